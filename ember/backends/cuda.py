"""``ember.backends.cuda``, as ``torch.backends.cuda``: ``matmul.allow_tf32`` is
``ember.set_float32_matmul_precision`` (``True``: ``"high"``, ``False``: ``"highest"``)."""

from __future__ import annotations

from ..precision import get_float32_matmul_precision, set_float32_matmul_precision


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: ``allow_tf32`` reads and sets the float32 matmul precision."""

    @property
    def allow_tf32(self) -> bool:
        """Whether float32 matmuls may use TF32 tensor cores (precision other than ``"highest"``)."""
        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        set_float32_matmul_precision("high" if value else "highest")

    #: as torch: reduced-precision reductions in float16/bfloat16 matmuls (nothing reads it)
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built() -> bool:
    """As ``torch.backends.cuda.is_built``: whether ember's CUDA runtime can load (its
    ``cuda-bindings`` dependency is installed; ``ember.cuda.is_available`` says whether a GPU is there)."""
    try:
        from ..cube.runtime import cuda  # noqa: F401
    except ImportError:
        return False
    return True
