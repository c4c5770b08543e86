"""Adagrad: per-coordinate steps scaled by the root of the summed squared gradients (PyTorch's update)."""
from __future__ import annotations

from typing import Any, Callable

from .._creation import full_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """lr / (1 + (step-1)*lr_decay) * g / (sqrt(sum of g^2) + eps)."""

    def __init__(self, params, lr: float | Tensor = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        # PyTorch creates Adagrad's state eagerly, so state_dict() has it before the first step.
        for group in self.param_groups:
            for p in group["params"]:
                _init_state(self.state[p], p, group)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, lr_decay, wd, eps = float(group["lr"]), group["lr_decay"], group["weight_decay"], group["eps"]
                for p in _group_params_with_grad(group):
                    state = self.state[p]
                    if len(state) == 0:  # a group added by add_param_group after construction
                        _init_state(state, p, group)
                    step = _bump(state["step"])
                    g = _grad(p, group["maximize"])
                    if wd != 0:
                        g = g.add(p, alpha=wd)
                    clr = lr / (1 + (step - 1) * lr_decay)
                    state["sum"].addcmul_(g, g, value=1)
                    std = state["sum"].sqrt().add_(eps)
                    p.addcdiv_(g, std, value=-clr)
        return loss


def _init_state(state: dict, p: Tensor, group: dict) -> None:
    state["step"] = _scalar(0.0)
    state["sum"] = full_like(p, group["initial_accumulator_value"])
