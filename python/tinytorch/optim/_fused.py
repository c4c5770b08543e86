"""The CUDA path of Adam/AdamW: one fused kernel launch per parameter (tinytorch._kernels.adamw_step,
compiled from src/adamw.cu) instead of a dozen CuPy ufunc passes."""
from __future__ import annotations

import numpy as np


def adamw_step_cuda(p, g, m, v, vmax, step: float, lr: float, beta1: float, beta2: float, eps: float, wd: float,
                    decoupled: bool, maximize: bool) -> bool:
    """Run the fused kernel on CuPy arrays; False when the case is outside what the kernel computes
    (amsgrad, maximize, L2-coupled weight decay, non-float32 or non-contiguous state), so the caller
    takes the ufunc path."""
    if vmax is not None or maximize or (wd != 0 and not decoupled):
        return False
    for a in (p, m, v):
        if a.dtype != np.float32 or not a.flags.c_contiguous:
            return False
    if not g.flags.c_contiguous:
        return False
    from .._kernels import adamw_step
    adamw_step(p, g, m, v, lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=wd, step=int(step))
    return True
