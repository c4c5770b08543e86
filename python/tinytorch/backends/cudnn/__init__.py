"""tinytorch.backends.cudnn: cuDNN's switches, stored (tinytorch's convolutions don't call cuDNN)."""
from __future__ import annotations

import contextlib

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """False: tinytorch does not use cuDNN."""
    return False


def version():
    """None: no cuDNN is loaded (PyTorch's answer when cuDNN is unavailable)."""
    return None


@contextlib.contextmanager
def flags(enabled: bool = False, benchmark: bool = False, deterministic: bool = False, allow_tf32: bool = True):
    """Set the cuDNN switches for a region, restoring them on exit."""
    g = globals()
    prev = {k: g[k] for k in ("enabled", "benchmark", "deterministic", "allow_tf32")}
    g.update(enabled=enabled, benchmark=benchmark, deterministic=deterministic, allow_tf32=allow_tf32)
    try:
        yield
    finally:
        g.update(prev)
