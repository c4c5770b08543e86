"""Adam (and the update shared with AdamW): PyTorch's single-tensor rule, done in place on the arrays.

Per parameter the update makes about a dozen elementwise passes through NumPy/CuPy ufuncs with
out=, using one scratch array reused across parameters; algebraically equal rearrangements of
PyTorch's formulas (m as b1*(m-g)+g, the bias-corrected denominator folded into one scale) keep it
there, so results match PyTorch to rounding. Contiguous float32/float64 CPU parameters skip all of that: a
group's are updated together in one C++ pass (_C._cpu.adamw_step, PyTorch's fused multi-tensor AdamW).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .._meta import MetaArray

from .. import _C, _threads
from .._creation import zeros_like
from .._tensor import Tensor, _wrap
from .optimizer import Optimizer, _group_params_with_grad, _on_device, _use_closure, _xp

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam: moving averages of the gradient and its square, bias-corrected; L2 weight decay on the gradient."""

    def __init__(self, params, lr: float | Tensor = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("capturable", False)
            group.setdefault("differentiable", False)
            group.setdefault("fused", None)
            group.setdefault("decoupled_weight_decay", False)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        for group in self.param_groups:
            lr = float(group["lr"])
            beta1, beta2 = (float(b) for b in group["betas"])
            eps = group["eps"]
            wd = group["weight_decay"]
            amsgrad = group["amsgrad"]
            maximize = group["maximize"]
            decoupled = group["decoupled_weight_decay"]
            fused: dict = {}  # dtype -> (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps)
            for p in _group_params_with_grad(group):
                with _on_device(p._data):
                    state = self.state[p]
                    if len(state) == 0:
                        # step is a float32 CPU tensor, as PyTorch keeps it (read on the host every step); the
                        # moments are zeros_like(p): DTensors laid out like a sharded (FSDP) parameter.
                        state["step"] = _wrap(np.zeros((), np.float32))
                        state["exp_avg"] = zeros_like(p)
                        state["exp_avg_sq"] = zeros_like(p)
                        if amsgrad:
                            state["max_exp_avg_sq"] = zeros_like(p)
                    step_t = state["step"]
                    step_t._data += 1
                    step_t._bump_version()
                    step = float(step_t._data)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    vmax = state["max_exp_avg_sq"]._data if amsgrad else None
                    arrays = (p._data, p._grad._data, exp_avg._data, exp_avg_sq._data, vmax)
                    if (decoupled or wd == 0) and _fusable(arrays):
                        lists = fused.setdefault(p._data.dtype, ([], [], [], [], [] if amsgrad else None, []))
                        for lst, a in zip(lists, arrays + (step,)):
                            if lst is not None:
                                lst.append(a)
                    else:
                        _adam_update(self, *arrays, step, lr, beta1, beta2, eps, wd, decoupled, maximize)
                    exp_avg._bump_version()
                    exp_avg_sq._bump_version()
                    p._bump_version()
            for lists in fused.values():
                # One C++ pass over all of the group's CPU parameters (PyTorch's fused multi-tensor AdamW).
                _C._cpu.adamw_step(*lists, lr, beta1, beta2, eps, wd if decoupled else 0.0, maximize, _threads.count)
        return loss


# CPU updates walk the arrays in blocks small enough that the dozen passes over one block hit the cache
# rather than main memory (the update is memory-bound); the scratch array is one block long.
_BLOCK = 1 << 16
_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _fusable(arrays: tuple) -> bool:
    """Whether adamw_step (csrc/kernels/adamw.cpp) takes a parameter's arrays (p, g, m, v, vmax or None):
    C-contiguous NumPy float32/float64 arrays of one dtype."""
    p = arrays[0]
    return type(p) is np.ndarray and p.dtype in _FUSED_DTYPES and all(
        a is None or (type(a) is np.ndarray and a.dtype == p.dtype and a.flags.c_contiguous) for a in arrays)


def _adam_update(opt: Optimizer, p, g, m, v, vmax, step: float, lr: float, beta1: float, beta2: float,
                 eps: float, wd: float, decoupled: bool, maximize: bool) -> None:
    """One Adam/AdamW update on raw arrays (p, m, v, vmax written in place)."""
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
    if type(p) is not np.ndarray:
        if type(p) is MetaArray:  # meta parameters: no values to update
            return
        from ._fused import adamw_step_cuda
        if adamw_step_cuda(p, g, m, v, vmax, step, lr, beta1, beta2, eps, wd, decoupled, maximize):
            return
        xp = _xp(p)
        _adam_block(xp, p, g, m, v, vmax, opt._scratch_like(p), lr, beta1, beta2, eps, wd, decoupled, maximize,
                    bias_correction1, bias_correction2_sqrt)
        return
    n = p.size
    arrays = (p, g, m, v) if vmax is None else (p, g, m, v, vmax)
    if n <= _BLOCK or not all(a.flags.c_contiguous for a in arrays):
        _adam_block(np, p, g, m, v, vmax, opt._scratch_like(p), lr, beta1, beta2, eps, wd, decoupled, maximize,
                    bias_correction1, bias_correction2_sqrt)
        return
    flat = [a.reshape(-1) for a in arrays]
    scratch = opt._scratch_like(np.empty(0, p.dtype), _BLOCK)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        pb, gb, mb, vb = (a[start:stop] for a in flat[:4])
        vmb = flat[4][start:stop] if vmax is not None else None
        _adam_block(np, pb, gb, mb, vb, vmb, scratch[:stop - start], lr, beta1, beta2, eps, wd, decoupled, maximize,
                    bias_correction1, bias_correction2_sqrt)


def _adam_block(xp, p, g, m, v, vmax, s, lr: float, beta1: float, beta2: float, eps: float, wd: float,
                decoupled: bool, maximize: bool, bias_correction1: float, bias_correction2_sqrt: float) -> None:
    """The update of one block, through the scratch block s."""
    if wd != 0:
        if decoupled:
            xp.multiply(p, 1 - lr * wd, out=p)
        else:
            # L2: the effective gradient g' = (+/-)g + wd*p lives in the scratch array.
            xp.multiply(p, wd, out=s)
            (xp.subtract if maximize else xp.add)(s, g, out=s)
            g = s
            maximize = False
    # m <- b1*m + (1-b1)*g' computed in place as b1*(m - g') + g' (no temporary).
    if maximize:
        xp.add(m, g, out=m)
        xp.multiply(m, beta1, out=m)
        xp.subtract(m, g, out=m)
    else:
        xp.subtract(m, g, out=m)
        xp.multiply(m, beta1, out=m)
        xp.add(m, g, out=m)
    # v <- b2*v + (1-b2)*g'^2 (the sign of g' does not matter here).
    if g is s:
        xp.multiply(s, s, out=s)
        xp.multiply(s, 1 - beta2, out=s)
    else:
        xp.multiply(g, 1 - beta2, out=s)
        xp.multiply(s, g, out=s)
    xp.multiply(v, beta2, out=v)
    xp.add(v, s, out=v)
    if vmax is not None:
        xp.maximum(vmax, v, out=vmax)
        v = vmax
    step_size = lr / bias_correction1
    # p -= step_size * m / (sqrt(v)/bc2_sqrt + eps)
    #    = (step_size*bc2_sqrt) * m / (sqrt(v) + eps*bc2_sqrt)
    xp.sqrt(v, out=s)
    xp.add(s, eps * bias_correction2_sqrt, out=s)
    xp.divide(m, s, out=s)
    xp.multiply(s, step_size * bias_correction2_sqrt, out=s)
    xp.subtract(p, s, out=p)
