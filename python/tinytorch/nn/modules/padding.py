"""Padding layers: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad in 1-3 dimensions."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..._tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]


def _ntuple(padding, n: int) -> tuple:
    """PyTorch's nn.modules.utils._ntuple: an iterable as a tuple (length unchecked), an int repeated n times."""
    if isinstance(padding, Iterable):
        return tuple(padding)
    return (padding,) * n


class _PadNd(Module):
    """A padding layer: F.pad(input, padding, mode) with padding (left, right, top, bottom, front, back)."""

    __constants__ = ["padding"]
    padding: Sequence[int]
    _mode = "constant"
    _nd = 1

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._nd)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def _check_input_dim(self, input: Tensor) -> None:
        batched = self._nd + 2
        if input.dim() != batched - 1 and input.dim() != batched:
            raise ValueError(f"expected {batched - 1}D or {batched}D input (got {input.dim()}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        return super().forward(input)


class CircularPad1d(_CircularPadNd):
    """Pad the last dim of (C, W) or (N, C, W) input by wrapping around: padding int or (left, right)."""
    _nd = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last 2 dims by wrapping around: padding int or (left, right, top, bottom)."""
    _nd = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last 3 dims by wrapping around: padding int or (left, right, top, bottom, front, back)."""
    _nd = 3


class _ConstantPadNd(_PadNd):
    __constants__ = ["padding", "value"]
    value: float

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value`: padding int or (left, right)."""
    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with `value`: padding int or (left, right, top, bottom)."""
    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with `value`: padding int or (left, right, top, bottom, front, back)."""
    _nd = 3


class _ReflectionPadNd(_PadNd):
    _mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    """Pad the last dim with its reflection about the edge (edge not repeated): padding int or (left, right)."""
    _nd = 1


class ReflectionPad2d(_ReflectionPadNd):
    """Pad the last 2 dims with their reflection: padding int or (left, right, top, bottom)."""
    _nd = 2


class ReflectionPad3d(_ReflectionPadNd):
    """Pad the last 3 dims with their reflection: padding int or (left, right, top, bottom, front, back)."""
    _nd = 3


class _ReplicationPadNd(_PadNd):
    _mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    """Pad the last dim by repeating its edge values: padding int or (left, right)."""
    _nd = 1


class ReplicationPad2d(_ReplicationPadNd):
    """Pad the last 2 dims by repeating their edge values: padding int or (left, right, top, bottom)."""
    _nd = 2


class ReplicationPad3d(_ReplicationPadNd):
    """Pad the last 3 dims by repeating their edge values: padding int or (left, right, top, bottom, front, back)."""
    _nd = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros: padding int or (left, right)."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last 2 dims with zeros: padding int or (left, right, top, bottom)."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last 3 dims with zeros: padding int or (left, right, top, bottom, front, back)."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"
