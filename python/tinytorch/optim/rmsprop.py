"""RMSprop (Hinton's lecture 6e), optionally centered and with momentum, as PyTorch's single-tensor update."""
from __future__ import annotations

from typing import Any, Callable

from .._creation import zeros_like
from .._tensor import Tensor
from ..autograd.grad_mode import no_grad
from ._single_tensor import _bump, _check_lr, _grad, _scalar
from .optimizer import Optimizer, _group_params_with_grad, _use_closure

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """Divides the gradient by a running RMS of recent gradients (minus their running mean when centered)."""

    def __init__(self, params, lr: float | Tensor = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns the closure's loss if given."""
        loss = _use_closure(closure)
        with no_grad():
            for group in self.param_groups:
                lr, alpha, eps = float(group["lr"]), group["alpha"], group["eps"]
                wd, momentum, centered = group["weight_decay"], group["momentum"], group["centered"]
                for p in _group_params_with_grad(group):
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = _scalar(0.0)
                        state["square_avg"] = zeros_like(p)
                        if momentum > 0:
                            state["momentum_buffer"] = zeros_like(p)
                        if centered:
                            state["grad_avg"] = zeros_like(p)
                    _bump(state["step"])
                    g = _grad(p, group["maximize"])
                    if wd != 0:
                        g = g.add(p, alpha=wd)
                    square_avg = state["square_avg"]
                    square_avg.mul_(alpha).addcmul_(g, g, value=1 - alpha)
                    if centered:
                        grad_avg = state["grad_avg"]
                        grad_avg.lerp_(g, 1 - alpha)
                        avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                    else:
                        avg = square_avg.sqrt()
                    avg = avg.add_(eps)
                    if momentum > 0:
                        buf = state["momentum_buffer"]
                        buf.mul_(momentum).addcdiv_(g, avg)
                        p.add_(buf, alpha=-lr)
                    else:
                        p.addcdiv_(g, avg, value=-lr)
        return loss
