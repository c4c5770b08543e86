"""embedding_bag: sums, means or maxima of bags of embedding rows, without materialising per-bag Python loops.

The looked-up rows (F.embedding, so max_norm, scale_grad_by_freq and padding_idx behave as there) are laid
out as a padded (bags, longest bag, dim) block by one gather that sends empty slots and padding_idx entries
to an appended zero row; the reduction over the slot axis is then one tensor op. Gradients flow through
those differentiable ops (weight and per_sample_weights).
"""
from __future__ import annotations

import numpy as np

from .._tensor import Tensor


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Reduce (sum/mean/max) the embedding rows of each bag: bags are input's rows (2-D) or offsets' spans (1-D)."""
    from ._common import needs_grad, record
    from .._tensor import _wrap
    args = (input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode, sparse, per_sample_weights,
            include_last_offset, padding_idx)
    if not needs_grad(weight, per_sample_weights):
        return _embedding_bag(*args)
    # One node named EmbeddingBagBackward0 (PyTorch's grad_fn, seen in reprs) over the composed ops, which run on
    # detached aliases: differentiating them must not fire the real inputs' tensor hooks a second time.
    srcs = tuple(t for t in (weight, per_sample_weights) if t is not None and t._requires_grad)
    aliases = {id(t): t.detach().requires_grad_() for t in srcs}
    inner = _embedding_bag(input, aliases.get(id(weight), weight), offsets, max_norm, norm_type, scale_grad_by_freq,
                           mode, sparse, aliases.get(id(per_sample_weights), per_sample_weights),
                           include_last_offset, padding_idx)
    result = _wrap(inner._data)
    if inner._grad_fn is None:  # only empty bags: nothing flows back
        return result

    def embedding_bag_backward(g):
        from ..autograd import grad
        from ._common import _grad_enabled
        if _grad_enabled():  # create_graph: gradients as functions of the real inputs, for double backward
            grads = grad(_embedding_bag(*args), srcs, g, create_graph=True, materialize_grads=True)
        else:
            grads = grad(inner, tuple(aliases[id(t)] for t in srcs), g, retain_graph=True, materialize_grads=True)
        return grads if len(grads) > 1 else grads[0]
    record("EmbeddingBagBackward0", embedding_bag_backward, result, srcs)
    return result


def _embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None, max_norm: float | None, norm_type: float,
                   scale_grad_by_freq: bool, mode: str, sparse: bool, per_sample_weights: Tensor | None,
                   include_last_offset: bool, padding_idx: int | None) -> Tensor:
    """embedding_bag as differentiable tensor ops."""
    from .. import cat, tensor, zeros
    from .indexing import embedding
    from . import pointwise as _pw
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights ({tuple(per_sample_weights.shape)}) is not None, "
                         f"then it must have the same shape as the input ({tuple(input.shape)})")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type "
                             f"<class '{type(offsets).__module__.split('.')[0]}.{type(offsets).__name__}'>")
        B, L = input.shape
        starts = np.arange(B, dtype=np.int64) * L
        ends = starts + L
        flat = input.reshape(-1)
        psw = per_sample_weights.reshape(-1) if per_sample_weights is not None else None
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        off = _host(offsets._data).astype(np.int64)
        n = input.shape[0]
        if off.size and off[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {int(off[0])}")
        if off.size and off[-1] > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length ({n}), but got "
                               f"offsets[-1] of {int(off[-1])}")
        if include_last_offset:
            starts, ends = off[:-1], off[1:]
        else:
            starts, ends = off, np.append(off[1:], n)
        flat = input
        psw = per_sample_weights
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    if mode == "max" and scale_grad_by_freq:
        raise RuntimeError("max mode does not support scaling the gradient by the frequency")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("padding_idx must be within num_embeddings")
        padding_idx = padding_idx % num
    rows = embedding(flat, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)  # (n, D)
    n, D = rows.shape[0], weight.shape[1]
    nb = len(starts)
    lengths = np.maximum(ends - starts, 0)
    Lmax = int(lengths.max()) if nb else 0
    pos = starts[:, None] + np.arange(Lmax)[None, :]
    valid = np.arange(Lmax)[None, :] < lengths[:, None]
    if padding_idx is not None and n:
        ids = _host(flat._data).astype(np.int64)
        valid &= ids[np.minimum(pos, max(n - 1, 0))] != padding_idx
    slot = np.where(valid, pos, n).reshape(-1)  # n: the appended zero row
    dev = weight.device
    ext = cat([rows, zeros(1, D, dtype=rows.dtype, device=dev)], 0)
    block = ext.index_select(0, tensor(slot, device=dev)).reshape(nb, Lmax, D)
    count = valid.sum(1)
    if mode == "sum" or mode == "mean":
        if psw is not None:
            wext = cat([psw, zeros(1, dtype=psw.dtype, device=dev)], 0)
            block = block * wext.index_select(0, tensor(slot, device=dev)).reshape(nb, Lmax, 1)
        out = block.sum(1) if Lmax else zeros(nb, D, dtype=weight.dtype, device=dev)
        if mode == "mean":
            denom = np.maximum(count, 1).astype(np.dtype(weight._data.dtype)).reshape(nb, 1)
            out = out / tensor(denom, device=dev)
        return out
    if Lmax == 0:
        return zeros(nb, D, dtype=weight.dtype, device=dev)
    vmask = tensor(valid.reshape(nb, Lmax, 1), device=dev)
    neg = _pw.where(vmask, block, float("-inf"))
    best = neg.max(1)[0]
    return _pw.where(tensor((count > 0).reshape(nb, 1), device=dev), best, 0.0)


__all__ = ["embedding_bag"]
