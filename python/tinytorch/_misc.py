"""Small top-level helpers of the tinytorch namespace (kept apart: __init__ rebinds builtin names
such as `bool` and `float` to dtypes, as PyTorch does)."""
from __future__ import annotations

import numpy as np

from ._tensor import Tensor


def is_tensor(obj) -> bool:
    """Whether obj is a tinytorch Tensor."""
    return isinstance(obj, Tensor)


def numel(t: Tensor) -> int:
    """The number of elements of t."""
    return t.numel()


def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether |a - b| <= atol + rtol * |b| everywhere."""
    return bool(np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """Where |a - b| <= atol + rtol * |b|."""
    from ._creation import tensor
    return tensor(np.isclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(a: Tensor, b: Tensor) -> bool:
    """Same shape and same values."""
    return a.shape == b.shape and bool((a == b).all())


def get_num_threads() -> int:
    """The number of threads the fused CPU kernels and NumPy's OpenBLAS use."""
    from . import _threads
    return _threads.get()


def set_num_threads(n: int) -> None:
    """Use n threads in the fused CPU kernels and in OpenBLAS's matrix products (as PyTorch's intra-op pool)."""
    from . import _threads
    _threads.set(n)


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor", mode=None,  # noqa: A001
            options=None, disable: bool = False):
    """torch.compile's signature; tinytorch has no graph compiler, so scripts that compile run eagerly: a function
    comes back unchanged, a module wrapped in PyTorch's OptimizedModule (state_dict keys '_orig_mod.*', as
    PyTorch's, so compiled models' checkpoints load both ways). With no model: a decorator doing the same."""
    if model is None:
        return lambda m: compile(m, disable=disable)
    from .nn.modules.module import Module
    if disable or not isinstance(model, Module):
        return model
    from ._dynamo.eval_frame import OptimizedModule
    return OptimizedModule(model)


Tensor.allclose = allclose
Tensor.isclose = isclose
Tensor.equal = equal
