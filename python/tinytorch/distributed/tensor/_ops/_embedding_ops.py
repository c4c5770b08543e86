"""Sharding rule of embedding lookups.

Per mesh dim: a table sharded by rows (RowwiseParallel) looks up replicated indices in its own rows only —
indices outside [offset, offset + rows) read row 0 and are zeroed, the rest are shifted by -offset — so the output
is a pending sum (PyTorch's _MaskPartial), reduced by all-reduce or reduce-scatter afterwards. A table sharded by
columns (ColwiseParallel) gives an output sharded on its last dim; sharded indices with a replicated table give
an output sharded like them.
"""
from __future__ import annotations

from typing import Any

from ...._ops.indexing import embedding as _embedding
from .._api import DTensor
from .._dispatch import OpCall, register, run
from .._redistribute import chunk_bounds
from ..placement_types import Partial, Shard
from .utils import R


@register("embedding")
def embedding_rule(call: OpCall) -> Any:
    ids, weight = call.args[0], call.args[1]
    if type(ids) is not DTensor or type(weight) is not DTensor:
        raise call.unsupported("indices and weight must both be DTensors")
    extra = call.args[2:]
    padding_idx = extra[0] if extra else call.kwargs.get("padding_idx")
    max_norm = extra[1] if len(extra) > 1 else call.kwargs.get("max_norm")
    mesh = call.mesh
    it, wt, out = [], [], []
    masked = None  # (mesh dim, rows) of the row-sharded table
    for m in range(mesh.ndim):
        pi, pw = ids._placements[m], weight._placements[m]
        if type(pw) is Shard and pw.dim == 0 and masked is None and \
                not any(q.is_shard(0) for e, q in enumerate(weight._placements) if e != m):
            it.append(R)
            wt.append(pw)
            out.append(Partial())
            masked = m
        elif type(pw) is Shard and pw.dim == 1:
            it.append(R)
            wt.append(pw)
            out.append(Shard(ids.ndim))
        elif type(pi) is Shard:
            it.append(pi)
            wt.append(R)
            out.append(pi)
        else:
            it.append(R)
            wt.append(R)
            out.append(R)
    if masked is not None and max_norm is not None:
        raise call.unsupported("max_norm renormalises rows in place, which a row-sharded table cannot do")
    shape = tuple(ids._gshape) + (weight._gshape[1],)
    targets = [tuple(it), tuple(wt)]
    if masked is None:
        return run(call, targets, (tuple(out), shape))
    lo, hi = chunk_bounds(weight._gshape[0], mesh.size(masked), mesh.get_coordinate()[masked])
    pad = None if padding_idx is None else padding_idx % weight._gshape[0]
    local_pad = pad - lo if pad is not None and lo <= pad < hi else None
    rest = dict(call.kwargs)
    rest.pop("padding_idx", None)

    def masked_lookup(idx, w, *_args, **_kwargs):
        outside = (idx < lo) | (idx >= hi)
        rows = _embedding((idx - lo).masked_fill(outside, 0), w, local_pad, *extra[1:], **rest)
        return rows * (~outside).unsqueeze(-1).to(rows.dtype)
    return run(call, targets, (tuple(out), shape), fn=masked_lookup)
