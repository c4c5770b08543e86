"""SGD with momentum, dampening, Nesterov, weight decay and maximize (PyTorch's update rule)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._meta import MetaArray

from .._creation import empty_like
from .adam import _BLOCK
from .optimizer import Optimizer, _group_params_with_grad, _on_device, _use_closure, _xp, required

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent: p -= lr * (g + wd*p, through the momentum buffer when momentum > 0)."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        for group in self.param_groups:
            lr = float(group["lr"])
            momentum = group["momentum"]
            dampening = group["dampening"]
            wd = group["weight_decay"]
            nesterov = group["nesterov"]
            maximize = group["maximize"]
            for p in _group_params_with_grad(group):
                with _on_device(p._data):
                    # Without momentum SGD keeps no per-parameter state (nor an empty entry), as PyTorch.
                    state = self.state[p] if momentum != 0 else None
                    buf = state.get("momentum_buffer") if momentum != 0 else None
                    first = momentum != 0 and buf is None
                    if first:
                        # The first step's buffer is the effective gradient itself; filled by the update.
                        buf = state["momentum_buffer"] = empty_like(p)
                    _sgd_update(self, p._data, p._grad._data, None if buf is None else buf._data, first, lr,
                                momentum, dampening, wd, nesterov, maximize)
                    if buf is not None:
                        buf._bump_version()
                    p._bump_version()
        return loss


def _sgd_update(opt: Optimizer, p, g, buf, first: bool, lr: float, momentum: float, dampening: float, wd: float,
                nesterov: bool, maximize: bool) -> None:
    """The update on raw arrays (p and buf written in place); CPU arrays go block by block so that the
    passes over one block stay in cache (see adam._BLOCK)."""
    if type(p) is MetaArray:  # meta parameters: no values to update
        return
    arrays = (p, g) if buf is None else (p, g, buf)
    n = p.size
    if type(p) is not np.ndarray or n <= _BLOCK or not all(a.flags.c_contiguous for a in arrays):
        _sgd_block(_xp(p), p, g, buf, opt._scratch_like(p), first, lr, momentum, dampening, wd, nesterov, maximize)
        return
    flat = [a.reshape(-1) for a in arrays]
    scratch = opt._scratch_like(np.empty(0, p.dtype), _BLOCK)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        blocks = [a[start:stop] for a in flat]
        _sgd_block(np, blocks[0], blocks[1], blocks[2] if buf is not None else None, scratch[:stop - start], first,
                   lr, momentum, dampening, wd, nesterov, maximize)


def _sgd_block(xp, p, g, buf, s, first: bool, lr: float, momentum: float, dampening: float, wd: float,
               nesterov: bool, maximize: bool) -> None:
    """One block of the update through the scratch block s."""
    # d is the effective gradient: g itself when nothing changes it (no copy), else built in s.
    if wd != 0:
        xp.multiply(p, wd, out=s)
        (xp.subtract if maximize else xp.add)(s, g, out=s)
        d = s
    elif maximize:
        xp.negative(g, out=s)
        d = s
    else:
        d = g
    if momentum != 0:
        if first:
            buf[...] = d
        elif dampening == 0:
            xp.multiply(buf, momentum, out=buf)
            xp.add(buf, d, out=buf)
        elif dampening == 1:
            xp.multiply(buf, momentum, out=buf)
        else:
            # buf = m*buf + (1-damp)*d = (1-damp) * (m/(1-damp)*buf + d), with no second temporary.
            xp.multiply(buf, momentum / (1 - dampening), out=buf)
            xp.add(buf, d, out=buf)
            xp.multiply(buf, 1 - dampening, out=buf)
        if nesterov:
            # p -= lr * (d + m*buf), as two scaled subtractions through the one scratch array.
            xp.multiply(d, lr, out=s)
            xp.subtract(p, s, out=p)
            xp.multiply(buf, lr * momentum, out=s)
            xp.subtract(p, s, out=p)
            return
        d = buf
    xp.multiply(d, lr, out=s)
    xp.subtract(p, s, out=p)
