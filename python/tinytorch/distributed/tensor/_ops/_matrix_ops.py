"""Sharding rules of matrix products (linear, matmul, mm, bmm, mv, dot) and scaled_dot_product_attention.

Products are read as einsums over labelled dims. Per mesh dim the candidates are: everything replicated; a dim
the output keeps sharded on every operand that has it (the output is sharded there: ColwiseParallel's weight
Shard(0) gives Shard(-1)); a contracted dim sharded on both operands (the output is a pending sum: RowwiseParallel's
Shard(-1) input and Shard(1) weight); one operand a pending sum and the others replicated (the output stays
one). The cheapest candidate for the current layouts wins. Linear's bias follows the output: sharded with it,
a share of it when the output is a pending sum, replicated otherwise.
"""
from __future__ import annotations

from typing import Any

from .._api import DTensor
from .._dispatch import OpCall, dispatch, register, run
from ..placement_types import Partial, Shard
from .utils import R, is_partial_linear, pick


def _einsum_plan(call: OpCall, ops: list, out_labels: list) -> tuple:
    """ops: [(DTensor, labels)] with None for a broadcast dim; returns (targets, out placements)."""
    mesh = call.mesh
    sizes = {}
    for d, labels in ops:
        for lab, s in zip(labels, d._gshape):
            if lab is not None:
                sizes[lab] = s
    contracted = [lab for lab in sizes if lab not in out_labels]
    targets: list = [[] for _ in ops]
    out = []
    numels = [d.numel() for d, _ in ops]
    for m in range(mesh.ndim):
        n = mesh.size(m)
        cur = [d._placements[m] for d, _ in ops]
        cands = [([R] * len(ops), R)]
        for lab in out_labels:
            if lab is not None and sizes[lab] > 1:
                cands.append(([Shard(labels.index(lab)) if lab in labels else R for _, labels in ops],
                              Shard(out_labels.index(lab))))
        for lab in contracted:
            cands.append(([Shard(labels.index(lab)) if lab in labels else R for _, labels in ops], Partial()))
        for i, p in enumerate(cur):
            if is_partial_linear(p):
                cands.append(([p if j == i else R for j in range(len(ops))], p))
        chosen, placement = pick(cands, cur, numels, n)
        for i, t in enumerate(chosen):
            targets[i].append(t)
        out.append(placement)
    return [tuple(t) for t in targets], tuple(out)


def _shape(ops: list, out_labels: list) -> tuple:
    sizes = {lab: s for d, labels in ops for lab, s in zip(labels, d._gshape) if lab is not None}
    return tuple(sizes[lab] for lab in out_labels)


def _batch_labels(a: DTensor, b: DTensor, na: int, nb: int) -> tuple:
    """Labels of the broadcast batch dims of a matmul (the first na/nb dims of a/b)."""
    nbatch = max(na, nb)
    la, lb, lo = [], [], []
    for i in range(nbatch):
        ia, ib = i - (nbatch - na), i - (nbatch - nb)
        sa = a._gshape[ia] if ia >= 0 else 1
        sb = b._gshape[ib] if ib >= 0 else 1
        lab = f"b{i}"
        if ia >= 0:
            la.append(lab if sa == max(sa, sb) else None)
        if ib >= 0:
            lb.append(lab if sb == max(sa, sb) else None)
        lo.append(lab)
    return la, lb, lo


def _matmul_labels(a: DTensor, b: DTensor) -> tuple:
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    if a.ndim == 1 and b.ndim == 1:
        return ["k"], ["k"], []
    if a.ndim == 1:
        la, lb, lo = _batch_labels(a, b, 0, b.ndim - 2)
        return ["k"], lb + ["k", "n"], lo + ["n"]
    if b.ndim == 1:
        la, lb, lo = _batch_labels(a, b, a.ndim - 2, 0)
        return la + ["m", "k"], ["k"], lo + ["m"]
    la, lb, lo = _batch_labels(a, b, a.ndim - 2, b.ndim - 2)
    return la + ["m", "k"], lb + ["k", "n"], lo + ["m", "n"]


@register("matmul", "mm", "bmm", "mv", "dot", "__matmul__", "__rmatmul__")
def matmul_rule(call: OpCall) -> Any:
    a, b = call.args[0], call.args[1]
    if type(a) is not DTensor or type(b) is not DTensor:
        raise call.unsupported("both operands of a product must be DTensors")
    if call.name == "__rmatmul__":
        a, b = b, a
    la, lb, lo = _matmul_labels(a, b)
    ops = [(a, la), (b, lb)]
    targets, out = _einsum_plan(call, ops, lo)
    if call.name == "__rmatmul__":
        targets = targets[::-1]
    return run(call, targets, (out, _shape(ops, lo)))


@register("linear")
def linear_rule(call: OpCall) -> Any:
    x, w = call.args[0], call.args[1]
    bias = call.args[2] if len(call.args) > 2 else call.kwargs.get("bias")
    if type(x) is not DTensor or type(w) is not DTensor or (bias is not None and type(bias) is not DTensor):
        raise call.unsupported("input, weight and bias must all be DTensors")
    if w.ndim != 2:
        raise call.unsupported("a weight that is not a matrix")
    lead = [f"b{i}" for i in range(x.ndim - 1)]
    ops = [(x, lead + ["k"]), (w, ["n", "k"])]
    out_labels = lead + ["n"]
    targets, out = _einsum_plan(call, ops, out_labels)
    if bias is not None:
        bt = tuple(Shard(0) if p.is_shard() and p.dim == len(out_labels) - 1 else p if p.is_partial() else R
                   for p in out)
        targets.append(bt)
    return run(call, targets, (out, _shape(ops, out_labels)))


@register("scaled_dot_product_attention")
def sdpa_rule(call: OpCall) -> Any:
    names = ("query", "key", "value", "attn_mask")
    if any(n in call.kwargs for n in names[:3]):
        # put the tensors first, in order, so that their layouts line up with call.dtensors
        given = dict(zip(names, call.args[:4]))
        given.update({k: v for k, v in call.kwargs.items() if k in names})
        rest = {k: v for k, v in call.kwargs.items() if k not in names}
        return dispatch(call.name, call.fn, (given["query"], given["key"], given["value"]),
                        dict(rest, attn_mask=given.get("attn_mask")))
    q, k, v = call.args[:3]
    mask = call.args[3] if len(call.args) > 3 else call.kwargs.get("attn_mask")
    causal = bool(call.args[5] if len(call.args) > 5 else call.kwargs.get("is_causal", False))
    tensors = [t for t in (q, k, v, mask) if t is not None]
    if any(type(t) is not DTensor for t in tensors):
        raise call.unsupported("query, key, value (and attn_mask) must all be DTensors")
    nd = q.ndim
    mesh = call.mesh
    targets: list = [[] for _ in tensors]
    out = []
    for m in range(mesh.ndim):
        n = mesh.size(m)
        cur = [t._placements[m] for t in tensors]
        cands = [([R] * len(tensors), R)]

        def along(dim_q: int, dim_kv: int) -> list:
            res = []
            for t in tensors:
                if t is mask:
                    md = dim_q - (nd - mask.ndim)
                    res.append(Shard(md) if md >= 0 and mask._gshape[md] == q._gshape[dim_q] else R)
                elif t is q:
                    res.append(Shard(dim_q))
                else:
                    res.append(Shard(dim_kv) if dim_kv is not None else R)
            return res
        if nd >= 3:
            hq, hk = q._gshape[nd - 3], k._gshape[nd - 3]
            if hq == hk or (hq % n == 0 and hk % n == 0):
                cands.append((along(nd - 3, nd - 3), Shard(nd - 3)))  # heads: tensor parallel attention
        if nd >= 4 and q._gshape[0] == k._gshape[0]:
            cands.append((along(0, 0), Shard(0)))  # batch
        if not causal:
            cands.append((along(nd - 2, None), Shard(nd - 2)))  # query rows: each row attends on its own
        chosen, placement = pick(cands, cur, [t.numel() for t in tensors], n)
        for i, t in enumerate(chosen):
            targets[i].append(t)
        out.append(placement)
    shape = tuple(q._gshape[:-1]) + (v._gshape[-1],)
    return run(call, [tuple(t) for t in targets], (tuple(out), shape))
