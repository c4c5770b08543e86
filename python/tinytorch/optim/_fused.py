"""The CUDA path of Adam/AdamW: one fused kernel per parameter when tinytorch._kernels provides
`adamw_step`; otherwise the caller falls back to the in-place CuPy ufunc sequence."""
from __future__ import annotations


def adamw_step_cuda(p, g, m, v, vmax, step: float, lr: float, beta1: float, beta2: float, eps: float, wd: float,
                    decoupled: bool, maximize: bool) -> bool:
    """Run the fused kernel on CuPy arrays; False when it is unavailable or does not cover this case."""
    if vmax is not None or not (p.flags.c_contiguous and g.flags.c_contiguous) or g.dtype != p.dtype:
        return False
    try:
        from .. import _kernels
        kernel = _kernels.adamw_step
    except (ImportError, AttributeError):
        return False
    return bool(kernel(p, g, m, v, step=step, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd,
                       decoupled=decoupled, maximize=maximize))
