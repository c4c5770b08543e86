"""default_collate and default_convert: how a list of samples becomes a batch (PyTorch's _utils/collate.py).

In a worker process, tensors are stacked straight into shared memory, so that handing the batch to the
main process copies nothing (PyTorch does the same)."""
from __future__ import annotations

import collections.abc
import re
from typing import Any

import numpy as np

from ...._tensor import Tensor, _wrap
from . import worker

__all__ = ["default_collate", "default_convert"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                                  "lists; found {}")


def default_convert(data: Any) -> Any:
    """Turn NumPy arrays inside data into tensors (what a loader with batch_size=None yields)."""
    from .... import as_tensor
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ == "ndarray" and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def _stack(batch: list) -> Tensor:
    """stack(batch, 0); in a worker, into a new shared memory block (the one copy a batch costs)."""
    from .... import _shared_memory, stack
    elem = batch[0]
    shape, dt = elem._data.shape, elem._data.dtype
    if (worker.get_worker_info() is not None and _shared_memory.AVAILABLE
            and all(type(t._data) is np.ndarray and t._data.shape == shape and t._data.dtype == dt
                    and not t.requires_grad for t in batch)):
        out = _shared_memory.empty_shared((len(batch),) + shape, dt)
        np.stack([t._data for t in batch], out=out)
        return _wrap(out)
    return stack(list(batch), 0)


def default_collate(batch: list) -> Any:
    """Stack a list of samples into a batch: tensors/arrays stacked, numbers into tensors, containers
    collated per field (tuples become lists, as in PyTorch)."""
    from .... import as_tensor, float64, tensor
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, Tensor):
        return _stack(batch)
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ in ("ndarray", "memmap"):
            if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
                raise TypeError(default_collate_err_msg_format.format(elem.dtype))
            return _stack([as_tensor(b) for b in batch])
        if elem.shape == ():  # NumPy scalars
            return as_tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            return elem_type({key: default_collate([d[key] for d in batch]) for key in elem})
        except TypeError:
            return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        try:
            return elem_type([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    raise TypeError(default_collate_err_msg_format.format(elem_type))
