"""The Fusion decorator: lazy per-thread op streams, drained and fused on read.

Fusion is generic: it queues catalog ops over any inner backend (``backend.py``, ``stream.py``)
and learns what that backend can do from two hooks (``hooks.py``) that whoever composes the
stack hands it (``backends.dispatch._build``): fusers that run blocks of a drain as one kernel,
and a drain capturer that lets repeated drains replay. It imports nothing from the Cube backend
or the runtimes; ``backends/cube`` implements both hooks (``fusers/``, ``drain_capturer.py``).

Three mechanisms repeat recorded work instead of deriving it again; each has one name:

* **Launch capture** (``ember/cube/runtime/capture.py``: ``Capture``, ``Replay``), the runtime
  mechanism beneath the other two: while a ``Capture`` is open on a thread, every ``@cube``
  launch and buffer reservation is recorded; ``Replay.run`` performs the same launches on fresh
  buffers for new inputs of the same layouts. It knows nothing of ops, plans or drains.
* **Drain replay** (``drain_replay.py``, driven by ``stream.py``), the Fusion layer's: a drain
  whose plan, input layouts and scalar values were seen twice runs its whole plan from a
  record the third time on (the parametric form rewrites the float scalars that changed; the
  fast path keys on the stream's signature, ``signature.py``, and skips building the IR). The
  record comes from the inner backend's drain capturer (``hooks.DrainCapturer``), which for the
  Cube backend is a launch capture (``backends/cube/drain_capturer.py``).
* **Op replay** (``backends/cube/op_replay.py``), the Cube backend's for eager devices (no Fusion
  layer): one op called again with the same argument layouts and values runs from a launch
  capture of its earlier call. It stands aside while any launch capture is open, so the
  capture sees every launch.
"""

from .backend import Fusion, FusionTensor
from .hooks import DrainCapturer, Fuser
from .ir import READ_ONLY, READ_WRITE, OperationIr, TensorIr
from .stream import Block, FusionStats, Plan, Stream

__all__ = ["Fusion", "FusionTensor", "Fuser", "DrainCapturer", "OperationIr", "TensorIr", "READ_ONLY", "READ_WRITE",
           "Block", "Plan", "Stream", "FusionStats"]
