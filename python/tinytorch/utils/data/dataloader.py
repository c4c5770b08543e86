"""DataLoader: batches from a dataset, loaded in the calling process (num_workers=0) or in worker
processes, with PyTorch's semantics, arguments and error messages.

With num_workers > 0 each iterator (_MultiProcessingDataLoaderIter) starts that many processes (fork on
Linux unless multiprocessing's start method was set, spawn elsewhere), each with its own index queue and
all sharing one result queue. The main process runs the sampler and keeps prefetch_factor batches in
flight per worker; batches come back in sampler order (in_order=True) or as they are ready. Tensors
cross in shared memory (tinytorch._shared_memory). persistent_workers keeps the processes from one
epoch to the next; otherwise they exit when the epoch ends, and always when the iterator is deleted, the
program exits or the main process dies (each worker watches its parent).
"""
from __future__ import annotations

import atexit
import itertools
import multiprocessing
import os
import pickle
import queue
import socket
import sys
import threading
import time
import warnings
from typing import Any, Callable, Iterable, Iterator, Optional

from ... import profiler as _profiler
from . import _utils
from ._utils.collate import default_collate, default_convert
from ._utils.fetch import _DatasetKind
from ._utils.worker import get_worker_info
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None forever (the dataset decides when to stop)."""

    def __iter__(self) -> Iterator[None]:
        while True:
            yield None


def _default_context() -> multiprocessing.context.BaseContext:
    """fork on Linux (cheap; the autograd engine restarts its threads in a forked child), unless the program
    chose a start method; elsewhere multiprocessing's default (spawn on macOS and Windows)."""
    if sys.platform.startswith("linux") and multiprocessing.get_start_method(allow_none=True) is None:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


class DataLoader:
    """Iterate over a dataset in batches: sampling (sequential, shuffled, or any sampler), batching,
    collation, and with num_workers > 0 loading in worker processes (see the module docstring)."""

    _initialized = False

    def __init__(self, dataset: Dataset, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Sampler | Iterable | None = None, batch_sampler: Sampler | Iterable | None = None,
                 num_workers: int = 0, collate_fn: Optional[Callable] = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Optional[Callable[[int], None]] = None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor: Optional[int] = None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._IterableDataset_len_called = None
        self._iterator: Optional[_BaseDataLoaderIter] = None
        self._initialized = True
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self) -> Optional[multiprocessing.context.BaseContext]:
        """The multiprocessing context workers start from (None: the default, see the module docstring)."""
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, multiprocessing_context) -> None:
        if multiprocessing_context is not None:
            if self.num_workers == 0:
                raise ValueError(f"multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(multiprocessing_context, str):
                valid_start_methods = multiprocessing.get_all_start_methods()
                if multiprocessing_context not in valid_start_methods:
                    raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                     f"{valid_start_methods!r}, but got "
                                     f"multiprocessing_context={multiprocessing_context!r}")
                multiprocessing_context = multiprocessing.get_context(multiprocessing_context)
            if not isinstance(multiprocessing_context, multiprocessing.context.BaseContext):
                raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                                f"specifying the start method, but got "
                                f"multiprocessing_context={multiprocessing_context}")
        self._multiprocessing_context = multiprocessing_context

    def __setattr__(self, attr: str, val: Any) -> None:
        if self._initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                          "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    def _get_iterator(self) -> "_BaseDataLoaderIter":
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self) -> "_BaseDataLoaderIter":
        # With persistent workers one iterator (and its processes) serves every epoch.
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._dataset_kind == _DatasetKind.Iterable:
            # An IterableDataset's own length (each worker must yield only its share for this to hold).
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                from math import ceil
                length = length // self.batch_size if self.drop_last else ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self) -> None:
        """Warn (as PyTorch does) when asking for more workers than this process may use cores."""
        if self.num_workers == 0:
            return
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if cores is None or self.num_workers > cores:
            cpuset = "" if hasattr(os, "sched_getaffinity") else " (`cpuset` is not taken into account)"
            suggestion = (f"Our suggested max number of worker in current system is {cores}{cpuset}, which is "
                          f"smaller than what this DataLoader is going to create." if cores is not None else
                          "DataLoader is not able to compute a suggested max number of worker in current system.")
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. {suggestion} "
                          "Please be aware that excessive worker creation might get DataLoader running slow or even "
                          "freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
                          stacklevel=2)


class _BaseDataLoaderIter:
    """One pass over the loader's sampler. Creating it draws the workers' base seed from the loader's
    generator (or the global one), as PyTorch does, whether or not there are workers."""

    def __init__(self, loader: DataLoader) -> None:
        from ... import accelerator, int64, randint
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        if loader.pin_memory and loader.pin_memory_device:
            warnings.warn(f"pin_memory_device is deprecated, the current accelerator will be used as the device,"
                          f"ignore pin_memory_device='{loader.pin_memory_device}'.", stacklevel=2)
        if loader.pin_memory and not accelerator.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                          "memory won't be used.", stacklevel=2)
        self._pin_memory = loader.pin_memory and accelerator.is_available()
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = int(randint(0, 2 ** 63 - 1, (), generator=loader.generator, dtype=int64).item())
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0
        self._profile_name = f"enumerate(DataLoader)#{self.__class__.__name__}.__next__"

    def __iter__(self) -> "_BaseDataLoaderIter":
        return self

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self) -> Any:
        return next(self._sampler_iter)  # may raise StopIteration

    def _next_data(self) -> Any:
        raise NotImplementedError

    def __next__(self) -> Any:
        # The profiler shows this span on the main thread beside the step's compute (PyTorch's name for it).
        with _profiler.record_function(self._profile_name):
            data = self._next_data()
        self._num_yielded += 1
        if (self._dataset_kind == _DatasetKind.Iterable and self._IterableDataset_len_called is not None
                and self._num_yielded > self._IterableDataset_len_called):
            msg = (f"Length of IterableDataset {self._dataset} was reported to be "
                   f"{self._IterableDataset_len_called}(when accessing len(dataloader)), but {self._num_yielded} "
                   f"samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly configuring the "
                        "IterableDataset replica at each worker. Please see "
                        "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset for examples.")
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{self.__class__.__name__} cannot be pickled")


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    """Loading in the calling process: fetch, collate, optionally pin, one batch per next()."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0 (timeout bounds the wait for a "
                                 f"worker process; got timeout={self._timeout} with num_workers=0)")
        self._dataset_fetcher = _DatasetKind.create_fetcher(self._dataset_kind, self._dataset, self._auto_collation,
                                                            self._collate_fn, self._drop_last)

    def _next_data(self) -> Any:
        index = self._next_index()  # may raise StopIteration
        data = self._dataset_fetcher.fetch(index)  # may raise StopIteration
        if self._pin_memory:
            data = _utils.pin_memory.pin_memory(data)
        return data


class _WorkerPool:
    """The processes, queues and descriptor sockets behind one multi-process iterator.

    Reachable from a module-level set until shut down, so that when the iterator dies in a garbage cycle
    (an exception's traceback holds it, say) its queues are not finalized with it: their feeder threads
    must still deliver the workers' final None when the iterator's __del__ shuts the pool down. Program
    exit shuts down every pool still running (before multiprocessing terminates daemonic children)."""

    running: "set[_WorkerPool]" = set()

    def __init__(self, ctx: multiprocessing.context.BaseContext, num_workers: int, loader_args: tuple,
                 pin_memory: bool) -> None:
        self.result_queue = ctx.Queue()
        self.done_event = ctx.Event()
        self.index_queues: list = []
        self.workers: list = []
        self.sockets: list = []  # the main process's end of each worker's descriptor socket
        self.told_to_stop: list = []
        self.closed = False
        self.pids_key: Optional[int] = None
        self.pin_thread: Optional[threading.Thread] = None
        self.data_queue: Any = self.result_queue
        _WorkerPool.running.add(self)
        try:
            for i in range(num_workers):
                self._start_worker(ctx, i, num_workers, loader_args)
        except BaseException:  # e.g. spawn cannot pickle the dataset: stop those already started
            self.shutdown()
            raise
        if pin_memory:
            from ... import accelerator
            self.pin_done_event = threading.Event()
            self.data_queue = queue.Queue()
            self.pin_thread = threading.Thread(
                target=_utils.pin_memory._pin_memory_loop, name="tinytorch_data_pin", daemon=True,
                args=(self.result_queue, self.data_queue, accelerator.current_device_index(), self.pin_done_event,
                      None, self.decode))
            self.pin_thread.start()

    def _start_worker(self, ctx: multiprocessing.context.BaseContext, i: int, num_workers: int,
                      loader_args: tuple) -> None:
        index_queue = ctx.Queue()
        index_queue.cancel_join_thread()  # a worker that died must not block our exit
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # A worker sends descriptors before their message, so reading them never waits: the timeout is a backstop.
        ours.settimeout(_utils.WORKER_JOIN_TIMEOUT)
        w = ctx.Process(target=_utils.worker._worker_loop, daemon=True,
                        args=(i, num_workers, index_queue, self.result_queue, theirs, self.done_event) + loader_args)
        try:
            w.start()
        except BaseException as e:
            ours.close()
            if isinstance(e, (TypeError, AttributeError, pickle.PicklingError)):
                warnings.warn("Got pickle error when attempting to start a worker Process. This might be because the "
                              "worker Process arguments are not picklable: the spawn and forkserver start methods "
                              "pickle the dataset, collate_fn and worker_init_fn (a lambda cannot be pickled).",
                              stacklevel=4)
            raise
        finally:
            theirs.close()
        self.index_queues.append(index_queue)
        self.sockets.append(ours)
        self.workers.append(w)
        self.told_to_stop.append(False)

    def register_pids(self, key: int) -> None:
        """Let the SIGCHLD handler report these workers' deaths."""
        _utils.signal_handling._set_worker_pids(key, tuple(w.pid for w in self.workers))
        _utils.signal_handling._set_SIGCHLD_handler()
        self.pids_key = key

    def decode(self, msg: tuple) -> tuple:
        """A worker's message -> (worker_id, idx, data), mapping the shared memory its descriptors name."""
        from ... import _shared_memory
        worker_id, idx, payload, ids = msg
        fds: list = []
        if ids:
            try:
                _, fds, _, _ = socket.recv_fds(self.sockets[worker_id], 1, len(ids))
            except OSError as e:
                raise RuntimeError(f"DataLoader worker {worker_id} sent a batch but its {len(ids)} shared memory "
                                   f"descriptor(s) did not arrive: {e}") from e
            if len(fds) != len(ids):
                for fd in fds:
                    os.close(fd)
                raise RuntimeError(f"DataLoader worker {worker_id} sent {len(fds)} shared memory descriptor(s) for "
                                   f"a batch that needs {len(ids)} (is the open file limit, ulimit -n, too low?)")
        return (worker_id, idx, _shared_memory.loads(payload, fds, ids, self.sockets[worker_id]))

    def stop(self, worker_id: int) -> None:
        """Send the worker its final None (once): it exits after its current task."""
        if not self.told_to_stop[worker_id]:
            self.told_to_stop[worker_id] = True
            self.index_queues[worker_id].put(None)

    def shutdown(self) -> None:
        """Stop the pin thread, tell every worker to stop, join them for a while, terminate what is left."""
        if self.closed:
            return
        self.closed = True
        _utils.signal_handling._shutting_down += 1
        try:
            if self.pin_thread is not None:
                self.pin_done_event.set()
                self.result_queue.put(None)  # wakes the thread if it is waiting
                self.pin_thread.join()
            self.done_event.set()
            for worker_id in range(len(self.workers)):
                self.stop(worker_id)
            for s in self.sockets:
                s.close()  # a worker blocked sending descriptors gets an error and exits
            for w in self.workers:
                w.join(timeout=_utils.WORKER_JOIN_TIMEOUT)
            for q in self.index_queues:
                q.cancel_join_thread()
                q.close()
            self.result_queue.cancel_join_thread()
            self.result_queue.close()
        finally:
            if self.pids_key is not None:
                _utils.signal_handling._remove_worker_pids(self.pids_key)  # before terminate: no false alarm
                self.pids_key = None
            for w in self.workers:
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=_utils.WORKER_JOIN_TIMEOUT)
            _WorkerPool.running.discard(self)
            _utils.signal_handling._shutting_down -= 1


def _shutdown_running_pools() -> None:
    # Registered after multiprocessing's exit handler, so it runs first: workers still running at exit
    # (persistent ones, typically) are stopped cleanly rather than terminated.
    for pool in list(_WorkerPool.running):
        pool.shutdown()


atexit.register(_shutdown_running_pools)


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    """Loading in num_workers processes (a _WorkerPool).

    Task k (the k-th index the sampler yields) goes to a worker's index queue; the worker's answer comes
    back tagged with k. `_task_info[k]` is (worker,) while k is outstanding and (worker, data) once it arrived
    ahead of its turn; `_rcvd_idx` is the next task to return in order, `_send_idx` the next to hand out.
    At most prefetch_factor * num_workers tasks are outstanding."""

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        if self._prefetch_factor <= 0:
            raise ValueError(f"prefetch_factor must be positive with worker processes, got {self._prefetch_factor}")
        self._worker_init_fn = loader.worker_init_fn
        self._workers_status = [True] * self._num_workers
        self._pool = _WorkerPool(
            loader.multiprocessing_context or _default_context(), self._num_workers,
            (self._dataset_kind, self._dataset, self._auto_collation, self._collate_fn, self._drop_last,
             self._base_seed, self._worker_init_fn), self._pin_memory)
        self._pool.register_pids(id(self))
        self._reset(loader, first_iter=True)

    @property
    def _workers(self) -> list:
        return self._pool.workers

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info: dict = {}
        self._workers_status = [True] * self._num_workers
        self._workers_num_tasks = [0] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            # Persistent workers: every worker acknowledges the new epoch; results of the last one's
            # unfinished tasks that arrive meanwhile are dropped.
            for q in self._pool.index_queues:
                q.put(_utils.worker._ResumeIteration())
            acks = self._num_workers
            while acks > 0:
                _, idx, _ = self._get_data()
                if isinstance(idx, _utils.worker._ResumeIteration):
                    acks -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_get_data(self, timeout: float = _utils.MP_STATUS_CHECK_INTERVAL) -> tuple:
        """(True, (worker_id, idx, data)) or (False, None) after `timeout` seconds; raises if a worker died."""
        try:
            msg = self._pool.data_queue.get(timeout=timeout)
        except queue.Empty:
            self._raise_if_workers_died()
            return (False, None)
        if self._pin_memory:
            if msg[0] is None:  # the pin thread could not decode a message
                msg[2].reraise()
            return (True, msg)
        return (True, self._pool.decode(msg))

    def _raise_if_workers_died(self) -> None:
        for worker_id, w in enumerate(self._pool.workers):
            if self._workers_status[worker_id] and not w.is_alive():
                msg = _utils.signal_handling.worker_failure(w.pid, w.exitcode)
                self._shutdown_workers()
                raise RuntimeError(msg or f"DataLoader worker (pid(s) {w.pid}) exited unexpectedly")

    def _get_data(self) -> tuple:
        # Wait in slices so that a dead worker is noticed between them; the SIGCHLD handler interrupts
        # the wait at once when it can.
        if self._timeout > 0:
            deadline = time.monotonic() + self._timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
                ok, data = self._try_get_data(min(left, _utils.MP_STATUS_CHECK_INTERVAL))
                if ok:
                    return data
        while True:
            if self._pool.pin_thread is not None and not self._pool.pin_thread.is_alive():
                raise RuntimeError("Pin memory thread exited unexpectedly")
            ok, data = self._try_get_data()
            if ok:
                return data

    def _next_data(self) -> Any:
        while True:
            # Skip tasks whose worker stopped (its IterableDataset copy ended) before answering them.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:  # arrived earlier, out of turn
                worker_id, data = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)
            worker_id, idx, data = self._get_data()
            if self._dataset_kind == _DatasetKind.Iterable and isinstance(
                    data, _utils.worker._IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if not self._in_order:
                    del self._task_info[idx]
                    return self._process_data(data, worker_id)
                self._task_info[idx] += (data,)
            else:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)

    def _try_put_index(self) -> None:
        max_tasks = self._prefetch_factor * self._num_workers
        active = sum(self._workers_status)
        for _ in range(self._num_workers):  # the next active worker; out of order: one with room
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id] and (
                    self._in_order or self._workers_num_tasks[worker_id] < max_tasks // active):
                break
        else:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        self._pool.index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._workers_num_tasks[worker_id] += 1
        self._send_idx += 1

    def _process_data(self, data: Any, worker_id: int) -> Any:
        self._workers_num_tasks[worker_id] -= 1
        self._try_put_index()
        if isinstance(data, _utils.ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id: int) -> None:
        self._pool.stop(worker_id)
        self._workers_status[worker_id] = False

    def _shutdown_workers(self) -> None:
        if not _utils.python_exit_status:
            self._pool.shutdown()

    def __del__(self) -> None:
        if hasattr(self, "_pool"):  # __init__ got far enough to start workers
            self._shutdown_workers()
