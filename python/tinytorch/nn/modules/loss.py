"""Loss modules: CrossEntropyLoss, MSELoss."""
from __future__ import annotations

import warnings

from ..._tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "MSELoss"]


def _legacy_reduction(size_average, reduce) -> str:
    """PyTorch's mapping of the deprecated size_average/reduce flags to a reduction string."""
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='{}' instead.".format(
        "none" if reduce is False else ("sum" if size_average is False else "mean")), stacklevel=3)
    if size_average is None:
        size_average = True
    if reduce is None:
        reduce = True
    if size_average and reduce:
        return "mean"
    if reduce:
        return "sum"
    return "none"


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            self.reduction = _legacy_reduction(size_average, reduce)
        else:
            self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight: Tensor | None = None, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.weight: Tensor | None


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy between logits and class indices (or class probabilities)."""

    def __init__(self, weight: Tensor | None = None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class MSELoss(_Loss):
    """Mean squared error (or its sum, or per element with reduction='none')."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)
