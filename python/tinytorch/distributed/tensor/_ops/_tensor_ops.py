"""Sharding rules of joining, splitting and indexing ops: cat, stack, split/chunk/unbind, basic indexing, new_*.

Joining and splitting need the dim they run along whole; other dims keep their shards (the inputs of cat/stack
follow the first input's layout). Basic indexing (ints, slices, None, ...) keeps a shard where it takes the
whole dim and gathers it otherwise; pending sums pass through all of these (they are linear).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...._tensor import _wrap
from .._api import DTensor
from .._dispatch import OpCall, localize, register, run, wrap
from ..placement_types import Shard
from .utils import R, is_partial_linear, norm_dim


def _join_plan(ref: DTensor, tensors: list, dim: int, new_dim: bool) -> tuple:
    """(targets for every tensor, output placements) of cat (dim) or stack (new dim at dim)."""
    targets, out = [], []
    for p in ref._placements:
        if p.is_shard() and (type(p) is not Shard or (not new_dim and p.dim == dim)):
            targets.append(R)
            out.append(R)
        elif p.is_shard():
            targets.append(p)
            out.append(Shard(p.dim + 1) if new_dim and p.dim >= dim else p)
        elif p.is_partial() and is_partial_linear(p):
            targets.append(p)
            out.append(p)
        else:
            targets.append(R)
            out.append(R)
    return tuple(targets), tuple(out)


@register("cat", "concat", "concatenate", "stack")
def join_rule(call: OpCall) -> Any:
    tensors = list(call.args[0] if call.args else call.kwargs["tensors"])
    if any(type(t) is not DTensor for t in tensors):
        raise call.unsupported("every tensor must be a DTensor")
    ref = tensors[0]
    dim = call.args[1] if len(call.args) > 1 else call.kwargs.get("dim", 0)
    new_dim = call.name == "stack"
    d = norm_dim(dim, ref.ndim + (1 if new_dim else 0))
    targets, out = _join_plan(ref, tensors, d, new_dim)
    if new_dim:
        shape = ref._gshape[:d] + (len(tensors),) + ref._gshape[d:]
    else:
        shape = ref._gshape[:d] + (sum(t._gshape[d] for t in tensors),) + ref._gshape[d + 1:]
    return run(call, [targets] * len(call.dtensors), (out, shape))


@register("split", "chunk", "tensor_split", "unbind")
def split_rule(call: OpCall) -> Any:
    """Pieces along one dim: that dim whole, the pieces laid out as the rest of the input."""
    x = call.args[0]
    default = 0
    pos = 1 if call.name == "unbind" else 2
    dim = call.args[pos] if len(call.args) > pos else call.kwargs.get("dim", default)
    d = norm_dim(dim, x.ndim)
    targets = tuple(R if (p.is_shard() and (p.dim == d or type(p) is not Shard)) or
                    (p.is_partial() and not is_partial_linear(p)) else p for p in x._placements)
    if call.name == "unbind":
        out = tuple(Shard(p.dim - (p.dim > d)) if p.is_shard() else p for p in targets)
    else:
        out = targets
    local = localize(x, targets, [out])
    pieces = call.fn(local, *call.args[1:], **call.kwargs)
    result = []
    for piece in pieces:
        shape = list(x._gshape)
        if call.name == "unbind":
            del shape[d]
        else:
            shape[d] = piece._data.shape[d]
        result.append(wrap(piece, x._mesh, out, shape))
    return tuple(result)


def _basic_index(key: Any, ndim: int) -> list:
    """Per input dim, the index applied to it (dims an Ellipsis covers get slice(None)); None entries are
    new dims. Only ints, slices, None and Ellipsis."""
    key = key if isinstance(key, tuple) else (key,)
    for k in key:
        if not (k is None or k is Ellipsis or isinstance(k, (int, np.integer, slice))) or isinstance(k, bool):
            raise NotImplementedError
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (ndim - used))
            used = ndim
        else:
            expanded.append(k)
    consumed = sum(1 for k in expanded if k is not None)
    expanded.extend([slice(None)] * (ndim - consumed))
    return expanded


@register("__getitem__")
def getitem_rule(call: OpCall) -> Any:
    x, key = call.args[0], call.args[1]
    if type(x) is not DTensor or len(call.dtensors) != 1:
        raise call.unsupported("indexing with tensors")
    try:
        index = _basic_index(key, x.ndim)
    except NotImplementedError:
        raise call.unsupported(f"index {key!r}: only ints, slices, None and ... keep a layout") from None
    shape = np.broadcast_to(np.empty((), dtype=np.int8), x._gshape)[tuple(index)].shape
    where, d_in, d_out = {}, 0, 0  # input dim -> output dim (None when an int removes it)
    for k in index:
        if k is None:
            d_out += 1
            continue
        if isinstance(k, slice):
            where[d_in] = (d_out, k.indices(x._gshape[d_in]) == (0, x._gshape[d_in], 1))
            d_out += 1
        else:
            where[d_in] = (None, False)
        d_in += 1
    targets, out = [], []
    for p in x._placements:
        if p.is_shard():
            o, whole = where[p.dim]
            if whole and type(p) is Shard:
                targets.append(p)
                out.append(Shard(o))
                continue
            targets.append(R)
            out.append(R)
        else:
            targets.append(p)
            out.append(p)
    return run(call, [tuple(targets)], (tuple(out), tuple(int(s) for s in shape)))


@register("new_zeros", "new_ones", "new_empty", "new_full", "new_tensor")
def new_factory_rule(call: OpCall) -> Any:
    """A new replicated tensor of the requested (global) size, like the DTensor's dtype and device."""
    x = call.args[0]
    local = call.fn(_wrap(x._data), *call.args[1:], **call.kwargs)
    return DTensor._make(local._data, x._mesh, tuple(R for _ in x._placements), local._data.shape,
                         local._requires_grad)


@register("tril", "triu", "flip", "roll", "repeat_interleave")
def along_rule(call: OpCall) -> Any:
    """Ops that move or mask elements along some dims: those dims whole, the others as they are."""
    x = call.args[0]
    if call.name in ("tril", "triu"):
        dims = (x.ndim - 2, x.ndim - 1)
    else:
        pos = {"flip": 1, "roll": 2, "repeat_interleave": 2}[call.name]
        dim = call.args[pos] if len(call.args) > pos else call.kwargs.get("dims" if call.name != "repeat_interleave"
                                                                          else "dim")
        if dim is None:
            dims = tuple(range(x.ndim))
        else:
            dims = tuple(norm_dim(d, x.ndim) for d in ((dim,) if isinstance(dim, int) else dim))
    targets = tuple(R if (p.is_shard() and (p.dim in dims or type(p) is not Shard)) or p.is_partial() else p
                    for p in x._placements)
    if call.name == "repeat_interleave":
        local = localize(x, targets, [targets])
        result = call.fn(local, *call.args[1:], **call.kwargs)
        shape = list(x._gshape)
        if len(dims) == 1:
            shape[dims[0]] = result._data.shape[dims[0]]
        else:
            shape = [result._data.size]
        return wrap(result, x._mesh, targets, shape)
    return run(call, [targets], (targets, x._gshape))
