"""What runs inside a ``DataLoader`` worker process, and the wire format both sides share.

A worker never touches an ember device runtime on its own: the dataset, ``collate_fn`` and
``worker_init_fn`` arrive pickled by ``_Pickler`` (ember tensors as numpy values, rebuilt on the
Flex device, which is plain numpy; an exact ``TensorDataset`` as its numpy arrays when the
loader collates with ``default_collate``/``default_convert``), ember's default device is Flex
with Autodiff, and results go back as numpy (``_ToTensor`` markers and tensors pickled as their
values), which the main process turns into tensors on the loader's device. Code in the dataset
that names another device (``Device.cpu()``) starts that runtime inside the worker: a fresh
process of the forkserver/spawn context may; a forked child of a process whose runtime already
ran must not (``dataloader.py`` says which context is used).

Messages main -> worker (``Connection.send``): ``("task", epoch, task_id, index)``,
``("reset", epoch)`` (persistent workers: a new epoch; an iterable dataset restarts) and
``None`` (exit). Worker -> main (``send_bytes``): a ``_HEADER`` (kind, worker id, epoch, task
id) followed by a pickle: the batch (``DATA``), nothing (``STOP``: the iterable dataset of this
worker is exhausted) or ``(exception type or None, message)`` (``ERROR``).
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import random
import signal
import struct
import threading
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from ...tensor import Tensor
from . import worker_info as _info
from .dataset import Subset, TensorDataset
from .worker_info import WorkerInfo, get_worker_info

__all__ = ["WorkerInfo", "get_worker_info"]

DATA, STOP, ERROR = 0, 1, 2
_HEADER = struct.Struct("<BxxxIqq")  # kind, worker id, epoch, task id

# --------------------------------------------------------------------------- pickling
def _worker_tensor(array: np.ndarray, requires_grad: bool) -> Tensor:
    """A tensor of the payload, rebuilt in a worker on its default device (Flex + Autodiff)."""
    from ...creation import from_numpy

    t = from_numpy(np.asarray(array))
    return t.requires_grad_() if requires_grad else t


class _Pickler(pickle.Pickler):
    """Pickles ember tensors as their numpy values: ``to_main`` (worker results) rebuilds them
    as batch tensors on the loader's device, otherwise (the payload of a worker) as worker
    tensors; ``numpy_datasets`` sends an exact ``TensorDataset`` as its numpy arrays."""

    def __init__(self, file: Any, to_main: bool, numpy_datasets: bool = False) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.to_main = to_main
        self.numpy_datasets = numpy_datasets

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            a = np.array(obj.numpy())  # a writable copy: pickling a read-only view is fine, but owned is simpler
            if self.to_main:
                from .collate import _batch_tensor

                return (_batch_tensor, (a,))
            return (_worker_tensor, (a, bool(obj.requires_grad)))
        if self.numpy_datasets:
            if type(obj) is TensorDataset:
                arrays = tuple(t.numpy() if isinstance(t, Tensor) else t for t in obj.tensors)
                return (TensorDataset, arrays)
        return NotImplemented


def dumps(obj: Any, to_main: bool, numpy_datasets: bool = False) -> bytes:
    """``obj`` pickled by ``_Pickler``."""
    f = io.BytesIO()
    _Pickler(f, to_main, numpy_datasets).dump(obj)
    return f.getvalue()


# --------------------------------------------------------------------------- fetching
class _Stage:
    """What a fetcher is doing, for the error report of a worker (formatted only on failure)."""

    __slots__ = ("what", "index", "batch")

    def __init__(self) -> None:
        self.what, self.index, self.batch = "", None, None

    def describe(self) -> str:
        if self.what == "sample":
            if self.batch is None:
                return f"while fetching sample index {self.index!r}"
            return f"while fetching sample index {self.index!r} (batch of sample indices {self.batch!r})"
        if self.what == "batch":
            return f"while fetching the batch of sample indices {self.batch!r}"
        if self.what == "collate":
            return f"while collating the batch of sample indices {self.batch!r}"
        if self.what == "iter":
            return "while iterating the IterableDataset"
        return self.what


class _TensorSource:
    """The fast path of an exact ``TensorDataset`` (under exact ``Subset`` layers) collated by
    ``default_collate``: the batch is each array at the batch's indices, one fancy index per
    tensor instead of a row per sample and a stack; the values, dtypes and devices are the
    ones ``default_collate`` gives. The numpy values are read once, when the fetcher is made."""

    def __init__(self, tds: Any, maps: list[np.ndarray]) -> None:
        self.arrays = [t.numpy() if isinstance(t, Tensor) else t for t in tds.tensors]
        self.devices = [t.device if isinstance(t, Tensor) else None for t in tds.tensors]
        self.maps = maps  # outermost Subset first

    @staticmethod
    def of(dataset: Any) -> _TensorSource | None:
        from .collate import np_str_obj_array_pattern

        maps = []
        d = dataset
        while type(d) is Subset:
            maps.append(np.asarray(d.indices, dtype=np.int64))
            d = d.dataset
        if type(d) is not TensorDataset:
            return None
        for t in d.tensors:
            if isinstance(t, Tensor) and t.requires_grad:
                return None  # default_collate's stack would record the graph
            if isinstance(t, np.ndarray) and np_str_obj_array_pattern.search(t.dtype.str) is not None:
                return None  # default_collate raises for these: let it
        return _TensorSource(d, maps)

    def fetch(self, index: list[Any]) -> list[Any]:
        from .collate import _device, _in_worker, _leaf, _ToTensor

        idx = np.asarray(index, dtype=np.int64)
        for m in self.maps:
            idx = m[idx]
        if _in_worker():
            return [_ToTensor(a[idx]) for a in self.arrays]
        from ...creation import from_numpy

        target = _device()
        out = []
        for a, dev in zip(self.arrays, self.devices):
            if target is None and dev is None:
                out.append(_leaf(a[idx]))
            else:
                out.append(from_numpy(a[idx], device=target if target is not None else dev))
        return out


class MapFetcher:
    """Fetches one index (or batch of indices) of a map-style dataset and collates it."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any], drop_last: bool) -> None:
        from .collate import default_collate

        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.stage = _Stage()
        self.fast = _TensorSource.of(dataset) if auto_collation and collate_fn is default_collate else None
        # torch fetches through __getitems__ where a dataset has one; exact Subsets that only
        # forward it to per-sample indexing are fetched sample by sample here instead (the
        # same samples), so that a failure can name the sample
        inner = dataset
        while type(inner) is Subset:
            inner = inner.dataset
        self.batched = callable(getattr(inner, "__getitems__", None))

    def fetch(self, index: Any) -> Any:
        st = self.stage
        if self.fast is not None:
            st.what, st.batch = "batch", index
            return self.fast.fetch(index)
        ds = self.dataset
        if self.auto_collation:
            st.batch = index
            if self.batched:
                st.what = "batch"
                data = ds.__getitems__(index)
            else:
                st.what = "sample"
                data = []
                for i in index:
                    st.index = i
                    data.append(ds[i])
        else:
            st.what, st.index, st.batch = "sample", index, None
            data = ds[index]
        st.what, st.batch = "collate", index
        return self.collate_fn(data)


class IterableFetcher:
    """Takes the next sample (or ``len(index)`` samples) of an iterable dataset and collates
    them; raises StopIteration when the stream ends (a short last batch unless ``drop_last``)."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any], drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.stage = _Stage()
        self.stage.what = "iter"
        self.it = iter(dataset)
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        st = self.stage
        st.what = "iter"
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.it))
                except StopIteration:
                    self.ended = True
                    break
            if not data or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.it)
        st.what = "collate"
        st.batch = f"<{len(data) if self.auto_collation else 1} samples of the stream>"
        return self.collate_fn(data)


def make_fetcher(iterable: bool, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any],
                 drop_last: bool) -> MapFetcher | IterableFetcher:
    """The fetcher of a dataset (torch's ``_DatasetKind.create_fetcher``)."""
    cls = IterableFetcher if iterable else MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


# --------------------------------------------------------------------------- the worker
def _error_body(exc: BaseException, where: str) -> bytes:
    """``(type, message)`` of a failure, torch's text: ``Caught ValueError in DataLoader worker
    process 0 ...\\nOriginal Traceback (most recent call last): ...``; the type is None when it
    does not pickle (the main process then raises RuntimeError)."""
    msg = f"Caught {type(exc).__name__} {where}.\nOriginal {''.join(traceback.format_exception(exc))}"
    try:
        return pickle.dumps((type(exc), msg), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps((None, msg), protocol=pickle.HIGHEST_PROTOCOL)


def _main_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drain(conn: Any, inbox: queue.SimpleQueue[Any], main_pid: int) -> None:
    """Move the main process's messages into ``inbox`` as they come; None once it is gone."""
    try:
        while True:
            if not conn.poll(1.0):
                if not _main_alive(main_pid):
                    break
                continue
            msg = conn.recv()
            inbox.put(msg)
            if msg is None:
                return
    except (EOFError, OSError):
        pass
    inbox.put(None)


def worker_loop(worker_id: int, conn: Any, payload: Any, pickled: bool, num_workers: int, base_seed: int,
                main_pid: int, iterable: bool, auto_collation: bool, drop_last: bool) -> None:
    """The body of worker process ``worker_id``: set up (seeds, default device, the payload,
    ``worker_init_fn``), then answer tasks until told to exit or the main process is gone.

    ``payload`` is ``(dataset, collate_fn, worker_init_fn)``, as bytes of ``_Pickler`` when
    ``pickled`` (else the objects themselves: a forked child's copies)."""
    # Ctrl-C reaches the whole process group: the main process handles it and shuts us down
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    where = f"in DataLoader worker process {worker_id}"
    init_error: bytes | None = None
    fetcher: Any = None
    dataset = collate_fn = worker_init_fn = None
    try:
        import ember
        from ember.device import Device

        ember.set_default_device(Device.flex().autodiff())  # numpy only: no runtime, no threads
        seed = base_seed + worker_id
        random.seed(seed)
        ember.manual_seed(seed)
        np.random.seed(np.random.SeedSequence([base_seed, worker_id]).generate_state(4))
        dataset, collate_fn, worker_init_fn = pickle.loads(payload) if pickled else payload
        _info._worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
    except Exception as e:  # noqa: BLE001  (reported with the first task)
        init_error = _error_body(e, where + " while starting (unpickling the dataset, collate_fn, worker_init_fn)")
    if init_error is None and worker_init_fn is not None:
        try:
            worker_init_fn(worker_id)
        except Exception as e:  # noqa: BLE001
            init_error = _error_body(e, where + " while running worker_init_fn")
    if init_error is None:
        try:
            fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception as e:  # noqa: BLE001
            init_error = _error_body(e, where + " while starting the iteration of the dataset")
    epoch = 0
    exhausted = False
    # The pipe is drained by a thread of its own: the main process may send tasks while this
    # thread is blocked sending it a batch it does not read yet (a large batch fills the pipe),
    # and a send of the main process must never wait for that, or both would wait forever.
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    threading.Thread(target=_drain, args=(conn, inbox, main_pid), daemon=True, name="ember-loader-inbox").start()
    try:
        while True:
            msg = inbox.get()
            if msg is None:
                return
            if msg[0] == "reset":
                epoch = msg[1]
                exhausted = False
                if iterable and init_error is None:
                    try:
                        fetcher = make_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                    except Exception as e:  # noqa: BLE001
                        init_error = _error_body(e, where + " while starting the iteration of the dataset")
                continue
            _, epoch, task_id, index = msg
            if init_error is not None:
                conn.send_bytes(_HEADER.pack(ERROR, worker_id, epoch, task_id) + init_error)
                continue
            if exhausted:
                continue  # the main process stops waiting for this worker's tasks (torch does the same)
            try:
                data = fetcher.fetch(index)
            except StopIteration:
                exhausted = True
                conn.send_bytes(_HEADER.pack(STOP, worker_id, epoch, task_id))
                continue
            except Exception as e:  # noqa: BLE001
                body = _error_body(e, f"{where} {fetcher.stage.describe()}")
                conn.send_bytes(_HEADER.pack(ERROR, worker_id, epoch, task_id) + body)
                continue
            try:
                body = dumps(data, to_main=True)
            except Exception as e:  # noqa: BLE001
                body = _error_body(e, f"{where} while pickling the batch of sample indices {index!r}")
                conn.send_bytes(_HEADER.pack(ERROR, worker_id, epoch, task_id) + body)
                continue
            del data
            conn.send_bytes(_HEADER.pack(DATA, worker_id, epoch, task_id) + body)
    except (EOFError, BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        return  # the main process closed its end: nothing left to do
    finally:
        try:
            conn.close()
        except OSError:
            pass
