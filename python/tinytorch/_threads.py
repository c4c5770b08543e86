"""The intra-op thread count: how many threads the C++ kernels' pool (tinytorch._C._cpu, csrc/kernels/parallel.h)
and NumPy's OpenBLAS use. Starts from OMP_NUM_THREADS (tinytorch-run sets it to 1 when it starts several
workers per node, as torchrun does), else one per core; torch.set_num_threads changes it."""
from __future__ import annotations

import atexit
import ctypes
import os
from typing import Optional

from . import _C


def _from_env() -> int:
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


count = _from_env()  # 0: one per core
_C._cpu.set_num_threads(count)
atexit.register(_C._cpu._shutdown_pool)

_BLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")


def _blas_setter() -> Optional[ctypes._CFuncPtr]:
    """OpenBLAS's set_num_threads in the library NumPy loaded (found through /proc/self/maps), if any."""
    try:
        with open("/proc/self/maps") as f:
            paths = {p for p in (line.split()[-1] for line in f) if "openblas" in p.lower() and ".so" in p}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _BLAS_SETTERS:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = [ctypes.c_int], None
                return fn
    return None


def get() -> int:
    """The thread count in effect (one per core when none was set)."""
    return count or (os.cpu_count() or 1)


def set(n: int) -> None:  # noqa: A001 - torch.set_num_threads's counterpart
    """Use n threads in the fused kernels and in OpenBLAS's matrix products."""
    global count
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    count = n
    _C._cpu.set_num_threads(n)
    import numpy  # noqa: F401 - loads OpenBLAS, so that /proc/self/maps lists it
    setter = _blas_setter()
    if setter is not None:
        setter(n)
