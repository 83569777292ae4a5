"""Control flow in kernels: runtime ``if``/``while``/``for`` (names merged through locals),
and comptime ones (a branch picked, a loop unrolled at expansion).
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from .. import ir
from ..ir import LOCAL, Const, Type, Var
from ..types import bool_, i32, u32
from . import intrinsics as K
from .errors import CubeSyntaxError
from .source import MISSING
from .values import (
    MAX_UNROLL,
    LoopCtx,
    Undefined,
    assigned_names,
    describe,
    holds_any,
    is_array,
    is_rt,
    lit_kind,
    same,
    subscript_roots,
)


class ControlFlow:
    """Mixin of the expander: if, while, for."""

    def sub_block(self, body: list[ast.stmt], env: dict[str, Any] | None = None) -> tuple[list[Any], bool]:
        """Expand ``body`` into a new instruction list inside one more runtime structure."""
        fr = self.frame
        saved_block, saved_env = self.block, fr.env
        out: list[Any] = []
        self.block = out
        if env is not None:
            fr.env = env
        fr.depth += 1
        try:
            ended = self.stmts(body)
        finally:
            fr.depth -= 1
            self.block = saved_block
            fr.env = saved_env
        return out, ended

    def s_If(self, s: ast.If) -> bool:
        test = self.expr(s.test)
        cond = self.to_cond(s.test, test)
        if not is_rt(cond):
            return self.stmts(s.body if cond else s.orelse)
        self.localize(s.body + s.orelse)
        fr = self.frame
        before = fr.env
        then_env, else_env = dict(before), dict(before)
        then_block, t_end = self.sub_block(s.body, then_env)
        else_block, e_end = self.sub_block(s.orelse, else_env)
        self.merge(s, before, [(then_env, then_block, t_end), (else_env, else_block, e_end)])
        self.emit(ir.If(cond, then_block, else_block))
        return t_end and e_end

    def merge(
        self, node: ast.AST, before: dict[str, Any], branches: list[tuple[dict[str, Any], list[Any], bool]]
    ) -> None:
        """Bind the names the branches of a runtime ``if`` changed (through locals)."""
        names = sorted(set().union(*(b[0].keys() for b in branches)))
        # SSA values computed inside a branch are scoped to it (C blocks): a comptime
        # container holding one must not outlive the if
        inner: set[int] = set()
        for _, blk, _ in branches:
            inner.update(id(i.out) for i in ir.walk(blk) if isinstance(i, ir.Op) and i.out is not None)
        for n in names:
            b = before.get(n, MISSING)
            live = [(env.get(n, MISSING), blk) for env, blk, ended in branches if not ended]
            if not live or all(v is b for v, _ in live):
                continue
            vals = [v for v, _ in live]
            defined = [v for v in vals if v is not MISSING]
            if defined and all(not is_rt(v) and lit_kind(v) is None for v in defined):
                if inner and any(v is not b and holds_any(v, inner) for v in defined):
                    before[n] = Undefined(
                        n, "holds values computed inside a branch of a runtime if, so it has no value after it"
                    )
                    continue
                # arrays and other comptime objects: fine when every branch agrees
                if all(v is defined[0] or same(v, defined[0]) for v in defined):
                    before[n] = defined[0]
                    continue
                # an error only if read after the if (comptime loop variables often differ)
                before[n] = Undefined(n, "is bound to different objects in the branches of a runtime if")
                continue
            if all(not is_rt(v) and v is not MISSING for v in vals):
                first = vals[0]
                if all(type(v) is type(first) and same(v, first) for v in vals):
                    before[n] = first
                    continue
                if not all(lit_kind(v) is not None for v in vals):
                    before[n] = Undefined(n, "is bound to different comptime objects in the branches of a runtime if")
                    continue
            for v in vals:
                if type(v) is Var and v.kind == LOCAL and all(w is v or w is MISSING for w in vals):
                    break
            else:
                v = None
            if v is not None:  # every branch left the same mutable local bound
                before[n] = v
                continue
            typed = [self.type_of(v) for v in vals if v is not MISSING and self.type_of(v) is not None]
            if typed:
                local = self.new_local(n, typed[0])
            else:
                kinds = {self.weak_kind(v) for v in vals if v is not MISSING}
                k = "float" if "float" in kinds else "int" if "int" in kinds else "bool"
                local = self.new_local(n, None, weak=k)
            for v, blk in live:
                if v is MISSING:
                    continue
                if not (is_rt(v) or lit_kind(v) is not None):
                    raise self.error(node, f"{n!r} is a value in one branch and {describe(v)} in another")
                saved = self.block
                self.block = blk
                try:
                    self.emit(ir.Assign(local, self.assign_value(node, local, v)))
                finally:
                    self.block = saved
            before[n] = local

    def localize(self, body: list[ast.stmt]) -> None:
        """Before a runtime if/loop: the runtime values of comptime lists/dicts whose elements
        ``body`` assigns move into mutable locals, so ``xs[k] = v`` in the block is a runtime
        assignment (registers carried through a loop: ``acc[r][c] += ...``)."""
        env = self.frame.env
        for n in sorted(subscript_roots(body)):
            v = env.get(n, MISSING)
            if isinstance(v, (list, dict)):
                self._localize(v, n, 0)

    def _localize(self, c: Any, name: str, depth: int) -> None:
        if depth > 8:
            return
        keys = range(len(c)) if isinstance(c, list) else list(c)
        for k in keys:
            v = c[k]
            if isinstance(v, (list, dict)):
                self._localize(v, f"{name}_{k}", depth + 1)
                continue
            if type(v) is Var and v.kind == LOCAL:
                continue
            lk = lit_kind(v)
            if lk is not None:
                local = self.new_local(f"{name}_{k}", None, weak=lk)
                self.emit(ir.Assign(local, Const(v, None)))
            elif is_rt(v):
                local = self.new_local(f"{name}_{k}", v.type)
                self.emit(ir.Assign(local, v))
            else:
                continue
            c[k] = local

    def carry(self, node: ast.AST, body: list[ast.stmt], exclude: set[str]) -> dict[str, Any]:
        """Turn names a runtime loop assigns into locals before the loop; returns their prior values."""
        self.localize(body)
        env = self.frame.env
        names = sorted(assigned_names(body) - exclude)
        prior: dict[str, Any] = {}
        for n in names:
            v = env.get(n, MISSING)
            prior[n] = v
            if v is MISSING or isinstance(v, Undefined):
                continue
            if type(v) is Var and v.kind == LOCAL:
                continue
            k = lit_kind(v)
            if k is not None:
                local = self.new_local(n, None, weak=k)
                self.emit(ir.Assign(local, Const(v, None)))
                env[n] = local
            elif is_rt(v):
                local = self.new_local(n, v.type)
                self.emit(ir.Assign(local, v))
                env[n] = local
        return prior

    def uncarry(self, prior: dict[str, Any]) -> None:
        """After a runtime loop: names it bound to per-iteration values have no value."""
        env = self.frame.env
        for n, before in prior.items():
            v = env.get(n, MISSING)
            if v is before or (type(v) is Var and v.kind == LOCAL):
                continue
            env[n] = Undefined(n)

    def s_While(self, s: ast.While) -> bool:
        if s.orelse:
            raise self.error(s, "while ... else is not supported", hint="use a flag variable")
        test = self.try_comptime(s.test)
        if test is not MISSING and not (isinstance(s.test, ast.Constant) and s.test.value is True):
            return self.comptime_while(s, test)
        prior = self.carry(s, s.body, set())
        fr = self.frame
        ctx = LoopCtx(True, fr.depth + 1)
        fr.loops.append(ctx)
        saved = self.block
        body: list[Any] = []
        self.block = body
        fr.depth += 1
        try:
            cond = self.to_cond(s.test, self.expr(s.test))
            if is_rt(cond):
                self.emit(ir.If(self.op("lnot", Type(bool_), cond), [ir.Break()], []))
            if cond is not False:
                self.stmts(s.body)
        finally:
            fr.depth -= 1
            fr.loops.pop()
            self.block = saved
        if cond is not False:
            self.emit(ir.Loop(body))
        self.uncarry(prior)
        return False

    def try_comptime(self, node: ast.expr) -> Any:
        """The value of ``node`` if it is comptime (runtime code it emits is thrown away)."""
        saved = self.block
        self.block = []
        try:
            v = self.expr(node)
        except CubeSyntaxError:
            return MISSING
        finally:
            self.block = saved
        return MISSING if is_rt(v) or is_array(v) else v

    def comptime_while(self, s: ast.While, test: Any) -> bool:
        fr = self.frame
        n = 0
        while test:
            n += 1
            if n > MAX_UNROLL:
                raise self.error(
                    s,
                    f"comptime while loop ran {MAX_UNROLL} times without ending",
                    hint="make its condition depend on a runtime value to get a runtime loop",
                )
            ctx = LoopCtx(False, fr.depth)
            fr.loops.append(ctx)
            try:
                self.stmts(s.body)
            finally:
                fr.loops.pop()
            if ctx.broken:
                break
            test = self.expr(s.test)
            if is_rt(test):
                raise self.error(
                    s.test,
                    "the condition of this while loop was comptime and became runtime",
                    hint="initialise the variables it tests with runtime values (cube.u32(0))",
                )
        return False

    def s_For(self, s: ast.For) -> bool:
        if s.orelse:
            raise self.error(s, "for ... else is not supported", hint="use a flag variable")
        it = s.iter
        if isinstance(it, ast.Call):
            fn = self.expr(it.func)
            if fn is builtins.range or (isinstance(fn, K.Intrinsic) and fn.name == "range"):
                return self.for_range(s, it, fn is builtins.range)
        seq = self.expr(it)
        if is_rt(seq) or is_array(seq):
            raise self.error(
                it,
                f"iterating over {describe(seq)}",
                hint="iterate indices: for i in range(x.len()): ... x[i]",
            )
        try:
            items = list(seq)
        except TypeError:
            raise self.error(it, f"{describe(seq)} is not iterable") from None
        return self.unrolled(s, items)

    def unrolled(self, s: ast.For, items: list[Any]) -> bool:
        fr = self.frame
        if len(items) > MAX_UNROLL:
            raise self.error(
                s,
                f"unrolling {len(items)} iterations",
                hint="use a runtime loop: for i in cube.range(n, unroll=False)",
            )
        for item in items:
            self.assign_target(s.target, item)
            ctx = LoopCtx(False, fr.depth)
            fr.loops.append(ctx)
            try:
                self.stmts(s.body)
            finally:
                fr.loops.pop()
            if ctx.broken:
                break
        return False

    def for_range(self, s: ast.For, call: ast.Call, python_range: bool) -> bool:
        args = [self.expr(a) for a in call.args]
        kw = {k.arg: self.expr(k.value) for k in call.keywords}
        unroll = kw.pop("unroll", None)
        if kw or python_range and call.keywords:
            raise self.error(call, f"unexpected keyword arguments {sorted(kw)} to range")
        if not 1 <= len(args) <= 3:
            raise self.error(call, "range takes 1 to 3 arguments")
        start, end, step = (
            (0, args[0], 1) if len(args) == 1 else ((args[0], args[1], 1) if len(args) == 2 else tuple(args))
        )
        comptime = not any(is_rt(a) for a in (start, end, step))
        for a in (start, end, step):
            if is_array(a):
                raise self.error(call, "range over an array", hint="use its length: range(x.len())")
        if comptime and unroll is not False:
            try:
                items = list(range(start, end, step))
            except TypeError as e:
                raise self.error(call, f"range({start!r}, {end!r}, {step!r}): {e}") from None
            return self.unrolled(s, items)
        if unroll is True:
            raise self.error(call, "cube.range(..., unroll=True) needs comptime bounds")
        if not isinstance(s.target, ast.Name):
            raise self.error(s.target, "a runtime range loop binds one name")
        if lit_kind(step) is not None and step == 0:
            raise self.error(call, "range step is zero")
        rt = [v for v in (start, end, step) if is_rt(v) and v.type is not None]
        if rt:
            t = Type(rt[0].type.elem)
        elif comptime:
            t = Type(u32) if min(start, end) >= 0 and step > 0 else Type(i32)
        else:
            t = Type(i32)
        start, end, step = (self.coerce(call, v, t) for v in (start, end, step))
        for v in (start, end, step):
            if v.type.width != 1 or not v.type.elem.is_int:
                raise self.error(call, f"range bounds must be integers, got {v.type}")
        if s.target.id in assigned_names(s.body):
            raise self.error(
                s,
                f"assigning to the loop variable {s.target.id!r} inside the loop",
                hint="copy it to another name first",
            )
        prior = self.carry(s, s.body, {s.target.id})
        fr = self.frame
        var = self.new_local(s.target.id, t)
        prior.setdefault(s.target.id, fr.env.get(s.target.id, MISSING))
        fr.env[s.target.id] = var
        ctx = LoopCtx(True, fr.depth + 1)
        fr.loops.append(ctx)
        try:
            body, _ = self.sub_block(s.body)
        finally:
            fr.loops.pop()
        self.emit(ir.RangeLoop(var, start, end, step, body))
        self.uncarry(prior)
        fr.env[s.target.id] = var
        return False
