"""Rprop: per-coordinate step sizes grown or shrunk by the sign agreement of successive gradients."""
from __future__ import annotations

from typing import Any, Callable

from .._creation import full_like, zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """step_size *= etaplus where the gradient kept its sign, etaminus (and skip the step) where it flipped."""

    def __init__(self, params, lr: float | Tensor = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        with no_grad():
            for group in self.param_groups:
                etaminus, etaplus = group["etas"]
                step_size_min, step_size_max = group["step_sizes"]
                for p in _group_params_with_grad(group):
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _scalar(0.0)
                        state["prev"] = zeros_like(p)
                        state["step_size"] = full_like(p, float(group["lr"]))
                    _bump(state["step"])
                    g = _grad(p, group["maximize"]).clone()
                    prev, step_size = state["prev"], state["step_size"]
                    sign = g.mul(prev).sign()
                    factor = sign.clone()
                    factor[sign > 0] = etaplus
                    factor[sign < 0] = etaminus
                    factor[sign == 0] = 1
                    step_size.mul_(factor).clamp_(step_size_min, step_size_max)
                    g[sign < 0] = 0
                    p.addcmul_(g.sign(), step_size, value=-1)
                    prev.copy_(g)
        return loss
