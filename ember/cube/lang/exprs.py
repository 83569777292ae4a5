"""Expressions in kernels: names, literals, subscripts, arithmetic, comparisons, boolean logic."""

from __future__ import annotations

import ast
import operator
from typing import Any

from .. import ir
from ..ir import ARRAY, Const, Type, Var
from ..types import BOOL, FLOAT, bool_, u32
from .values import (
    ARRAY_METHODS,
    UNSUPPORTED,
    ArrayMethod,
    describe,
    is_array,
    is_rt,
    lit_kind,
)

_ARITH = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.Pow: "pow",
    ast.BitAnd: "and",
    ast.BitOr: "or",
    ast.BitXor: "xor",
    ast.LShift: "shl",
    ast.RShift: "shr",
}
_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_PYOP = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
    "shl": operator.lshift,
    "shr": operator.rshift,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
    "eq": operator.eq,
    "ne": operator.ne,
}
_SYMBOL = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "shr": ">>",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
}

# Unsupported statements and expressions: what to write instead.


class Expressions:
    """Mixin of the expander: every non-call expression."""

    def expr(self, e: ast.expr) -> Any:
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            hint = UNSUPPORTED.get(type(e), "see the kernel language reference in ember/cube/__init__.py")
            raise self.error(
                e, f"'{type(e).__name__}' expressions are not part of the kernel language", hint=hint
            )
        return m(e)

    def e_Constant(self, e: ast.Constant) -> Any:
        return e.value

    def e_Name(self, e: ast.Name) -> Any:
        return self.lookup(e)

    def e_Tuple(self, e: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.snapshot(e, v) for v in self.elements(e.elts))

    def e_List(self, e: ast.List) -> list[Any]:
        return self.made_container([self.snapshot(e, v) for v in self.elements(e.elts)])

    def elements(self, elts: list[ast.expr]) -> list[Any]:
        out: list[Any] = []
        for x in elts:
            if isinstance(x, ast.Starred):
                v = self.expr(x.value)
                if is_rt(v):
                    raise self.error(x, "unpacking a runtime value")
                out.extend(v)
            else:
                out.append(self.expr(x))
        return out

    def e_Dict(self, e: ast.Dict) -> dict[Any, Any]:
        out = {}
        for k, v in zip(e.keys, e.values):
            if k is None:
                raise self.error(e, "** in a dict literal")
            kk, vv = self.expr(k), self.expr(v)
            if is_rt(kk):
                raise self.error(k, "dict keys must be comptime")
            out[kk] = self.snapshot(v, vv)
        return self.made_container(out)

    def e_JoinedStr(self, e: ast.JoinedStr) -> str:
        parts = []
        for v in e.values:
            x = self.expr(v.value) if isinstance(v, ast.FormattedValue) else self.expr(v)
            if is_rt(x):
                raise self.error(e, "formatting a runtime value", hint="strings exist at comptime only")
            parts.append(str(x))
        return "".join(parts)

    def e_Slice(self, e: ast.Slice) -> slice:
        parts = [None if p is None else self.expr(p) for p in (e.lower, e.upper, e.step)]
        if any(is_rt(p) for p in parts):
            raise self.error(e, "slicing with runtime bounds", hint="kernels index one element at a time")
        return slice(*parts)

    def e_Attribute(self, e: ast.Attribute) -> Any:
        base = self.expr(e.value)
        if is_array(base):
            if e.attr in ARRAY_METHODS:
                return ArrayMethod(base, e.attr)
            raise self.error(
                e,
                f"arrays have no attribute {e.attr!r}",
                hint="arrays offer len(), shape(d), stride(d), rank(), line_size()",
            )
        if is_rt(base):
            raise self.error(e, f"runtime values have no attribute {e.attr!r}")
        try:
            v = getattr(base, e.attr)
        except AttributeError as x:
            raise self.error(e, str(x)) from None
        return self.pyval(e, v)

    def subscript_index(self, node: ast.AST, arr: Var, key: Any) -> Any:
        if isinstance(key, tuple):
            if arr.kind != ARRAY:
                raise self.error(
                    node,
                    "multi-dimensional index of a shared or local array",
                    hint="compute the flat index yourself",
                )
            if len(key) != arr.rank:
                raise self.error(node, f"{len(key)} indices for an array of rank {arr.rank}")
            if arr.type.width != 1:
                raise self.error(node, "multi-dimensional index of an array of lines")
            flat: Any = None
            for d, k in enumerate(key):
                k = self.index(node, k)
                if k.type.elem is not u32:
                    k = self.op("cast", Type(u32), k)
                term = self.op("mul", Type(u32), k, self.op("stride", Type(u32), arr, Const(d, Type(u32))))
                flat = term if flat is None else self.op("add", Type(u32), flat, term)
            return flat if flat is not None else Const(0, Type(u32))
        return self.index(node, key)

    def lane(self, node: ast.AST, v: Var | Const, k: Any) -> Any:
        if lit_kind(k) == "int" and not 0 <= k < v.type.width:
            raise self.error(node, f"lane {k} of a line of width {v.type.width}")
        return self.index(node, k)

    def e_Subscript(self, e: ast.Subscript) -> Any:
        base = self.expr(e.value)
        key = self.expr(e.slice)
        if is_array(base):
            return self.op("read", base.type, base, self.subscript_index(e, base, key))
        if is_rt(base):
            base = self.materialize(e, base)
            k = self.lane(e, base, key)
            if base.type.width == 1:  # lane 0 of a width-1 line (kernels generic over widths)
                return base
            return self.op("lane_get", base.type.scalar(), base, k)
        if is_rt(key):
            holds = isinstance(base, (list, tuple)) and any(is_rt(x) or is_array(x) for x in base)
            raise self.error(
                e,
                f"indexing the comptime value {describe(base)} with a runtime index",
                hint="its elements (registers or buffers) exist at expansion only: index it with comptime "
                "ints, e.g. in an unrolled loop `for k in range(len(xs))`; to index values at run time "
                "copy them into a cube.LocalArray"
                if holds
                else "index comptime sequences with comptime values (e.g. in an unrolled loop)",
            )
        if isinstance(base, ArrayMethod):
            raise self.error(e, f"{base.name} is a method", hint=f"call it: x.{base.name}(d)")
        try:
            return self.pyval(e, base[key])
        except Exception as x:
            raise self.error(e, f"{type(x).__name__}: {x}") from None

    def e_BinOp(self, e: ast.BinOp) -> Any:
        op = _ARITH.get(type(e.op))
        if op is None:
            raise self.error(
                e,
                f"operator {type(e.op).__name__} is not part of the kernel language",
                hint="matrix products are written with loops",
            )
        return self.binary(e, op, self.expr(e.left), self.expr(e.right))

    def binary(self, node: ast.AST, op: str, a: Any, b: Any) -> Any:
        if not is_rt(a) and not is_rt(b):
            if is_array(a) or is_array(b):
                raise self.error(
                    node, f"arrays in an arithmetic expression ({_SYMBOL[op]})", hint="index them: x[i]"
                )
            try:
                return _PYOP[op](a, b)
            except Exception as x:
                raise self.error(node, f"{type(x).__name__}: {x}") from None
        if is_array(a) or is_array(b):
            raise self.error(
                node, f"arrays in an arithmetic expression ({_SYMBOL[op]})", hint="index them: x[i]"
            )
        if op == "pow":
            return self.power(node, a, b)
        t, a, b = self.unify(node, a, b)
        k = t.elem.kind
        if op == "div" and k != FLOAT:
            raise self.error(
                node, f"'/' on {t} values", hint="use // for integer division, or cast to a float type first"
            )
        if op in ("add", "sub", "mul", "floordiv", "mod") and k == BOOL:
            raise self.error(node, f"'{_SYMBOL[op]}' on bool values", hint="use & | ^ or cast to an int")
        if op in ("shl", "shr") and not t.elem.is_int:
            raise self.error(node, f"'{_SYMBOL[op]}' on {t} values", hint="shifts need integer operands")
        if op in ("and", "or", "xor") and k == FLOAT:
            raise self.error(
                node,
                f"'{_SYMBOL[op]}' on {t} values",
                hint="bitwise operators need ints or bools; use cube.bitcast for bits",
            )
        if op in ("lt", "le", "gt", "ge") and k == BOOL:
            raise self.error(node, "ordering comparison of bools", hint="compare with == or !=")
        if op in _CMP.values():
            return self.op(op, Type(bool_, t.width), a, b)
        return self.op(op, t, a, b)

    def power(self, node: ast.AST, a: Any, b: Any) -> Any:
        if not is_rt(b) and lit_kind(b) == "int" and 0 <= b <= 16:
            a = self.materialize(node, a)
            if b == 0:
                return Const(self.lit(node, 1, a.type.elem), Type(a.type.elem))
            acc = a
            for _ in range(b - 1):
                acc = self.op("mul", a.type, acc, a)
            return acc
        t, a, b = self.unify(node, a, b)
        if not t.elem.is_float:
            raise self.error(
                node,
                f"'**' on {t} values with a runtime or negative exponent",
                hint="cast to a float type, or use a comptime exponent in 0..16",
            )
        return self.op("pow", t, a, b)

    def e_UnaryOp(self, e: ast.UnaryOp) -> Any:
        v = self.expr(e.operand)
        if not is_rt(v):
            if is_array(v):
                raise self.error(e, "an array in an arithmetic expression")
            try:
                return {
                    ast.USub: operator.neg,
                    ast.UAdd: operator.pos,
                    ast.Not: operator.not_,
                    ast.Invert: operator.invert,
                }[type(e.op)](v)
            except Exception as x:
                raise self.error(e, f"{type(x).__name__}: {x}") from None
        v = self.materialize(e, v)
        k = v.type.elem.kind
        if isinstance(e.op, ast.UAdd):
            return v
        if isinstance(e.op, ast.USub):
            if k == BOOL:
                raise self.error(e, "negating a bool", hint="use 'not x'")
            return self.op("neg", v.type, v)
        if isinstance(e.op, ast.Invert):
            if not v.type.elem.is_int:
                raise self.error(e, f"'~' on {v.type}", hint="use 'not x' for bools; '~' needs ints")
            return self.op("not", v.type, v)
        # not
        if v.type.width != 1:
            raise self.error(e, "'not' on a line", hint="compare lane-wise: v == 0")
        if k == BOOL:
            return self.op("lnot", v.type, v)
        return self.op("eq", Type(bool_), v, Const(self.lit(e, 0, v.type.elem), Type(v.type.elem)))

    def e_Compare(self, e: ast.Compare) -> Any:
        left = self.expr(e.left)
        result: Any = True
        for opn, right_node in zip(e.ops, e.comparators):
            right = self.expr(right_node)
            if isinstance(opn, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                if is_rt(left) or is_rt(right):
                    raise self.error(e, f"'{type(opn).__name__}' with runtime values", hint="use == / !=")
                f = {
                    ast.Is: operator.is_,
                    ast.IsNot: operator.is_not,
                    ast.In: lambda x, y: x in y,
                    ast.NotIn: lambda x, y: x not in y,
                }[type(opn)]
                part: Any = f(left, right)
            else:
                part = self.binary(e, _CMP[type(opn)], left, right)
            result = part if result is True else self.logical(e, "and", result, part)
            left = right
        return result

    def logical(self, node: ast.AST, which: str, a: Any, b: Any) -> Any:
        """Non-short-circuit combination of two evaluated conditions (for comparison chains)."""
        if not is_rt(a) and not is_rt(b):
            return (a and b) if which == "and" else (a or b)
        if not is_rt(a):
            return b if (bool(a) if which == "and" else not a) else a
        if not is_rt(b):
            return a if (bool(b) if which == "and" else not b) else b
        t, a, b = self.unify(node, a, b)
        return self.op("land" if which == "and" else "lor", t, a, b)

    def e_BoolOp(self, e: ast.BoolOp) -> Any:
        which = "and" if isinstance(e.op, ast.And) else "or"
        first = self.expr(e.values[0])
        rest = e.values[1:]
        if not rest:
            return first
        if not is_rt(first):
            if (which == "and" and not first) or (which == "or" and first):
                return first
            return (
                self.expr(ast.BoolOp(op=e.op, values=rest, lineno=e.lineno, col_offset=e.col_offset))
                if len(rest) > 1
                else self.expr(rest[0])
            )
        # short-circuit: the right side runs only when the left does not decide
        c = self.to_cond(e.values[0], first)
        r = self.new_local("_" + which, Type(bool_))
        self.emit(ir.Assign(r, c))
        tail = (
            ast.BoolOp(op=e.op, values=rest, lineno=e.lineno, col_offset=e.col_offset)
            if len(rest) > 1
            else rest[0]
        )
        saved = self.block
        blk: list[Any] = []
        self.block = blk
        self.frame.depth += 1
        try:
            v = self.to_cond(tail, self.expr(tail))
            self.emit(ir.Assign(r, v if is_rt(v) else Const(bool(v), Type(bool_))))
        finally:
            self.frame.depth -= 1
            self.block = saved
        self.emit(ir.If(r, blk, []) if which == "and" else ir.If(r, [], blk))
        return self.snapshot(e, r)

    def e_IfExp(self, e: ast.IfExp) -> Any:
        cond = self.to_cond(e.test, self.expr(e.test))
        if not is_rt(cond):
            return self.expr(e.body if cond else e.orelse)
        r = self.new_local("_sel", None, weak="int")
        blocks = []
        saved = self.block
        for node in (e.body, e.orelse):
            blk: list[Any] = []
            self.block = blk
            self.frame.depth += 1
            try:
                v = self.expr(node)
                if not (is_rt(v) or lit_kind(v) is not None):
                    raise self.error(node, f"a conditional expression choosing {describe(v)} at run time")
                if r.type is None and lit_kind(v) is not None and r.weak != "float":
                    r.weak = lit_kind(v)
                self.emit(ir.Assign(r, self.assign_value(node, r, v)))
            finally:
                self.frame.depth -= 1
                self.block = saved
            blocks.append(blk)
        self.emit(ir.If(cond, blocks[0], blocks[1]))
        return self.snapshot(e, r)
