"""The intra-op thread count: how many threads the C++ kernels' pool (tinytorch._C._cpu, csrc/kernels/parallel.h)
uses. Starts from OMP_NUM_THREADS (tinytorch-run sets it to 1 when it starts several workers per node, as torchrun
does), else one per core; torch.set_num_threads changes it.

Matrix products run on the same pool (csrc/kernels/gemm.cpp calls a one-threaded cblas gemm, one block per
thread), so OpenBLAS's own threads are set to one: two thread pools on the same cores take them from each other.
The gemm is MKL's when the `mkl` wheel is installed (`pip install tinytorch[mkl]`; its sequential layer, no threads
of its own), else that of the OpenBLAS NumPy loaded; TINYTORCH_BLAS=openblas or =mkl chooses. MKL is what PyTorch
calls on the CPU, and on Intel cores it runs the transformer's products 15-25% faster than OpenBLAS
(docs/benchmarks.md, "tenth pass"). Where no library has a cblas gemm, OpenBLAS keeps the thread count instead."""
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


def _openblas_paths() -> list:
    """The OpenBLAS libraries loaded in this process (NumPy's), found through /proc/self/maps."""
    import numpy  # noqa: F401 - loads OpenBLAS, so that /proc/self/maps lists it
    try:
        with open("/proc/self/maps") as f:
            return sorted({p for p in (line.split()[-1] for line in f) if "openblas" in p.lower() and ".so" in p})
    except OSError:
        return []


def _blas_setter() -> Optional[ctypes._CFuncPtr]:
    """OpenBLAS's set_num_threads in the library NumPy loaded, if any."""
    for path in _openblas_paths():
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
    """Use n threads in the C++ kernels, matrix products included."""
    global count
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    count = n
    _C._cpu.set_num_threads(n)
    setter = _blas_setter()
    if setter is not None:
        setter(1 if blas_on_pool else n)


_MKL_SEQUENTIAL = 1  # MKL_THREADING_SEQUENTIAL: the pool splits the products, MKL must not start threads of its own


def _mkl_path() -> Optional[str]:
    """libmkl_rt of the installed `mkl` wheel, if any."""
    from importlib import metadata
    try:
        files = metadata.distribution("mkl").files or []
    except metadata.PackageNotFoundError:
        return None
    paths = [str(f.locate()) for f in files if f.name.startswith("libmkl_rt.so")]
    return os.path.realpath(sorted(paths)[-1]) if paths else None


def _load_mkl() -> bool:
    """Point gemm.cpp at MKL's cblas gemm in its sequential layer; False when the wheel is not installed."""
    path = _mkl_path()
    if path is None:
        return False
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return False
    lib.MKL_Set_Threading_Layer.argtypes, lib.MKL_Set_Threading_Layer.restype = [ctypes.c_int], ctypes.c_int
    lib.MKL_Set_Threading_Layer(_MKL_SEQUENTIAL)
    return _C._cpu.set_blas(path)


def _choose_blas() -> Optional[str]:
    """Set gemm.cpp's BLAS as TINYTORCH_BLAS asks (mkl, openblas; unset: MKL when installed) and name it."""
    want = os.environ.get("TINYTORCH_BLAS", "").strip().lower()
    if want not in ("", "mkl", "openblas"):
        raise RuntimeError(f"TINYTORCH_BLAS={want!r}: expected 'mkl' or 'openblas' (or unset: MKL when installed)")
    if want != "openblas" and _load_mkl():
        return "mkl"
    if want == "mkl":
        raise RuntimeError("TINYTORCH_BLAS=mkl, but the mkl wheel is not installed (pip install tinytorch[mkl]) "
                           "or has no cblas_sgemm")
    return "openblas" if any(_C._cpu.set_blas(p) for p in _openblas_paths()) else None


def use_blas(name: str) -> None:
    """Switch the library matrix products call in this process ("mkl" or "openblas"): for benchmarks that set
    the two side by side in one process (benchmarks/nanogpt.py --in-process --compare-blas)."""
    global blas
    ok = _load_mkl() if name == "mkl" else name == "openblas" and any(_C._cpu.set_blas(p) for p in _openblas_paths())
    if not ok:
        raise RuntimeError(f"use_blas({name!r}): expected 'mkl' (with the mkl wheel installed) or 'openblas'")
    blas = name


# The library matrix products call ("mkl", "openblas"; None: NumPy's matmul, with OpenBLAS's own threads).
blas = _choose_blas()
# Whether matrix products run on the pool (gemm.cpp found a cblas gemm).
blas_on_pool = blas is not None
if blas_on_pool and _blas_setter() is not None:
    _blas_setter()(1)
