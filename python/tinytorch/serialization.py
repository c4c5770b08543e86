"""tinytorch.save / tinytorch.load in PyTorch's checkpoint format, so checkpoints travel both ways.

File format: PyTorch's zip archive (what torch.save writes since 1.6). Every record is stored uncompressed
with its data starting at a multiple of 64 bytes (so storages can be memory-mapped), in this order:

    archive/data.pkl                 the object, pickled (protocol 2) with tensors as
                                     torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
                                     requires_grad, OrderedDict()), Parameters as
                                     torch._utils._rebuild_parameter(tensor, requires_grad, OrderedDict()),
                                     dtypes as the globals torch.float32 ..., devices as torch.device(...),
                                     shapes as torch.Size(...), and each storage as the persistent id
                                     ("storage", torch.FloatStorage, "<key>", "cpu" | "cuda:N", numel)
    archive/.format_version          "1"
    archive/.storage_alignment       "64"
    archive/byteorder                "little"
    archive/data/<key>               one record per storage: its raw bytes
    archive/version                  "3\\n"
    archive/.data/serialization_id   40 digits derived from the records' CRCs and sizes

A storage is the whole array a tensor's memory belongs to, so views of one array (slices, transposes, tied
weights) are written once and load as views of one storage, with their strides and offsets.

`load` reads those files (PyTorch's or tinytorch's) and tinytorch's older own format (recognised by its
magic; _serialization_legacy.py). With weights_only=True (the default) the pickle is read by a restricted
unpickler that only builds tensors, storages, containers, numbers, strings, dtypes, devices, sizes and the
globals PyTorch's weights_only loader admits (plus those added by add_safe_globals): a file that names any
other callable is refused before anything from it runs. tinytorch.save also puts the CRC-32C of every byte
before it in the archive's comment (`tinytorch crc32c=<8 hex digits>`; zip readers, PyTorch's included, ignore
it), so a flipped byte anywhere (zip headers, directory, padding) is found too, not only in a record's data.
When that checksum holds, load skips the per-record CRC-32s; otherwise (PyTorch's files have no comment) every
record's CRC-32 is checked, and a file whose comment checksum fails although every record's CRC-32 holds is
reported as corrupt headers. mmap=True maps storages without reading them, so neither is checked then. A
truncated or corrupted file raises a CheckpointError naming the file. `save` to a path writes a temporary file
in the same directory, fsyncs it and renames it into place, so a failed or interrupted save leaves any previous
checkpoint intact.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import os
import pickle
import re
import struct
import sys
import tempfile
import zipfile
import zlib
from collections import Counter, OrderedDict
from typing import Any, BinaryIO, Callable

import numpy as np

from . import _C
from ._device import device as _device_cls, move, to_device
from ._dtype import ALL as _ALL_DTYPES, dtype as _dtype_cls
from ._tensor import Size, Tensor, _wrap
from .storage import TypedStorage, UntypedStorage

__all__ = ["save", "load", "add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals",
           "get_unsafe_globals_in_checkpoint", "CheckpointError"]

DEFAULT_PROTOCOL = 2
_ALIGN = 64
_ZIP64_LIMIT = 0xFFFFFFFF  # sizes and offsets from here on need zip64 fields (a module constant so tests can lower it)
_ARCHIVE = "archive"
# The archive's zip comment: the CRC-32C of every archive byte before it (the end record's comment length included).
_COMMENT = re.compile(rb"tinytorch crc32c=([0-9a-f]{8})")
_COMMENT_LEN = 25
_EOCD_LEN = 22

# PyTorch's legacy storage classes by tinytorch dtype name: the storage type written in persistent ids.
_STORAGE_TYPE_OF = {"float64": "DoubleStorage", "float32": "FloatStorage", "float16": "HalfStorage",
                    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
                    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
                    "complex64": "ComplexFloatStorage", "complex128": "ComplexDoubleStorage"}
_DTYPES = {d.name: d for d in _ALL_DTYPES}


class CheckpointError(RuntimeError):
    """A checkpoint file is truncated, corrupted or not in a format tinytorch reads."""


def _fail(name: str, what: str) -> None:
    raise CheckpointError(f"tinytorch.load: {name}: {what}")


# ================================================================== save

class _TorchGlobal:
    """A global in PyTorch's namespace (torch.FloatStorage, torch._utils._rebuild_tensor_v2, ...): pickled as
    the GLOBAL that torch.load resolves, whatever tinytorch object stands for it here."""

    __slots__ = ("module", "name")
    _cache: dict = {}

    def __new__(cls, module: str, name: str) -> "_TorchGlobal":
        key = (module, name)
        g = cls._cache.get(key)
        if g is None:  # one object per name, so the pickle memo writes each GLOBAL once
            g = object.__new__(cls)
            g.module, g.name = module, name
            cls._cache[key] = g
        return g

    def __call__(self, *args: Any) -> Any:  # pickle's save_reduce insists on a callable; it is never called
        raise TypeError(f"{self.module}.{self.name} names a PyTorch global in a checkpoint; it is not callable")


class _StorageRef:
    """A storage met while pickling: pickled as PyTorch's persistent id."""

    __slots__ = ("pid",)

    def __init__(self, pid: tuple) -> None:
        self.pid = pid


def _is_numpy(a: Any) -> bool:
    return isinstance(a, np.ndarray)


def _data_ptr(a: Any) -> int:
    return int(a.__array_interface__["data"][0]) if _is_numpy(a) else int(a.data.ptr)


def _memory_order_flat(a: Any) -> Any:
    """A contiguous array's elements as a 1-D view in memory order."""
    return a.reshape(-1) if a.flags.c_contiguous else a.T.reshape(-1)


class _Pickler(pickle._Pickler):
    """Python's pickler with tinytorch objects reduced to what torch.save writes for PyTorch's.

    The pure-Python pickler is used because it lets `_TorchGlobal` write a GLOBAL naming a module (torch) that
    need not be importable here; the pickle holds only the object structure (tensor data goes to the zip's
    records), so its speed does not matter.
    """

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file: BinaryIO, protocol: int) -> None:
        super().__init__(file, protocol)
        self.storages: dict[str, tuple[Any, str]] = {}  # key -> (1-D array in memory order, location)
        self._refs: dict[tuple[int, str], tuple[_StorageRef, Any]] = {}  # (id(root), dtype) -> (ref, root)

    def persistent_id(self, obj: Any) -> tuple | None:
        return obj.pid if type(obj) is _StorageRef else None

    def save_torch_global(self, obj: _TorchGlobal) -> None:
        if self.proto >= 4:
            self.save(obj.module)
            self.save(obj.name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + obj.module.encode("utf-8") + b"\n" + obj.name.encode("utf-8") + b"\n")
        self.memoize(obj)

    dispatch[_TorchGlobal] = save_torch_global

    def save_dtype(self, obj: _dtype_cls) -> None:
        self.save(_TorchGlobal("torch", obj.name))

    dispatch[_dtype_cls] = save_dtype

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            return self._reduce_tensor(obj)
        t = type(obj)
        if t is Size:
            return _TorchGlobal("torch", "Size"), (tuple(obj),)
        if t is _device_cls:
            return _TorchGlobal("torch", "device"), ((obj.type,) if obj.index is None else (obj.type, obj.index))
        return NotImplemented

    def _reduce_tensor(self, t: Tensor) -> tuple:
        from .nn.parameter import Parameter
        if isinstance(t, Parameter):
            return (_TorchGlobal("torch._utils", "_rebuild_parameter"),
                    (_wrap(t._data), bool(t._requires_grad), OrderedDict()))
        ref, offset, stride = self._storage_of(t._data)
        # A tensor that is part of a graph saves its values, as PyTorch's does (no graph is saved).
        if t._data.dtype.name not in _STORAGE_TYPE_OF:  # uint16/32/64: an untyped storage and the dtype, as PyTorch
            return (_TorchGlobal("torch._utils", "_rebuild_tensor_v3"),
                    (ref, offset, tuple(t._data.shape), stride, bool(t.requires_grad), OrderedDict(),
                     _TorchGlobal("torch", t._data.dtype.name)))
        return (_TorchGlobal("torch._utils", "_rebuild_tensor_v2"),
                (ref, offset, tuple(t._data.shape), stride, bool(t.requires_grad), OrderedDict()))

    def _storage_of(self, a: Any) -> tuple[_StorageRef, int, tuple]:
        """The storage `a` views (the whole array its memory belongs to), its offset and strides in elements."""
        item = a.dtype.itemsize
        root = a
        array_type = np.ndarray if _is_numpy(a) else type(a)
        while True:
            b = root.base
            if isinstance(b, array_type):
                root = b
            elif isinstance(getattr(b, "base", None), array_type) and hasattr(b, "__array_interface__"):
                root = b.base  # through the stand-in object np.lib.stride_tricks.as_strided puts between
            else:
                break
        offset = _data_ptr(a) - _data_ptr(root) if a.size else 0
        view_of_root = (
            a.size > 0 and (root.flags.c_contiguous or root.flags.f_contiguous)
            and offset >= 0 and offset % item == 0 and root.nbytes % item == 0
            and all(s >= 0 and s % item == 0 for s in a.strides)
            and offset + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) + item <= root.nbytes)
        strides = a.strides
        if not view_of_root:  # an empty, negatively strided or oddly aligned view: saved as its own copy
            root = a.copy(order="C")
            offset, strides = 0, root.strides
            if a.size == 0:  # PyTorch's strides (NumPy gives an empty array zero strides), as Tensor.stride()
                from ._tensor import _contiguous_strides
                strides = tuple(s * item for s in _contiguous_strides(a.shape))
        dtype_name = _from_array_dtype(a.dtype).name
        key = (id(root), dtype_name)
        hit = self._refs.get(key)
        if hit is None:
            flat = _memory_order_flat(root).view(a.dtype)
            location = "cpu" if _is_numpy(a) else f"cuda:{int(a.device.id)}"
            storage_key = str(len(self.storages))
            self.storages[storage_key] = (flat, location)
            typed = dtype_name in _STORAGE_TYPE_OF  # else PyTorch's untyped storage, sized in bytes
            ref = _StorageRef(("storage", _TorchGlobal("torch", _STORAGE_TYPE_OF[dtype_name]) if typed else
                               _TorchGlobal("torch.storage", "UntypedStorage"), storage_key, location,
                               int(flat.size if typed else flat.nbytes)))
            hit = self._refs[key] = (ref, root)  # holding root keeps id(root) unique while pickling
        return hit[0], offset // item, tuple(s // item for s in strides)


def _from_array_dtype(np_dtype: Any) -> _dtype_cls:
    from ._dtype import from_numpy_dtype
    return from_numpy_dtype(np_dtype)


class _ZipWriter:
    """Writes records the way PyTorch's PyTorchStreamWriter lays them out: stored (uncompressed), each record's
    data aligned to 64 bytes by an "FB" padding extra field, zip64 fields where sizes or offsets need them."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.pos = 0  # relative to the archive's first byte, so an archive written mid-stream is self-consistent
        self.central: list[bytes] = []
        self._id_a = 0xcbf29ce484222325  # serialization id: two 64-bit FNV-1a hashes of (name, crc, size)
        self._id_b = 0x84222325cbf29ce4
        self.crc32c = 0  # of every byte written so far: the archive comment records it

    def _write(self, b: Any) -> None:
        self.f.write(b)
        self.pos += memoryview(b).nbytes
        self.crc32c = _C._cpu.crc32c(b, self.crc32c)

    def write_record(self, name: str, data: Any) -> None:
        mv = memoryview(data)
        if mv.format != "B" or not mv.contiguous:
            mv = mv.cast("B")
        size = mv.nbytes
        crc = zlib.crc32(mv)
        fname = f"{_ARCHIVE}/{name}".encode("utf-8")
        offset = self.pos
        big = size >= _ZIP64_LIMIT
        local_extra = struct.pack("<HHQQ", 1, 16, size, size) if big else b""
        start = offset + 30 + len(fname) + len(local_extra) + 4
        pad = (-start) % _ALIGN
        local_extra += b"FB" + struct.pack("<H", pad) + b"Z" * pad
        version = 45 if big or offset >= _ZIP64_LIMIT else 20
        size32 = 0xFFFFFFFF if big else size
        # signature, version needed, flags (UTF-8 names), method 0 (stored), time, date, crc, sizes, lengths
        self._write(struct.pack("<IHHHHHIIIHH", 0x04034B50, version, 0x800, 0, 0, 0x21, crc, size32, size32,
                                len(fname), len(local_extra)) + fname + local_extra)
        if size:
            self._write(mv)
        z64 = b""
        if big:
            z64 += struct.pack("<QQ", size, size)
        if offset >= _ZIP64_LIMIT:
            z64 += struct.pack("<Q", offset)
        central_extra = struct.pack("<HH", 1, len(z64)) + z64 if z64 else b""
        self.central.append(struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, version, version, 0x800, 0, 0, 0x21, crc, size32, size32,
            len(fname), len(central_extra), 0, 0, 0, 0, min(offset, 0xFFFFFFFF)) + fname + central_extra)
        for part in (fname, struct.pack("<IQ", crc, size)):
            for byte in part:
                self._id_a = ((self._id_a ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
                self._id_b = ((self._id_b ^ byte) * 0x100000001b3 + 1) & 0xFFFFFFFFFFFFFFFF

    def finish(self) -> None:
        self.write_record("version", b"3\n")
        self.write_record(".data/serialization_id", f"{self._id_a:020d}{self._id_b:020d}".encode("ascii"))
        cd_offset = self.pos
        for entry in self.central:
            self._write(entry)
        cd_size = self.pos - cd_offset
        n = len(self.central)
        eocd64_offset = self.pos
        # zip64 end of central directory record and locator (PyTorch always writes them), then the classic end.
        self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_offset))
        self._write(struct.pack("<IIQI", 0x07064B50, 0, eocd64_offset, 1))
        self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(n, 0xFFFF), min(n, 0xFFFF),
                                min(cd_size, 0xFFFFFFFF), min(cd_offset, 0xFFFFFFFF), _COMMENT_LEN))
        self.f.write(f"tinytorch crc32c={self.crc32c:08x}".encode("ascii"))


def _save_to(obj: Any, f: BinaryIO, pickle_protocol: int, disable_byteorder_record: bool) -> None:
    buf = io.BytesIO()
    pickler = _Pickler(buf, pickle_protocol)
    pickler.dump(obj)
    w = _ZipWriter(f)
    w.write_record("data.pkl", buf.getbuffer())
    w.write_record(".format_version", b"1")
    w.write_record(".storage_alignment", str(_ALIGN).encode("ascii"))
    if not disable_byteorder_record:
        w.write_record("byteorder", sys.byteorder.encode("ascii"))
    for key, (flat, _location) in pickler.storages.items():
        host = flat if _is_numpy(flat) else flat.get()  # one storage at a time on the host
        w.write_record(f"data/{key}", host.view(np.uint8) if host.size else b"")
    w.finish()


def save(obj: Any, f: str | os.PathLike | BinaryIO, pickle_module: Any = pickle,
         pickle_protocol: int = DEFAULT_PROTOCOL, _use_new_zipfile_serialization: bool = True,
         _disable_byteorder_record: bool = False) -> None:
    """Write obj (tensors, state dicts, nested containers, any picklable object) in PyTorch's zip format to a
    path (atomically: temporary file, fsync, rename) or a binary file object; torch.load reads it."""
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError(f"tinytorch.save pickles with Python's pickle module; pickle_module="
                         f"{getattr(pickle_module, '__name__', pickle_module)!r} is not supported")
    # _use_new_zipfile_serialization=False asks PyTorch for its pre-1.6 format; tinytorch writes only the zip
    # format, which every PyTorch since 1.6 reads.
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise RuntimeError(f"Parent directory {os.path.dirname(path) or directory} does not exist.")
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                umask = os.umask(0)  # mkstemp makes the file 0600; give it the mode open() would
                os.umask(umask)
                os.fchmod(fh.fileno(), 0o666 & ~umask)
                _save_to(obj, fh, pickle_protocol, _disable_byteorder_record)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        try:  # make the rename itself durable
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
        return
    if not hasattr(f, "write"):
        raise AttributeError(f"expected 'f' to be string, path, or a file-like object with a 'write' attribute, "
                             f"got {type(f).__name__}")
    _save_to(obj, f, pickle_protocol, _disable_byteorder_record)


# ================================================================== load: what the pickle may name

class _StorageType:
    """Stands for one of PyTorch's storage classes (torch.FloatStorage, torch.UntypedStorage) in a pickle."""

    __slots__ = ("name", "dtype_name")

    def __init__(self, name: str, dtype_name: str | None) -> None:
        self.name, self.dtype_name = name, dtype_name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


def _check_ints(what: str, values: Any) -> tuple:
    if not isinstance(values, (tuple, list)) or not all(type(v) is int for v in values):
        raise pickle.UnpicklingError(f"{what} must be a tuple of ints, got {values!r}")
    return tuple(values)


def _tensor_from_storage(storage: Any, storage_offset: Any, size: Any, stride: Any, dtype: _dtype_cls) -> Tensor:
    """A view of the storage's array, after checking that it stays inside it (a file can hold any numbers)."""
    if not isinstance(storage, TypedStorage):
        raise pickle.UnpicklingError(f"expected a storage to rebuild a tensor from, got {type(storage).__name__}")
    size = _check_ints("size", size)
    stride = _check_ints("stride", stride)
    if type(storage_offset) is not int or storage_offset < 0 or len(size) != len(stride) or \
            any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise pickle.UnpicklingError(f"invalid tensor geometry: offset {storage_offset!r}, size {size}, stride "
                                     f"{stride}")
    arr = storage._array
    if dtype is not storage.dtype:  # an untyped (byte) storage viewed as the tensor's dtype
        if arr.nbytes % dtype.itemsize:
            raise pickle.UnpicklingError(f"a storage of {arr.nbytes} bytes cannot hold {dtype} elements")
        arr = arr.view(dtype.np)
    numel = 1
    for n in size:
        numel *= n
    if numel:
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= arr.size:
            raise pickle.UnpicklingError(
                f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {storage_offset}, and "
                f"itemsize {dtype.itemsize} requiring a storage size of {(last + 1) * dtype.itemsize} are out of "
                f"bounds for storage of size {arr.nbytes}")
    item = dtype.itemsize
    if numel == 0:
        data = arr[:0].reshape(size)
    elif _is_numpy(arr):  # a view whose base is the storage's array: saving it again finds the storage
        data = np.ndarray(size, arr.dtype, buffer=arr, offset=storage_offset * item,
                          strides=tuple(s * item for s in stride))
    else:
        import cupy
        data = cupy.lib.stride_tricks.as_strided(arr[storage_offset:], shape=size,
                                                 strides=tuple(s * item for s in stride))
    return _wrap(data)


def _rebuild_tensor(storage: Any, storage_offset: int, size: Any, stride: Any) -> Tensor:
    """torch._utils._rebuild_tensor: a tensor viewing a typed storage."""
    return _tensor_from_storage(storage, storage_offset, size, stride, getattr(storage, "dtype", None))


def _rebuild_tensor_v2(storage: Any, storage_offset: int, size: Any, stride: Any, requires_grad: bool,
                       backward_hooks: Any, metadata: Any = None) -> Tensor:
    """torch._utils._rebuild_tensor_v2: what torch.save writes for every tensor."""
    t = _rebuild_tensor(storage, storage_offset, size, stride)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_tensor_v3(storage: Any, storage_offset: int, size: Any, stride: Any, requires_grad: bool,
                       backward_hooks: Any, dtype: Any, metadata: Any = None) -> Tensor:
    """torch._utils._rebuild_tensor_v3: a tensor of `dtype` over an untyped storage (dtypes without a legacy
    storage class)."""
    if not isinstance(dtype, _dtype_cls):
        raise pickle.UnpicklingError(f"expected a dtype, got {dtype!r}")
    t = _tensor_from_storage(storage, storage_offset, size, stride, dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _set_obj_state(obj: Any, state: Any) -> None:
    """Apply pickled object state (a dict, or (dict, slots dict)) as pickle's BUILD does, refusing dunder names
    (a file must not reassign __class__ or the like)."""
    if isinstance(state, tuple) and len(state) == 2:
        dict_state, slots_state = state
    else:
        dict_state, slots_state = state, None
    for part in (dict_state, slots_state):
        if part is None:
            continue
        if not isinstance(part, dict) or not all(type(k) is str and not k.startswith("__") for k in part):
            raise pickle.UnpicklingError(f"object state must be a dict of attribute names, got {part!r:.80}")
    if dict_state:
        if hasattr(obj, "__dict__"):
            obj.__dict__.update(dict_state)
        else:
            for k, v in dict_state.items():
                setattr(obj, k, v)
    if slots_state:
        for k, v in slots_state.items():
            setattr(obj, k, v)


def _rebuild_parameter(data: Any, requires_grad: bool, backward_hooks: Any) -> Any:
    """torch._utils._rebuild_parameter."""
    from .nn.parameter import Parameter
    if not isinstance(data, Tensor):
        raise pickle.UnpicklingError(f"expected a tensor to make a Parameter of, got {type(data).__name__}")
    return Parameter(data, bool(requires_grad))


def _rebuild_parameter_with_state(data: Any, requires_grad: bool, backward_hooks: Any, state: Any) -> Any:
    """torch._utils._rebuild_parameter_with_state: a Parameter with Python attributes."""
    p = _rebuild_parameter(data, requires_grad, backward_hooks)
    _set_obj_state(p, state)
    return p


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> Any:
    """torch._tensor._rebuild_from_type_v2: a tensor (subclass) with Python attributes."""
    if func not in _REBUILD_FUNCTIONS or not isinstance(args, tuple):
        raise pickle.UnpicklingError(f"_rebuild_from_type_v2 may only call a tensor rebuild function, got {func!r}")
    ret = func(*args)
    if isinstance(new_type, type) and issubclass(new_type, Tensor) and type(ret) is not new_type:
        from .nn.parameter import Parameter
        ret = Parameter(ret, ret.requires_grad) if new_type is Parameter else ret
    if state:
        _set_obj_state(ret, state)
    return ret


def _encode(obj: Any, encoding: str = "latin1") -> bytes:
    """_codecs.encode as Python's pickle uses it for bytes in protocol 2 (only the latin-1 codec)."""
    if type(obj) is not str or encoding.replace("-", "").replace("_", "").lower() not in ("latin1", "latin",
                                                                                          "iso88591"):
        raise pickle.UnpicklingError(f"_codecs.encode is allowed only for str -> latin1 bytes, got "
                                     f"{type(obj).__name__} with encoding {encoding!r}")
    return obj.encode("latin1")


_REBUILD_FUNCTIONS = {_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
                      _rebuild_parameter_with_state}


def _torch_globals() -> dict[str, Any]:
    """PyTorch's names a checkpoint may use, mapped to tinytorch's objects (the weights_only allowlist)."""
    from .nn.parameter import Parameter
    g: dict[str, Any] = {
        "collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
        "torch._utils._rebuild_tensor": _rebuild_tensor, "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.nn.parameter.Parameter": Parameter, "torch.Tensor": Tensor, "torch._tensor.Tensor": Tensor,
        "torch.Size": Size, "torch.device": _device_cls, "_codecs.encode": _encode,
        "builtins.set": set, "builtins.frozenset": frozenset, "builtins.bytearray": bytearray,
        "builtins.complex": complex, "builtins.slice": slice,
    }
    for dname, sname in _STORAGE_TYPE_OF.items():
        g[f"torch.{sname}"] = _StorageType(sname, dname)
    for name in ("UntypedStorage", "ByteStorage"):
        g[f"torch.storage.{name}"] = g[f"torch.{name}"] = _StorageType(name, "uint8")
    for d in _ALL_DTYPES:
        g[f"torch.{d.name}"] = d
    return g


_ALLOWED: dict[str, Any] = {}
_USER_SAFE: dict[str, Any] = {}


def _allowed() -> dict[str, Any]:
    if not _ALLOWED:
        _ALLOWED.update(_torch_globals())
    return _ALLOWED


def _global_name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


def add_safe_globals(safe_globals: list) -> None:
    """Allow weights_only loads to use these classes/functions (objects, or (object, "module.name") pairs)."""
    for item in safe_globals:
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[1], str):
                raise ValueError(f"expected (object, 'module.name'), got {item!r}")
            _USER_SAFE[item[1]] = item[0]
        else:
            _USER_SAFE[_global_name(item)] = item


def clear_safe_globals() -> None:
    """Forget every global added with add_safe_globals."""
    _USER_SAFE.clear()


def get_safe_globals() -> list:
    """The globals added with add_safe_globals."""
    return list(_USER_SAFE.values())


class safe_globals:
    """Context manager: add_safe_globals(list) inside the block, restored on exit."""

    def __init__(self, safe_globals: list) -> None:
        self.safe_globals = safe_globals

    def __enter__(self) -> None:
        self._saved = dict(_USER_SAFE)
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc: Any) -> None:
        _USER_SAFE.clear()
        _USER_SAFE.update(self._saved)


_UNSUPPORTED_TORCH_DTYPES = ("complex32", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                             "float8_e8m0fnu", "float4_e2m1fn_x2", "qint8", "quint8", "qint32", "quint4x2",
                             "quint2x4", "bits8", "bits16", "bits1x8", "bits2x4", "bits4x2")


def _missing_torch_feature(module: str, name: str) -> str | None:
    """Why a PyTorch name a checkpoint uses has no tinytorch equivalent (None when that is not the reason)."""
    if module == "torch" and name in _UNSUPPORTED_TORCH_DTYPES:
        return f"the checkpoint holds tensors of dtype torch.{name}, which tinytorch does not have"
    if module == "torch" and name.endswith("Storage"):
        return f"the checkpoint holds a torch.{name}, a storage type tinytorch does not have"
    if module == "torch._utils" and name.startswith("_rebuild"):
        return f"the checkpoint holds tensors rebuilt by torch._utils.{name} (sparse, quantized, nested or " \
               "meta tensors), which tinytorch does not have"
    return None


# ================================================================== load: unpicklers

class _WeightsUnpickler(pickle._Unpickler):
    """The weights_only unpickler: globals only from the allowlist, objects built only from allowed classes."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, file: BinaryIO, persistent_load: Callable, **kwargs: Any) -> None:
        super().__init__(file, **kwargs)
        self._persistent = persistent_load

    def persistent_load(self, pid: Any) -> Any:
        return self._persistent(pid)

    @staticmethod
    def _is_allowed(obj: Any) -> bool:
        return any(obj is v for v in _allowed().values()) or any(obj is v for v in _USER_SAFE.values())

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3 and self.fix_imports:
            from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
            if (module, name) in NAME_MAPPING:
                module, name = NAME_MAPPING[(module, name)]
            elif module in IMPORT_MAPPING:
                module = IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        if full in _USER_SAFE:
            return _USER_SAFE[full]
        if full in _allowed():
            return _allowed()[full]
        missing = _missing_torch_feature(module, name)
        if missing:
            raise pickle.UnpicklingError(missing)
        shown = name if module == "builtins" else full
        raise pickle.UnpicklingError(
            f"Unsupported global: GLOBAL {full} was not an allowed global by default. Please use "
            f"`tinytorch.serialization.add_safe_globals([{shown}])` or the "
            f"`tinytorch.serialization.safe_globals([{shown}])` context manager to allowlist this global if you "
            "trust this class/function.")

    def load_reduce(self) -> None:
        args = self.stack.pop()
        func = self.stack[-1]
        if not self._is_allowed(func):
            raise pickle.UnpicklingError(f"Trying to call reduce for unrecognized function {func!r}")
        self.stack[-1] = func(*args)

    dispatch[pickle.REDUCE[0]] = load_reduce

    def _new(self, cls: Any, args: tuple, kwargs: dict | None = None) -> Any:
        from .nn.parameter import Parameter
        if cls is Parameter:
            return Parameter(*args, **(kwargs or {}))
        if not isinstance(cls, type) or not self._is_allowed(cls) or issubclass(cls, Tensor):
            raise pickle.UnpicklingError(f"Can only create new object for nn.Parameter or classes allowlisted via "
                                         f"`add_safe_globals` but got {cls!r}")
        return cls.__new__(cls, *args, **(kwargs or {}))

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args))

    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, kwargs))

    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        from .nn.parameter import Parameter
        if type(inst) in (OrderedDict, Counter, Parameter):
            _set_obj_state(inst, state)
        elif self._is_allowed(type(inst)) and any(type(inst) is v for v in _USER_SAFE.values()):
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None and not isinstance(state, type(None)):
                setstate(state)
            else:
                _set_obj_state(inst, state)
        else:
            raise pickle.UnpicklingError(f"Can only build Tensor, Parameter, OrderedDict or types allowlisted via "
                                         f"`add_safe_globals`, but got {type(inst)}")

    dispatch[pickle.BUILD[0]] = load_build

    def _refuse(self) -> None:
        raise pickle.UnpicklingError("the INST/OBJ opcodes are not allowed in a weights_only load")

    dispatch[pickle.INST[0]] = _refuse
    dispatch[pickle.OBJ[0]] = _refuse


def _full_unpickler(base: type) -> type:
    """An unpickler (from pickle_module) that resolves PyTorch's names to tinytorch's and everything else as
    pickle does: weights_only=False, for trusted files only."""

    class _FullUnpickler(base):  # type: ignore[misc, valid-type]
        def __init__(self, file: BinaryIO, persistent_load: Callable, **kwargs: Any) -> None:
            super().__init__(file, **kwargs)
            self._persistent = persistent_load

        def persistent_load(self, pid: Any) -> Any:
            return self._persistent(pid)

        def find_class(self, module: str, name: str) -> Any:
            full = f"{module}.{name}"
            if full in _allowed():
                return _allowed()[full]
            if module == "torch" or module.startswith("torch."):
                missing = _missing_torch_feature(module, name)
                if missing:
                    raise pickle.UnpicklingError(missing)
                try:
                    obj: Any = importlib.import_module("tinytorch" + module[len("torch"):])
                    for part in name.split("."):
                        obj = getattr(obj, part)
                    return obj
                except (ImportError, AttributeError):
                    raise pickle.UnpicklingError(f"the checkpoint uses {full}, which has no tinytorch "
                                                 "equivalent") from None
            return super().find_class(module, name)

    return _FullUnpickler


# ================================================================== load: the zip archive

def _restore_location(storage: TypedStorage, location: str, map_location: Any) -> TypedStorage:
    """PyTorch's map_location rules: None -> where it was saved; str/device -> there; dict -> remapped
    location; callable(storage, location) -> its result (None falls back to the saved location)."""
    if callable(map_location) and not isinstance(map_location, (str, _device_cls, dict)):
        result = map_location(storage, location)
        if result is None:
            return _restore_location(storage, location, None)
        if isinstance(result, Tensor):
            result = TypedStorage(result._data.reshape(-1))
        if not isinstance(result, TypedStorage):
            raise TypeError(f"map_location callable must return a storage, a Tensor or None, got "
                            f"{type(result).__name__}")
        return result
    if map_location is None:
        target = location
    elif isinstance(map_location, dict):
        target = map_location.get(location, location)
        target = str(target) if isinstance(target, _device_cls) else target
    else:
        target = str(map_location)
    dev = to_device(target)
    if dev.type == "cuda":
        from . import cuda
        if not cuda.is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
                               "False. If you are running on a CPU-only machine, please use torch.load with "
                               "map_location=torch.device('cpu') to map your storages to the CPU.")
        if dev.index is None:
            dev = _device_cls("cuda", 0)
    if storage.device == dev:
        return storage
    return type(storage)(move(storage._array, dev), storage.dtype)


def _archive_checksum(f: BinaryIO, start: int, name: str) -> bool | None:
    """Check the CRC-32C tinytorch.save records in the archive comment against the bytes from ``start``: True
    when it holds, None when the file has no such comment (PyTorch's files); raise when it does not hold."""
    end = f.seek(0, io.SEEK_END)
    tail_len = min(end - start, _EOCD_LEN + _COMMENT_LEN)
    f.seek(end - tail_len)
    tail = f.read(tail_len)
    m = _COMMENT.fullmatch(tail[-_COMMENT_LEN:])
    if m is None:
        at = tail.rfind(b"PK\x05\x06")  # the end record (a comment of ours holds no such bytes)
        if at >= 0 and len(tail) >= at + _EOCD_LEN and struct.unpack("<H", tail[at + 20:at + 22])[0] == _COMMENT_LEN:
            _fail(name, f"file is truncated or corrupted: the archive comment is {tail[at + _EOCD_LEN:]!r}, not "
                        f"{_COMMENT_LEN} bytes of 'tinytorch crc32c=<8 hex digits>'")
        return None  # no comment of ours: a file from PyTorch (or damaged where the zip reader will notice)
    f.seek(start)
    crc, left = 0, end - _COMMENT_LEN - start
    chunk = bytearray(8 << 20)
    view = memoryview(chunk)
    while left > 0:
        got = f.readinto(view[:min(left, len(chunk))])
        if not got:
            break
        crc = _C._cpu.crc32c(view[:got], crc)
        left -= got
    return crc == int(m.group(1), 16)


class _ZipReader:
    """Reads a PyTorch zip checkpoint: records' CRCs checked (unless the whole archive's checksum was), storages
    read or memory-mapped once per key."""

    def __init__(self, f: BinaryIO, name: str, map_location: Any, mmap_path: str | None,
                 check_records: bool = True) -> None:
        self.f, self.name, self.map_location, self.mmap_path = f, name, map_location, mmap_path
        self.check_records = check_records
        try:
            self.zf = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, struct.error) as e:
            _fail(name, f"file is truncated or corrupted: not a readable zip archive ({e})")
        pkl = [n for n in self.zf.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
        if not pkl:
            _fail(name, "the zip archive has no <archive>/data.pkl record: not a PyTorch checkpoint")
        self.prefix = pkl[0][: -len("data.pkl")]
        self.swap = False
        if self.prefix + "byteorder" in self.zf.NameToInfo:
            order = self.read_record("byteorder").decode("ascii", "replace")
            if order not in ("little", "big"):
                _fail(name, f"unknown byte order {order!r} in the byteorder record")
            self.swap = order != sys.byteorder
        self.storages: dict[str, TypedStorage] = {}
        self._mmap: Any = None

    def _mapping(self) -> Any:
        """The file mapped copy-on-write (PyTorch's mmap=True, shared=False): tensors over it are writable and
        the file never changes; pages are read when touched."""
        if self._mmap is None:
            import mmap
            with open(self.mmap_path, "rb") as fh:
                self._mmap = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        return self._mmap

    def _info(self, record: str) -> zipfile.ZipInfo:
        try:
            return self.zf.getinfo(self.prefix + record)
        except KeyError:
            _fail(self.name, f"record {self.prefix + record!r} is missing: the file is truncated or corrupted")

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        if info.header_offset < 0:
            _fail(self.name, f"record {info.filename!r}: negative header offset {info.header_offset}: the file is "
                             "corrupted")
        self.f.seek(info.header_offset)
        head = self.f.read(30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            _fail(self.name, f"record {info.filename!r}: no local header at offset {info.header_offset}: the file "
                             "is truncated or corrupted")
        name_len, extra_len = struct.unpack("<HH", head[26:30])
        return info.header_offset + 30 + name_len + extra_len

    def read_record(self, record: str) -> bytes:
        info = self._info(record)
        try:
            with self.zf.open(info) as fh:
                data = fh.read()
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError, NotImplementedError) as e:
            _fail(self.name, f"record {info.filename!r}: {e}: the file is truncated or corrupted")
        if len(data) != info.file_size:
            _fail(self.name, f"record {info.filename!r}: read {len(data)} of {info.file_size} bytes: the file is "
                             "truncated")
        return data

    def _read_array(self, info: zipfile.ZipInfo, np_dtype: np.dtype, numel: int) -> np.ndarray:
        n = info.file_size
        if info.compress_type != zipfile.ZIP_STORED:  # re-zipped with compression: zipfile inflates it
            if self.mmap_path:
                _fail(self.name, f"record {info.filename!r} is compressed and cannot be memory-mapped")
            return np.frombuffer(bytearray(self.read_record(info.filename[len(self.prefix):])), np_dtype)
        offset = self._data_offset(info)
        if self.mmap_path:
            if n == 0:
                return np.empty(0, np_dtype)
            if offset + n > len(self._mapping()):
                _fail(self.name, f"record {info.filename!r} ({n} bytes at offset {offset}) lies past the end of the "
                                 f"file ({len(self._mapping())} bytes): the file is truncated")
            # Each storage is its own array over the one mapping, so saving it again writes only that storage.
            return np.frombuffer(self._mapping(), np_dtype, numel, offset)
        arr = np.empty(numel, np_dtype)
        view = memoryview(arr.view(np.uint8)) if n else memoryview(b"")
        self.f.seek(offset)
        got = self.f.readinto(view) if n else 0
        if got != n:
            _fail(self.name, f"record {info.filename!r}: read {got} of {n} bytes: the file is truncated")
        if self.check_records:
            crc = zlib.crc32(view)
            if crc != info.CRC:
                _fail(self.name, f"record {info.filename!r}: CRC-32 mismatch (stored {info.CRC:#010x}, computed "
                                 f"{crc:#010x}): the file is corrupted")
        return arr

    def persistent_load(self, pid: Any) -> TypedStorage:
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] not in ("storage", b"storage"):
            raise pickle.UnpicklingError(f"Only persistent_load of storage is allowed, but got {pid!r}")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"expected a storage type in a persistent id, got {storage_type!r}")
        if not isinstance(key, str) or not isinstance(location, str) or type(numel) is not int:
            raise pickle.UnpicklingError(f"malformed storage persistent id {pid!r}")
        cached = self.storages.get(key)
        if cached is not None:
            return cached
        dtype = _DTYPES[storage_type.dtype_name]
        info = self._info(f"data/{key}")
        if info.file_size != numel * dtype.itemsize:
            _fail(self.name, f"record {info.filename!r} has {info.file_size} bytes but the pickle says it holds "
                             f"{numel} {dtype} elements ({numel * dtype.itemsize} bytes): the file is corrupted")
        arr = self._read_array(info, dtype.np, numel)
        if self.swap and dtype.itemsize > 1:
            arr = arr.byteswap()
        cls = UntypedStorage if storage_type.name == "UntypedStorage" else TypedStorage
        storage = _restore_location(cls(arr, dtype), location, self.map_location)
        self.storages[key] = storage
        return storage


def _load_zip(f: BinaryIO, name: str, map_location: Any, weights_only: bool, mmap_path: str | None,
              pickle_module: Any, pickle_load_args: dict) -> Any:
    start = f.tell()
    whole = None if mmap_path else _archive_checksum(f, start, name)
    f.seek(start)
    try:
        reader = _ZipReader(f, name, map_location, mmap_path, check_records=whole is not True)
        obj = _unpickle_zip(reader, name, weights_only, pickle_module, pickle_load_args)
    except CheckpointError:
        raise
    except Exception as e:
        if whole is False:  # damaged headers make zipfile or the unpickler fail in many ways: say what it is
            _fail(name, f"the archive's CRC-32C (in its comment) does not match and reading it failed "
                        f"({type(e).__name__}: {e}): the file is corrupted")
        raise
    if whole is False:  # every record's data checked out: the damage is in the headers around them
        _fail(name, "the archive's CRC-32C (in its comment) does not match although every record's CRC-32 does: "
                    "zip headers or the directory are corrupted")
    return obj


def _unpickle_zip(reader: "_ZipReader", name: str, weights_only: bool, pickle_module: Any,
                  pickle_load_args: dict) -> Any:
    data = reader.read_record("data.pkl")
    if weights_only:
        unpickler = _WeightsUnpickler(io.BytesIO(data), reader.persistent_load, **pickle_load_args)
        try:
            return unpickler.load()
        except pickle.UnpicklingError as e:
            raise pickle.UnpicklingError(
                f"Weights only load failed for {name}. Re-running `tinytorch.load` with `weights_only` set to "
                "`False` will likely succeed, but it can result in arbitrary code execution. Do it only if you got "
                f"the file from a trusted source.\n WeightsUnpickler error: {e}") from None
    cls = _full_unpickler((pickle_module or pickle).Unpickler)
    return cls(io.BytesIO(data), reader.persistent_load, **pickle_load_args).load()


# ================================================================== load: PyTorch's pre-1.6 format

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def _load_legacy(f: BinaryIO, name: str, map_location: Any, weights_only: bool, pickle_module: Any,
                 pickle_load_args: dict) -> Any:
    """torch.save(..., _use_new_zipfile_serialization=False): pickles of the magic number, protocol version and
    system info, the object's pickle (storages as persistent ids), the list of storage keys, then each storage's
    bytes (an int64 element count, then the elements) in that order. The storages' arrays are made empty while
    unpickling, so that the tensors built meanwhile view them, and filled from the file after."""
    plain = dict(pickle_load_args)
    try:
        magic = pickle.load(f, **plain)
        protocol = pickle.load(f, **plain)
        sys_info = pickle.load(f, **plain)
    except Exception:
        _fail(name, "this is a plain pickle, not a checkpoint torch.save wrote (PyTorch's pre-1.6 format starts with "
                    "its magic number): load it with pickle")
    if magic != _LEGACY_MAGIC:
        _fail(name, f"invalid magic number {magic!r}: not a checkpoint torch.save wrote (a plain pickle?)")
    if protocol != _LEGACY_PROTOCOL:
        _fail(name, f"invalid protocol version {protocol!r} (expected {_LEGACY_PROTOCOL})")
    if not isinstance(sys_info, dict) or not sys_info.get("little_endian", True):
        _fail(name, "the checkpoint was written on a big-endian machine, which tinytorch does not read")
    storages: dict = {}  # root key -> (storage, array to fill); view key -> storage
    views: dict = {}

    def persistent_load(pid: Any) -> Any:
        if isinstance(pid, tuple) and pid and pid[0] in ("module", b"module"):
            if weights_only:
                raise pickle.UnpicklingError("a whole module (its source code) in a weights_only load")
            return pid[1]
        if not isinstance(pid, tuple) or len(pid) != 6 or pid[0] not in ("storage", b"storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id in a pre-1.6 checkpoint: {pid!r}")
        _, storage_type, key, location, numel, view = pid
        if not isinstance(storage_type, _StorageType) or type(numel) is not int or numel < 0:
            raise pickle.UnpicklingError(f"malformed storage persistent id {pid!r}")
        location = location.decode("ascii") if isinstance(location, bytes) else location
        if _restore_location_target(location, map_location).type != "cpu":
            raise RuntimeError(f"{name}: a pre-1.6 checkpoint is read into CPU memory only; load it with "
                               "map_location='cpu' and move the tensors (or save it again in the zip format)")
        if key not in storages:
            dtype = _DTYPES[storage_type.dtype_name]
            arr = np.empty(numel, dtype.np)
            cls = UntypedStorage if storage_type.name == "UntypedStorage" else TypedStorage
            storages[key] = (cls(arr, dtype), arr)
        storage = storages[key][0]
        if view is None:
            return storage
        view_key, offset, size = view
        if view_key not in views:
            views[view_key] = type(storage)(storage._array[offset:offset + size], storage.dtype)
        return views[view_key]

    if weights_only:
        unpickler: Any = _WeightsUnpickler(f, persistent_load, **pickle_load_args)
    else:
        unpickler = _full_unpickler((pickle_module or pickle).Unpickler)(f, persistent_load, **pickle_load_args)
    try:
        result = unpickler.load()
    except pickle.UnpicklingError as e:
        if not weights_only:
            raise
        raise pickle.UnpicklingError(
            f"Weights only load failed for {name}. Re-running `tinytorch.load` with `weights_only` set to `False` "
            "will likely succeed, but it can result in arbitrary code execution. Do it only if you got the file "
            f"from a trusted source.\n WeightsUnpickler error: {e}") from None
    keys = pickle.load(f, **plain)
    for key in keys:
        if key not in storages:
            _fail(name, f"storage {key!r} is listed after the pickle but no tensor uses it: the file is corrupted")
        arr = storages[key][1]
        head = f.read(8)
        if len(head) != 8:
            _fail(name, f"storage {key!r}: the file ends before its data: the file is truncated")
        count = struct.unpack("<q", head)[0]
        if count != arr.size:
            _fail(name, f"storage {key!r} holds {count} elements in the file but {arr.size} in the pickle: the file "
                        "is corrupted")
        view = memoryview(arr.view(np.uint8)) if arr.size else memoryview(b"")
        if arr.size and f.readinto(view) != arr.nbytes:
            _fail(name, f"storage {key!r}: the file ends inside its data: the file is truncated")
    return result


def _restore_location_target(location: str, map_location: Any) -> _device_cls:
    """Where _restore_location would put a storage saved at `location` (callables: where they were saved)."""
    if map_location is None or callable(map_location) and not isinstance(map_location, (str, _device_cls, dict)):
        return to_device(location)
    if isinstance(map_location, dict):
        target = map_location.get(location, location)
        return to_device(str(target) if isinstance(target, _device_cls) else target)
    return to_device(str(map_location))


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike | BinaryIO) -> list[str]:
    """The globals a checkpoint's pickle names that a weights_only load would refuse (read without loading)."""
    import pickletools
    with _opened(f) as (fh, name):
        data = _ZipReader(fh, name, None, None).read_record("data.pkl")
    found: list[str] = []
    strings: list[str] = []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        full = None
        if op.name in ("GLOBAL", "INST"):
            full = arg.replace(" ", ".")
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            full = f"{strings[-2]}.{strings[-1]}"
        if full and full not in _allowed() and full not in _USER_SAFE and full not in found:
            found.append(full)
    return found


@contextlib.contextmanager
def _opened(f: Any):
    """(seekable binary file, name for messages) for a path or a file object."""
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        with open(name, "rb") as fh:
            yield fh, name
        return
    if not hasattr(f, "read"):
        raise AttributeError(f"expected 'f' to be string, path, or a file-like object with a 'read' attribute, "
                             f"got {type(f).__name__}")
    name = str(getattr(f, "name", None) or f"<{type(f).__name__}>")
    if hasattr(f, "seekable") and f.seekable():
        yield f, name
    else:
        yield io.BytesIO(f.read()), name


def load(f: str | os.PathLike | BinaryIO, map_location: str | _device_cls | dict | Callable | None = None,
         pickle_module: Any = None, *, weights_only: bool | None = None, mmap: bool | None = None,
         **pickle_load_args: Any) -> Any:
    """Read a checkpoint written by torch.save or tinytorch.save (or tinytorch's older format); map_location
    moves storages ('cpu', 'cuda', device, {saved: target} dict, or callable(storage, saved_location))."""
    if weights_only is None:
        if os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0") not in ("0", ""):
            weights_only = False
        else:
            weights_only = pickle_module is None
    if os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0") not in ("0", ""):
        weights_only = True
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    pickle_load_args.setdefault("encoding", "utf-8")
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("f must be a file path in order to use the mmap argument")
    from ._serialization_legacy import MAGIC, _Reader
    with _opened(f) as (fh, name):
        start = fh.tell()
        head = fh.read(len(MAGIC))
        fh.seek(start)
        if head[:4] == b"PK\x03\x04":
            if start and mmap:
                raise ValueError("mmap needs the checkpoint to start at the beginning of the file")
            return _load_zip(fh, name, map_location, bool(weights_only), name if mmap else None, pickle_module,
                             pickle_load_args)
        if head == MAGIC:
            if mmap:
                raise RuntimeError(f"{name}: mmap can only be used with files saved in PyTorch's zip format; this "
                                   "is tinytorch's older format: load it and save it again to convert it")
            return _Reader(fh, name, map_location, bool(weights_only)).decode_root()
        if len(head) < len(MAGIC):
            _fail(name, f"file is truncated: {len(head)} bytes, too short to be a checkpoint")
        if head[:1] == b"\x80":
            if mmap:
                raise RuntimeError(f"{name}: mmap can only be used with files saved with "
                                   "`torch.save(_use_new_zipfile_serialization=True), please torch.save your "
                                   "checkpoint with this option in order to use mmap.")
            return _load_legacy(fh, name, map_location, bool(weights_only), pickle_module, pickle_load_args)
        _fail(name, f"not a checkpoint tinytorch can read (starts with {head!r}): expected PyTorch's zip format "
                    "(torch.save since PyTorch 1.6, tinytorch.save) or tinytorch's older format")
