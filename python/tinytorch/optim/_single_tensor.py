"""Shared pieces of the optimizers written with tensor ops (RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam,
Rprop, ASGD): their per-parameter scalar state and the validation PyTorch does on their hyperparameters."""
from __future__ import annotations

import numpy as np

from .._tensor import Tensor, _wrap


def _scalar(value: float) -> Tensor:
    """A 0-d float32 CPU tensor, the form PyTorch keeps step counters (and ASGD's eta, mu) in."""
    return _wrap(np.array(value, dtype=np.float32))


def _bump(t: Tensor) -> float:
    """Add one to a step counter in place and return its new value."""
    t._data += 1
    t._bump_version()
    return float(t._data)


def _check_lr(lr) -> None:
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _grad(p: Tensor, maximize: bool) -> Tensor:
    return -p.grad if maximize else p.grad
