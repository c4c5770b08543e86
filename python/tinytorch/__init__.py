"""tinytorch: a small training runtime with PyTorch's API (`import tinytorch as torch`)."""
from __future__ import annotations

from . import _C  # noqa: F401  (the C++ engine; also registers the Tensor helpers it calls)
from ._tensor import Size, Tensor
from ._dtype import (bfloat16, dtype, float16, float32, float64, get_default_dtype, int8, int16, int32, int64,
                     promote_types, result_type, set_default_dtype, uint8)
from ._dtype import bool_ as bool  # noqa: A001  (PyTorch's name)
from ._device import device
from . import _ops  # noqa: F401  (attaches the ops to Tensor)
from ._creation import *  # noqa: F401,F403
from ._creation import __all__ as _creation_all
from ._ops.pointwise import *  # noqa: F401,F403
from ._ops.pointwise import __all__ as _pointwise_all
from ._ops.reduction import (all, amax, amin, any, argmax, argmin, count_nonzero, cumsum, logsumexp, max, mean,
                             min, norm, prod, std, std_mean, sum, var, var_mean)
from ._ops.shape import (broadcast_tensors, broadcast_to, cat, chunk, clone, concat, concatenate, diagonal,
                         flatten, flip, hstack, movedim, narrow, permute, repeat_interleave, reshape, split, squeeze,
                         stack, t, tensor_split, tile, transpose, tril, triu, unbind, unflatten, unsqueeze, vstack)
from ._ops.linalg import addmm, baddbmm, bmm, dot, einsum, matmul, mm, mv, outer
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                                 set_grad_enabled)
from . import autograd, cuda, utils  # noqa: E402

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16

__version__ = "0.1.0"


def is_tensor(obj) -> bool:
    """Whether obj is a tinytorch Tensor."""
    return isinstance(obj, Tensor)


def numel(t: Tensor) -> int:
    return t.numel()


def allclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether |a - b| <= atol + rtol * |b| everywhere."""
    import numpy as _np
    return bool(_np.allclose(_np.asarray(a), _np.asarray(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(a: Tensor, b: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    import numpy as _np
    return tensor(_np.isclose(_np.asarray(a), _np.asarray(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(a: Tensor, b: Tensor) -> bool:
    """Same shape and same values."""
    return a.shape == b.shape and bool((a == b).all())


def get_num_threads() -> int:
    import os as _os
    return _os.cpu_count() or 1


def set_num_threads(n: int) -> None:
    """Accepted for compatibility: NumPy's BLAS threads are set by its own environment variables."""


def compile(model=None, **kwargs):  # noqa: A001
    """PyTorch 2's compiler has no counterpart here: the model is returned unchanged."""
    return model if model is not None else (lambda m: m)
