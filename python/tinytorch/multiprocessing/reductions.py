"""How tensors cross processes through torch.multiprocessing (queues, pipes, a spawned process's arguments).

A CPU tensor in shared memory (share_memory_(), e.g. a Hogwild model's parameters, or a tensor received from
another process) is pickled by multiprocessing's ForkingPickler as the descriptor of its shared memory block
(tinytorch._shared_memory) and its place in it, passed with multiprocessing.reduction.DupFd: the receiver's
tensor is the same memory, so in-place updates in one process are seen by the other. The descriptor travels
with a process being spawned, or else from a small server thread in the sender, so (as with PyTorch's
"file_descriptor" strategy) the sender must still be alive when the receiver unpickles.

Unlike PyTorch, a tensor not in shared memory is not moved there when sent: it is pickled by value. Moving
it would detach the views other tensors hold of its memory (tinytorch's share_memory_() copies), and a
result put on a queue by a process that then exits still arrives.
"""
from __future__ import annotations

import os
import pickle
import weakref
from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any, Callable, Tuple

import numpy as np

from .. import _shared_memory
from .._tensor import Tensor, _new
from ..nn.parameter import Parameter

# Blocks this process has mapped, by the memfd's identity: the same block received twice is mapped once,
# so tensors sent separately from one shared tensor still alias each other here.
_mapped: "weakref.WeakValueDictionary[Tuple[int, int], _shared_memory.SharedBlock]" = weakref.WeakValueDictionary()


def _block_from_fd(fd: int, keep_fd: bool) -> _shared_memory.SharedBlock:
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    block = _mapped.get(key)
    if block is not None and (block.fd >= 0 or not keep_fd):
        os.close(fd)
        return block
    block = _shared_memory.SharedBlock(fd, st.st_size, keep_fd=keep_fd)
    _mapped[key] = block
    return block


def rebuild_tensor(cls: type, fd_handle: Any, offset: int, shape: tuple, strides: tuple, dtype: str,
                   requires_grad: bool) -> Tensor:
    """Map the shared block a tensor was sent in and rebuild the tensor over it (no copy)."""
    from . import get_sharing_strategy
    # "file_system" keeps no descriptor open per received block (PyTorch's way around running out of them);
    # a tensor received that way is pickled by value if this process sends it on.
    block = _block_from_fd(fd_handle.detach(), keep_fd=get_sharing_strategy() == "file_descriptor")
    t = _new(cls)
    t._data = block.array(np.dtype(dtype), shape, offset, strides)
    if requires_grad:
        t._requires_grad = True
    return t


def reduce_tensor(tensor: Tensor) -> Tuple[Callable[..., Any], tuple]:
    """ForkingPickler's reduction of a Tensor or Parameter. One in shared memory (share_memory_(), or received
    from another process) is sent as its block's descriptor and its place in the block, so both processes
    hold the same memory; any other is pickled by value, which needs nothing of the sender once sent."""
    if tensor._grad_fn is not None:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
                           "does not support crossing process boundaries.  If you just want to transfer the "
                           "data, call detach() on the tensor before serializing (e.g., putting it on the queue).")
    a = tensor._data
    block = _shared_memory.block_of(a) if type(a) is np.ndarray else None
    if block is None or block.fd < 0:
        return tensor.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    offset = a.__array_interface__["data"][0] - block.addr
    return rebuild_tensor, (type(tensor), DupFd(block.fd), offset, a.shape, a.strides, a.dtype.str,
                            tensor._requires_grad)


def init_reductions() -> None:
    """Register the tensor reductions with multiprocessing's ForkingPickler (PyTorch registers Tensor and
    Parameter; other subclasses keep their own pickling)."""
    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, reduce_tensor)
