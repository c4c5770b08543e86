"""Distributed checkpoints (torch.distributed.checkpoint.save/load): a directory with one file per rank holding
the pieces of tensors that rank owns, and `.metadata` (written last, by rank 0) saying for every tensor its
global shape, dtype and which box of it each file holds. Loading reads, for every tensor of the state dict
given, the boxes that overlap the part this rank needs, so a checkpoint saved at one world size loads at another.

Files: `__<rank>_0.distcp` (raw little-endian array bytes, back to back) and `.metadata`: a first line
`tinytorch-dcp-2 crc32c=<8 hex digits>` (the CRC-32C of the rest) and then JSON. Every file is written to a
temporary name, fsynced and renamed; `.metadata` appears only after every rank's file is in place. Each piece's
CRC-32C (csrc/kernels/crc32c.cpp) and each file's size are recorded in the metadata and checked when the piece
is read, so a truncated file or a flipped byte is reported (naming the file, the item and the rank that wrote
it) instead of loaded. A failure on any rank fails save/load on every rank (CheckpointException, as PyTorch's
DCP), and load changes nothing in the state dict unless every rank read everything it needs.
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ... import _C
from ..._tensor import Tensor
from .. import distributed_c10d as c10d
from ..tensor._api import DTensor, chunk_bounds
from ..tensor.placement_types import Shard, _StridedShard

__all__ = ["save", "load", "FileSystemWriter", "FileSystemReader", "CheckpointException"]

METADATA = ".metadata"
FORMAT = "tinytorch-dcp-2"
_FORMAT_1 = "tinytorch-dcp-1"  # plain JSON metadata without checksums: still read
_HEADER = re.compile(rb"tinytorch-dcp-2 crc32c=([0-9a-f]{8})")


class CheckpointException(RuntimeError):
    """A checkpoint could not be written or read (names the file and what was wrong). ``failures`` maps each
    rank that failed to its error message."""

    def __init__(self, msg: str, failures: Optional[Dict[int, str]] = None) -> None:
        super().__init__(msg)
        self.failures = dict(failures or {})


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


def _boxes(t: Tensor) -> List[Tuple[List[int], List[int], List[int]]]:
    """(global offsets, sizes, offsets in the local piece) of each part of the global tensor this rank holds:
    one box, or several when a _StridedShard placement (FSDP over a TP-sharded dim) gives a rank rows from
    several places. Mesh dims cut in order, each cutting what the outer ones left (as DTensor lays pieces out)."""
    shape = list(t.shape)
    # per tensor dim: the global [start, stop) intervals this rank holds, in local order
    spans: List[List[Tuple[int, int]]] = [[(0, s)] for s in shape]
    if isinstance(t, DTensor):
        coord = t._mesh.get_coordinate()
        for d, p in enumerate(t._placements):
            if isinstance(p, Shard):
                spans[p.dim] = _cut(spans[p.dim], p, t._mesh.size(d), coord[d])
    boxes: List[Tuple[List[int], List[int], List[int]]] = [([], [], [])]
    for dim_spans in spans:
        local, parts = 0, []
        for a, b in dim_spans:
            parts.append((a, b - a, local))
            local += b - a
        boxes = [(o + [a], s + [n], lo + [l]) for o, s, lo in boxes for a, n, l in parts]
    return boxes


def _cut(spans: List[Tuple[int, int]], p: Shard, n: int, i: int) -> List[Tuple[int, int]]:
    """Rank i's part (of n) of the rows `spans` (global intervals read in order) under Shard/_StridedShard p."""
    total = sum(b - a for a, b in spans)
    if isinstance(p, _StridedShard):
        block, piece = total // p.split_factor, total // (p.split_factor * n)
        wanted = [(k * block + i * piece, k * block + (i + 1) * piece) for k in range(p.split_factor)]
    else:
        wanted = [chunk_bounds(total, n, i)]
    out, at = [], 0
    for a, b in spans:  # map local row ranges back to global ones
        for lo, hi in wanted:
            x, y = max(lo, at), min(hi, at + b - a)
            if x < y:
                out.append((a + x - at, a + y - at))
        at += b - a
    return out or [(0, 0)]


def _held(state_dict: Dict[str, Any]) -> set:
    """(key, offsets, sizes) of every box of every tensor this rank holds."""
    return {(_key(p), tuple(offs), tuple(sizes)) for p, leaf in _flatten(state_dict) if isinstance(leaf, Tensor)
            for offs, sizes, _ in _boxes(leaf)}


def _host(a: Any) -> np.ndarray:
    return np.ascontiguousarray(a if type(a) is np.ndarray else a.get())


def _atomic_write(path: str, chunks: List[Any], sync: bool = True) -> None:
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


def _message(error: Optional[BaseException]) -> Optional[str]:
    return None if error is None else f"{type(error).__name__}: {error}"


def _fail_together(what: str, failures: Dict[int, str], error: Optional[BaseException]) -> None:
    """Raise on every rank when any rank failed (this rank's own error is chained as the cause)."""
    if not failures:
        return
    detail = "\n".join(f"  rank {r}: {m}" for r, m in sorted(failures.items()))
    raise CheckpointException(f"{what} failed on rank{'s' if len(failures) > 1 else ''} "
                              f"{', '.join(map(str, sorted(failures)))}:\n{detail}", failures) from error


def save(state_dict: Dict[str, Any], *, checkpoint_id: Any = None, storage_writer: Optional[FileSystemWriter] = None,
         planner: Any = None, process_group: Any = None, no_dist: bool = False) -> Dict[str, Any]:
    """Write state_dict (nested dicts of DTensors, tensors and plain values) as a distributed checkpoint; every
    rank of the group must call it. Returns the metadata written."""
    path = _dir(checkpoint_id, storage_writer, "save")
    dist = c10d.is_initialized() and not no_dist
    rank = c10d.get_rank(process_group) if dist else 0
    sync = storage_writer.sync_files if storage_writer is not None else True
    mine: Optional[dict] = None
    error: Optional[BaseException] = None
    # Each box of a tensor is written once, by the lowest rank holding it, as PyTorch's planner deduplicates:
    # replicas (plain tensors, Replicate placements, sub-mesh DTensors repeated over the other mesh dims) are
    # skipped, while ranks holding different parts of the model (pipeline stages) each write theirs.
    held = _held(state_dict)
    if dist:
        holders: list = [None] * c10d.get_world_size(process_group)
        c10d.all_gather_object(holders, held, group=process_group)
        held = held.difference(*holders[:rank])
    try:
        mine = _write_rank_file(state_dict, path, rank, sync, held)
    except Exception as e:  # every rank must reach the exchange below, or the others would wait for it
        error = e
    if not dist:
        if error is not None:
            raise error
        parts = [mine]
    else:
        gathered: list = [None] * c10d.get_world_size(process_group)
        c10d.all_gather_object(gathered, (mine, _message(error)), group=process_group)
        # No metadata unless every rank's file is in place: a checkpoint missing a piece is never taken.
        _fail_together(f"dcp.save to {path}", {r: m for r, (_, m) in enumerate(gathered) if m is not None}, error)
        parts = [g[0] for g in gathered]
    meta = {"format": FORMAT, "tensors": {}, "values": {}, "pieces": [], "files": {}}
    for g in parts:  # a value is the lowest rank's that has it (pipeline stages hold different keys)
        meta["values"] = {**g["values"], **meta["values"]}
        meta["tensors"].update(g["tensors"])
        meta["pieces"].extend(g["pieces"])
        meta["files"].update(g["files"])
    if rank == 0:
        body = json.dumps(meta).encode()
        header = f"{FORMAT} crc32c={_C._cpu.crc32c(body):08x}\n".encode()
        _atomic_write(os.path.join(path, METADATA), [header, body], sync)
    if dist:
        c10d.barrier(group=process_group)
    return meta


def _write_rank_file(state_dict: Dict[str, Any], path: str, rank: int, sync: bool, writes: set) -> dict:
    """Write this rank's pieces to its file; return what the metadata says about them."""
    os.makedirs(path, exist_ok=True)
    fname = f"__{rank}_0.distcp"
    chunks: List[Any] = []
    pieces: List[dict] = []
    tensors: Dict[str, dict] = {}
    values: Dict[str, Any] = {}
    offset = 0
    for p, leaf in _flatten(state_dict):
        key = _key(p)
        if isinstance(leaf, Tensor):
            tensors[key] = {"shape": list(leaf.shape), "dtype": str(leaf._data.dtype)}
            local = None
            for offs, sizes, at in _boxes(leaf):
                if (key, tuple(offs), tuple(sizes)) in writes:
                    local = _host(leaf._data).reshape(leaf._data.shape) if local is None else local
                    data = np.ascontiguousarray(local[(Ellipsis,) + tuple(slice(a, a + n) for a, n in zip(at, sizes))])
                    data = data.reshape(-1).view(np.uint8)
                    pieces.append({"key": key, "offsets": offs, "sizes": sizes, "file": fname, "rank": rank,
                                   "start": offset, "nbytes": data.nbytes, "crc32c": _C._cpu.crc32c(data)})
                    chunks.append(data)
                    offset += data.nbytes
        else:
            values[key] = _encode(leaf)
    _atomic_write(os.path.join(path, fname), chunks, sync)
    return {"pieces": pieces, "tensors": tensors, "values": values,
            "files": {fname: {"rank": rank, "nbytes": offset}}}


def _read_meta(path: str) -> dict:
    mpath = os.path.join(path, METADATA)
    try:
        with open(mpath, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise CheckpointException(f"dcp.load: {mpath} does not exist: {path} is not a complete distributed "
                                  "checkpoint (metadata is written last, once every rank's file is in place)") from None
    head, _, body = raw.partition(b"\n")
    m = _HEADER.fullmatch(head)
    try:
        if m is None and raw.startswith(b"{"):
            meta = json.loads(raw.decode())  # format 1: no checksums to check
            if meta.get("format") == _FORMAT_1:
                return meta
            raise CheckpointException(f"dcp.load: {mpath} is not a tinytorch distributed checkpoint")
        if m is None:
            raise CheckpointException(f"dcp.load: {mpath} is corrupt or not a tinytorch distributed checkpoint: its "
                                      f"first line is {head[:60]!r}, expected '{FORMAT} crc32c=<8 hex digits>'")
        want, got = int(m.group(1), 16), _C._cpu.crc32c(body)
        if got != want:
            raise CheckpointException(f"dcp.load: {mpath} (written by rank 0) is corrupt: CRC-32C of its "
                                      f"{len(body)} bytes of metadata is {got:#010x}, the recorded one {want:#010x}")
        meta = json.loads(body.decode())
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
    tensor it holds, whatever world size saved it; plain values are replaced by the saved ones. Every piece read
    is checked against its recorded checksum; if any rank finds a problem, every rank raises and none changes its
    state dict (the pieces are read into fresh arrays first, so this rank's share is held twice meanwhile)."""
    path = _dir(checkpoint_id, storage_reader, "load")
    dist = c10d.is_initialized() and not no_dist
    rank = c10d.get_rank(process_group) if dist else 0
    updates: List[Tuple[Tuple, Any]] = []
    error: Optional[BaseException] = None
    try:
        updates = _read_updates(state_dict, path, rank)
    except Exception as e:  # every rank must reach the exchange below, or the others would wait for it
        error = e
    if not dist:
        if error is not None:
            raise error
    else:
        gathered: list = [None] * c10d.get_world_size(process_group)
        c10d.all_gather_object(gathered, _message(error), group=process_group)
        _fail_together(f"dcp.load from {path}", {r: m for r, m in enumerate(gathered) if m is not None}, error)
    for p, value in updates:
        if isinstance(value, np.ndarray):
            leaf = _leaf(state_dict, p)
            data = leaf._data
            if type(data) is not np.ndarray:
                import cupy
                data[...] = cupy.asarray(value.astype(data.dtype, copy=False))
            else:
                data[...] = value.astype(data.dtype, copy=False)
            leaf._bump_version()
        else:
            _assign(state_dict, p, value)


def _read_updates(state_dict: Dict[str, Any], path: str, rank: int) -> List[Tuple[Tuple, Any]]:
    """(path, new value) for every leaf of state_dict the checkpoint holds: for a tensor, the array of the part
    this rank needs, built from checked pieces."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
    meta = _read_meta(path)
    by_key: Dict[str, List[dict]] = {}
    for piece in meta["pieces"]:
        by_key.setdefault(piece["key"], []).append(piece)
    files = _Files(path, meta)
    updates: List[Tuple[Tuple, Any]] = []
    for p, leaf in _flatten(state_dict):
        key = _key(p)
        item = ".".join(map(str, p))
        if not isinstance(leaf, Tensor):
            if key in meta["values"]:
                updates.append((p, _decode(meta["values"][key])))
            continue
        info = meta["tensors"].get(key)
        if info is None:
            raise CheckpointException(f"dcp.load: the checkpoint in {path} has no tensor {item}")
        if list(leaf.shape) != info["shape"]:
            raise CheckpointException(f"dcp.load: {item} has shape {info['shape']} in the "
                                      f"checkpoint but {list(leaf.shape)} in the state dict given")
        dt = np.dtype(info["dtype"])
        out = np.empty(tuple(leaf._data.shape), dtype=dt)
        for offs, sizes, at in _boxes(leaf):
            region = out[(Ellipsis,) + tuple(slice(a, a + n) for a, n in zip(at, sizes))]  # a view, also 0-d
            covered = 0
            for piece in by_key.get(key, []):
                inter = _intersect(offs, sizes, piece["offsets"], piece["sizes"])
                if inter is None:
                    continue
                lo, hi = inter
                src = files.piece(piece, item).view(dt).reshape(piece["sizes"])
                src_idx = tuple(slice(l - o, h - o) for l, h, o in zip(lo, hi, piece["offsets"]))
                dst_idx = tuple(slice(l - o, h - o) for l, h, o in zip(lo, hi, offs))
                region[dst_idx] = src[src_idx]
                covered += math.prod(h - l for l, h in zip(lo, hi))
            if covered != math.prod(sizes):
                raise CheckpointException(f"dcp.load: the checkpoint in {path} does not cover all of "
                                          f"{item} (saved pieces hold {covered} of the "
                                          f"{math.prod(sizes)} elements this rank needs at offsets {offs})")
        updates.append((p, out))
    return updates


class _Files:
    """The checkpoint's rank files, mapped once each; hands out a piece's bytes after checking them."""

    def __init__(self, path: str, meta: dict) -> None:
        self.path = path
        self.info: Dict[str, dict] = meta.get("files", {})
        self.maps: Dict[str, Any] = {}

    def file(self, name: str) -> Any:
        """The bytes of rank file ``name``, mapped; its size checked against the metadata."""
        if name not in self.maps:
            fpath = os.path.join(self.path, name)
            try:
                size = os.path.getsize(fpath)
                self.maps[name] = np.memmap(fpath, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
            except FileNotFoundError:
                raise CheckpointException(f"dcp.load: {fpath} is missing from the checkpoint") from None
            want = self.info.get(name, {}).get("nbytes")
            if want is not None and size != want:
                raise CheckpointException(
                    f"dcp.load: {fpath} (written by rank {self.info[name].get('rank', '?')}) has {size} bytes, the "
                    f"metadata says {want}: the file is {'truncated' if size < want else 'corrupt'}")
        return self.maps[name]

    def piece(self, piece: dict, item: str) -> Any:
        """The bytes of one saved piece of ``item``, checked against its recorded size and CRC-32C."""
        fpath = os.path.join(self.path, piece["file"])
        writer = piece.get("rank", "?")
        end = piece["start"] + piece["nbytes"]
        raw = self.file(piece["file"])[piece["start"]:end]
        if raw.size != piece["nbytes"]:
            raise CheckpointException(f"dcp.load: {fpath} (written by rank {writer}) is truncated: item {item} "
                                      f"needs bytes {piece['start']}..{end}")
        if "crc32c" in piece:  # format 1 recorded none
            got = _C._cpu.crc32c(raw)
            if got != piece["crc32c"]:
                raise CheckpointException(
                    f"dcp.load: {fpath} (written by rank {writer}) is corrupt: item {item} (offsets "
                    f"{piece['offsets']}, sizes {piece['sizes']}, bytes {piece['start']}..{end}) has CRC-32C "
                    f"{got:#010x}, the recorded one {piece['crc32c']:#010x}")
        return raw


def _verify(path: str) -> None:
    """Check every file and piece of the checkpoint in ``path`` against its metadata (no state dict needed);
    raise CheckpointException naming the first problem."""
    meta = _read_meta(path)
    files = _Files(path, meta)
    for name in meta.get("files", {}):
        files.file(name)
    for piece in meta["pieces"]:
        files.piece(piece, ".".join(map(str, json.loads(piece["key"]))))


def _leaf(root: Any, path: Tuple) -> Any:
    obj = root
    for k in path:
        obj = obj[k]
    return obj


def _assign(root: Any, path: Tuple, value: Any) -> None:
    obj = root
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value
