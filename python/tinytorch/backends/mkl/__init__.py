"""tinytorch.backends.mkl: whether the CPU's matrix products run on Intel's MKL (the `mkl` extra; tinytorch
calls its one-threaded gemm from its own pool) rather than NumPy's OpenBLAS."""
from __future__ import annotations

VERBOSE_OFF = 0
VERBOSE_ON = 1


def is_available() -> bool:
    """True when tinytorch's matrix products call MKL (the `mkl` wheel installed, TINYTORCH_BLAS not openblas)."""
    from ... import _threads
    return _threads.blas == "mkl"


class verbose:
    """Context manager that has MKL print one line per call (MKL_VERBOSE) while it is active; nothing happens
    when MKL is not the BLAS in use."""

    def __init__(self, enable: int) -> None:
        self.enable = enable

    def __enter__(self) -> "verbose":
        if self.enable != VERBOSE_OFF and is_available():
            _set_verbose(self.enable)
        return self

    def __exit__(self, *exc) -> bool:
        if self.enable != VERBOSE_OFF and is_available():
            _set_verbose(VERBOSE_OFF)
        return False


def _set_verbose(level: int) -> None:
    import ctypes

    from ... import _threads
    lib = ctypes.CDLL(_threads._mkl_path())
    lib.MKL_Verbose.argtypes, lib.MKL_Verbose.restype = [ctypes.c_int], ctypes.c_int
    lib.MKL_Verbose(level)
