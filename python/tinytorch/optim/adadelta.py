"""Adadelta (Zeiler 2012): steps scaled by the ratio of running RMS of past updates to that of gradients."""
from __future__ import annotations

from typing import Any, Callable

from .._creation import zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g; p -= lr * delta."""

    def __init__(self, params, lr: float | Tensor = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, rho, eps, wd = float(group["lr"]), group["rho"], group["eps"], group["weight_decay"]
                for p in _group_params_with_grad(group):
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _scalar(0.0)
                        state["square_avg"] = zeros_like(p)
                        state["acc_delta"] = zeros_like(p)
                    _bump(state["step"])
                    g = _grad(p, group["maximize"])
                    if wd != 0:
                        g = g.add(p, alpha=wd)
                    square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                    square_avg.mul_(rho).addcmul_(g, g, value=1 - rho)
                    std = square_avg.add(eps).sqrt_()
                    delta = acc_delta.add(eps).sqrt_().div_(std).mul_(g)
                    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                    p.add_(delta, alpha=-lr)
        return loss
