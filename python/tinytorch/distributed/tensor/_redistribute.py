"""redistribute: move a DTensor's local piece from one list of placements to another with collectives.

One step per mesh dimension (PyTorch's table): Shard -> Replicate all-gathers, Partial -> Replicate all-reduces,
Partial -> Shard reduce-scatters, Shard(i) -> Shard(j) exchanges blocks all-to-all, Replicate -> Shard cuts the
local piece, Replicate -> Partial keeps a share of the value. Uneven torch.chunk pieces are padded to
ceil(size/n) for the collective and unpadded after. On an n-d mesh, shards that sit inside a mesh dimension that
changes the same tensor dimension are gathered first (inner to outer), then every mesh dimension is moved to its
target (outer to inner), so nested shards always read as "mesh dim 0 cuts first".

The autograd node runs the dual redistribution in backward: the gradient goes back to the source placements,
with Partial read as Replicate (the gradient of a pending sum is the same on every rank).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import distributed_c10d as c10d
from ..device_mesh import DeviceMesh
from .placement_types import Partial, Placement, Replicate, Shard, _StridedShard

_REDUCE = {"sum": c10d.ReduceOp.SUM, "avg": c10d.ReduceOp.AVG, "max": c10d.ReduceOp.MAX,
           "min": c10d.ReduceOp.MIN, "product": c10d.ReduceOp.PRODUCT}
_COMM_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "complex64", "complex128")


def chunk_bounds(size: int, n: int, i: int) -> tuple[int, int]:
    """[start, stop) of piece i when `size` rows are cut as torch.chunk cuts them into n (later pieces may be empty)."""
    step = -(-size // n) if size else 0
    start = min(i * step, size)
    return start, min(start + step, size)


def _xp(a: Any):
    return np if type(a) is np.ndarray else a.__array_namespace__()


def _contiguous_copy(a: Any) -> Any:
    return np.array(a, order="C", copy=True) if type(a) is np.ndarray else a.copy()


def _take(a: Any, dim: int, start: int, stop: int) -> Any:
    index = [slice(None)] * a.ndim
    index[dim] = slice(start, stop)
    return a[tuple(index)]


def _comm_dtype(a: Any) -> Any:
    """The array in a dtype the backends move (bool and small ints travel as int32)."""
    return a if np.dtype(a.dtype).name in _COMM_DTYPES else a.astype(np.int32)


def normalize_for_grad(placements: Sequence[Placement]) -> tuple:
    """The placements of a gradient: Partial becomes Replicate (every rank's term has the whole gradient)."""
    return tuple(Replicate() if p.is_partial() else p for p in placements)


# ------------------------------------------------------------------ one mesh dimension, on arrays


def shard_piece(full: Any, p: Shard, n: int, i: int) -> Any:
    """Rank i's piece of `full` under Shard/_StridedShard p over n ranks (a contiguous copy)."""
    size = full.shape[p.dim]
    if isinstance(p, _StridedShard):
        sf = p.split_factor
        if size % (sf * n):
            raise ValueError(f"_StridedShard(dim={p.dim}, sf={sf}): dim {p.dim} of size {size} is not divisible by "
                             f"split_factor * mesh size = {sf * n}")
        block, piece = size // sf, size // (sf * n)
        parts = [_take(full, p.dim, b * block + i * piece, b * block + (i + 1) * piece) for b in range(sf)]
        return _xp(full).ascontiguousarray(_xp(full).concatenate(parts, axis=p.dim))
    a, b = chunk_bounds(size, n, i)
    return _contiguous_copy(_take(full, p.dim, a, b))


def all_gather_piece(data: Any, p: Shard, full: int, n: int, group: Any) -> Any:
    """The whole of dim p.dim (`full` long) from every rank's piece (uneven pieces padded for the collective)."""
    xp = _xp(data)
    dim = p.dim
    orig = data.dtype
    data = _comm_dtype(data)
    if isinstance(p, _StridedShard):
        step = full // n
    else:
        step = -(-full // n) if full else 0
    moved = xp.moveaxis(data, dim, 0)
    rest = moved.shape[1:]
    if moved.shape[0] == step:
        padded = xp.ascontiguousarray(moved)
    else:
        padded = xp.zeros((step,) + rest, dtype=data.dtype)
        padded[:moved.shape[0]] = moved
    out = xp.empty((n * step,) + rest, dtype=data.dtype)
    c10d.all_gather_into_tensor(out, padded, group=group)
    if isinstance(p, _StridedShard):
        sf = p.split_factor
        sub = step // sf
        # out holds n pieces, each the concatenation of its sf sub-blocks: block b is sub-block b of every piece
        out = out.reshape((n, sf, sub) + rest)
        out = xp.swapaxes(out, 0, 1).reshape((n * step,) + rest)
    result = xp.ascontiguousarray(xp.moveaxis(out[:full], 0, dim))
    return result if result.dtype == orig else result.astype(orig)


def reduce_scatter_piece(data: Any, dim: int, n: int, i: int, op: str, group: Any) -> Any:
    """Reduce the partial terms (full along dim) and keep rank i's torch.chunk piece of dim."""
    xp = _xp(data)
    full = data.shape[dim]
    step = -(-full // n) if full else 0
    moved = xp.moveaxis(data, dim, 0)
    rest = moved.shape[1:]
    if full == n * step:
        buf = xp.ascontiguousarray(moved)
    else:
        buf = xp.zeros((n * step,) + rest, dtype=data.dtype)
        buf[:full] = moved
    out = xp.empty((step,) + rest, dtype=data.dtype)
    c10d.reduce_scatter_tensor(out, buf, op=_REDUCE[op], group=group)
    a, b = chunk_bounds(full, n, i)
    return xp.ascontiguousarray(xp.moveaxis(out[:b - a], 0, dim))


def all_reduce_piece(data: Any, op: str, group: Any) -> Any:
    out = _contiguous_copy(_comm_dtype(data))
    c10d.all_reduce(out, op=_REDUCE[op], group=group)
    return out if out.dtype == data.dtype else out.astype(data.dtype)


def all_to_all_piece(data: Any, src: int, dst: int, full_src: int, full_dst: int, n: int, i: int,
                     group: Any) -> Any:
    """Shard(src) -> Shard(dst) on one mesh dim: send block p of dim dst to rank p, receive every rank's src rows."""
    xp = _xp(data)
    step_s = -(-full_src // n) if full_src else 0
    step_d = -(-full_dst // n) if full_dst else 0
    # put (dst, src) first and pad both to whole blocks
    moved = xp.moveaxis(data, (dst, src), (0, 1))
    rest = moved.shape[2:]
    buf = xp.zeros((n * step_d, step_s) + rest, dtype=data.dtype)
    buf[:moved.shape[0], :moved.shape[1]] = moved
    buf = xp.ascontiguousarray(buf.reshape((n, step_d, step_s) + rest))
    out = xp.empty_like(buf)
    c10d.all_to_all_single(out, buf, group=group)
    # out[p] is rank p's src rows of this rank's dst block: lay the src rows out in rank order
    out = xp.moveaxis(out, 0, 1).reshape((step_d, n * step_s) + rest)
    a, b = chunk_bounds(full_dst, n, i)
    out = out[:b - a, :full_src]
    return xp.ascontiguousarray(xp.moveaxis(out, (0, 1), (dst, src)))


def partition_value(data: Any, p: Partial, n: int, i: int) -> Any:
    """Replicate -> Partial: each rank's term, so that reducing the terms gives the value back."""
    if p.reduce_op == "sum":
        share = data / n if data.dtype.kind in "fcV" else (data if i == 0 else data * 0)
        return _xp(data).asarray(share, dtype=data.dtype)  # 0-d arithmetic gives NumPy scalars
    if p.reduce_op == "product":
        raise ValueError("Replicate -> Partial(product) is not supported")
    return _contiguous_copy(data)


def shard_to_partial(data: Any, p: Shard, full: int, n: int, i: int) -> Any:
    """Shard -> Partial(sum) without communication: the piece at its offset in zeros."""
    xp = _xp(data)
    shape = list(data.shape)
    shape[p.dim] = full
    out = xp.zeros(tuple(shape), dtype=data.dtype)
    a, b = chunk_bounds(full, n, i)
    index = [slice(None)] * data.ndim
    index[p.dim] = slice(a, b)
    out[tuple(index)] = data
    return out


# ------------------------------------------------------------------ the n-d plan


def level_size(gshape: Sequence[int], placements: Sequence[Placement], mesh: DeviceMesh, coord: Sequence[int],
               mesh_dim: int, dim: int) -> int:
    """Length of tensor dim `dim` as mesh dim `mesh_dim` sees it: after the outer mesh dims' shards of it."""
    size = gshape[dim]
    for e in range(mesh_dim):
        q = placements[e]
        if q.is_shard(dim):
            n = mesh.size(e)
            if isinstance(q, _StridedShard):
                size //= n
            else:
                a, b = chunk_bounds(size, n, coord[e])
                size = b - a
    return size


def local_shape(gshape: Sequence[int], mesh: DeviceMesh, placements: Sequence[Placement]) -> tuple:
    """The shape of this rank's piece of a tensor of global shape gshape."""
    coord = mesh.get_coordinate()
    shape = list(gshape)
    for d, p in enumerate(placements):
        if p.is_shard():
            n = mesh.size(d)
            if isinstance(p, _StridedShard):
                shape[p.dim] //= n
            else:
                a, b = chunk_bounds(shape[p.dim], n, coord[d])
                shape[p.dim] = b - a
    return tuple(shape)


def _blocked(cur: list, dst: Sequence[Placement], d: int) -> bool:
    """Whether the shard on mesh dim d must be gathered because an outer mesh dim changes the same tensor dim."""
    k = cur[d].dim
    for e in range(d):
        if cur[e] != dst[e] and (cur[e].is_shard(k) or dst[e].is_shard(k)):
            return True
    return False


def _alone(cur: list, dst: Sequence[Placement], d: int, dims: tuple) -> bool:
    """No mesh dim but d shards any of `dims`, before or after (so a plain all-to-all keeps the nesting right)."""
    for e in range(len(cur)):
        if e != d and any(cur[e].is_shard(k) or dst[e].is_shard(k) for k in dims):
            return False
    return True


def redistribute_local(data: Any, mesh: DeviceMesh, src: Sequence[Placement], dst: Sequence[Placement],
                       gshape: Sequence[int]) -> Any:
    """This rank's piece of a global tensor (shape gshape) laid out as `src`, re-laid out as `dst`."""
    cur = list(src)
    dst = tuple(dst)
    if tuple(cur) == dst:
        return data
    coord = mesh.get_coordinate()
    nd = mesh.ndim
    # phase 1, inner to outer: gather the shards that change (unless a direct step exists) or that sit inside a
    # mesh dim that changes the same tensor dim
    for d in reversed(range(nd)):
        p, q = cur[d], dst[d]
        if not p.is_shard():
            continue
        blocked = _blocked(cur, dst, d)
        if p == q and not blocked:
            continue
        if not blocked and type(p) is Shard:
            if type(q) is Shard and _alone(cur, dst, d, (p.dim, q.dim)):
                continue  # all-to-all in phase 2
            if isinstance(q, Partial) and q.reduce_op == "sum":
                continue  # zero-fill in phase 2
        full = level_size(gshape, cur, mesh, coord, d, p.dim)
        data = all_gather_piece(data, p, full, mesh.size(d), mesh.get_group(d))
        cur[d] = Replicate()
    # phase 2, outer to inner: move every mesh dim to its target
    for d in range(nd):
        p, q = cur[d], dst[d]
        if p == q:
            continue
        n, i, g = mesh.size(d), coord[d], (mesh.get_group(d) if mesh.size(d) > 1 else None)
        if n == 1:
            cur[d] = q
            continue
        if p.is_partial():
            if q.is_shard() and type(q) is Shard:
                data = reduce_scatter_piece(data, q.dim, n, i, p.reduce_op, g)
                cur[d] = q
                continue
            data = all_reduce_piece(data, p.reduce_op, g)
            p = cur[d] = Replicate()
            if p == q:
                continue
        if p.is_shard():
            full_p = level_size(gshape, cur, mesh, coord, d, p.dim)
            if q.is_shard():
                full_q = level_size(gshape, cur, mesh, coord, d, q.dim)
                data = all_to_all_piece(data, p.dim, q.dim, full_p, full_q, n, i, g)
            else:
                data = shard_to_partial(data, p, full_p, n, i)
            cur[d] = q
            continue
        # p is Replicate
        if q.is_shard():
            data = shard_piece(data, q, n, i)
        elif q.is_partial():
            data = partition_value(data, q, n, i)
        cur[d] = q
    return data
