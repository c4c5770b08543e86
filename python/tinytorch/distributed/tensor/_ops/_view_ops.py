"""Sharding rules of view ops: reshape/view/flatten/unflatten/squeeze/unsqueeze, dim permutations, expand.

A reshape pairs groups of input dims with groups of output dims of equal product. A shard on a dim that maps
one-to-one moves with it; a shard on the first dim of a group survives (on the group's first output dim) when
that dim and the group's first output dim divide evenly by the ranks sharding it, because each rank's piece is
then one contiguous block of whole output rows. Any other shard must be gathered first: reshape does it, view
raises (PyTorch's strict view), telling the caller to redistribute.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...._ops.shape import _infer, _shape_arg
from ...._tensor import Tensor
from .._api import DTensor
from .._dispatch import OpCall, register, run
from ..placement_types import Shard
from .utils import R, local_shape, norm_dim


def view_groups(in_shape: tuple, out_shape: tuple) -> list:
    """[(input dims, output dims)] of equal products, in order; size-1 dims stand alone."""
    groups, i, j = [], 0, 0
    nin, nout = len(in_shape), len(out_shape)
    while i < nin or j < nout:
        if i < nin and in_shape[i] == 1 and (j >= nout or out_shape[j] != 1):
            groups.append(([i], []))
            i += 1
            continue
        if j < nout and out_shape[j] == 1 and (i >= nin or in_shape[i] != 1):
            groups.append(([], [j]))
            j += 1
            continue
        ins, outs = [], []
        pi = pj = 1
        if i < nin:
            ins.append(i)
            pi = in_shape[i]
            i += 1
        if j < nout:
            outs.append(j)
            pj = out_shape[j]
            j += 1
        while pi != pj:
            if pi < pj and i < nin:
                ins.append(i)
                pi *= in_shape[i]
                i += 1
            elif j < nout:
                outs.append(j)
                pj *= out_shape[j]
                j += 1
            else:
                break
        groups.append((ins, outs))
    return groups


def reshape_placements(x: DTensor, out_shape: tuple) -> tuple:
    """(input targets, output placements, reason a shard could not stay) for x reshaped to out_shape."""
    in_shape, mesh = x._gshape, x._mesh
    groups = view_groups(in_shape, out_shape)
    where = {k: g for g in groups for k in g[0]}
    targets, out, why = [], [], ""
    for m, p in enumerate(x._placements):
        if not p.is_shard():
            targets.append(p)
            out.append(p)
            continue
        k = p.dim
        ins, outs = where[k]
        ways = math.prod(mesh.size(e) for e, q in enumerate(x._placements) if q.is_shard(k))
        keep = None
        if type(p) is Shard and outs:
            if ins == [k] and len(outs) == 1:
                keep = outs[0]
            elif ins[0] == k and in_shape[k] % ways == 0 and out_shape[outs[0]] % ways == 0:
                keep = outs[0]
        if keep is None:
            why = why or (f"dim {k} of size {in_shape[k]} is sharded over {ways} ranks and cannot stay sharded in "
                          f"shape {tuple(out_shape)}")
            targets.append(R)
            out.append(R)
        else:
            targets.append(p)
            out.append(Shard(keep))
    return tuple(targets), tuple(out), why


def _reshaped(call: OpCall, x: DTensor, out_shape: tuple, strict: bool) -> DTensor:
    targets, out, why = reshape_placements(x, out_shape)
    if strict and targets != x._placements:
        raise RuntimeError(f"{call.name}: cannot view the DTensor of shape {tuple(x._gshape)} with placements "
                           f"{x._placements} as {tuple(out_shape)} without redistributing ({why}); redistribute the "
                           "input first, call .full_tensor(), or use reshape()")
    lshape = local_shape(out_shape, x._mesh, out)
    op = Tensor.view if strict else Tensor.reshape
    return run(call, [targets] + [None] * (len(call.dtensors) - 1), (out, out_shape),
               fn=lambda a: op(a, lshape), args=(x,), kwargs={})


@register("view", "reshape", "flatten", "unflatten", "ravel", "squeeze", "unsqueeze")
def view_rule(call: OpCall) -> Any:
    x, args, kw, name = call.args[0], call.args[1:], call.kwargs, call.name
    shape = x._gshape
    numel = math.prod(shape)
    if name == "view":
        if len(args) == 1 and not isinstance(args[0], (tuple, list, int)) and not hasattr(args[0], "__len__"):
            raise call.unsupported("a view as another dtype")
        out = _infer(_shape_arg(args), numel, shape)
    elif name == "reshape":
        out = _infer(_shape_arg(args if "shape" not in kw else (kw["shape"],)), numel, shape)
    elif name == "ravel":
        out = (numel,)
    elif name == "flatten":
        nd = len(shape)
        if nd == 0:
            out = (1,)
        else:
            s = norm_dim(args[0] if args else kw.get("start_dim", 0), nd)
            e = norm_dim(args[1] if len(args) > 1 else kw.get("end_dim", -1), nd)
            if s > e:
                raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
            out = shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:]
    elif name == "unflatten":
        d = norm_dim(args[0] if args else kw["dim"], len(shape))
        sizes = tuple(args[1] if len(args) > 1 else kw["sizes"])
        out = _infer(shape[:d] + sizes + shape[d + 1:], numel, shape)
    elif name == "unsqueeze":
        d = norm_dim(args[0] if args else kw["dim"], len(shape) + 1)
        out = shape[:d] + (1,) + shape[d:]
    else:  # squeeze
        dim = args[0] if args else kw.get("dim")
        if dim is None:
            drop = {i for i, s in enumerate(shape) if s == 1}
        else:
            dims = (dim,) if isinstance(dim, int) else tuple(dim)
            drop = {norm_dim(d, len(shape)) for d in dims if shape[norm_dim(d, len(shape))] == 1}
        out = tuple(s for i, s in enumerate(shape) if i not in drop)
    return _reshaped(call, x, tuple(int(s) for s in out), strict=name in ("view", "squeeze", "unsqueeze"))


def _permutation(name: str, nd: int, args: tuple, kw: dict) -> list:
    """perm with output dim i = input dim perm[i]."""
    perm = list(range(nd))
    if name in ("transpose", "swapaxes", "swapdims"):
        a = norm_dim(args[0] if args else kw.get("dim0", kw.get("axis0")), nd)
        b = norm_dim(args[1] if len(args) > 1 else kw.get("dim1", kw.get("axis1")), nd)
        perm[a], perm[b] = perm[b], perm[a]
    elif name == "t":
        perm = perm[::-1] if nd == 2 else perm
    elif name == "permute":
        dims = _shape_arg(args if "dims" not in kw else (kw["dims"],))
        perm = [norm_dim(d, nd) for d in dims]
    else:  # movedim / moveaxis
        src = args[0] if args else kw["source"]
        dst = args[1] if len(args) > 1 else kw["destination"]
        src = [src] if isinstance(src, int) else list(src)
        dst = [dst] if isinstance(dst, int) else list(dst)
        perm = list(np.moveaxis(np.arange(nd), [norm_dim(s, nd) for s in src], [norm_dim(d, nd) for d in dst]))
    return [int(p) for p in perm]


@register("view_as_complex", "view_as_real")
def complex_view_rule(call: OpCall) -> Any:
    """view_as_complex drops the last dim (the (real, imaginary) pairs: a shard on it is gathered first),
    view_as_real adds one; shards on the other dims stay."""
    x = call.args[0]
    to_complex = call.name == "view_as_complex"
    last = x.ndim - 1
    targets = tuple(R if p.is_shard() and (type(p) is not Shard or to_complex and p.dim == last) else p
                    for p in x._placements)
    return run(call, [targets], (targets, x._gshape[:-1] if to_complex else x._gshape + (2,)))


@register("transpose", "swapaxes", "swapdims", "t", "permute", "movedim", "moveaxis")
def permute_rule(call: OpCall) -> Any:
    x = call.args[0]
    perm = _permutation(call.name, x.ndim, call.args[1:], call.kwargs)
    targets = tuple(R if p.is_shard() and type(p) is not Shard else p for p in x._placements)
    out = tuple(Shard(perm.index(p.dim)) if p.is_shard() else p for p in targets)
    return run(call, [targets], (out, tuple(x._gshape[i] for i in perm)))


@register("expand", "broadcast_to")
def expand_rule(call: OpCall) -> Any:
    x = call.args[0]
    sizes = _shape_arg(call.args[1:] if "size" not in call.kwargs else (call.kwargs["size"],)) \
        if call.name == "expand" else tuple(call.args[1] if len(call.args) > 1 else call.kwargs["size"])
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({x.ndim})")
    target = tuple(x._gshape[i - lead] if s == -1 else int(s) for i, s in enumerate(sizes))
    targets, out = [], []
    for p in x._placements:
        if p.is_shard() and (type(p) is not Shard or x._gshape[p.dim] != target[p.dim + lead]):
            targets.append(R)  # a broadcast (size-1) dim cannot stay sharded
            out.append(R)
        elif p.is_shard():
            targets.append(p)
            out.append(Shard(p.dim + lead))
        else:
            targets.append(p)
            out.append(p)
    lshape = local_shape(target, x._mesh, tuple(out))
    return run(call, [tuple(targets)], (tuple(out), target), fn=lambda a: Tensor.expand(a, lshape), args=(x,),
               kwargs={})
