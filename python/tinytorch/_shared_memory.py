"""Shared memory for CPU tensors: how a DataLoader worker hands a batch to the main process without
copying its bytes through a pipe (PyTorch's torch.multiprocessing.reductions, "file_descriptor" strategy).

A SharedBlock is anonymous memory from memfd_create, mapped MAP_SHARED: a process forked afterwards
shares it, and any process that receives its file descriptor (SCM_RIGHTS over a Unix socket) maps the
same pages. It has no name, so nothing leaks when a process dies: the kernel frees the pages once the
last mapping and descriptor are gone. A block is unmapped when the last array over it is freed.

`dumps` pickles an object with every CPU tensor replaced by a reference to a block (a tensor already in
one, such as a batch that default_collate stacked in a worker, costs no copy; any other is copied once,
all of them into one block); `loads` maps the received descriptors and rebuilds the tensors over them.
A receiver that frees a block it got tells the sender (its id back over the socket), and the sender's
Recycler reuses the block for a later batch of the same size: its pages already exist, so the batch's
stack is its only cost, rather than faulting in and zeroing fresh memory every batch.
"""
from __future__ import annotations

import ctypes
import io
import mmap
import os
import pickle
import socket
import struct
import sys
import weakref
from collections import OrderedDict
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


_BLOCK_ID = struct.Struct("q")


def _release(addr: int, size: int, fd: int, give_back: Optional[Tuple[socket.socket, int]]) -> None:
    _libc.munmap(addr, size)
    if fd >= 0:
        os.close(fd)
    if give_back is not None:
        sock, block_id = give_back
        try:  # never blocks: a finalizer may run anywhere
            sock.send(_BLOCK_ID.pack(block_id), socket.MSG_DONTWAIT)
        except OSError:
            pass  # the sender is gone or not listening: it allocates anew


class SharedBlock:
    """`size` bytes of shared memory at `addr`; `fd` is its memfd while this process may still send it
    (-1 in a process that received it: the mapping alone keeps the pages, and holds no descriptor)."""

    __slots__ = ("fd", "size", "addr", "__array_interface__", "_finalizer", "__weakref__")

    def __init__(self, fd: int, size: int, keep_fd: bool,
                 give_back: Optional[Tuple[socket.socket, int]] = None) -> None:
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
        self._finalizer = weakref.finalize(self, _release, addr, size, self.fd, give_back)
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
    def from_fd(cls, fd: int, give_back: Optional[Tuple[socket.socket, int]] = None) -> "SharedBlock":
        """Map a received descriptor (and close it); when freed, send give_back's id over its socket."""
        try:
            size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, size, keep_fd=False, give_back=give_back)

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


class Recycler:
    """Blocks a sending process (a DataLoader worker) lent to the receiver and blocks given back, so that a
    later batch of the same size reuses them. Only blocks it allocated itself are lent, and a given-back
    block is reused only when nothing in this process still refers to it."""

    MAX_LENT = 16  # beyond this many outstanding, the oldest are forgotten (and freed here)
    MAX_FREE = 4

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.own: "weakref.WeakSet[SharedBlock]" = weakref.WeakSet()
        self.lent: "OrderedDict[int, SharedBlock]" = OrderedDict()
        self.free: List[SharedBlock] = []
        self.next_id = 0

    def allocate(self, size: int) -> SharedBlock:
        """A block of `size` bytes: a given-back one when there is one, else a new one."""
        self._collect()
        for i in range(len(self.free)):
            if self.free[i].size == size and sys.getrefcount(self.free[i]) == 2:  # self.free and the argument
                return self.free.pop(i)
        block = SharedBlock.allocate(size)
        self.own.add(block)
        return block

    def lend(self, block: SharedBlock) -> int:
        """The id the receiver gives back when it frees `block` (-1: not ours to reuse)."""
        if block not in self.own:
            return -1
        block_id, self.next_id = self.next_id, self.next_id + 1
        self.lent[block_id] = block
        if len(self.lent) > self.MAX_LENT:
            self.lent.popitem(last=False)
        return block_id

    def _collect(self) -> None:
        while True:
            try:
                msg = self.sock.recv(_BLOCK_ID.size, socket.MSG_DONTWAIT)
            except OSError:  # nothing waiting (BlockingIOError), or the receiver is gone
                return
            if len(msg) != _BLOCK_ID.size:
                return
            block = self.lent.pop(_BLOCK_ID.unpack(msg)[0], None)
            if block is not None:
                self.free.append(block)
                del self.free[:-self.MAX_FREE]


recycler: Optional[Recycler] = None
"""Set in a DataLoader worker: where its shared blocks come from and go back to."""


def empty_shared(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """An uninitialized array in a shared block (a plain array when it is empty or memfd is missing)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes == 0 or not AVAILABLE:
        return np.empty(shape, dtype)
    block = recycler.allocate(nbytes) if recycler is not None else SharedBlock.allocate(nbytes)
    return block.array(dtype, tuple(shape))


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


def dumps(obj: Any) -> Tuple[bytes, List[int], List[int], List[SharedBlock]]:
    """Pickle obj for another process: (bytes, descriptors to send with them, the blocks' ids for giving
    them back (-1: not to give back), the blocks, to keep alive until sent). Tensors not yet in shared
    memory are copied, all into one block whose descriptor comes last."""
    if not AVAILABLE:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), [], [], []
    buf = io.BytesIO()
    p = _Pickler(buf)
    p.dump(obj)
    blocks = p.blocks
    if p.pending:
        size = p.pending_bytes
        extra = recycler.allocate(size) if recycler is not None else SharedBlock.allocate(size)
        for a, offset in p.pending:
            np.copyto(extra.array(a.dtype, a.shape, offset), a)
        blocks = blocks + [extra]
    ids = [recycler.lend(b) if recycler is not None else -1 for b in blocks]
    return buf.getvalue(), [b.fd for b in blocks], ids, blocks


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, fds: List[int], ids: List[int], sock: Optional[socket.socket]) -> None:
        super().__init__(file)
        self.fds, self.ids, self.sock = fds, ids, sock
        self.blocks: dict = {}

    def _block(self, slot: int) -> SharedBlock:
        block = self.blocks.get(slot)
        if block is None:
            fd, self.fds[slot] = self.fds[slot], -1
            give_back = (self.sock, self.ids[slot]) if self.sock is not None and self.ids[slot] >= 0 else None
            block = self.blocks[slot] = SharedBlock.from_fd(fd, give_back)
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


def loads(payload: bytes, fds: List[int], ids: Optional[List[int]] = None,
          sock: Optional[socket.socket] = None) -> Any:
    """Rebuild what dumps pickled, mapping the received descriptors (each is closed, used or not); a block
    with an id is given back over `sock` when freed."""
    fds = list(fds)
    try:
        return _Unpickler(io.BytesIO(payload), fds, ids or [-1] * len(fds), sock).load()
    finally:
        for fd in fds:
            if fd >= 0:
                os.close(fd)
