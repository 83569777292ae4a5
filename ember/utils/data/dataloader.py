"""``DataLoader``, as ``torch.utils.data.DataLoader``, with worker processes.

One class and its iterators over ~650 lines, as torch's ``dataloader`` module: the single- and
multi-process iterators read the loader's every option; what runs inside a worker is
``_worker.py``.

Worker processes (``num_workers > 0``)
--------------------------------------
Each worker gets the dataset, ``collate_fn`` and ``worker_init_fn`` pickled (ember tensors as
their numpy values: ``_worker.py``), is told which indices to fetch (round-robin, at most
``prefetch_factor`` batches in flight per worker), collates in the worker and sends the batch
back as numpy; the main process turns it into ember tensors on ``device`` (or ember's default
device) and yields batches in sampler order (``in_order=True``). Workers never touch a device
runtime on their own (their default device is Flex with Autodiff: numpy).

The default start method is torch's fork while that is safe (no device runtime has started in
this process and no other thread runs: only Flex stacks exist), so an unguarded script, lambdas
and local classes work as under torch; once a runtime has started it is **forkserver** (spawn
where there is none): forking a process whose ember runtimes started is unsafe. The cpu device
runs its kernels on libgomp's OpenMP thread pool, which a forked child inherits in a broken
state (its first parallel region can hang); a CUDA context cannot be used in a forked child;
wgpu (lavapipe), ember's Philox and compile thread pools and any lock another thread holds at
the fork are copied mid-flight. A forkserver child forks from a clean single-threaded server
process that never imported a runtime, so a worker may even use a device itself. Python 3.14
makes forkserver the Linux default for the same reasons. The costs of forkserver: the dataset, collate_fn and
worker_init_fn must pickle (module-level functions, not lambdas), each worker imports ember
(docs/data.md has measured start-up times; ``persistent_workers=True`` pays it once), and a
script's top level must be guarded by ``if __name__ == "__main__":``.
``multiprocessing_context="fork"`` is allowed: it is fast and takes lambdas, and it is safe
while no device runtime has started in this process.

A worker's exception is re-raised in the main process with torch's text (``Caught ValueError
in DataLoader worker process 0 while fetching sample index 7 ...`` plus the original
traceback); a worker that dies (a signal, ``os._exit``) raises RuntimeError at once (the
process sentinels are waited on with the pipes); ``timeout`` bounds the wait for one batch.
Workers exit when the iterator is exhausted, deleted or the loop breaks (or, with
``persistent_workers``, when the loader goes).

``pin_memory=True``: the main-process conversion of batch k+1 (unpickling into tensors on
``device``, the host-to-device copy) is done before batch k is handed out, so the copy of the
next batch is queued ahead of the compute on the current one. ember's CUDA runtime has no
page-locked upload path to offer (it pins only a small staging block for reads back; uploads
go from pageable memory through ``cuMemcpyHtoDAsync``), so there is no page-locking beyond
that look-ahead; ``pin_memory_device`` is accepted (torch deprecates it) and unused.

``device=`` (an ember extension): batches are moved to that device in the main process.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import multiprocessing as mp
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from ...device import Device
from ...tensor import Tensor
from . import _rng
from ._worker import _HEADER, ERROR, STOP, WorkerInfo, dumps, get_worker_info, make_fetcher, worker_loop
from .collate import _target, default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "WorkerInfo", "default_collate", "default_convert"]

T_co = TypeVar("T_co", covariant=True)


class _InfiniteConstantSampler(Sampler[None]):
    """The sampler of an IterableDataset: None forever (the fetcher only counts them)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


#: what the forkserver imports once, so that every worker forks with it loaded
_WORKER_MODULE = "ember.utils.data._worker"


def _fork_is_safe() -> bool:
    """Whether forking now copies no runtime state: fork exists here, no thread but this one runs
    (no thread pool or service thread of ember's, wgpu's or the user's), and every device stack
    built so far is Flex (numpy), so no OpenMP pool, CUDA context or wgpu device exists."""
    if "fork" not in mp.get_all_start_methods() or threading.active_count() > 1:
        return False
    dispatch = sys.modules.get("ember.backends.dispatch")
    for device in list(getattr(dispatch, "_stacks", ())):
        spec = device.spec
        while spec[0] in ("autodiff", "fusion"):
            spec = spec[1]
        if spec[0] != "flex":
            return False
    return True


def _default_context() -> mp.context.BaseContext:
    """fork while that is safe (``_fork_is_safe``: as torch, so unguarded scripts, lambdas and
    local classes work), else forkserver where the platform has it, else spawn (the module
    docstring says why not fork once a runtime started)."""
    if _fork_is_safe():
        return mp.get_context("fork")
    return mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")


def _server_imports_this_ember() -> bool:
    """Whether a ``python -c`` started now from here (the forkserver) would import this very
    ember: it ignores the ``sys.path`` changes made at run time (CPython 3.11 does not apply the
    ``sys_path`` it is handed before preloading), so a preload could load another checkout or
    installed copy, and every worker would then run that one. Its path is the current directory,
    ``PYTHONPATH``, then the interpreter's own entries (stdlib, site-packages), then the meta path
    finders (editable installs). When in doubt: False (the workers import ember themselves)."""
    import importlib.machinery
    import sys

    import ember

    here = os.path.realpath(ember.__file__)
    front = [os.getcwd(), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    prefixes = tuple(os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    site = [p for p in sys.path if p and os.path.realpath(p).startswith(prefixes)]
    spec = importlib.machinery.PathFinder.find_spec("ember", front + site)
    if spec is None:
        for finder in sys.meta_path:
            if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec"):
                continue
            try:
                spec = finder.find_spec("ember", None)
            except Exception:  # noqa: BLE001  (a finder that cannot answer: treat as unknown)
                return False
            if spec is not None:
                break
    origin = getattr(spec, "origin", None)
    return origin is not None and os.path.realpath(origin) == here


def _preload_worker_module(ctx: mp.context.BaseContext) -> None:
    """Add the worker module to the forkserver's preload list (before the server starts).

    Without it every worker imports ember itself (ml_dtypes alone is 0.7 s of CPU on a slow
    machine) on every epoch: CPython 3.11/3.12's server never preloads ``__main__`` (it is
    handed ``main_path`` under a key get_preparation_data does not write), so nothing is
    imported before the fork. The list has no public getter: read the private one, keep its
    entries, and fall back to torch-like ``["__main__"]``."""
    if ctx.get_start_method() != "forkserver" or not _server_imports_this_ember():
        return
    import multiprocessing.forkserver as fs

    current = list(getattr(getattr(fs, "_forkserver", None), "_preload_modules", None) or ["__main__"])
    if _WORKER_MODULE not in current:
        ctx.set_forkserver_preload([*current, _WORKER_MODULE])


def _as_device(device: Any) -> Device | None:
    if device is None or isinstance(device, Device):
        return device
    if isinstance(device, str):
        return Device.parse(device)
    raise TypeError(f"device must be an ember.Device, a device string or None, got {device!r}")


@contextlib.contextmanager
def _on_device(device: Device | None) -> Iterator[None]:
    """Collate leaves and worker batches are built on ``device`` inside the block."""
    prev = getattr(_target, "device", None)
    _target.device = device
    try:
        yield
    finally:
        _target.device = prev


def _move(data: Any, device: Device) -> Any:
    """Every ember tensor in ``data`` (through Mappings, namedtuples, tuples, lists) on ``device``."""
    if isinstance(data, Tensor):
        return data if data.device == device else data.to(device)
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, Mapping):
        parts = {k: _move(v, device) for k, v in data.items()}
        try:
            return type(data)(parts)  # type: ignore[call-arg]
        except TypeError:
            return parts
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_move(d, device) for d in data))
    if isinstance(data, tuple):
        return tuple(_move(d, device) for d in data)
    if isinstance(data, list):
        return [_move(d, device) for d in data]
    return data


class DataLoader(Generic[T_co]):
    """As ``torch.utils.data.DataLoader``: batches of ``dataset`` in ``sampler`` order, loaded
    in the main process (``num_workers=0``) or in worker processes.

    ember differences (docs/data.md): ``generator`` is an ``ember.random.Generator`` or an int
    seed, and shuffled orders differ from torch's for the same seed; the default
    ``multiprocessing_context`` is forkserver (the module docstring says why); batches from
    workers are tensors on ``device`` or ember's default device (torch: CPU tensors);
    ``pin_memory`` is a one-batch look-ahead of the conversion; ``device=`` (extension) moves
    every batch to that device in the main process."""

    dataset: Dataset[T_co]
    batch_size: int | None
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    sampler: Sampler[Any] | Iterable[Any]
    prefetch_factor: int | None
    _iterator: Any
    __initialized = False

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler[Any] | Iterable[Any] | None = None,
                 batch_sampler: Sampler[list[Any]] | Iterable[list[Any]] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[list[Any]], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: _rng.GeneratorLike = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True, device: Device | str | None = None) -> None:
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor <= 0:
            raise ValueError("prefetch_factor option should be positive")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.in_order = in_order
        self.device = _as_device(device)
        self.multiprocessing_context = multiprocessing_context
        self.generator = _rng.as_generator(generator)

        if isinstance(dataset, IterableDataset):
            # an IterableDataset defines its own order: torch's checks
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if isinstance(dataset, IterableDataset):
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=self.generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._iterator = None
        self.__initialized = True
        self._check_worker_number()

    # ------------------------------------------------------------------ attributes
    @property
    def multiprocessing_context(self) -> Any:
        """The start-method context of the workers (None: fork while no device runtime has started,
        else forkserver, else spawn)."""
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx: Any) -> None:
        if ctx is not None:
            if self.num_workers == 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(ctx, str):
                valid = mp.get_all_start_methods()
                if ctx not in valid:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{valid!r}, but got multiprocessing_context={ctx!r}")
                ctx = mp.get_context(ctx)
            if not isinstance(ctx, mp.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got multiprocessing_context={ctx}")
        self.__multiprocessing_context = ctx

    def __setattr__(self, attr: str, val: Any) -> None:
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                           "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def _check_worker_number(self) -> None:
        """torch's warning when more workers are asked for than this process may use cores."""
        if self.num_workers == 0:
            return
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 0
        if cpus and self.num_workers > cpus:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. Our suggested "
                          f"max number of worker in current system is {cpus}, which is smaller than what this "
                          "DataLoader is going to create. Please be aware that excessive worker creation might get "
                          "DataLoader running slow or even freeze, lower the worker number to avoid potential "
                          "slowness/freeze if necessary.", stacklevel=3)

    # ------------------------------------------------------------------ iteration
    def _get_iterator(self) -> _BaseDataLoaderIter:
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self) -> _BaseDataLoaderIter:
        """An iterator over the batches (with persistent workers: the same one, reset)."""
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def __len__(self) -> int:
        """Batches per epoch (an IterableDataset: from its ``__len__``, as torch)."""
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)


class _BaseDataLoaderIter:
    """What both iterators share: the sampler, the seeds, the ``pin_memory`` look-ahead."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        self._dataset = loader.dataset
        self._iterable = isinstance(loader.dataset, IterableDataset)
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._collate_fn = loader.collate_fn
        self._pin_memory = loader.pin_memory
        self._device = loader.device
        self._timeout = loader.timeout
        self._persistent_workers = loader.persistent_workers
        self._sampler_iter = iter(self._index_sampler)
        # drawn from the loader's generator (the global stream when None), as torch: workers
        # seed from it, so a seeded run gives every worker the same seeds every time
        self._base_seed = _rng.draw_seed(loader.generator)
        self._num_yielded = 0
        self._ahead: tuple[Any, ...] | None = None

    def __iter__(self) -> _BaseDataLoaderIter:
        return self

    def _reset(self, loader: DataLoader[Any], first_iter: bool = False) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._ahead = None

    def _next_index(self) -> Any:
        return next(self._sampler_iter)

    def _next_data(self) -> Any:
        raise NotImplementedError

    def _produce(self) -> tuple[Any, ...]:
        try:
            return ("ok", self._next_data())
        except StopIteration:
            return ("end",)
        except Exception as e:  # noqa: BLE001  (raised when its batch is asked for)
            return ("err", e)

    def __next__(self) -> Any:
        if not self._pin_memory:
            data = self._next_data()
        else:
            # look-ahead: batch k+1 is converted (uploaded) before batch k is handed out
            cur = self._ahead if self._ahead is not None else self._produce()
            self._ahead = self._produce() if cur[0] == "ok" else cur
            if cur[0] == "end":
                raise StopIteration
            if cur[0] == "err":
                self._ahead = None
                raise cur[1]
            data = cur[1]
        self._num_yielded += 1
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """``num_workers=0``: fetch and collate in the calling thread (exceptions propagate as they are)."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        super().__init__(loader)
        self._fetcher = make_fetcher(self._iterable, self._dataset, self._auto_collation, self._collate_fn,
                                     self._drop_last)

    def _next_data(self) -> Any:
        index = self._next_index()
        with _on_device(self._device):
            data = self._fetcher.fetch(index)
        if self._device is not None:
            data = _move(data, self._device)
        return data


_GONE = object()  # a task already handed out (out of order) in _task_info


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """``num_workers > 0``: worker processes, ``prefetch_factor`` tasks in flight per worker,
    batches in sampler order (the module docstring describes the protocol)."""

    def __init__(self, loader: DataLoader[Any]) -> None:
        super().__init__(loader)
        self._prefetch_factor = int(loader.prefetch_factor or 2)
        self._in_order = loader.in_order
        self._shutdown = False
        self._workers: list[Any] = []
        self._conns: list[Any] = []
        self._epoch = 0
        ctx = loader.multiprocessing_context or _default_context()
        _preload_worker_module(ctx)
        collate_default = loader.collate_fn is default_collate or loader.collate_fn is default_convert
        objects = (self._dataset, self._collate_fn, loader.worker_init_fn)
        try:
            payload: Any = dumps(objects, to_main=False, numpy_datasets=collate_default)
            pickled = True
        except Exception as e:
            if ctx.get_start_method() != "fork":
                msg = (f"{e}\nDataLoader workers of the {ctx.get_start_method()!r} start method receive the "
                       "dataset, collate_fn and worker_init_fn pickled: use module-level functions and picklable "
                       "objects, or multiprocessing_context='fork' (docs/data.md)")
                try:
                    err = type(e)(msg)
                except Exception:  # noqa: BLE001  (an exception type that takes other arguments)
                    err = RuntimeError(msg)
                raise err from e
            payload, pickled = objects, False  # a forked child inherits the objects themselves
        main_pid = os.getpid()
        try:
            for wid in range(self._num_workers):
                parent, child = ctx.Pipe(duplex=True)
                w = ctx.Process(target=worker_loop, daemon=True,
                                args=(wid, child, payload, pickled, self._num_workers, self._base_seed, main_pid,
                                      self._iterable, self._auto_collation, self._drop_last))
                w.start()
                child.close()  # the worker holds the only other end: its exit shows as EOF
                self._workers.append(w)
                self._conns.append(parent)
        except BaseException:
            self._shutdown_workers()
            raise
        self._conn_worker = {c: i for i, c in enumerate(self._conns)}
        self._sentinel_worker = {w.sentinel: i for i, w in enumerate(self._workers)}
        self._reset(loader, first_iter=True)

    def _reset(self, loader: DataLoader[Any], first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        if not first_iter:
            self._epoch += 1  # results of an earlier epoch still in the pipes are dropped by tag
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info: dict[int, Any] = {}  # task id -> worker id, or (worker id, kind, body) once in
        self._active = [True] * self._num_workers
        self._cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for i in range(self._num_workers):
                self._send(i, ("reset", self._epoch))
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _send(self, worker: int, msg: Any) -> None:
        try:
            self._conns[worker].send(msg)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._worker_failed(worker)

    def _try_put_index(self) -> None:
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            w = next(self._cycle)
            if self._active[w]:
                break
        else:
            return  # every worker's stream ended
        self._task_info[self._send_idx] = w
        self._send(w, ("task", self._epoch, self._send_idx, index))
        self._send_idx += 1

    def _next_data(self) -> Any:
        while True:
            if self._shutdown:
                raise StopIteration
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx, _GONE)
                if info is not _GONE and (isinstance(info, tuple) or self._active[info]):
                    break
                # handed out already, or sent to a worker whose stream ended: never comes
                self._task_info.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if isinstance(info, tuple):
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info)
            w, kind, task, body = self._get_result()
            if task not in self._task_info:
                continue
            if kind == STOP:
                self._active[w] = False
                continue
            if task == self._rcvd_idx:
                del self._task_info[task]
                self._rcvd_idx += 1
                return self._process((w, kind, body))
            if not self._in_order:
                self._task_info[task] = _GONE
                return self._process((w, kind, body))
            self._task_info[task] = (w, kind, body)

    def _process(self, info: tuple[int, int, Any]) -> Any:
        self._try_put_index()
        w, kind, body = info
        if kind == ERROR:
            exc_type, msg = pickle.loads(body)
            raise _rebuild_exception(exc_type, msg)
        with _on_device(self._device):
            return pickle.loads(body)

    def _get_result(self) -> tuple[int, int, int, memoryview]:
        """The next message of the current epoch from any worker; raises when a worker died or
        ``timeout`` passed."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            ready = mp.connection.wait(self._conns + list(self._sentinel_worker), timeout=remaining)
            for r in ready:
                w = self._conn_worker.get(r)  # type: ignore[call-overload]
                if w is None:
                    continue
                try:
                    buf = r.recv_bytes()
                except (EOFError, OSError):
                    self._worker_failed(w)
                kind, wid, epoch, task = _HEADER.unpack_from(buf)
                if epoch == self._epoch:
                    return wid, kind, task, memoryview(buf)[_HEADER.size:]
                break  # a stale result of an earlier epoch: wait again
            else:
                for r in ready:  # only sentinels: a worker exited
                    w = self._sentinel_worker[r]
                    if not self._conns[w].poll():
                        self._worker_failed(w)

    def _worker_failed(self, w: int) -> None:
        proc = self._workers[w]
        proc.join(timeout=1.0)
        code = proc.exitcode
        self._shutdown_workers()
        if code is not None and code < 0:
            name = signal.strsignal(-code) or f"signal {-code}"  # torch's text: "... by signal: Killed."
            raise RuntimeError(f"DataLoader worker (pid {proc.pid}) is killed by signal: {name}.")
        raise RuntimeError(f"DataLoader worker (pid {proc.pid}) exited unexpectedly with exit code {code}")

    def _shutdown_workers(self) -> None:
        """Tell every worker to exit, close the pipes (a worker blocked sending a batch gets
        EPIPE), join, and terminate the ones that do not exit within a few seconds."""
        if self._shutdown:
            return
        self._shutdown = True
        for c in self._conns:
            with contextlib.suppress(Exception):
                c.send(None)
        for c in self._conns:
            with contextlib.suppress(Exception):
                c.close()
        deadline = time.monotonic() + 5.0
        for w in self._workers:
            with contextlib.suppress(Exception):
                w.join(timeout=max(0.0, deadline - time.monotonic()))
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=1.0)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._shutdown_workers()


class _KeyErrorMessage(str):
    """A KeyError's message shown as it is (KeyError prints the repr of its argument)."""

    def __repr__(self) -> str:
        return str(self)


def _rebuild_exception(exc_type: Any, msg: str) -> BaseException:
    """The worker's exception type with the worker's text, or RuntimeError when the type cannot
    be built from one message (as torch's ``ExceptionWrapper.reraise``)."""
    if exc_type is KeyError:
        return KeyError(_KeyErrorMessage(msg))
    if isinstance(exc_type, type) and issubclass(exc_type, BaseException):
        try:
            return exc_type(msg)
        except Exception:  # noqa: BLE001
            pass
    return RuntimeError(msg)

