"""What the Fusion layer asks of the code beneath it: fusers, and optionally a drain capturer.

Fusion is generic (burn-fusion's ``FusionBackend`` / ``Optimization`` split is the model): it
queues catalog ops over any inner backend and knows nothing of how that backend computes. What
a backend adds comes in through two hooks, handed to ``Fusion(inner, fusers, capturer)`` by
whoever composes the stack (``backends.dispatch._build``):

* ``Fuser``: offers to run a block of the drained op sequence as one kernel (the search in
  ``Fusion.search`` asks every fuser at every position; the best-scoring claim wins).
* ``DrainCapturer``: lets a drain be recorded while it runs and then replayed (``drain_replay``).
  Without one, every drain runs its plan block by block.

Both are structural protocols: the Cube backend's fusers (``backends/cube/fusers``) and its
capturer (``backends/cube/drain_capturer.py``) implement them without importing this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .ir import OperationIr

__all__ = ["Fuser", "DrainCapturer", "Recording", "FloatSlots"]


class Fuser(Protocol):
    """Looks at a queued op sequence and offers to run a block of it as one kernel."""

    #: shown by the inspector and in ``fuse`` spans
    name: str

    def claim(self, ops: list[OperationIr], i: int) -> tuple[int, float, Any] | None:
        """Can this fuser take ``ops[i:stop]`` as one block? ``(stop, score, data)``: ``score``
        ranks competing claims at one position (higher wins; roughly the memory round trips
        saved); ``data`` is what ``execute`` needs, prepared once per plan. Plans are cached and
        run again on later drains with new tensor ids, so ``data`` holds no tensor values and no
        ids, only their relative layout."""

    def execute(self, inner: Any, ops: list[OperationIr], data: Any, env: dict[int, Any]) -> None:
        """Run the block on ``inner``: ``env`` maps tensor id -> inner primitive; read the inputs
        there and write every output that a later op or a live handle may read."""


class Recording(Protocol):
    """One drain's record of the inner backend's work, open as ``with recording:`` on the
    draining thread (``DrainCapturer.capture``)."""

    #: why the record cannot be replayed ("" while it can); the Fusion layer sets it too, for
    #: work of its own that a replay would not repeat (a host-side index check: ``indices``)
    failed: str
    #: the recorded work, opaque to Fusion: two records of one plan are compared by
    #: ``DrainCapturer.float_slots``
    steps: list[Any]

    def __enter__(self) -> Recording: ...

    def __exit__(self, *exc: Any) -> None: ...

    def replay(self, outputs: list[Any]) -> Any:
        """What ``DrainCapturer.bind`` turns into a function of new inputs (its ``launches``: the
        work it repeats, for the log), or None where the record cannot be replayed."""


class FloatSlots(Protocol):
    """Where a record holds the drain's float values, so a replay can take new ones."""

    #: indices (into the drain's blanked values) that the record holds
    filled: frozenset[int]
    #: value indices that were equal in both records where one slot matched several (a replay
    #: needs them equal still)
    groups: tuple[tuple[int, ...], ...]

    def patch(self, values: list[Any]) -> bool:
        """Write ``values`` into the record (False: a value the record cannot hold)."""


class DrainCapturer(Protocol):
    """How an inner backend records a drain's work and runs it again on new inputs.

    A replay is valid for new inputs of the same layouts and the same scalar values: the Fusion
    layer keys replays on its plan, its blanked values, each realised input's layout and the
    float32 matmul precision, and calls a replay only with inputs matching its capture."""

    #: the inner backend's primitive type whose values a replay can take as inputs; its values
    #: have ``dtype``, ``shape``, ``strides``, ``offset`` (their layout) and ``buffer`` (storage
    #: that several values may share); a drain reading any other kind of value is not replayed
    tensor_type: type

    def capture(self, inputs: list[Any]) -> Recording:
        """A recording of the work the inner backend does on the calling thread on ``inputs``."""

    def bind(self, replay: Any) -> Callable[[list[Any]], list[Any]]:
        """``Recording.replay``'s result as a function: new inputs -> the outputs."""

    def float_slots(self, first: list[Any], second: list[Any], first_values: list[Any],
                    values: list[Any], changed: list[int]) -> FloatSlots | None:
        """Compare two records (``steps``) of one plan and layout that ran with ``first_values``
        and ``values`` (``changed``: the indices of the floats that differ): the slots of
        ``second`` that hold changed floats, or None where the records differ otherwise."""
