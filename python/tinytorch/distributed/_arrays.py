"""Array plumbing shared by the backends: unwrap tensors, map dtypes, validate buffers."""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

# Codes match csrc/nccl_ring/dtypes.hpp.
_CODES = {
    np.dtype(np.float16): 0,
    np.dtype(np.float32): 2,
    np.dtype(np.float64): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
}
_BFLOAT16_CODE = 1  # ml_dtypes' bfloat16, recognised by name so ml_dtypes need not be imported here

SUPPORTED = "float16, bfloat16, float32, float64, int32, int64"


def array_of(x: Any) -> Any:
    """The NumPy/CuPy array behind a tinytorch Tensor (its `_data`), or the array itself. A contiguous complex
    array comes as its real view (re, im, re, im, ...): collectives move and sum complex numbers as real pairs,
    as PyTorch's do through view_as_real."""
    data = getattr(x, "_data", None)
    if data is None:
        if not (isinstance(x, np.ndarray) or _is_cupy(x)):
            raise TypeError(f"expected a tinytorch Tensor or an ndarray, got {type(x).__name__}")
        data = x
    if data.dtype.kind == "c" and data.flags["C_CONTIGUOUS"]:
        return data.view(data.real.dtype)
    return data


def is_complex(x: Any) -> bool:
    """Whether a tensor or array holds complex numbers."""
    return getattr(x, "_data", x).dtype.kind == "c"


def _is_cupy(a: Any) -> bool:
    return type(a).__module__.startswith("cupy")


def is_cuda(a: Any) -> bool:
    """True for a CuPy (device) array."""
    return _is_cupy(a)


def dtype_code(a: Any, op: str) -> int:
    """The C++ dtype code of an array, or a TypeError naming the op and the supported dtypes."""
    d = np.dtype(a.dtype)
    code = _CODES.get(d, _BFLOAT16_CODE if d.name == "bfloat16" else None)
    if code is None:
        raise TypeError(f"{op}: dtype {a.dtype} is not supported (supported: {SUPPORTED})")
    return code


def data_ptr(a: Any) -> int:
    """Address of the first element (host or device)."""
    if _is_cupy(a):
        return int(a.data.ptr)
    return int(a.__array_interface__["data"][0])


def check_contiguous(a: Any, op: str, name: str = "tensor", writable: bool = False) -> None:
    """Raise a clear ValueError unless `a` is C-contiguous (and writable when it is an output)."""
    if not a.flags["C_CONTIGUOUS"]:
        raise ValueError(f"{op}: {name} must be contiguous (shape {tuple(a.shape)}, strides {a.strides})")
    if writable and not _is_cupy(a) and not a.flags["WRITEABLE"]:
        raise ValueError(f"{op}: {name} is read-only but the collective writes into it")


def describe(a: Any) -> Tuple[Tuple[int, ...], str, str]:
    """(shape, dtype name, device type) of an array, for fingerprints and errors."""
    return tuple(int(s) for s in a.shape), str(np.dtype(a.dtype)), "cuda" if _is_cupy(a) else "cpu"


def bump_version(x: Any) -> None:
    """Tell autograd that a tensor was written in place."""
    bump = getattr(x, "_bump_version", None)
    if bump is not None:
        bump()
