"""The float32 matmul precision switch, with torch's names and meaning.

``"highest"`` (the default): float32 matmuls compute in IEEE float32 (FFMA). ``"high"`` and
``"medium"``: float32 matmuls may use TensorFloat-32 tensor cores (inputs rounded to a 10-bit
mantissa, f32 accumulation) where the device has them (CUDA, sm_80+); ember draws no line
between the two, as torch on CUDA. Backends without tf32 (Flex, CPU, WGSL) ignore the switch:
higher precision than asked is allowed.

Process-global like torch's. It is read when a matmul *runs*: on a fused (lazy) device that is
when the stream drains, not when ``a @ b`` registers. Autotune keys carry it (``matmul_key``'s
``precision`` field), so decisions under tf32 and under IEEE are never shared.
"""

from __future__ import annotations

__all__ = [
    "set_float32_matmul_precision", "get_float32_matmul_precision", "tf32_allowed", "tensor_core_types", "PRECISIONS",
]

PRECISIONS = ("highest", "high", "medium")

# one-element lists: read on every float32 matmul dispatch, so a plain index, no lookup
_precision = ["highest"]
_tf32 = [False]


def set_float32_matmul_precision(precision: str) -> None:
    """Set the internal precision of float32 matmuls: "highest", "high" or "medium"."""
    if precision not in PRECISIONS:
        raise ValueError(f"float32 matmul precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    _precision[0] = precision
    _tf32[0] = precision != "highest"


def get_float32_matmul_precision() -> str:
    """The current float32 matmul precision ("highest" unless set)."""
    return _precision[0]


def tf32_allowed() -> bool:
    """Whether float32 matmuls may run on tf32 tensor cores (precision "high" or "medium")."""
    return _tf32[0]


_HALF_TYPES = ("bfloat16", "float16")
_WITH_TF32 = ("bfloat16", "float16", "float32")


def tensor_core_types() -> tuple[str, ...]:
    """Operand dtype names the matmul tensor-core kernels take now: the 16-bit floats, and
    float32 (as tf32) while the switch allows it."""
    return _WITH_TF32 if _tf32[0] else _HALF_TYPES
