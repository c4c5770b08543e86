"""torch.jit.trace for tinytorch: runs the function or module once on the example inputs (so that a call that
cannot run fails here, as tracing would) and returns an eager wrapper: a TopLevelTracedModule for a module, a
ScriptFunction for a function. No graph is recorded, so later calls follow Python control flow on their own inputs
(a trace would replay the example's path)."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Optional, Tuple

from ..nn.modules.module import Module
from ._script import RecursiveScriptModule, ScriptFunction, ScriptModule, _wrap_module

__all__ = ["TopLevelTracedModule", "TracedModule", "TracerWarning", "TracingCheckError", "trace", "trace_module"]


class TracerWarning(Warning):
    """Warned by tracing about code a trace would not capture faithfully."""


class TracingCheckError(Exception):
    """Raised when a trace check fails."""

    def __init__(self, graph_diff_error: str, tensor_compare_error: str, extra_msg: Optional[str] = None) -> None:
        self.message = "Tracing failed sanity checks!\n"
        if extra_msg is not None:
            self.message += extra_msg + "\n"
        if graph_diff_error is not None:
            self.message += f"ERROR: Graphs differed across invocations!\n{graph_diff_error}\n"
        if tensor_compare_error is not None:
            self.message += f"ERROR: Tensor-valued Constant nodes differed in value across invocations.\n" \
                            f"{tensor_compare_error}\n"
        super().__init__(self.message)


class TracedModule(ScriptModule):
    """A traced submodule; the concrete class also derives from the traced module's class."""

    _original_class = Module
    __reduce_ex__ = RecursiveScriptModule.__reduce_ex__

    @property
    def original_name(self) -> str:
        return self._original_class.__name__

    def _get_name(self) -> str:
        return self.original_name

    def extra_repr(self) -> str:
        return f"original_name={self.original_name}"


class TopLevelTracedModule(TracedModule):
    """What torch.jit.trace(module, ...) returns."""

    __reduce_ex__ = RecursiveScriptModule.__reduce_ex__


def _as_args(example_inputs: Any) -> Tuple[Any, ...]:
    return example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)


def _run_once(fn: Callable, example_inputs: Any, example_kwarg_inputs: Optional[Dict[str, Any]]) -> None:
    if example_kwarg_inputs is not None:
        if not isinstance(example_kwarg_inputs, dict):
            raise RuntimeError(f"example_kwarg_inputs should be a dict, got {type(example_kwarg_inputs).__name__}")
        fn(**example_kwarg_inputs)
    elif example_inputs is None:
        raise RuntimeError("example_kwarg_inputs or example_inputs must be given to trace")
    else:
        fn(*_as_args(example_inputs))


def trace(func: Any, example_inputs: Any = None, optimize: Optional[bool] = None, check_trace: bool = True,
          check_inputs: Any = None, check_tolerance: float = 1e-05, strict: bool = True,
          _force_outplace: bool = False, _module_class: Any = None, _compilation_unit: Any = None,
          example_kwarg_inputs: Optional[Dict[str, Any]] = None, _store_inputs: bool = True) -> Any:
    """Run `func` once on the example inputs and return it wrapped as a traced module or ScriptFunction."""
    warnings.warn("`torch.jit.trace` is deprecated. Please switch to `torch.compile` or `torch.export`.",
                  DeprecationWarning, stacklevel=1)
    if optimize is not None:
        warnings.warn("`optimize` is deprecated and has no effect. Use `with torch.jit.optimized_execution()` "
                      "instead", FutureWarning, stacklevel=2)
    if isinstance(func, (ScriptModule, ScriptFunction)):
        warnings.warn("The input to trace is already a ScriptModule, tracing it is a no-op. Returning the object "
                      "as is.", stacklevel=2)
        return func
    if isinstance(func, Module):
        traced = _wrap_module(func, TopLevelTracedModule, TracedModule, {})
        _run_once(traced, example_inputs, example_kwarg_inputs)
        return traced
    if not callable(func):
        raise TypeError(f"torch.jit.trace expects an nn.Module or a function, got {type(func).__name__}")
    _run_once(func, example_inputs, example_kwarg_inputs)
    return ScriptFunction(func)


def trace_module(mod: Module, inputs: Dict[str, Any], optimize: Optional[bool] = None, check_trace: bool = True,
                 check_inputs: Any = None, check_tolerance: float = 1e-05, strict: bool = True,
                 _force_outplace: bool = False, _module_class: Any = None, _compilation_unit: Any = None,
                 example_inputs_is_kwarg: bool = False, _store_inputs: bool = True) -> Module:
    """Trace the named methods of `mod`: run each once on its example inputs; returns the traced module."""
    warnings.warn("`torch.jit.trace_method` is deprecated. Please switch to `torch.compile` or `torch.export`.",
                  DeprecationWarning, stacklevel=1)
    if not isinstance(mod, Module):
        raise AttributeError("expected torch.nn.Module as the first argument")
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    traced = _wrap_module(mod, TopLevelTracedModule, TracedModule, {})
    for method_name, example in inputs.items():
        method = getattr(traced, method_name)
        if example_inputs_is_kwarg:
            method(**example)
        else:
            method(*_as_args(example))
    return traced
