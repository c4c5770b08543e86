"""Distributed checkpoints (torch.distributed.checkpoint.save/load): a directory with one file per rank holding
the pieces of tensors that rank owns, and `.metadata` (written last, by rank 0) saying for every tensor its
global shape, dtype and which box of it each file holds. Loading reads, for every tensor of the state dict
given, the boxes that overlap the part this rank needs, so a checkpoint saved at one world size loads at another.

Files: `__<rank>_0.distcp` (raw little-endian array bytes, back to back) and `.metadata` (JSON). Every file is
written to a temporary name, fsynced and renamed; `.metadata` appears only after every rank's file is in place.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..._tensor import Tensor, _wrap
from .. import distributed_c10d as c10d
from ..tensor._api import DTensor, chunk_bounds
from ..tensor.placement_types import Replicate, Shard

__all__ = ["save", "load", "FileSystemWriter", "FileSystemReader", "CheckpointException"]

METADATA = ".metadata"
FORMAT = "tinytorch-dcp-1"


class CheckpointException(RuntimeError):
    """A checkpoint could not be written or read (names the file and what was wrong)."""


class FileSystemWriter:
    """Where save() writes: a directory."""

    def __init__(self, path: Any, single_file_per_rank: bool = True, sync_files: bool = True, **kwargs: Any) -> None:
        self.path = os.fspath(path)
        self.sync_files = sync_files


class FileSystemReader:
    """Where load() reads: a directory written by save()."""

    def __init__(self, path: Any) -> None:
        self.path = os.fspath(path)


# ---------------------------------------------------------------------------------------------- flattening
def _flatten(obj: Any, path: Tuple = ()) -> List[Tuple[Tuple, Any]]:
    """(path, leaf) for every leaf of nested dicts/lists; tensors are leaves."""
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out.extend(_flatten(v, path + (k,)))
        return out
    if isinstance(obj, list) and any(isinstance(v, (Tensor, dict, list)) for v in obj):
        out = []
        for i, v in enumerate(obj):
            out.extend(_flatten(v, path + (i,)))
        return out
    return [(path, obj)]


def _key(path: Tuple) -> str:
    return json.dumps(list(path))


def _encode(value: Any) -> Any:
    """A JSON form of a non-tensor leaf that decodes to the same Python value (tuples stay tuples)."""
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"__dict__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.generic,)):
        return value.item()
    raise CheckpointException(f"dcp.save: cannot store a value of type {type(value).__name__} ({value!r}); "
                              "checkpoints hold tensors, numbers, strings and containers of them")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__tuple__" in value:
            return tuple(_decode(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {_decode(k): _decode(v) for k, v in value["__dict__"]}
        if "__float__" in value:
            return float(value["__float__"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _box(t: Tensor) -> Tuple[List[int], List[int]]:
    """(offsets, sizes) of the part of the global tensor this rank holds."""
    shape = list(t.shape)
    if not isinstance(t, DTensor):
        return [0] * len(shape), shape
    offsets = [0] * len(shape)
    sizes = list(shape)
    coord = t._mesh.get_coordinate()
    for d, p in enumerate(t._placements):
        if isinstance(p, Shard):
            a, b = chunk_bounds(sizes[p.dim], t._mesh.size(d), coord[d])
            offsets[p.dim] += a
            sizes[p.dim] = b - a
    return offsets, sizes


def _writes(t: Tensor) -> bool:
    """Whether this rank stores its piece of t: replicas are written once, by the first rank holding them."""
    if not isinstance(t, DTensor):
        return (c10d.get_rank() if c10d.is_initialized() else 0) == 0
    coord = t._mesh.get_coordinate()
    return all(coord[d] == 0 for d, p in enumerate(t._placements) if isinstance(p, Replicate))


def _host(a: Any) -> np.ndarray:
    return np.ascontiguousarray(a if type(a) is np.ndarray else a.get())


def _atomic_write(path: str, chunks: List[bytes], sync: bool = True) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _dir(checkpoint_id: Any, storage: Any, what: str) -> str:
    if storage is not None:
        return storage.path
    if checkpoint_id is None:
        raise ValueError(f"dcp.{what}: give checkpoint_id (a directory) or a storage_{'writer' if what == 'save' else 'reader'}")
    return os.fspath(checkpoint_id)


def save(state_dict: Dict[str, Any], *, checkpoint_id: Any = None, storage_writer: Optional[FileSystemWriter] = None,
         planner: Any = None, process_group: Any = None, no_dist: bool = False) -> Dict[str, Any]:
    """Write state_dict (nested dicts of DTensors, tensors and plain values) as a distributed checkpoint; every
    rank of the group must call it. Returns the metadata written."""
    path = _dir(checkpoint_id, storage_writer, "save")
    dist = c10d.is_initialized() and not no_dist
    rank = c10d.get_rank(process_group) if dist else 0
    os.makedirs(path, exist_ok=True)
    fname = f"__{rank}_0.distcp"
    chunks: List[bytes] = []
    pieces: List[dict] = []
    tensors: Dict[str, dict] = {}
    values: Dict[str, Any] = {}
    offset = 0
    for p, leaf in _flatten(state_dict):
        key = _key(p)
        if isinstance(leaf, Tensor):
            tensors[key] = {"shape": list(leaf.shape), "dtype": str(leaf._data.dtype)}
            if _writes(leaf):
                offs, sizes = _box(leaf)
                data = _host(leaf._data).tobytes()
                pieces.append({"key": key, "offsets": offs, "sizes": sizes, "file": fname, "start": offset,
                               "nbytes": len(data)})
                chunks.append(data)
                offset += len(data)
        else:
            values[key] = _encode(leaf)
    sync = storage_writer.sync_files if storage_writer is not None else True
    _atomic_write(os.path.join(path, fname), chunks, sync)
    mine = {"pieces": pieces, "tensors": tensors, "values": values}
    if dist:
        gathered: list = [None] * c10d.get_world_size(process_group)
        c10d.all_gather_object(gathered, mine, group=process_group)
    else:
        gathered = [mine]
    meta = {"format": FORMAT, "tensors": {}, "values": gathered[0]["values"], "pieces": []}
    for g in gathered:
        meta["tensors"].update(g["tensors"])
        meta["pieces"].extend(g["pieces"])
    if rank == 0:
        old = os.path.join(path, METADATA)
        _atomic_write(old, [json.dumps(meta).encode()], sync)
    if dist:
        c10d.barrier(group=process_group)
    return meta


def _read_meta(path: str) -> dict:
    mpath = os.path.join(path, METADATA)
    try:
        with open(mpath, "rb") as f:
            meta = json.loads(f.read().decode())
    except FileNotFoundError:
        raise CheckpointException(f"dcp.load: {mpath} does not exist: {path} is not a complete distributed "
                                  "checkpoint (metadata is written last, once every rank's file is in place)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointException(f"dcp.load: {mpath} is corrupt ({e})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointException(f"dcp.load: {mpath} is not a tinytorch distributed checkpoint")
    return meta


def _intersect(a_off, a_size, b_off, b_size):
    lo = [max(x, y) for x, y in zip(a_off, b_off)]
    hi = [min(x + s, y + t) for x, s, y, t in zip(a_off, a_size, b_off, b_size)]
    if any(h <= l for l, h in zip(lo, hi)) and lo:
        return None
    return lo, hi


def load(state_dict: Dict[str, Any], *, checkpoint_id: Any = None, storage_reader: Optional[FileSystemReader] = None,
         planner: Any = None, process_group: Any = None, no_dist: bool = False) -> None:
    """Fill state_dict in place from a checkpoint: each tensor (DTensor or plain) gets the part of the saved global
    tensor it holds, whatever world size saved it; plain values are replaced by the saved ones."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
    path = _dir(checkpoint_id, storage_reader, "load")
    meta = _read_meta(path)
    by_key: Dict[str, List[dict]] = {}
    for piece in meta["pieces"]:
        by_key.setdefault(piece["key"], []).append(piece)
    files: Dict[str, Any] = {}

    def file_bytes(name: str) -> Any:
        if name not in files:
            fpath = os.path.join(path, name)
            try:
                files[name] = np.memmap(fpath, dtype=np.uint8, mode="r") if os.path.getsize(fpath) else \
                    np.zeros(0, np.uint8)
            except FileNotFoundError:
                raise CheckpointException(f"dcp.load: {fpath} is missing from the checkpoint") from None
        return files[name]

    leaves = _flatten(state_dict)
    for p, leaf in leaves:
        key = _key(p)
        if not isinstance(leaf, Tensor):
            if key in meta["values"]:
                _assign(state_dict, p, _decode(meta["values"][key]))
            continue
        info = meta["tensors"].get(key)
        if info is None:
            raise CheckpointException(f"dcp.load: the checkpoint in {path} has no tensor {'.'.join(map(str, p))}")
        if list(leaf.shape) != info["shape"]:
            raise CheckpointException(f"dcp.load: {'.'.join(map(str, p))} has shape {info['shape']} in the "
                                      f"checkpoint but {list(leaf.shape)} in the state dict given")
        dt = np.dtype(info["dtype"])
        offs, sizes = _box(leaf)
        out = np.empty(sizes, dtype=dt)
        covered = 0
        for piece in by_key.get(key, []):
            inter = _intersect(offs, sizes, piece["offsets"], piece["sizes"])
            if inter is None:
                continue
            lo, hi = inter
            raw = file_bytes(piece["file"])[piece["start"]:piece["start"] + piece["nbytes"]]
            if raw.size != piece["nbytes"]:
                raise CheckpointException(f"dcp.load: {os.path.join(path, piece['file'])} is truncated")
            src = raw.view(dt).reshape(piece["sizes"])
            src_idx = tuple(slice(l - o, h - o) for l, h, o in zip(lo, hi, piece["offsets"]))
            dst_idx = tuple(slice(l - o, h - o) for l, h, o in zip(lo, hi, offs))
            out[dst_idx] = src[src_idx]
            covered += math.prod(h - l for l, h in zip(lo, hi))
        if covered != math.prod(sizes):
            raise CheckpointException(f"dcp.load: the checkpoint in {path} does not cover all of "
                                      f"{'.'.join(map(str, p))} (saved pieces hold {covered} of the "
                                      f"{math.prod(sizes)} elements this rank needs)")
        data = leaf._data
        if type(data) is not np.ndarray:
            import cupy
            data[...] = cupy.asarray(out.astype(data.dtype, copy=False))
        else:
            data[...] = out.astype(data.dtype, copy=False)
        leaf._bump_version()


def _assign(root: Any, path: Tuple, value: Any) -> None:
    obj = root
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value
