"""Dropout, channel dropout (Dropout1d/2d/3d) and AlphaDropout."""
from __future__ import annotations

from ..._tensor import Tensor
from .. import functional as F
from ..._ops import dropout as _drop
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"]


class Dropout(Module):
    """In training, zero each element with probability p and scale the rest by 1/(1-p); identity in eval."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _DropoutNd(Module):
    __constants__ = ["p", "inplace"]

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """In training, zero whole channels of (N, C, L) input with probability p (scaling the rest)."""

    def forward(self, input: Tensor) -> Tensor:
        return _drop.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """In training, zero whole channels of (N, C, H, W) input with probability p (scaling the rest)."""

    def forward(self, input: Tensor) -> Tensor:
        return _drop.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """In training, zero whole channels of (N, C, D, H, W) input with probability p (scaling the rest)."""

    def forward(self, input: Tensor) -> Tensor:
        return _drop.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: keeps zero mean and unit variance."""

    def forward(self, input: Tensor) -> Tensor:
        return _drop.alpha_dropout(input, self.p, self.training)
