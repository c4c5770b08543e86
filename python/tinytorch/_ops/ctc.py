"""CTC loss (connectionist temporal classification): the forward (alpha) and backward (beta) recursions in
log space over the blank-extended targets, vectorised over the batch and the extended-target positions,
one node for the whole batch.

The gradient follows PyTorch's ctc_loss: d/d log_probs = exp(log_probs) - posterior, i.e. the gradient
for log_probs that come out of log_softmax (the exp term is what log_softmax's backward removes again);
composed with log_softmax it is the exact gradient of the loss.
"""
from __future__ import annotations

import numpy as np

from .._tensor import Tensor, _wrap
from ._common import _grad_enabled, needs_grad, record

_NEG_INF = -np.inf


def _host(x) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x._data
    if hasattr(x, "get"):
        x = x.get()
    return np.asarray(x)


def _lse(*xs):
    """Elementwise log(sum(exp(x))) of equally shaped arrays, -inf where all are -inf."""
    m = xs[0]
    for x in xs[1:]:
        m = np.maximum(m, x)
    safe = np.where(np.isneginf(m), 0.0, m)
    s = sum(np.exp(x - safe) for x in xs)
    with np.errstate(divide="ignore"):
        return np.where(np.isneginf(m), _NEG_INF, np.log(s) + safe)


def _ctc_batch(lp: np.ndarray, targets: list, in_lens: np.ndarray, blank: int):
    """Per-sample negative log-likelihoods (N,) and the gradient (T, N, C) of their sum, PyTorch's form."""
    T, N, C = lp.shape
    S = max((len(t) for t in targets), default=0)
    L = 2 * S + 1
    ext = np.full((N, L), blank, np.int64)  # blank, l1, blank, l2, ..., blank
    valid = np.zeros((N, L), bool)
    skip = np.zeros((N, L), bool)  # s may be reached from s - 2 (a label differing from the one before it)
    end = np.zeros(N, np.int64)
    for n, tgt in enumerate(targets):
        k = len(tgt)
        ext[n, 1:2 * k:2] = tgt
        valid[n, :2 * k + 1] = True
        end[n] = 2 * k
        if k > 1:
            lab = np.asarray(tgt)
            skip[n, 3:2 * k:2] = lab[1:] != lab[:-1]
    rows = np.arange(N)[:, None]
    lpe = np.where(valid[None], lp[:, rows, ext], _NEG_INF)  # (T, N, L): log prob of each extended symbol
    la = np.full((T, N, L), _NEG_INF)
    la[0, :, 0] = lpe[0, :, 0]
    if L > 1:
        la[0, :, 1] = np.where(end > 0, lpe[0, :, 1], _NEG_INF)
    ninf1 = np.full((N, 1), _NEG_INF)
    ninf2 = np.full((N, 2), _NEG_INF)
    for t in range(1, T):
        prev = la[t - 1]
        s1 = np.concatenate([ninf1, prev[:, :-1]], 1)
        s2 = np.where(skip, np.concatenate([ninf2, prev[:, :-2]], 1), _NEG_INF)
        la[t] = _lse(prev, s1, s2) + lpe[t]
    last = in_lens - 1
    n_idx = np.arange(N)
    fin = la[last, n_idx]
    end_prev = np.maximum(end - 1, 0)
    ll = _lse(fin[n_idx, end], np.where(end > 0, fin[n_idx, end_prev], _NEG_INF))
    nll = -ll
    lb = np.full((T, N, L), _NEG_INF)
    for t in range(T - 1, -1, -1):
        if t < T - 1:
            nxt = lb[t + 1]
            s1 = np.concatenate([nxt[:, 1:], ninf1], 1)
            s2 = np.concatenate([np.where(skip[:, 2:], nxt[:, 2:], _NEG_INF), ninf2], 1)
            lb[t] = _lse(nxt, s1, s2) + lpe[t]
        starts = last == t  # each sequence's beta starts at its own last step
        if starts.any():
            init = np.full((N, L), _NEG_INF)
            init[n_idx, end] = lpe[t, n_idx, end]
            init[n_idx, end_prev] = np.where(end > 0, lpe[t, n_idx, end_prev], init[n_idx, end_prev])
            lb[t] = np.where(starts[:, None], init, lb[t])
        lb[t] = np.where((t > last)[:, None], _NEG_INF, lb[t])
    # posterior per class: logsumexp over the extended positions holding that class
    ab = la + lb  # (T, N, L)
    m = ab.max(axis=2, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    w = np.exp(ab - m)  # (T, N, L)
    acc = np.zeros((T, N, C))
    for s in range(L):
        acc[:, n_idx, ext[:, s]] += w[:, :, s]
    with np.errstate(divide="ignore"):
        lcab = np.log(acc) + m
    with np.errstate(over="ignore", invalid="ignore"):
        grad = np.exp(lp) - np.exp(lcab + nll[None, :, None] - lp)
    tmask = (np.arange(T)[:, None] < in_lens[None, :])[:, :, None]
    grad = np.where(tmask, grad, 0.0)
    return nll, grad


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """CTC loss of log_probs (T, N, C) (or (T, C)) against targets (N, S) padded or 1-D concatenated."""
    from .nn import _check_reduction
    _check_reduction(reduction)
    unbatched = log_probs.dim() == 2
    lpt = log_probs.unsqueeze(1) if unbatched else log_probs
    if lpt.dim() != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, but got {log_probs.dim()}-D")
    T, N, C = lpt.shape
    in_lens = _host(input_lengths).astype(np.int64).reshape(-1)
    tg_lens = _host(target_lengths).astype(np.int64).reshape(-1)
    tg = _host(targets).astype(np.int64)
    if unbatched and tg.ndim == 1 and tg_lens.size == 1 and in_lens.size == 1:
        tg = tg.reshape(1, -1) if tg.size else tg.reshape(1, 0)
    if in_lens.size != N:
        raise RuntimeError(f"input_lengths must be of size batch_size, but got {in_lens.size} and batch size {N}")
    if tg_lens.size != N:
        raise RuntimeError(f"target_lengths must be of size batch_size, but got {tg_lens.size} and batch size {N}")
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    if (in_lens > T).any():
        n = int(np.argmax(in_lens > T))
        raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {int(in_lens[n])} "
                           f"(while checking arguments for ctc_loss_allocate_outputs)")
    seqs = []
    offset = 0
    for n in range(N):
        k = int(tg_lens[n])
        if tg.ndim == 1:
            seqs.append(tg[offset:offset + k])
            offset += k
        else:
            if k > tg.shape[1]:
                raise RuntimeError(f"Expected tensor to have size at least {k} at dimension 1, but got size "
                                   f"{tg.shape[1]} for argument #2 'targets' (while checking arguments for "
                                   "ctc_loss_allocate_outputs)")
            seqs.append(tg[n, :k])
    lp = _host(lpt._data).astype(np.float64)
    nll, grad = _ctc_batch(lp, seqs, in_lens, blank)
    dt = np.dtype(lpt._data.dtype)
    inf = np.isinf(nll) if zero_infinity else None
    if zero_infinity:
        grad = np.where(inf[None, :, None], 0.0, grad)
    xp_data = lpt._data
    losses = _wrap(_to_device(nll.astype(dt), xp_data))
    if needs_grad(lpt):
        g_arr = grad.astype(dt)

        def ctc_backward(g):
            out = _wrap(_to_device(g_arr, xp_data)) * g.reshape(1, N, 1)
            if _grad_enabled():  # the posterior term is computed on arrays: not differentiable again
                from .rnn import _once_differentiable
                out = _once_differentiable((out,), (lpt,))[0]
            return out
        record("CtcLossBackward0", ctc_backward, losses, (lpt,))
    if zero_infinity:
        # As in PyTorch, a where() after the loss: its grad_fn is WhereBackward0.
        from .pointwise import where
        losses = where(_wrap(_to_device(inf, xp_data)), 0.0, losses)
    if reduction == "none":
        return losses.squeeze(0) if unbatched else losses
    if reduction == "sum":
        return losses.sum()
    denom = np.maximum(tg_lens, 1).astype(dt)
    return (losses / _wrap(_to_device(denom, xp_data))).mean()


def _to_device(a: np.ndarray, like):
    if type(like) is np.ndarray:
        return a
    from .._device import cupy
    return cupy().asarray(a)


__all__ = ["ctc_loss"]
