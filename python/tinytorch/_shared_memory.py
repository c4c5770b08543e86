"""Shared memory for CPU tensors: how a DataLoader worker hands a batch to the main process without
copying its bytes through a pipe (PyTorch's torch.multiprocessing.reductions, "file_descriptor" strategy).

A SharedBlock is anonymous memory from memfd_create, mapped MAP_SHARED: a process forked afterwards
shares it, and any process that receives its file descriptor (SCM_RIGHTS over a Unix socket) maps the
same pages. It has no name, so nothing leaks when a process dies: the kernel frees the pages once the
last mapping and descriptor are gone. A block is unmapped when the last array over it is freed.

`dumps` pickles an object with every CPU tensor replaced by a reference to a block (a tensor already in
one, such as a batch that default_collate stacked in a worker, costs no copy; any other is copied once,
all of them into one block); `loads` maps the received descriptors and rebuilds the tensors over them.
"""
from __future__ import annotations

import ctypes
import io
import mmap
import os
import pickle
import weakref
from typing import Any, List, Optional, Tuple

import numpy as np

from ._tensor import Tensor, _new

# memfd_create is Linux's; elsewhere tensors cross processes pickled by value.
AVAILABLE = hasattr(os, "memfd_create")

_ALIGN = 64
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value


def _release(addr: int, size: int, fd: int) -> None:
    _libc.munmap(addr, size)
    if fd >= 0:
        os.close(fd)


class SharedBlock:
    """`size` bytes of shared memory at `addr`; `fd` is its memfd while this process may still send it
    (-1 in a process that received it: the mapping alone keeps the pages, and holds no descriptor)."""

    __slots__ = ("fd", "size", "addr", "__array_interface__", "_finalizer", "__weakref__")

    def __init__(self, fd: int, size: int, keep_fd: bool) -> None:
        # ctypes' mmap rather than the mmap module's, which keeps a duplicate descriptor per mapping:
        # a process holding many batches would run out of descriptors.
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of a {size}-byte shared memory block failed: {os.strerror(err)}")
        if not keep_fd:
            os.close(fd)
        self.fd, self.size, self.addr = (fd if keep_fd else -1), size, addr
        self.__array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (addr, False), "version": 3}
        self._finalizer = weakref.finalize(self, _release, addr, size, self.fd)
        self._finalizer.atexit = False  # the process's exit frees it anyway

    @classmethod
    def allocate(cls, size: int) -> "SharedBlock":
        """A new zero-filled block of `size` (> 0) bytes."""
        fd = os.memfd_create("tinytorch", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            return cls(fd, size, keep_fd=True)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def from_fd(cls, fd: int) -> "SharedBlock":
        """Map a received descriptor (and close it)."""
        try:
            size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, size, keep_fd=False)

    def array(self, dtype: np.dtype, shape: tuple, offset: int = 0, strides: Optional[tuple] = None) -> np.ndarray:
        """An array over this block's bytes (it keeps the block mapped)."""
        return np.ndarray(shape, dtype=dtype, buffer=np.asarray(self), offset=offset, strides=strides)


def block_of(array: Any) -> Optional[SharedBlock]:
    """The block an array's memory lies in, or None."""
    while isinstance(array, np.ndarray):
        array = array.base
    if isinstance(array, SharedBlock):
        return array
    return None


def empty_shared(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """An uninitialized array in a new shared block (a plain array when it is empty or memfd is missing)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes == 0 or not AVAILABLE:
        return np.empty(shape, dtype)
    return SharedBlock.allocate(nbytes).array(dtype, tuple(shape))


def share_array(array: np.ndarray) -> np.ndarray:
    """`array` itself when it lies in shared memory, else a copy of it in a new block."""
    if block_of(array) is not None:
        return array
    out = empty_shared(array.shape, array.dtype)
    np.copyto(out, array)
    return out


def _shareable(obj: Any) -> bool:
    # Subclasses with their own pickling (DTensor) keep it.
    return (isinstance(obj, Tensor) and type(obj).__reduce_ex__ is Tensor.__reduce_ex__
            and type(obj._data) is np.ndarray and obj._data.nbytes > 0)


class _Pickler(pickle.Pickler):
    """Pickles CPU tensors as references to shared blocks (persistent ids) instead of their bytes."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.blocks: List[SharedBlock] = []       # sent as descriptors, in this order
        self._slot: dict = {}                      # id(block) -> its index in blocks
        self.pending: List[Tuple[np.ndarray, int]] = []  # (array, offset) to copy into one new block
        self.pending_bytes = 0

    def persistent_id(self, obj: Any) -> Any:
        if not _shareable(obj):
            return None
        if obj._grad_fn is not None:
            raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd "
                               "does not support crossing process boundaries.  If you just want to transfer the "
                               "data, call detach() on the tensor before serializing (e.g., putting it on the queue).")
        a = obj._data
        block = block_of(a)
        if block is not None and block.fd >= 0:
            slot = self._slot.get(id(block))
            if slot is None:
                slot = self._slot[id(block)] = len(self.blocks)
                self.blocks.append(block)
            offset = a.__array_interface__["data"][0] - block.addr
            return ("block", type(obj), slot, offset, a.shape, a.strides, a.dtype.str, obj._requires_grad)
        offset = self.pending_bytes
        self.pending.append((a, offset))
        self.pending_bytes = offset + (a.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
        return ("copy", type(obj), offset, a.shape, a.dtype.str, obj._requires_grad)


def dumps(obj: Any) -> Tuple[bytes, List[int], List[SharedBlock]]:
    """Pickle obj for another process: (bytes, descriptors to send with them, blocks to keep alive until sent).
    Tensors not yet in shared memory are copied, all into one new block whose descriptor comes last."""
    if not AVAILABLE:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), [], []
    buf = io.BytesIO()
    p = _Pickler(buf)
    p.dump(obj)
    blocks = p.blocks
    if p.pending:
        extra = SharedBlock.allocate(p.pending_bytes)
        for a, offset in p.pending:
            np.copyto(extra.array(a.dtype, a.shape, offset), a)
        blocks = blocks + [extra]
    return buf.getvalue(), [b.fd for b in blocks], blocks


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, fds: List[int]) -> None:
        super().__init__(file)
        self.fds = fds
        self.blocks: dict = {}

    def _block(self, slot: int) -> SharedBlock:
        block = self.blocks.get(slot)
        if block is None:
            fd, self.fds[slot] = self.fds[slot], -1
            block = self.blocks[slot] = SharedBlock.from_fd(fd)
        return block

    def persistent_load(self, pid: Any) -> Tensor:
        if pid[0] == "block":
            _, cls, slot, offset, shape, strides, dt, requires_grad = pid
            array = self._block(slot).array(np.dtype(dt), shape, offset, strides)
        else:
            _, cls, offset, shape, dt, requires_grad = pid
            array = self._block(len(self.fds) - 1).array(np.dtype(dt), shape, offset)
        t = _new(cls)
        t._data = array
        if requires_grad:
            t._requires_grad = True
        return t


def loads(payload: bytes, fds: List[int]) -> Any:
    """Rebuild what dumps pickled, mapping the received descriptors (each is closed, used or not)."""
    fds = list(fds)
    try:
        return _Unpickler(io.BytesIO(payload), fds).load()
    finally:
        for fd in fds:
            if fd >= 0:
                os.close(fd)
