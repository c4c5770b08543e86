"""Sharding rules of reductions, softmax, layer/RMS norm and the losses outside loss_parallel.

A reduction over a sharded dim leaves a pending reduction (sum: Partial(sum), amax: Partial(max), ...) that the
next op or full_tensor() resolves; a mean is a sum over the global count. Reductions that cannot be split that
way (indices, variance, logsumexp) gather the reduced dims first. Softmax and the norms normalise along some
dims: those must be whole on every rank, the others may stay sharded (sequence parallelism keeps the sequence
dim sharded through layer_norm and rms_norm); their replicated weights get partial gradients (see _dispatch).
"""
from __future__ import annotations

import math
from typing import Any

from .._api import DTensor
from .._dispatch import OpCall, register, run
from ..placement_types import Partial, Shard
from .utils import R, norm_dim, norm_dims, unshard

# Reductions whose per-rank results combine into the result (and whose local gradient is then right too: a
# sum's gradient is the same everywhere; all/any have none). max and prod are not among them: the local
# backward of a local max or product would send gradient to the wrong elements.
_PENDING = {"sum": "sum", "nansum": "sum", "all": "min", "any": "max"}


def _reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    return tuple(1 if i in dims else s for i, s in enumerate(shape) if keepdim or i not in dims)


def _after(dims: tuple, keepdim: bool):
    """Where a kept input dim lands in the output of a reduction over `dims`."""
    return (lambda d: d) if keepdim else (lambda d: d - sum(1 for r in dims if r < d))


def _arg(call: OpCall, pos: int, name: str, default: Any) -> Any:
    return call.args[pos] if len(call.args) > pos else call.kwargs.get(name, default)


def _along(x: DTensor, dims: tuple, keepdim: bool) -> tuple:
    """(targets, output placements) of an op that needs `dims` whole: those (and pending sums and strided
    shards) are gathered, other shards move to where their dim lands in the output."""
    targets = tuple(R if (p.is_shard() and (p.dim in dims or type(p) is not Shard)) or p.is_partial() else p
                    for p in x._placements)
    after = _after(dims, keepdim)
    return targets, tuple(Shard(after(p.dim)) if p.is_shard() else p for p in targets)


@register("sum", "nansum", "all", "any")
def reduce_rule(call: OpCall) -> Any:
    x = call.args[0]
    dim = _arg(call, 1, "dim", None)
    keepdim = bool(_arg(call, 2, "keepdim", False))
    dims = norm_dims(dim, x.ndim)
    op = _PENDING[call.name]
    targets, out = [], []
    for p in x._placements:
        if p.is_shard() and p.dim in dims:
            targets.append(p)
            out.append(Partial(op))
        elif p.is_shard():
            new = _after(dims, keepdim)(p.dim)
            targets.append(p if type(p) is Shard else R)
            out.append(Shard(new) if type(p) is Shard else R)
        elif p.is_partial() and (p.reduce_op == op or (op == "sum" and p.is_linear)):
            targets.append(p)
            out.append(p)
        elif p.is_partial():
            targets.append(R)
            out.append(R)
        else:
            targets.append(p)
            out.append(p)
    return run(call, [tuple(targets)], (tuple(out), _reduced_shape(x._gshape, dims, keepdim)))


@register("mean")
def mean_rule(call: OpCall) -> Any:
    """A sum over the global count, so that uneven shards average correctly."""
    x = call.args[0]
    dim = _arg(call, 1, "dim", None)
    keepdim = bool(_arg(call, 2, "keepdim", False))
    dtype = call.kwargs.get("dtype")
    dims = norm_dims(dim, x.ndim)
    if not any(p.is_shard() and p.dim in dims or p.is_partial() for p in x._placements):
        targets, out = _along(x, dims, keepdim)
        return run(call, [targets], (out, _reduced_shape(x._gshape, dims, keepdim)))
    if dtype is None and not x.dtype.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {str(x.dtype).replace('tinytorch.', '').capitalize()}")
    count = math.prod(x._gshape[d] for d in dims)
    return x.sum(dim=dims, keepdim=keepdim, dtype=dtype) / count


_KEEPDIM_AT = {"var": 3, "std": 3, "var_mean": 3, "std_mean": 3, "logsumexp": 2, "argmax": 2, "argmin": 2,
               "amax": 2, "amin": 2, "max": 2, "min": 2, "prod": 2}


@register("var", "std", "var_mean", "std_mean", "logsumexp", "argmax", "argmin", "count_nonzero", "cumsum",
          "cumprod", "sort", "argsort", "topk", "amax", "amin", "max", "min", "prod")
def gather_reduced_rule(call: OpCall) -> Any:
    """Reductions and scans that need the whole of the dims they run along."""
    x, name = call.args[0], call.name
    if name in ("max", "min") and isinstance(_arg(call, 1, "dim", None), DTensor):
        return (x.maximum if name == "max" else x.minimum)(_arg(call, 1, "dim", None))  # max(other): elementwise
    if name in ("cumsum", "cumprod", "sort", "argsort", "topk"):
        dims = (norm_dim(_arg(call, 2 if name == "topk" else 1, "dim", -1), x.ndim),)
        keepdim = True
    else:
        dim = _arg(call, 1, "dim", None)
        dims = norm_dims(None if isinstance(dim, bool) or dim == () else dim, x.ndim)
        keepdim = name in _KEEPDIM_AT and bool(_arg(call, _KEEPDIM_AT[name], "keepdim", False))
    targets, out = _along(x, dims, keepdim)
    if name in ("cumsum", "cumprod", "sort", "argsort"):
        shape = x._gshape
    elif name == "topk":
        k = int(_arg(call, 1, "k", None))
        shape = tuple(k if i == dims[0] else s for i, s in enumerate(x._gshape))
    else:
        shape = _reduced_shape(x._gshape, dims, keepdim)
    if name in ("var_mean", "std_mean", "sort", "topk") or name in ("max", "min") and _arg(call, 1, "dim", None) \
            is not None:
        return run(call, [targets], [(out, shape), (out, shape)])
    return run(call, [targets], (out, shape))


@register("norm")
def norm_rule(call: OpCall) -> Any:
    """p-norm: a pending sum of |x|^p (or max of |x|) reduced, then the root."""
    x = call.args[0]
    p = _arg(call, 1, "p", "fro")
    dim = _arg(call, 2, "dim", None)
    keepdim = bool(_arg(call, 3, "keepdim", False))
    order = 2.0 if p in ("fro", None) else float(p)
    if order in (0.0,) or order < 0:
        raise call.unsupported(f"p={p}")
    dims = norm_dims(dim, x.ndim)
    if not any(q.is_shard() and q.dim in dims or q.is_partial() for q in x._placements):
        targets, out = _along(x, dims, keepdim)
        return run(call, [targets], (out, _reduced_shape(x._gshape, dims, keepdim)))
    if any(q.is_partial() for q in x._placements):
        x = x.redistribute(x._mesh, unshard(x._placements, ()))
    if math.isinf(order):
        pending = x.abs().amax(dim=dims, keepdim=keepdim)
        return pending.redistribute(x._mesh, unshard(pending._placements, ()))
    pending = (x.abs() ** order).sum(dim=dims, keepdim=keepdim)
    return pending.redistribute(x._mesh, unshard(pending._placements, ())) ** (1.0 / order)


@register("softmax", "log_softmax", "softmin")
def softmax_rule(call: OpCall) -> Any:
    x = call.args[0]
    dim = _arg(call, 1, "dim", None)
    if dim is None:
        raise call.unsupported("softmax without dim")
    d = norm_dim(dim, x.ndim)
    targets = unshard(x._placements, (d,))
    return run(call, [targets], (targets, x._gshape))


@register("layer_norm", "rms_norm")
def norm_layer_rule(call: OpCall) -> Any:
    """The normalized (trailing) dims whole, earlier dims as they are; weight and bias replicated."""
    x = call.args[0]
    ns = _arg(call, 1, "normalized_shape", None)
    k = 1 if isinstance(ns, int) else len(tuple(ns))
    dims = tuple(range(x.ndim - k, x.ndim))
    xt = tuple(R if q.is_shard() and type(q) is not Shard else q for q in unshard(x._placements, dims))
    targets = [xt] + [tuple(R for _ in x._placements)] * (len(call.dtensors) - 1)
    if call.dtensors[0] is not x:
        raise call.unsupported("the input must be the first DTensor")
    return run(call, targets, (xt, x._gshape))


@register("cross_entropy", "nll_loss")
def loss_rule(call: OpCall) -> Any:
    """Outside loss_parallel: the class dim whole; per-sample losses keep the batch layout, sums stay pending,
    and a mean is taken over the replicated batch."""
    x = call.args[0]
    reduction = _arg(call, 6, "reduction", "mean")
    cls = 1 if x.ndim >= 2 else 0
    if reduction == "mean" or any(not (q.is_shard() or q.is_replicate()) for q in x._placements):
        targets = [tuple(R for _ in d._placements) for d in call.dtensors]
        return run(call, targets, (targets[0], () if reduction != "none" else tuple(
            s for i, s in enumerate(x._gshape) if i != cls)))
    xt = unshard(x._placements, (cls,))
    tt = tuple(Shard(q.dim - (q.dim > cls)) if q.is_shard() else q for q in xt)
    targets = [xt] + [tt if d is call.args[1] else tuple(R for _ in x._placements) for d in call.dtensors[1:]]
    if reduction == "none":
        shape = tuple(s for i, s in enumerate(x._gshape) if i != cls)
        return run(call, targets, (tt, shape))
    return run(call, targets, (tuple(Partial() if q.is_shard() else q for q in tt), ()))
