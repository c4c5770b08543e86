"""tinytorch.backends: PyTorch's backend switches (TF32, cuDNN, SDPA kernels, MPS...). tinytorch computes with
NumPy/CuPy, so the switches store what scripts set and report it back; the few that change results are noted."""
from __future__ import annotations

import warnings

from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp, opt_einsum  # noqa: F401

_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """Record float32 matmul precision ('highest' keeps full float32; 'high'/'medium' allow TF32, as PyTorch:
    this also sets backends.cuda.matmul.allow_tf32)."""
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.")
        return
    cuda.matmul._precision = precision


def get_float32_matmul_precision() -> str:
    """'highest', 'high' or 'medium' (what set_float32_matmul_precision or matmul.allow_tf32 last set)."""
    return cuda.matmul._precision


__all__ = ["cpu", "cuda", "cudnn", "get_float32_matmul_precision", "mkl", "mkldnn", "mps", "openmp", "opt_einsum",
           "set_float32_matmul_precision"]
