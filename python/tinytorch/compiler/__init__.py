"""tinytorch.compiler: torch.compiler's common entry points. tinytorch has no graph compiler, so compiling
returns its argument and the queries report that nothing is being compiled."""
from __future__ import annotations

from typing import Callable

from .._dynamo import allow_in_graph, disable, reset  # noqa: F401


def compile(*args, **kwargs):  # noqa: A001
    """Same as tinytorch.compile: the model or function, unchanged."""
    from .._misc import compile as _compile
    return _compile(*args, **kwargs)


def is_compiling() -> bool:
    """False: tinytorch never traces."""
    return False


def is_dynamo_compiling() -> bool:
    """False: tinytorch never traces."""
    return False


def is_exporting() -> bool:
    """False: tinytorch has no export."""
    return False


def cudagraph_mark_step_begin() -> None:
    """No CUDA graphs are captured: nothing to mark."""


def assume_constant_result(fn: Callable) -> Callable:
    """fn itself."""
    return fn


def list_backends(exclude_tags=("debug", "experimental")) -> list:
    """No compiler backends."""
    return []


__all__ = ["allow_in_graph", "assume_constant_result", "compile", "cudagraph_mark_step_begin", "disable",
           "is_compiling", "is_dynamo_compiling", "is_exporting", "list_backends", "reset"]
