"""Pinning: with pin_memory=True on a CUDA machine a thread of the main process copies each batch into
page-locked host memory (CuPy's pinned allocator), so that `.to("cuda", non_blocking=True)` is a DMA
that overlaps compute (PyTorch's _utils/pin_memory.py)."""
from __future__ import annotations

import collections.abc
import copy
import queue
from typing import Any, Callable

from . import MP_STATUS_CHECK_INTERVAL, ExceptionWrapper


def pin_memory(data: Any, device: Any = None) -> Any:
    """data with every tensor (and anything else with a pin_memory method) replaced by its pinned copy."""
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)  # keeps the mapping type's own attributes
                clone.update({k: pin_memory(v, device) for k, v in data.items()})
                return clone
            return type(data)({k: pin_memory(v, device) for k, v in data.items()})
        except TypeError:
            return {k: pin_memory(v, device) for k, v in data.items()}
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # namedtuple
            return type(data)(*(pin_memory(v, device) for v in data))
        return type(data)(pin_memory(v, device) for v in data)
    if isinstance(data, collections.abc.Sequence):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, item in enumerate(data):
                    clone[i] = pin_memory(item, device)
                return clone
            return type(data)([pin_memory(v, device) for v in data])
        except TypeError:
            return [pin_memory(v, device) for v in data]
    return data


def _pin_memory_loop(in_queue: Any, out_queue: queue.Queue, device_id: int, done_event: Any, device: Any,
                     decode: Callable[[Any], tuple]) -> None:
    """Take workers' messages, decode them (map their shared memory), pin, and pass them on, until done."""
    from .... import _threads, accelerator
    _threads.set(1)  # the copies must not take every core from the training step
    accelerator.set_device_index(device_id)
    while not done_event.is_set():
        try:
            msg = in_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
        except queue.Empty:
            continue
        if msg is None:  # the iterator's wake-up call at shutdown
            continue
        try:
            worker_id, idx, data = decode(msg)
        except Exception:  # noqa: BLE001 - the main thread raises it
            out_queue.put((None, None, ExceptionWrapper(where="in pin memory thread")))
            continue
        if not done_event.is_set() and not isinstance(data, ExceptionWrapper):
            try:
                data = pin_memory(data, device)
            except Exception:  # noqa: BLE001
                data = ExceptionWrapper(where=f"in pin memory thread for device {device_id}")
        out_queue.put((worker_id, idx, data))
        del msg, data
