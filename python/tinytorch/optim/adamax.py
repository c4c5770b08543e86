"""Adamax: Adam with the infinity norm in place of the second moment."""
from __future__ import annotations

from typing import Any, Callable

from .._creation import zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """exp_inf = max(beta2 * exp_inf, |g| + eps); p -= lr / (1 - beta1^t) * exp_avg / exp_inf."""

    def __init__(self, params, lr: float | Tensor = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        from .. import maximum
        loss = _use_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, (beta1, beta2) = float(group["lr"]), group["betas"]
                eps, wd = group["eps"], group["weight_decay"]
                for p in _group_params_with_grad(group):
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _scalar(0.0)
                        state["exp_avg"] = zeros_like(p)
                        state["exp_inf"] = zeros_like(p)
                    step = _bump(state["step"])
                    g = _grad(p, group["maximize"])
                    if wd != 0:
                        g = g.add(p, alpha=wd)
                    exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                    exp_avg.lerp_(g, 1 - beta1)
                    exp_inf.copy_(maximum(exp_inf.mul_(beta2), g.abs().add_(eps)))
                    p.addcdiv_(exp_avg, exp_inf, value=-lr / (1 - beta1 ** step))
        return loss
