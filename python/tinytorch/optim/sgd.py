"""SGD with momentum, dampening, Nesterov, weight decay and maximize (PyTorch's update rule)."""
from __future__ import annotations

from typing import Any, Callable

from .._tensor import _wrap
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
                    new_buf = _sgd_update(self, p._data, p._grad._data, buf, lr, momentum, dampening, wd, nesterov,
                                          maximize)
                    if momentum != 0 and buf is None:
                        state["momentum_buffer"] = _wrap(new_buf)
                    elif buf is not None:
                        buf._bump_version()
                    p._bump_version()
        return loss


def _sgd_update(opt: Optimizer, p, g, buf, lr: float, momentum: float, dampening: float, wd: float,
                nesterov: bool, maximize: bool):
    """The update on raw arrays with one scratch array; returns the momentum buffer array (new or updated)."""
    xp = _xp(p)
    s = opt._scratch_like(p)
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
    buf_arr = None
    if momentum != 0:
        if buf is None:
            buf_arr = d.copy()
        else:
            buf_arr = buf._data
            if dampening == 0:
                xp.multiply(buf_arr, momentum, out=buf_arr)
                xp.add(buf_arr, d, out=buf_arr)
            elif dampening == 1:
                xp.multiply(buf_arr, momentum, out=buf_arr)
            else:
                # buf = m*buf + (1-damp)*d = (1-damp) * (m/(1-damp)*buf + d), with no second temporary.
                xp.multiply(buf_arr, momentum / (1 - dampening), out=buf_arr)
                xp.add(buf_arr, d, out=buf_arr)
                xp.multiply(buf_arr, 1 - dampening, out=buf_arr)
        if nesterov:
            # p -= lr * (d + m*buf), as two scaled subtractions through the one scratch array.
            if d is s:
                xp.multiply(s, lr, out=s)
                xp.subtract(p, s, out=p)
            else:
                xp.multiply(d, lr, out=s)
                xp.subtract(p, s, out=p)
            xp.multiply(buf_arr, lr * momentum, out=s)
            xp.subtract(p, s, out=p)
            return buf_arr
        d = buf_arr
    xp.multiply(d, lr, out=s)
    xp.subtract(p, s, out=p)
    return buf_arr
