"""Helpers shared by the sharding rules: dims, broadcasting, choosing the cheapest layout per mesh dim."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .._redistribute import local_shape  # noqa: F401  (re-exported for the rule files)
from ..placement_types import Partial, Placement, Replicate

R = Replicate()


def norm_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def norm_dims(dims: Any, ndim: int) -> tuple:
    """dims (None: all, an int, or a sequence) as sorted non-negative ints."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, (int, np.integer)):
        dims = (int(dims),)
    return tuple(sorted({norm_dim(int(d), ndim) for d in dims}))


def broadcast_shape(*shapes: Sequence[int]) -> tuple:
    try:
        return tuple(int(s) for s in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError as e:
        raise RuntimeError(f"shapes {[list(s) for s in shapes]} cannot be broadcast together") from e


def unshard(placements: Sequence[Placement], dims: Sequence[int]) -> tuple:
    """placements with Shard on any of `dims` (and Partial) replaced by Replicate."""
    return tuple(R if (p.is_shard() and p.dim in dims) or p.is_partial() else p for p in placements)


def comm_cost(src: Placement, dst: Placement, numel: int, n: int) -> float:
    """Elements moved per rank to turn src into dst on one mesh dim of size n (alpha-beta, latency ignored)."""
    if src == dst or n == 1:
        return 0.0
    if src.is_replicate():
        return 0.0 if dst.is_shard() else numel * 1e-3  # a local cut / share
    if src.is_partial():
        return numel * (n - 1) / n * (1.0 if dst.is_shard() else 2.0)  # reduce-scatter / all-reduce
    if dst.is_shard():
        return numel * (n - 1) / n / n  # all-to-all
    return numel * (n - 1) / n  # all-gather


def pick(candidates: Sequence[tuple], current: Sequence[Placement], numels: Sequence[int], n: int) -> tuple:
    """The cheapest candidate (inputs' placements, output placement...) for one mesh dim, ties to the first."""
    best, best_cost = None, math.inf
    for cand in candidates:
        cost = sum(comm_cost(c, t, numel, n) for c, t, numel in zip(current, cand[0], numels))
        if cost < best_cost:
            best, best_cost = cand, cost
    return best


def is_partial_linear(p: Placement) -> bool:
    return isinstance(p, Partial) and p.is_linear
