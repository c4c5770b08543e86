"""loss_parallel: cross-entropy on logits sharded on the class dim, without ever gathering them.

Inside the context, F.cross_entropy (and log_softmax / nll_loss) on a DTensor whose class dim is sharded on
exactly one mesh dim (the tensor-parallel dim) runs on each rank's slice of the vocabulary: the row maximum and
the sum of exponentials are all-reduced over that mesh dim (MAX, then SUM), and the logit of each target class,
which lives on one rank, is picked there and all-reduced (SUM) — three all-reduces of one value per row. The
gradient of cross-entropy, softmax minus one-hot, is computed on each slice with no communication.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

from ...._tensor import Tensor, _wrap
from ...._ops._common import record
from ... import distributed_c10d as c10d
from .._api import DTensor
from .._dispatch import OpCall, flags, localize, register_loss_parallel, wrap
from .._redistribute import chunk_bounds
from ..placement_types import Partial, Replicate, Shard

__all__ = ["loss_parallel"]


@contextlib.contextmanager
def loss_parallel() -> Iterator[None]:
    """Run cross_entropy (and log_softmax/nll_loss) on class-sharded DTensor logits in parallel; the backward of a
    loss computed inside should run inside too. The target holds class indices (plain tensors are read as
    replicated); weight is replicated; label_smoothing is not supported."""
    previous = flags.loss_parallel
    flags.loss_parallel = True
    try:
        yield
    finally:
        flags.loss_parallel = previous


def _tp_dim(x: DTensor, cls: int) -> int:
    """The one mesh dim that shards the class dim (other mesh dims: Shard of other dims or Replicate)."""
    dims = [m for m, p in enumerate(x._placements) if p.is_shard(cls)]
    if len(dims) != 1:
        raise ValueError(f"loss_parallel() requires exactly one mesh dim to shard tensor dimension {cls}, but got "
                         f"placements {x._placements} with {len(dims)} such mesh dim(s).")
    for m, p in enumerate(x._placements):
        if m != dims[0] and not (type(p) is Shard or p.is_replicate()):
            raise ValueError(f"loss_parallel() expects non-TP mesh dims to be Shard or Replicate, got {p} at dim {m}.")
    return dims[0]


def _target(x: DTensor, target: Any, cls: int, tp: int) -> DTensor:
    """The target as a DTensor laid out like the logits without their class dim."""
    placements = tuple(Replicate() if m == tp or not p.is_shard() else Shard(p.dim - (p.dim > cls))
                       for m, p in enumerate(x._placements))
    if isinstance(target, DTensor):
        if target._placements != placements:
            raise RuntimeError(f"Expected {placements} but got {target._placements}.")
        return target
    if not isinstance(target, Tensor):
        raise TypeError(f"Unsupported type {type(target)}")
    if any(p.is_shard() for p in placements):
        raise ValueError(f"loss_parallel() requires a DTensor (not a plain torch.Tensor) when the derived placements "
                         f"{placements} contain Shard; wrap the target with DTensor.from_local or distribute_tensor.")
    return DTensor.from_local(target, x._mesh, placements, run_check=False)


def _moved(a: Any, cls: int) -> Any:
    """Class dim last (rows x classes view of the logits)."""
    return np.moveaxis(a, cls, -1) if type(a) is np.ndarray else a.__array_namespace__().moveaxis(a, cls, -1)


def _allreduce(a: Any, op: Any, group: Any) -> Any:
    a = np.ascontiguousarray(a) if type(a) is np.ndarray else a.copy()
    c10d.all_reduce(a, op=op, group=group)
    return a


def _lse(xl: Any, group: Any) -> tuple:
    """(row max, log of the sum of exp(x - max)) over the whole class dim (class dim last)."""
    xp = np if type(xl) is np.ndarray else xl.__array_namespace__()
    mx = xl.max(axis=-1, keepdims=True) if xl.shape[-1] else xp.full(xl.shape[:-1] + (1,), -np.inf, xl.dtype)
    mx = _allreduce(mx, c10d.ReduceOp.MAX, group)
    se = _allreduce(xp.exp(xl - mx).sum(axis=-1, keepdims=True), c10d.ReduceOp.SUM, group)
    return mx, xp.log(se)


def _picked(vals: Any, t: Any, lo: int, hi: int, group: Any) -> tuple:
    """vals at each row's target class (which one rank holds), all-reduced; and where this rank holds it."""
    xp = np if type(vals) is np.ndarray else vals.__array_namespace__()
    inside = (t >= lo) & (t < hi)
    idx = xp.clip(t - lo, 0, max(hi - lo - 1, 0))
    mine = xp.take_along_axis(vals, idx[..., None], axis=-1)[..., 0] if hi > lo else xp.zeros(t.shape, vals.dtype)
    return _allreduce(xp.where(inside, mine, 0), c10d.ReduceOp.SUM, group), inside, idx


def _args(call: OpCall, names: tuple, defaults: tuple) -> dict:
    got = dict(zip(names, call.args))
    got.update(call.kwargs)
    return {n: got.get(n, d) for n, d in zip(names, defaults)}


def _nll_parts(call: OpCall, log_probs_fn: Any) -> Any:
    """cross_entropy (log_probs_fn computes log-softmax first) or nll_loss on class-sharded input."""
    a = _args(call, ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                     "label_smoothing"), (None, None, None, None, -100, None, "mean", 0.0))
    x, ignore, reduction = a["input"], int(a["ignore_index"]), a["reduction"]
    if a["size_average"] is not None or a["reduce"] is not None:
        from ...._ops.nn import _legacy_reduction
        reduction = _legacy_reduction(a["size_average"], a["reduce"], reduction)
    if a["label_smoothing"]:
        raise NotImplementedError("loss_parallel(): label_smoothing is not supported")
    if a["target"].dtype.is_floating_point:
        raise NotImplementedError("loss_parallel(): class probabilities as target are not supported, pass indices")
    cls = 1 if x.ndim >= 2 else 0
    tp = _tp_dim(x, cls)
    mesh = x._mesh
    if reduction == "mean" and mesh.ndim > 1:
        raise NotImplementedError(f"loss_parallel() with reduction='mean' is only supported on one-dimensional "
                                  f"DeviceMesh; got mesh with ndim={mesh.ndim}. Use reduction='sum' or 'none' "
                                  "instead.")
    target = _target(x, a["target"], cls, tp)
    group = mesh.get_group(tp)
    lo, hi = chunk_bounds(x._gshape[cls], mesh.size(tp), mesh.get_coordinate()[tp])
    shape = tuple(s for i, s in enumerate(x._gshape) if i != cls)
    if reduction == "none":
        out_pl = target._placements
        out_shape = shape
    else:
        out_pl = tuple(Replicate() if m == tp else Partial() if p.is_shard() else p
                       for m, p in enumerate(x._placements))
        out_shape = ()
    xl = localize(x, x._placements, [out_pl])
    t = target._data
    xp = np if type(t) is np.ndarray else t.__array_namespace__()
    valid = t != ignore
    tc = xp.where(valid, t, 0)
    weight = a["weight"]
    if weight is not None:
        w = (weight.full_tensor() if isinstance(weight, DTensor) else weight)._data
        wt = xp.where(valid, w[tc], 0).astype(xl._data.dtype)
    else:
        wt = valid.astype(xl._data.dtype)
    data = _moved(xl._data, cls)
    if log_probs_fn:
        mx, lse = _lse(data, group)
        shifted = data - mx
        logp_picked, inside, idx = _picked(shifted, tc, lo, hi, group)
        per_row = (lse[..., 0] - logp_picked) * wt
    else:
        picked, inside, idx = _picked(data, tc, lo, hi, group)
        per_row = -picked * wt
    total = wt.sum()
    if reduction == "none":
        result = per_row
    elif reduction == "sum":
        result = per_row.sum()
    else:
        result = per_row.sum() / total
    out = _wrap(xp.asarray(result, dtype=xl._data.dtype))
    if xl._requires_grad:
        def loss_parallel_backward(g):
            gd = g._data
            coef = wt / total if reduction == "mean" else wt
            coef = coef * (gd if reduction == "none" else gd.reshape(()))
            grad = xp.zeros(data.shape, dtype=data.dtype)
            if log_probs_fn:
                grad = xp.exp(shifted - lse) * coef[..., None]
            onehot = xp.zeros(data.shape, dtype=data.dtype)
            xp.put_along_axis(onehot, idx[..., None], xp.where(inside, coef, 0)[..., None], axis=-1)
            grad = grad - onehot
            return _wrap(xp.ascontiguousarray(np.moveaxis(grad, -1, cls) if xp is np else xp.moveaxis(grad, -1, cls)))
        record("NllLossBackward0", loss_parallel_backward, out, (xl,))
    return wrap(out, mesh, out_pl, out_shape)


@register_loss_parallel("cross_entropy")
def cross_entropy_rule(call: OpCall) -> Any:
    return _nll_parts(call, log_probs_fn=True)


@register_loss_parallel("nll_loss")
def nll_loss_rule(call: OpCall) -> Any:
    return _nll_parts(call, log_probs_fn=False)


@register_loss_parallel("log_softmax")
def log_softmax_rule(call: OpCall) -> Any:
    """log_softmax along the sharded class dim: the output stays sharded (two all-reduces of one value per row);
    backward all-reduces the per-row sum of the incoming gradient."""
    x = call.args[0]
    dim = call.args[1] if len(call.args) > 1 else call.kwargs.get("dim")
    cls = dim + x.ndim if dim is not None and dim < 0 else dim
    if cls is None or not any(p.is_shard(cls) for p in x._placements):
        from .._dispatch import _RULES
        return _RULES["log_softmax"](call)
    tp = _tp_dim(x, cls)
    group = x._mesh.get_group(tp)
    xl = localize(x, x._placements, [x._placements])
    data = _moved(xl._data, cls)
    mx, lse = _lse(data, group)
    logp = data - mx - lse
    out = _wrap(np.ascontiguousarray(np.moveaxis(logp, -1, cls)) if type(logp) is np.ndarray else
                logp.__array_namespace__().moveaxis(logp, -1, cls).copy())
    if xl._requires_grad:
        def log_softmax_backward(g):
            gd = _moved(g._data, cls)
            s = _allreduce(gd.sum(axis=-1, keepdims=True), c10d.ReduceOp.SUM, group)
            gx = gd - np.exp(logp) * s if type(gd) is np.ndarray else gd - gd.__array_namespace__().exp(logp) * s
            return _wrap(np.ascontiguousarray(np.moveaxis(gx, -1, cls)) if type(gx) is np.ndarray else
                         gx.__array_namespace__().moveaxis(gx, -1, cls).copy())
        record("LogSoftmaxBackward0", log_softmax_backward, out, (xl,))
    return wrap(out, x._mesh, x._placements, x._gshape)
