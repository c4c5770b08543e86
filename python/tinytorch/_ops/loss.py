"""More losses and distances (PyTorch's functional forms): kl_div, margin_ranking_loss, triplet_margin_loss,
cosine_embedding_loss, poisson_nll_loss, gaussian_nll_loss, multilabel_soft_margin_loss, soft_margin_loss,
hinge_embedding_loss, multilabel_margin_loss; cosine_similarity, pairwise_distance; bilinear.

Each is a composition of differentiable tensor ops (no new derivative formulas), written so that no
branch that is masked away can feed an inf or nan into the gradient (e.g. log of a zero target).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .._tensor import Tensor
from . import pointwise as _pw
from .nn import _check_reduction, _legacy_reduction, _reduce, logsigmoid, relu, softplus
from ._common import user_stacklevel as _user_stacklevel


def _zeros_like(x: Tensor) -> Tensor:
    from .._creation import zeros_like
    return zeros_like(x)


# ------------------------------------------------------------------ distances


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim (eps keeps the norm differentiable at equal points)."""
    out_dim = max(x1.dim(), x2.dim())
    diff = x1 - x2 + eps
    if out_dim == 0:
        return diff.abs()
    return diff.norm(p, -1, keepdim=keepdim)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """x1 . x2 / (max(||x1||, eps) * max(||x2||, eps)) along dim (inputs broadcast)."""
    # the norm's own node (not sqrt of a sum: its slope at a zero vector is 0 * inf = NaN, the norm's is 0)
    n1 = x1.norm(2, dim, keepdim=True).clamp_min(eps)
    n2 = x2.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y_o = x1^T W_o x2 + b_o for weight (out, in1, in2), over any leading dims."""
    from .linalg import einsum
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {weight.dim()}-D")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {weight.shape[2]}")
    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    return y + bias if bias is not None else y


# ------------------------------------------------------------------ losses


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """KL(target || exp(input)) pointwise: target (log target - input); 'batchmean' divides the sum by the batch."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=_user_stacklevel())
    if log_target:
        loss = target.exp() * (target - input)
    else:
        pos = target > 0
        safe = _pw.where(pos, target, 1.0)  # log(1) = 0: no inf/nan reaches the gradient at target == 0
        loss = _pw.where(pos, target * safe.log(), 0.0) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() != 0 else loss.sum()
    return _reduce(loss, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, -target (x1 - x2) + margin)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} ")
    return _reduce(relu(-target * (input1 - input2) + margin), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with d the p-norm distance (swap: d(a, n) -> min(d(a, n), d(p, n)))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_swap = pairwise_distance(positive, negative, p, eps)
        d_neg = _pw.minimum(d_neg, d_swap)
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, size_average=None,
                          reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target == 1, max(0, cos(x1, x2) - margin) where target == -1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input1.dim() not in (1, 2) or input1.shape != input2.shape:
        if input1.shape != input2.shape:
            raise RuntimeError(f"cosine_embedding_loss: Input1 and Input2 must have the same shape, but got "
                               f"{list(input1.shape)} and {list(input2.shape)}")
        raise RuntimeError(f"cosine_embedding_loss: Expected 1D or 2D input, but got {input1.dim()}D")
    if input1.dim() != target.dim() + 1:
        raise RuntimeError(f"{input1.dim()}D target tensor expects {input1.dim() - 1}D input tensors, but found "
                           f"inputs with sizes {list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12  # PyTorch's EPSILON: the squared norms get it added before the square root
    d = input1.dim() - 1
    prod = (input1 * input2).sum(d)
    mag = ((input1 * input1).sum(d) + eps) * ((input2 * input2).sum(d) + eps)
    cos = prod / mag.sqrt()
    zeros = _zeros_like(cos)
    pos = _pw.where(target == 1, 1 - cos, zeros)
    neg = _pw.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _reduce(pos + neg, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    """exp(x) - t x (log_input) or x - t log(x + eps); full adds Stirling's t log t - t + log(2 pi t) / 2."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        safe = _pw.where(big, target, 1.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _pw.where(big, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """0.5 (log var + (x - t)^2 / var) (+ 0.5 log 2 pi when full); var is clamped at eps without cutting its grad."""
    if isinstance(var, (int, float)):
        from .._creation import full as full_like_shape
        var = full_like_shape(tuple(input.shape), float(var), dtype=input.dtype, device=input.device)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)  # homoscedastic over the last dim
        elif tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1:
            pass  # heteroscedastic with one variance per sample
        else:
            raise ValueError("var is of incorrect size")
    if reduction != "none" and reduction != "mean" and reduction != "sum":
        raise ValueError(reduction + " is not valid")
    vd = var._data
    if bool((vd < 0).any()):
        raise ValueError("var has negative entry/entries")
    # PyTorch clamps a clone under no_grad: the value is clamped, the gradient passes as if it were not.
    var = var + (var.detach().clamp_min(eps) - var.detach())
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
                                reduce=None, reduction: str = "mean") -> Tensor:
    """Per-class logistic loss averaged over classes: -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) / C."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    C = input.shape[class_dim]
    loss = loss.sum(class_dim) / C
    return _reduce(loss, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-t x)), the two-class logistic loss."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce(softplus(-target * input), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    """x where target == 1, max(0, margin - x) where target == -1 (PyTorch's formula for other targets too)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    zeros = _zeros_like(input)
    margin_clamp = (margin - input).clamp_min(0)
    out = _pw.where(target != 1, margin_clamp, zeros) + _pw.where(target != -1, input, zeros)
    return _reduce(out, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """sum over target classes j and non-target classes i of max(0, 1 - (x_j - x_i)), divided by C."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input.dim() > 2 or target.shape != input.shape:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    tg = np.asarray(target._data if type(target._data) is np.ndarray else target._data.get()).reshape(x.shape)
    N, C = x.shape
    is_target = np.zeros((N, C), bool)  # classes listed before the first -1
    for n in range(N):
        for c in tg[n]:
            if c < 0:
                break
            if c >= C:
                raise RuntimeError(f"argument #2 'target' is out of range: {int(c)} is not in [0, {C})")
            is_target[n, c] = True
    pair = (is_target[:, :, None] & ~is_target[:, None, :]).astype(np.dtype(x._data.dtype))
    from .._creation import tensor
    w = tensor(pair, device=x.device)
    hinge = relu(1 - x.unsqueeze(2) + x.unsqueeze(1))  # [n, j, i] = max(0, 1 - (x_j - x_i))
    loss = (hinge * w).sum((1, 2)) / C
    if input.dim() < 2:
        loss = loss.reshape(()) if input.dim() == 1 else loss.reshape(())
    return _reduce(loss, reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *, distance_function=None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with any distance function (pairwise_distance by default)."""
    if margin <= 0:
        raise ValueError(f"triplet_margin_with_distance_loss: expected margin to be greater than 0, got {margin} "
                         "instead")
    a_dim, p_dim, n_dim = anchor.dim(), positive.dim(), negative.dim()
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = _pw.minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: sum over classes i != y of max(0, margin - x_y + x_i)^p (times weight[y]), over C."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    y = target.reshape(-1, 1)
    C = x.shape[1]
    tg = np.asarray(target._data if type(target._data) is np.ndarray else target._data.get()).reshape(-1)
    if tg.size and (tg.min() < 0 or tg.max() >= C):
        raise IndexError(f"Target {int(tg.max() if tg.max() >= C else tg.min())} is out of bounds.")
    from .._creation import tensor
    others = tensor((np.arange(C)[None, :] != tg[:, None]).astype(np.dtype(x._data.dtype)), device=x.device)
    z = relu(margin - x.gather(1, y) + x)
    if p == 2:
        z = z * z
    z = z * others
    if weight is not None:
        z = z * weight.index_select(0, target.reshape(-1)).reshape(-1, 1)
    loss = z.sum(1) / C
    if input.dim() < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


__all__ = ["triplet_margin_with_distance_loss", "multi_margin_loss", "pairwise_distance", "cosine_similarity", "bilinear", "kl_div", "margin_ranking_loss",
           "triplet_margin_loss", "cosine_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "multilabel_soft_margin_loss", "soft_margin_loss", "hinge_embedding_loss", "multilabel_margin_loss"]
