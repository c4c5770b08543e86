"""The worker process: its loop, its seeds and get_worker_info() (PyTorch's _utils/worker.py).

A worker receives (task index, sampler index) on its own index queue, fetches and collates, and puts
(worker id, task index, pickled data, ids of the blocks whose descriptors it sent) on the result queue
shared by all workers. The shared-memory blocks of the batch's tensors travel beside it as file
descriptors over the worker's Unix socket (tinytorch._shared_memory), sent before the message, so the
main process finds them waiting; the main process sends back over the same socket the ids of blocks it
freed, which the worker reuses."""
from __future__ import annotations

import faulthandler
import os
import queue
import random
import socket
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import numpy as np

from . import MP_STATUS_CHECK_INTERVAL, ExceptionWrapper


class ManagerWatchdog:
    """Tells a worker whether the process that started it is still alive: after the parent dies the worker
    is re-parented, so getppid() changes (checked every MP_STATUS_CHECK_INTERVAL, hence no orphans)."""

    def __init__(self) -> None:
        self.manager_pid = os.getppid()
        self.manager_dead = False

    def is_alive(self) -> bool:
        if not self.manager_dead:
            self.manager_dead = os.getppid() != self.manager_pid
        return not self.manager_dead


@dataclass(frozen=True)
class WorkerInfo:
    """What get_worker_info() returns in a worker: its id (0 to num_workers - 1), num_workers, the seed
    it was given (base_seed + id) and its own copy of the dataset."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: Optional[WorkerInfo] = None


def get_worker_info() -> Optional[WorkerInfo]:
    """This worker's WorkerInfo in a DataLoader worker process; None in the main process. An IterableDataset
    uses it to read only its share of the data (by id and num_workers)."""
    return _worker_info


@dataclass(frozen=True)
class _IterableDatasetStopIteration:
    """Sent by a worker whose copy of an IterableDataset is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class _ResumeIteration:
    """Sent to persistent workers at the start of each epoch after the first: rebuild the fetcher."""

    seed: Optional[int] = None


def _generate_state(base_seed: int, worker_id: int) -> List[int]:
    """The 4 x 32-bit seed of a worker's NumPy global generator, as PyTorch derives it: NumPy's SeedSequence
    hash of (worker_id, low and high 32 bits of base_seed, 0), so that no two workers (and no worker and its
    `random` seed) share a stream."""
    entropy = [worker_id, base_seed & 0xFFFFFFFF, base_seed >> 32, 0]
    return [int(v) for v in np.random.SeedSequence(entropy).generate_state(4, dtype=np.uint32)]


def _send(sock: socket.socket, data_queue: Any, worker_id: int, idx: Any, data: Any) -> None:
    """Hand (idx, data) to the main process: the shared blocks' descriptors first, then the message."""
    from .... import _shared_memory
    try:
        payload, fds, ids, blocks = _shared_memory.dumps(data)
    except Exception:  # noqa: BLE001 - e.g. an unpicklable batch: the main process raises it
        payload, fds, ids, blocks = _shared_memory.dumps(ExceptionWrapper(where=f"in DataLoader worker process "
                                                                                f"{worker_id}"))
    if fds:
        socket.send_fds(sock, [b"f"], fds)
    data_queue.put((worker_id, idx, payload, ids))
    del blocks  # the receiver holds its own descriptors now


def _worker_loop(worker_id: int, num_workers: int, index_queue: Any, data_queue: Any, fd_socket: socket.socket,
                 done_event: Any, dataset_kind: int, dataset: Any, auto_collation: bool, collate_fn: Callable,
                 drop_last: bool, base_seed: int, init_fn: Optional[Callable]) -> None:
    """Serve fetch requests until told to stop (None), the loader shuts down, or the parent dies."""
    from .... import _shared_memory, _threads, manual_seed
    from .fetch import _DatasetKind
    try:
        _shared_memory.recycler = _shared_memory.Recycler(fd_socket)
        faulthandler.enable()  # a crash in native code prints this worker's Python stack before it dies
        _threads.set(1)  # parallelism comes from the workers; intra-op threads would oversubscribe the cores
        seed = base_seed + worker_id
        random.seed(seed)
        manual_seed(seed)
        np.random.seed(_generate_state(base_seed, worker_id))

        global _worker_info
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)

        init_exception = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = _DatasetKind.create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
        except Exception:  # noqa: BLE001 - reported with the first batch this worker is asked for
            init_exception = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")

        # Once this worker's IterableDataset copy is exhausted (iteration_end) or the loader shuts down
        # (done_event), it answers nothing more and only waits for the final None.
        iteration_end = False
        watchdog = ManagerWatchdog()
        while watchdog.is_alive():
            try:
                r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(r, _ResumeIteration):
                iteration_end = False
                fetcher = _DatasetKind.create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
                _send(fd_socket, data_queue, worker_id, r, None)
                continue
            if r is None:
                break
            if done_event.is_set() or iteration_end:
                continue
            idx, index = r
            if init_exception is not None:
                data, init_exception = init_exception, None
            else:
                try:
                    data = fetcher.fetch(index)
                except Exception as e:  # noqa: BLE001 - every failure goes to the main process
                    if isinstance(e, StopIteration) and dataset_kind == _DatasetKind.Iterable:
                        data = _IterableDatasetStopIteration(worker_id)
                        iteration_end = True
                    else:
                        data = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
            try:
                _send(fd_socket, data_queue, worker_id, idx, data)
            except OSError:
                if done_event.is_set() or not watchdog.is_alive():
                    break  # the main process closed its end: nobody is waiting for this batch
                raise
            del data, idx, index, r  # hold no batch while waiting for the next request
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the whole process group: the main process reports it
    if done_event.is_set():
        data_queue.cancel_join_thread()  # exit even if results nobody will read are still queued
        data_queue.close()
