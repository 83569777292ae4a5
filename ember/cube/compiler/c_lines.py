"""Line code the C target writes itself where GCC's treatment of a per-lane loop over a vector
value is slow or wrong (the emitter's ``lanewise`` picks these by the lane expression):

* one libm call per lane: a call of glibc's libmvec SIMD variant (``vector_math``);
* NaN-propagating max/min on float lines: vector compares and a bit select (``vector_minmax``);
* comparisons of byte-sized lanes: GCC 12 -O3 vectorises their lane loop into 0xFF for true,
  so the native vector compare, negated (1 for true by construction), replaces it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LIBM_CALL", "FLOAT_MINMAX", "COMPARE", "byte_sized", "vector_minmax", "vector_math"]

#: a lane expression that is one call of a libm function with a libmvec vector variant
LIBM_CALL = re.compile(
    r"^(exp|log|sin|cos|tan|tanh|expm1|log1p|erf|exp2|log2|log10|sinh|cosh|asin|acos|atan)\((\w+)\[l_\]\)$"
)


def vector_minmax(op: str, vt: str, target: str, a: str, b: str) -> str:
    """``target = max/min(a, b)`` on float lines, NaN-propagating (numpy's maximum/minimum:
    ``a`` when ``a > b`` or ``a`` is NaN, else ``b``) as vector compares and a bit select; GCC
    leaves the per-lane loop of ``em_max_*`` scalar. ``a``/``b`` may be lines or scalars."""
    cmp = ">" if op == "max" else "<"
    return (
        f"{{ const {vt} a_ = ({vt}){{}} + {a}; const {vt} b_ = ({vt}){{}} + {b}; "
        f"const __typeof__(a_ {cmp} b_) m_ = (a_ {cmp} b_) | (a_ != a_); "
        f"{target} = ({vt})((m_ & (__typeof__(m_))a_) | (~m_ & (__typeof__(m_))b_)); }}"
    )


FLOAT_MINMAX = re.compile(r"^em_(max|min)_f(?:32|64)\(")
COMPARE = re.compile(r"^\S+ (==|!=|<|<=|>|>=) \S+$")


def byte_sized(a: Any) -> bool:
    t = getattr(a, "type", None)
    return t is not None and t.elem.bits == 8


#: (C element type, line width) -> (x86-64 vector ABI variant letter, the macro that enables it)
_MVEC_VARIANTS = {
    ("float", 4): ("b", "__SSE2__"),
    ("float", 8): ("d", "__AVX2__"),
    ("float", 16): ("e", "__AVX512F__"),
    ("double", 2): ("b", "__SSE2__"),
    ("double", 4): ("d", "__AVX2__"),
    ("double", 8): ("e", "__AVX512F__"),
}


def vector_math(fn: str, vt: str, ct: str, w: int) -> str:
    """``em_v_<fn>_<vt>``: ``fn`` on a line. With EM_MVEC (the toolchain linked libmvec) and the
    ISA the variant needs, one call of glibc's SIMD variant (<= 4 ulp, glibc's bound), else
    the per-lane libm loop; GCC does not vectorise lane loops over vector values itself."""
    loop = f"{{ {vt} r; for (int l = 0; l < {w}; ++l) r[l] = {fn}(x[l]); return r; }}"
    head = f"EM_INLINE {vt} em_v_{fn}_{vt}({vt} x)"
    variant = _MVEC_VARIANTS.get((ct, w))
    if variant is None:
        return f"{head} {loop}"
    letter, isa = variant
    name = f"_ZGV{letter}N{w}v_{fn}{'f' if ct == 'float' else ''}"
    return (
        f"#if defined(EM_MVEC) && defined({isa})\n{vt} {name}({vt});\n{head} {{ return {name}(x); }}\n"
        f"#else\n{head} {loop}\n#endif"
    )
