"""NAdam: Adam with Nesterov momentum and Dozat's momentum-decay schedule."""
from __future__ import annotations

from typing import Any, Callable

from .._creation import zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay)); the update mixes g and exp_avg by mu_t, mu_{t+1}."""

    def __init__(self, params, lr: float | Tensor = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, (beta1, beta2) = float(group["lr"]), group["betas"]
                eps, wd, psi = group["eps"], group["weight_decay"], group["momentum_decay"]
                for p in _group_params_with_grad(group):
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _scalar(0.0)
                        state["mu_product"] = _scalar(1.0)
                        state["exp_avg"] = zeros_like(p)
                        state["exp_avg_sq"] = zeros_like(p)
                    step = _bump(state["step"])
                    g = _grad(p, group["maximize"])
                    if wd != 0:
                        if group["decoupled_weight_decay"]:
                            p.mul_(1 - lr * wd)
                        else:
                            g = g.add(p, alpha=wd)
                    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * psi))
                    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
                    mu_product_t = state["mu_product"]
                    mu_product_t.mul_(mu)
                    mu_product = float(mu_product_t)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.lerp_(g, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                    denom = exp_avg_sq.div(1 - beta2 ** step).sqrt().add_(eps)
                    p.addcdiv_(g, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
                    p.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - mu_product * mu_next))
        return loss
