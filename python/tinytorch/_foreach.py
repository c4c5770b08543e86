"""torch._foreach_*: one op over a list of tensors (timm's EMA calls _foreach_lerp_, optimizers _foreach_mul_).
Each is the per-tensor op in a loop: tinytorch's fused multi-tensor kernels live inside the optimizers and
clip_grad_norm_, where the lists are known; here the list is the caller's. The second operand may be a number,
a list of numbers, a tensor or a list of tensors, as in PyTorch; trailing-underscore forms work in place."""
from __future__ import annotations

from typing import Any, Callable, List

from ._tensor import Tensor

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
          "sinh", "sqrt", "tan", "tanh", "trunc")
_BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "clamp_max", "clamp_min")
_TERNARY = ("addcmul", "addcdiv", "lerp")


def _check(tensors: Any, name: str) -> List[Tensor]:
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"_foreach_{name}(): argument 'self' must be tuple of Tensors")
    return list(tensors)


def _per(value: Any, n: int, name: str) -> list:
    """The second operand for each of n tensors: a list as given (its length checked), else the one value."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise RuntimeError(f"Tensor lists must have the same number of tensors, got {n} and {len(value)}")
        return list(value)
    return [value] * n


def _unary(name: str, inplace: bool) -> Callable:
    op = name + "_" if inplace else name

    def f(self: List[Tensor]) -> Any:
        ts = _check(self, op)
        out = [getattr(t, op)() for t in ts]
        return None if inplace else out
    return f


def _binary(name: str, inplace: bool) -> Callable:
    op = name + "_" if inplace else name

    def f(self: List[Tensor], other: Any, *, alpha: Any = 1) -> Any:
        ts = _check(self, op)
        others = _per(other, len(ts), op)
        kw = {"alpha": alpha} if name in ("add", "sub") and alpha != 1 else {}
        if inplace and not hasattr(Tensor, op):  # maximum/minimum have no in-place method: write the result back
            for t, o in zip(ts, others):
                t.copy_(getattr(t, name)(o))
            return None
        out = [getattr(t, op)(o, **kw) for t, o in zip(ts, others)]
        return None if inplace else out
    return f


def _ternary(name: str, inplace: bool) -> Callable:
    op = name + "_" if inplace else name

    def f(self: List[Tensor], a: Any, b: Any = None, value: Any = 1) -> Any:
        ts = _check(self, op)
        first = _per(a, len(ts), op)
        if name == "lerp":  # lerp(self, tensors1, weight)
            weights = _per(b, len(ts), op)
            out = [getattr(t, op)(x, w) for t, x, w in zip(ts, first, weights)]
        else:  # addcmul/addcdiv(self, tensor1, tensor2, value): value may be a list or a tensor of scalars
            second = _per(b, len(ts), op)
            vals = value.tolist() if isinstance(value, Tensor) else value
            vals = _per(vals, len(ts), op)
            out = [getattr(t, op)(x, y, value=v) for t, x, y, v in zip(ts, first, second, vals)]
        return None if inplace else out
    return f


def _foreach_zero_(self: List[Tensor]) -> None:
    for t in _check(self, "zero_"):
        t.zero_()


def _foreach_copy_(self: List[Tensor], src: List[Tensor], non_blocking: bool = False) -> None:
    for t, s in zip(_check(self, "copy_"), _per(src, len(self), "copy_")):
        t.copy_(s)


def _foreach_clone(self: List[Tensor]) -> List[Tensor]:
    return [t.clone() for t in _check(self, "clone")]


def _foreach_norm(self: List[Tensor], ord: float = 2, dtype: Any = None) -> List[Tensor]:
    return [t.norm(ord, dtype=dtype) for t in _check(self, "norm")]


def _foreach_max(self: List[Tensor]) -> List[Tensor]:
    return [t.max() for t in _check(self, "max")]


ops = {"_foreach_zero_": _foreach_zero_, "_foreach_copy_": _foreach_copy_, "_foreach_clone": _foreach_clone,
       "_foreach_norm": _foreach_norm, "_foreach_max": _foreach_max}
for _names, _make in ((_UNARY, _unary), (_BINARY, _binary), (_TERNARY, _ternary)):
    for _n in _names:
        for _inplace in (False, True):
            _f = _make(_n, _inplace)
            _f.__name__ = f"_foreach_{_n}{'_' if _inplace else ''}"
            _f.__doc__ = f"torch.{_n}{'_' if _inplace else ''} over each tensor of a list."
            ops[_f.__name__] = _f
