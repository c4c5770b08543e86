"""tinytorch._dynamo: the few torch._dynamo names scripts touch. tinytorch has no graph compiler
(tinytorch.compile runs eagerly: OptimizedModule in eval_frame.py only keeps PyTorch's wrapper), so these configure
nothing and wrap nothing."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

config = SimpleNamespace(suppress_errors=False, cache_size_limit=8, verbose=False,
                         optimize_ddp=True, capture_scalar_outputs=False)


def reset() -> None:
    """Nothing is compiled, so nothing is cached."""


def disable(fn: Callable | None = None, recursive: bool = True):
    """fn itself (no compiler to disable); usable bare or as @disable()."""
    return fn if fn is not None else (lambda f: f)


def allow_in_graph(fn: Callable) -> Callable:
    """fn itself."""
    return fn


def is_compiling() -> bool:
    """False: tinytorch never compiles."""
    return False
