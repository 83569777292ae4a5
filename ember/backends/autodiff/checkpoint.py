"""Checkpointing: recompute memory-bound results in backward instead of keeping them.

With ``checkpointing="balanced"`` a tracked elementwise or view op does not hand its result
to the graph. Its node keeps a :class:`Recipe` instead: the inner op and references to its
inputs, each either a concrete inner value or, where the input is itself recomputable,
that input's recipe. A backward rule that needs such a value receives it from a
:class:`Recomputer`, which evaluates the recipe chain on demand (iteratively, so a chain of
any length works) and memoises each value for the rest of the pass, dropping it after its
last use. Compute-bound ops (matmul) and reductions are never recipes: a consumer keeps
their result as usual, which bounds every recomputation by the nearest such op or leaf.

Saved values hold recipes only at top level or one tuple deep (the tensor lists of ``cat``
and ``index``), which is how the backend builds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["Recipe", "Recomputer"]


class Recipe:
    """``fn(*args)`` recomputes a value; an argument that is a Recipe stands for its value."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args


def _recipes(values: Iterable[Any]) -> Iterator[Recipe]:
    for v in values:
        if type(v) is Recipe:
            yield v
        elif type(v) is tuple:
            for w in v:
                if type(w) is Recipe:
                    yield w


class Recomputer:
    """The recomputed values of one backward pass.

    Invariant: ``uses[r]`` counts the references to ``r`` not yet consumed, from the saved
    values of the pass's nodes and from the arguments of the recipes that will be evaluated.
    Each recipe is evaluated at most once (a value stays memoised while uses remain), so
    every argument reference is consumed exactly once, and a value leaves the memo as soon
    as nothing else will read it.
    """

    __slots__ = ("uses", "memo")

    def __init__(self, saved_tuples: Iterable[tuple[Any, ...]]) -> None:
        self.uses: dict[Recipe, int] = {}
        self.memo: dict[Recipe, Any] = {}
        uses = self.uses
        todo = [r for saved in saved_tuples for r in _recipes(saved)]
        while todo:
            r = todo.pop()
            n = uses.get(r, 0)
            uses[r] = n + 1
            if n == 0:  # first sight: its arguments will be consumed once, when it is evaluated
                todo.extend(_recipes(r.args))

    def take(self, saved: tuple[Any, ...]) -> tuple[Any, ...]:
        """``saved`` with every recipe replaced by its value (one use of each consumed)."""
        out = []
        for v in saved:
            if type(v) is Recipe:
                v = self._value(v)
            elif type(v) is tuple and any(type(w) is Recipe for w in v):
                v = tuple(self._value(w) if type(w) is Recipe else w for w in v)
            out.append(v)
        return tuple(out)

    def _value(self, r: Recipe) -> Any:
        v = self.memo.get(r)
        if v is None:
            v = self._evaluate(r)
        self._release(r)
        return v

    def _evaluate(self, root: Recipe) -> Any:
        memo = self.memo
        stack = [root]
        while stack:
            r = stack[-1]
            if r in memo:
                stack.pop()
                continue
            missing = [a for a in r.args if type(a) is Recipe and a not in memo]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            memo[r] = r.fn(*[memo[a] if type(a) is Recipe else a for a in r.args])
            for a in r.args:
                if type(a) is Recipe:
                    self._release(a)
        return memo[root]

    def _release(self, r: Recipe) -> None:
        n = self.uses[r] - 1
        if n:
            self.uses[r] = n
        else:
            del self.uses[r]
            self.memo.pop(r, None)
