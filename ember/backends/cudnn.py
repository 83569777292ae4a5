"""``ember.backends.cudnn``, as ``torch.backends.cudnn``: the flags scripts set.

ember does not use cuDNN (its convolutions are ``@cube`` kernels whose choice the autotuner
makes and persists), so the flags are kept for scripts that set and read them and change
nothing: results on one device are deterministic whatever ``deterministic`` says.
"""

from __future__ import annotations

#: as torch: whether cuDNN may be used (nothing reads it)
enabled: bool = True
#: as torch: autotune convolution algorithms (ember's autotuner always chooses and persists)
benchmark: bool = False
#: as torch: deterministic algorithms only (ember's kernels are deterministic)
deterministic: bool = False
#: as torch: TF32 in convolutions (matmul precision is ``ember.set_float32_matmul_precision``)
allow_tf32: bool = True


def is_available() -> bool:
    """As ``torch.backends.cudnn.is_available``: False (ember does not use cuDNN)."""
    return False


def version() -> None:
    """As ``torch.backends.cudnn.version``: None (no cuDNN)."""
    return None
