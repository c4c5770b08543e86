"""tinytorch.save / tinytorch.load: checkpoints of tensors, state dicts and nested containers.

File format (version 1), little-endian, one file:

    offset 0        magic  b"TTCKPT\\x00\\x01"                       (8 bytes)
    offset 8        tensor data: each tensor's raw C-order bytes, every block starting at a multiple of 64
    header_offset   header: UTF-8 JSON  {"format": "tinytorch-checkpoint", "version": 1,
                                         "tensors": [{"kind", "dtype", "shape", "offset", "nbytes", "crc32",
                                                      "device"}, ...] (one per data block),
                                         "root": <encoded object>}
    end - 32        footer: header_offset (u64), header_len (u64), header crc32 (u32), 4 zero bytes,
                    end magic b"TTCKEND1" (8 bytes)

Offsets are relative to the checkpoint's first byte: a file object is written from, and read from, its
current position (reading runs to the end of the file).

Objects are encoded as JSON: None/bool/int/float/str as themselves; containers and tensors as tagged
objects: {"t": "list"|"tuple", "v": [...]}, {"t": "dict"|"odict", "items": [[key, value], ...]} (keys may be
any encodable value, e.g. the int indices of an optimizer state_dict), {"t": "tensor", "i": index into
"tensors" (the data block), "k": tensor number, "requires_grad": bool, "param": bool}, {"t": "ndarray", "i": ...},
{"t": "dtype"|"device", "v": str}, {"t": "size", "v": [...]}, {"t": "bytes", "i": ...}. A tensor saved twice loads
as one object; tensors sharing one array (tied weights in a state_dict) are stored once and load sharing memory.
Other aliasing (a view and its base) is not preserved: each is stored with its own values.

Any other object is pickled into a data block ({"t": "pickle", "i": ...}); `load` with weights_only=True (the
default) refuses such files instead of unpickling them, so loading weights never runs code from the file.

Every data block carries a CRC-32 and the header carries its own, so a truncated or corrupted file raises
a RuntimeError naming the file and what is wrong instead of returning damaged weights. `save` to a path
writes a temporary file in the same directory, fsyncs it and renames it into place (os.replace), so a
failed or interrupted save leaves any previous checkpoint intact.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import struct
import tempfile
import zlib
from collections import OrderedDict
from typing import Any, BinaryIO, Callable

import numpy as np

from ._device import device as _device_cls, move, to_device
from ._dtype import dtype as _dtype_cls, from_numpy_dtype, to_dtype
from ._tensor import Size, Tensor, _host, _wrap

__all__ = ["save", "load"]

MAGIC = b"TTCKPT\x00\x01"
END_MAGIC = b"TTCKEND1"
_FOOTER = struct.Struct("<QQI4x8s")
_ALIGN = 64
_FORMAT = "tinytorch-checkpoint"
_VERSION = 1


# ------------------------------------------------------------------ save

class _Writer:
    """Encodes an object tree to JSON while streaming its arrays to the file."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.pos = len(MAGIC)
        self.tensors: list[dict] = []
        self.arrays: dict[int, int] = {}  # id(array) -> data block: tensors sharing one array share a block
        self.tensors_seen: dict[int, int] = {}  # id(tensor) -> tensor number: one tensor saved twice loads once
        self._keepalive: list = []  # the ids above stay valid only while the objects live

    def _write_block(self, buf, meta: dict) -> int:
        pad = (-self.pos) % _ALIGN
        if pad:
            self.f.write(b"\x00" * pad)
            self.pos += pad
        mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else memoryview(buf)
        meta.update(offset=self.pos, nbytes=mv.nbytes, crc32=zlib.crc32(mv))
        self.f.write(mv)
        self.pos += mv.nbytes
        self.tensors.append(meta)
        return len(self.tensors) - 1

    def _array(self, a: np.ndarray, device: str) -> int:
        if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d arrays into 1-d)
            a = a.copy(order="C")
        dt = from_numpy_dtype(a.dtype).name
        # ml_dtypes' bfloat16 has no buffer-protocol format; its bytes are read through a uint8 view.
        raw = a.reshape(-1).view(np.uint8) if a.size else np.zeros(0, np.uint8)
        return self._write_block(raw, {"kind": "array", "dtype": dt, "shape": list(a.shape), "device": device})

    def encode(self, obj: Any) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        t = type(obj)
        if t is int:
            return obj
        if t is float:
            return obj if obj == obj and obj not in (float("inf"), float("-inf")) else {"t": "float", "v": repr(obj)}
        if isinstance(obj, Tensor):
            data = obj._data
            if id(data) not in self.arrays:
                self.arrays[id(data)] = self._array(_host(data), str(obj.device))
            if id(obj) not in self.tensors_seen:
                self.tensors_seen[id(obj)] = len(self.tensors_seen)
            self._keepalive.append(obj)
            from .nn.parameter import Parameter
            # A non-leaf saves its values (PyTorch does not save graphs either).
            return {"t": "tensor", "i": self.arrays[id(data)], "k": self.tensors_seen[id(obj)],
                    "requires_grad": bool(obj._requires_grad), "param": isinstance(obj, Parameter)}
        if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
            return {"t": "ndarray", "i": self._array(obj, "cpu")}
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            v = obj.item() if obj.dtype.kind in "biu" else repr(float(obj))
            return {"t": "npscalar", "dtype": from_numpy_dtype(obj.dtype).name, "v": v}
        if isinstance(obj, Size):
            return {"t": "size", "v": list(obj)}
        if isinstance(obj, OrderedDict):
            return {"t": "odict", "items": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        if t is dict:
            return {"t": "dict", "items": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        if t is list:
            return {"t": "list", "v": [self.encode(v) for v in obj]}
        if t is tuple:
            return {"t": "tuple", "v": [self.encode(v) for v in obj]}
        if isinstance(obj, _dtype_cls):
            return {"t": "dtype", "v": obj.name}
        if isinstance(obj, _device_cls):
            return {"t": "device", "v": str(obj)}
        if isinstance(obj, (bytes, bytearray)):
            return {"t": "bytes", "i": self._write_block(bytes(obj), {"kind": "bytes"})}
        if t is float or isinstance(obj, float):
            return float(obj)
        if isinstance(obj, int):
            return int(obj)
        blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        return {"t": "pickle", "type": f"{t.__module__}.{t.__qualname__}",
                "i": self._write_block(blob, {"kind": "pickle"})}

    def finish(self, root: Any) -> None:
        header = json.dumps({"format": _FORMAT, "version": _VERSION, "tensors": self.tensors, "root": root},
                            separators=(",", ":"), allow_nan=False).encode("utf-8")
        header_offset = self.pos
        self.f.write(header)
        self.f.write(_FOOTER.pack(header_offset, len(header), zlib.crc32(header), END_MAGIC))


def _save_to(obj: Any, f: BinaryIO) -> None:
    f.write(MAGIC)
    w = _Writer(f)
    root = w.encode(obj)
    w.finish(root)


def save(obj: Any, f, pickle_module: Any = None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False) -> None:
    """Write obj (tensors, state dicts, nested containers) to a path (atomically) or a binary file object."""
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as fh:
                _save_to(obj, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
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
    _save_to(obj, f)


# ------------------------------------------------------------------ load

class CheckpointError(RuntimeError):
    """A checkpoint file is truncated, corrupted or not a tinytorch checkpoint."""


def _fail(name: str, what: str) -> None:
    raise CheckpointError(f"tinytorch.load: {name}: {what}")


def _resolve_device(saved: str, map_location) -> _device_cls | None:
    """The device a tensor saved on `saved` loads onto, or None when a callable handles it."""
    if map_location is None:
        dev = to_device(saved)
    elif isinstance(map_location, dict):
        dev = to_device(map_location.get(saved, saved))
    elif callable(map_location):
        return None
    else:
        dev = to_device(map_location)
    if dev.type == "cuda":
        from . import cuda
        if not cuda.is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
                               "False. If you are running on a CPU-only machine, please use torch.load with "
                               "map_location=torch.device('cpu') to map your storages to the CPU.")
    return dev


class _Reader:
    def __init__(self, f: BinaryIO, name: str, map_location, weights_only: bool) -> None:
        self.f = f
        self.name = name
        self.map_location = map_location
        self.weights_only = weights_only
        self.arrays: dict[int, Any] = {}  # data block -> array on its target device
        self.tensors: dict[int, Tensor] = {}  # tensor number -> tensor
        # Offsets in the file are relative to where the checkpoint starts: the current position, so that a
        # checkpoint written after other data in a stream is read back from the same place.
        self.base = f.tell()
        f.seek(0, os.SEEK_END)
        self.size = f.tell() - self.base
        self._check_frame()

    def _check_frame(self) -> None:
        f, size, name, base = self.f, self.size, self.name, self.base
        f.seek(base)
        head = f.read(len(MAGIC))
        if head != MAGIC:
            if head[:4] == b"PK\x03\x04":
                _fail(name, "this is a zip archive (PyTorch's torch.save format?); tinytorch.load reads only "
                            "tinytorch checkpoints")
            if size < len(MAGIC):
                _fail(name, f"file is truncated: {size} bytes, shorter than the {len(MAGIC)}-byte magic")
            _fail(name, f"not a tinytorch checkpoint (bad magic {head!r})")
        if size < len(MAGIC) + _FOOTER.size:
            _fail(name, f"file is truncated: {size} bytes, no room for the {_FOOTER.size}-byte footer")
        f.seek(base + size - _FOOTER.size)
        header_offset, header_len, header_crc, end = _FOOTER.unpack(f.read(_FOOTER.size))
        if end != END_MAGIC:
            _fail(name, f"file is truncated or corrupted: end marker missing (file has {size} bytes)")
        if header_offset + header_len + _FOOTER.size != size or header_offset < len(MAGIC):
            _fail(name, f"length mismatch: footer says the header spans [{header_offset}, "
                        f"{header_offset + header_len}) but the file has {size} bytes")
        f.seek(base + header_offset)
        header = f.read(header_len)
        crc = zlib.crc32(header)
        if crc != header_crc:
            _fail(name, f"header checksum mismatch (stored {header_crc:#010x}, computed {crc:#010x}): the file is "
                        "corrupted")
        try:
            meta = json.loads(header.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            _fail(name, f"header is not valid JSON ({e})")
        if meta.get("format") != _FORMAT or meta.get("version") != _VERSION:
            _fail(name, f"unsupported checkpoint format {meta.get('format')!r} version {meta.get('version')!r}")
        self.header_offset = header_offset
        self.blocks = meta["tensors"]
        self.root = meta["root"]
        if self.weights_only:
            kinds = {b.get("kind") for b in self.blocks}
            if "pickle" in kinds:
                types = sorted({t for t in _pickled_types(self.root)})
                raise pickle.UnpicklingError(
                    f"Weights only load failed for {name}: the checkpoint holds pickled objects of type(s) "
                    f"{', '.join(types)}, which weights_only=True does not unpickle. Re-running `tinytorch.load` "
                    "with `weights_only` set to `False` will likely succeed, but it can result in arbitrary code "
                    "execution. Do it only if you got the file from a trusted source.")

    def decode_root(self) -> Any:
        return self.decode(self.root)

    def _read_block(self, i: int) -> tuple[dict, bytes | np.ndarray]:
        try:
            b = self.blocks[i]
        except (IndexError, TypeError):
            _fail(self.name, f"header refers to data block {i}, which does not exist")
        off, n = b["offset"], b["nbytes"]
        if off < len(MAGIC) or off + n > self.header_offset:
            _fail(self.name, f"data block {i} [{off}, {off + n}) lies outside the data region "
                             f"[{len(MAGIC)}, {self.header_offset}): the file is corrupted")
        self.f.seek(self.base + off)
        if b.get("kind") == "array":
            dt = to_dtype(b["dtype"]).np
            shape = tuple(b["shape"])
            arr = np.empty(shape, dt)
            if arr.nbytes != n:
                _fail(self.name, f"tensor {i} (dtype {b['dtype']}, shape {list(shape)}) should have {arr.nbytes} "
                                 f"bytes, the header says {n}")
            view = memoryview(arr.reshape(-1).view(np.uint8)) if n else memoryview(b"")
            got = self.f.readinto(view) if n else 0
            if got != n:
                _fail(self.name, f"tensor {i}: read {got} of {n} bytes: the file is truncated")
            crc = zlib.crc32(view)
            if crc != b["crc32"]:
                _fail(self.name, f"tensor {i} (dtype {b['dtype']}, shape {list(shape)}): checksum mismatch (stored "
                                 f"{b['crc32']:#010x}, computed {crc:#010x}): the file is corrupted")
            return b, arr
        data = self.f.read(n)
        if len(data) != n:
            _fail(self.name, f"data block {i}: read {len(data)} of {n} bytes: the file is truncated")
        crc = zlib.crc32(data)
        if crc != b["crc32"]:
            _fail(self.name, f"data block {i}: checksum mismatch (stored {b['crc32']:#010x}, computed "
                             f"{crc:#010x}): the file is corrupted")
        return b, data

    def _tensor(self, node: dict) -> Tensor:
        k = node.get("k")
        if k is not None and k in self.tensors:
            return self.tensors[k]
        i = node["i"]
        if i not in self.arrays:
            b, arr = self._read_block(i)
            saved_dev = b.get("device", "cpu")
            dev = _resolve_device(saved_dev, self.map_location)
            if dev is None:  # callable map_location(tensor_on_cpu, saved_location) -> tensor (None keeps it)
                t = _wrap(arr)
                res = self.map_location(t, saved_dev)
                t = t if res is None else res
                if not isinstance(t, Tensor):
                    raise TypeError(f"map_location callable must return a Tensor or None, got {type(res).__name__}")
                arr = t._data
            elif dev.type != "cpu":
                arr = move(arr, dev)
            self.arrays[i] = arr
        t = _wrap(self.arrays[i])
        if node.get("param"):
            from .nn.parameter import Parameter
            t = Parameter(t, requires_grad=node.get("requires_grad", True))
        elif node.get("requires_grad") and t.is_floating_point():
            t.requires_grad_(True)
        if k is not None:
            self.tensors[k] = t
        return t

    def decode(self, node: Any) -> Any:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):  # not produced by save; tolerate hand-written headers
            return [self.decode(v) for v in node]
        if not isinstance(node, dict) or "t" not in node:
            _fail(self.name, f"malformed header entry {str(node)[:80]!r}")
        t = node["t"]
        if t == "tensor":
            return self._tensor(node)
        if t == "list":
            return [self.decode(v) for v in node["v"]]
        if t == "tuple":
            return tuple(self.decode(v) for v in node["v"])
        if t == "dict":
            return {self.decode(k): self.decode(v) for k, v in node["items"]}
        if t == "odict":
            return OrderedDict((self.decode(k), self.decode(v)) for k, v in node["items"])
        if t == "float":
            return float(node["v"])
        if t == "ndarray":
            return self._read_block(node["i"])[1]
        if t == "npscalar":
            v = node["v"]
            return to_dtype(node["dtype"]).np.type(float(v) if isinstance(v, str) else v)
        if t == "size":
            return Size(node["v"])
        if t == "dtype":
            return to_dtype(node["v"])
        if t == "device":
            return _device_cls(node["v"])
        if t == "bytes":
            return self._read_block(node["i"])[1]
        if t == "pickle":
            return pickle.loads(self._read_block(node["i"])[1])
        _fail(self.name, f"unknown entry type {t!r} in header")


def _pickled_types(node: Any):
    if isinstance(node, dict):
        if node.get("t") == "pickle":
            yield node.get("type", "?")
            return
        for v in node.values():
            yield from _pickled_types(v)
    elif isinstance(node, list):
        for v in node:
            yield from _pickled_types(v)


def load(f, map_location: str | _device_cls | dict | Callable | None = None, pickle_module: Any = None, *,
         weights_only: bool | None = True, mmap: bool | None = None, **pickle_load_args: Any) -> Any:
    """Read an object written by tinytorch.save; map_location moves tensors ('cpu', 'cuda', device,
    {saved: target} dict, or callable(tensor, saved_location) -> tensor)."""
    weights_only = True if weights_only is None else bool(weights_only)
    if isinstance(f, (str, os.PathLike)):
        name = os.fspath(f)
        with open(name, "rb") as fh:
            return _Reader(fh, name, map_location, weights_only).decode_root()
    if not hasattr(f, "read"):
        raise AttributeError(f"expected 'f' to be string, path, or a file-like object with a 'read' attribute, "
                             f"got {type(f).__name__}")
    name = str(getattr(f, "name", None) or f"<{type(f).__name__}>")
    if not (hasattr(f, "seekable") and f.seekable()):
        f = io.BytesIO(f.read())
    return _Reader(f, name, map_location, weights_only).decode_root()

