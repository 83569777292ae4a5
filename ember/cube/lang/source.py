"""The parsed source of a Python function, shared by every expansion of it."""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import textwrap
from typing import Any

from .errors import CubeSyntaxError

__all__ = ["FunctionSource", "MISSING"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def _closure_repr(v: Any) -> str:
    """A stable text for a captured value where there is one; else one unique in this process
    (correct, only the entry name then differs between processes)."""
    from ..kernel_id import stable_repr

    if callable(v) and hasattr(v, "__qualname__"):
        return f"{getattr(v, '__module__', '')}.{v.__qualname__}"
    try:
        return stable_repr(v)
    except TypeError:
        return f"<{type(v).__qualname__}@{id(v):x}>"


class FunctionSource:
    """AST, file, line offset and scopes of one function (parsed once, lazily)."""

    __slots__ = ("fn", "fdef", "filename", "line0", "lines", "digest", "_cells")

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        code = fn.__code__
        self.filename = code.co_filename
        try:
            src = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError) as e:
            raise CubeSyntaxError(
                f"cannot read the source of {fn.__qualname__} ({e})",
                self.filename,
                code.co_firstlineno,
                hint="define @cube functions in a file (not in a REPL or with exec), so their "
                "source can be parsed",
            ) from None
        tree = ast.parse(src)
        fdef = tree.body[0] if tree.body else None
        if not isinstance(fdef, ast.FunctionDef):
            raise CubeSyntaxError(
                f"{fn.__qualname__} is not a plain function definition",
                self.filename,
                code.co_firstlineno,
                hint="decorate a 'def' function (not a lambda or an async def)",
            )
        self.fdef = fdef
        # ast line 1 is the first line inspect returned: the first decorator, as co_firstlineno
        self.line0 = code.co_firstlineno - 1
        self.lines = src.splitlines()
        self._cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        # The identity covers the values the function closes over: two kernels made by one
        # factory (same text, different captured constants) expand to different IR.
        h = hashlib.sha256(src.encode())
        for name in sorted(self._cells):
            h.update(f"\0{name}={_closure_repr(self.lookup(name))}".encode())
        self.digest = h.hexdigest()[:12]

    def lookup(self, name: str) -> Any:
        """A free name of the function: closure cell, then module global, then builtin."""
        cell = self._cells.get(name)
        if cell is not None:
            try:
                return cell.cell_contents
            except ValueError:
                return MISSING
        g = self.fn.__globals__
        if name in g:
            return g[name]
        return getattr(builtins, name, MISSING)

    def where(self, node: ast.AST | None) -> tuple[int, str, int]:
        """(absolute line, source text of the line, column) of ``node``."""
        lineno = getattr(node, "lineno", None) or self.fdef.lineno
        text = self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else ""
        col = getattr(node, "col_offset", 0) or 0
        raw = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        col = max(col - (len(raw) - len(raw.lstrip())), 0)
        return lineno + self.line0, text, col

    def error(self, node: ast.AST | None, what: str, hint: str = "") -> CubeSyntaxError:
        line, text, col = self.where(node)
        return CubeSyntaxError(what, self.filename, line, text, hint, col)

    def annotations(self) -> dict[str, Any]:
        """Evaluated annotations (strings from ``from __future__ import annotations`` too)."""
        out: dict[str, Any] = {}
        for name, ann in getattr(self.fn, "__annotations__", {}).items():
            if isinstance(ann, str):
                scope = dict(self.fn.__globals__)
                for k in self._cells:
                    v = self.lookup(k)
                    if v is not MISSING:
                        scope[k] = v
                try:
                    ann = eval(ann, scope)  # noqa: S307 - the user's own annotation text
                except Exception as e:
                    raise self.error(self.fdef, f"cannot evaluate the annotation of {name!r}: {e}") from None
            out[name] = ann
        return out
