"""torch.finfo and torch.iinfo: the numeric limits of a dtype, with PyTorch's attributes, from NumPy's finfo/iinfo
(ml_dtypes' finfo for bfloat16)."""
from __future__ import annotations

import numpy as np

from ._dtype import bfloat16, bool_, dtype, get_default_dtype
from ._ops.special import as_dtype

__all__ = ["finfo", "iinfo"]


class finfo:
    """Machine limits of a floating dtype (of a complex dtype's parts); the default dtype when called without one."""

    def __init__(self, type: dtype | None = None) -> None:
        d = get_default_dtype() if type is None else as_dtype(type, "finfo", "type", 1).to_real()
        if not d.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        if d is bfloat16:
            import ml_dtypes
            info = ml_dtypes.finfo(d.np)
        else:
            info = np.finfo(d.np)
        self.bits: int = int(info.bits)
        self.eps: float = float(info.eps)
        self.max: float = float(info.max)
        self.min: float = float(info.min)
        self.tiny: float = float(info.smallest_normal)
        self.smallest_normal: float = self.tiny
        self.resolution: float = 10.0 ** -int(info.precision)  # as PyTorch: exactly 1e-06, not float32's nearest
        self.dtype: str = d.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, finfo) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype."""

    def __init__(self, type: dtype) -> None:
        d = as_dtype(type, "iinfo", "type", 1)
        if d is bool_:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if d.is_floating_point or d.is_complex:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        info = np.iinfo(d.np)
        self.bits: int = int(info.bits)
        self.max: int = int(info.max)
        self.min: int = int(info.min)
        self.dtype: str = d.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, iinfo) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
