"""ASGD: SGD with Polyak-Ruppert averaging of the iterates (the average kept in state['ax'])."""
from __future__ import annotations

from typing import Any, Callable

from .._creation import zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """p = p * (1 - lambd*eta) - eta*g; eta = lr / (1 + lambd*lr*t)^alpha; averaging starts after t0 steps."""

    def __init__(self, params, lr: float | Tensor = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, lambd, alpha, t0 = float(group["lr"]), group["lambd"], group["alpha"], group["t0"]
                wd = group["weight_decay"]
                for p in _group_params_with_grad(group):
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _scalar(0.0)
                        state["eta"] = _scalar(lr)
                        state["mu"] = _scalar(1.0)
                        state["ax"] = zeros_like(p)
                    step = _bump(state["step"])
                    g = _grad(p, group["maximize"])
                    if wd != 0:
                        g = g.add(p, alpha=wd)
                    eta = float(state["eta"])
                    p.mul_(1 - lambd * eta)
                    p.add_(g, alpha=-eta)
                    ax, mu = state["ax"], float(state["mu"])
                    if mu != 1:
                        ax.add_(p.sub(ax).mul_(mu))
                    else:
                        ax.copy_(p)
                    state["eta"].fill_(lr / ((1 + lambd * lr * step) ** alpha))
                    state["mu"].fill_(1 / max(1, step - t0))
        return loss
