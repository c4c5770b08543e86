"""RAdam: Adam whose adaptive term is switched on, with a variance rectification, once it is reliable."""
from __future__ import annotations

import math
from typing import Any, Callable

from .._creation import zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """Plain momentum SGD while rho_t <= 5, then the rectified Adam step."""

    def __init__(self, params, lr: float | Tensor = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
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
                        state["exp_avg_sq"] = zeros_like(p)
                    step = _bump(state["step"])
                    g = _grad(p, group["maximize"])
                    if wd != 0:
                        if group["decoupled_weight_decay"]:
                            p.mul_(1 - lr * wd)
                        else:
                            g = g.add(p, alpha=wd)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.lerp_(g, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2 = 1 - beta2 ** step
                    corrected = exp_avg / bias_correction1
                    rho_inf = 2 / (1 - beta2) - 1
                    rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                    if rho_t > 5.0:
                        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                         / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                        adaptive = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
                        p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
                    else:
                        p.add_(corrected * lr, alpha=-1.0)
        return loss
