"""Reading tinytorch's own checkpoint format (version 1), written by tinytorch.save before it wrote PyTorch's
zip format. tinytorch.load recognises it by its magic and reads it here; nothing writes it any more.

Layout, little-endian: magic b"TTCKPT\\x00\\x01"; the tensors' raw C-order bytes, each block 64-byte aligned;
a UTF-8 JSON header {"format": "tinytorch-checkpoint", "version": 1, "tensors": [{"kind", "dtype", "shape",
"offset", "nbytes", "crc32", "device"}, ...], "root": <encoded object>}; a 32-byte footer: header offset (u64),
header length (u64), header crc32 (u32), 4 zero bytes, b"TTCKEND1". Objects other than tensors, containers,
numbers, strings, dtypes, devices and sizes were pickled into a block ({"t": "pickle"}); weights_only=True
refuses such files.
"""
from __future__ import annotations

import json
import os
import pickle
import struct
import zlib
from collections import OrderedDict
from typing import Any, BinaryIO

import numpy as np

from ._device import device as _device_cls
from ._dtype import to_dtype
from ._tensor import Size, Tensor, _wrap
from .serialization import _fail, _restore_location
from .storage import TypedStorage

MAGIC = b"TTCKPT\x00\x01"
END_MAGIC = b"TTCKEND1"
_FOOTER = struct.Struct("<QQI4x8s")
_FORMAT = "tinytorch-checkpoint"
_VERSION = 1


class _Reader:
    """Decodes a version-1 checkpoint from the current position of a seekable binary file."""

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
            # map_location sees a flat storage, as with PyTorch's files; the tensor keeps the saved shape.
            storage = _restore_location(TypedStorage(arr.reshape(-1)), saved_dev, self.map_location)
            arr = storage._array.reshape(arr.shape)
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


