"""torch.jit for tinytorch, which has no TorchScript compiler: everything runs eagerly, as PyTorch code does outside
TorchScript.

- script(fn_or_module) / trace(fn_or_module, example_inputs) return ScriptFunction / ScriptModule wrappers that
  call the Python code (see _script.py and _trace.py); is_scripting() and is_tracing() are False.
- ignore, unused, export, interface, script_method, Final, annotate, Attribute and isinstance behave as they do
  in eager PyTorch (markers, identity, a runtime type check).
- save / load write and read tinytorch checkpoints holding the module, not TorchScript archives (_serialization.py).
- fork runs the function at once and returns a completed torch.futures.Future, as PyTorch's fork does outside
  TorchScript.
- freeze / optimize_for_inference and the fuser switches check their arguments and change nothing.
"""
from __future__ import annotations

import builtins
import contextlib
import inspect
import typing
from typing import Any, Callable, Iterator, Optional, TypeVar

from ..futures import Future
from ._script import (Attribute, RecursiveScriptModule, ScriptFunction, ScriptModule, script,  # noqa: F401
                      script_method)
from ._serialization import load, save
from ._trace import TopLevelTracedModule, TracedModule, TracerWarning, TracingCheckError, trace, trace_module

__all__ = ["Attribute", "Error", "Final", "Future", "RecursiveScriptModule", "ScriptFunction", "ScriptModule",
           "ScriptWarning", "TopLevelTracedModule", "TracedModule", "TracerWarning", "TracingCheckError", "annotate",
           "enable_onednn_fusion", "export", "fork", "freeze", "fuser", "ignore", "interface", "is_scripting",
           "is_tracing", "isinstance", "load", "onednn_fusion_enabled", "optimize_for_inference",
           "optimized_execution", "run_frozen_optimizations", "save", "script", "script_if_tracing",
           "script_method", "set_fusion_strategy", "strict_fusion", "trace", "trace_module", "unused", "wait"]

_T = TypeVar("_T")
Final = typing.Final


class Error(RuntimeError):
    """torch.jit.Error: raised by TorchScript's `raise` statements (a RuntimeError)."""


class ScriptWarning(Warning):
    """Warned about scripted code."""


def is_scripting() -> bool:
    """False: tinytorch never runs code as TorchScript (PyTorch returns True only inside compiled code)."""
    return False


def is_tracing() -> bool:
    """False: tinytorch's trace records no graph, so code never runs under a tracer."""
    return False


def annotate(the_type: Any, the_value: _T) -> _T:
    """Tells the TorchScript compiler the type of `the_value`; eagerly, returns the value."""
    return the_value


def _marker(fn: Optional[Callable], modifier: str) -> Any:
    # PyTorch records the modifier on the function; kept so code that inspects it finds it
    if fn is not None:
        try:
            fn._torchscript_modifier = modifier
        except (AttributeError, TypeError):
            pass
    return fn


def ignore(drop: Any = False, **kwargs: Any) -> Any:
    """Leaves a function to Python instead of compiling it: `@ignore` or `@ignore(drop=...)`; returns it unchanged."""
    if callable(drop):
        return _marker(drop, "ignore")
    if not builtins.isinstance(drop, bool):
        raise RuntimeError(f"Argument to @torch.jit.ignore must be a bool or a function but got {drop}")
    return lambda fn: _marker(fn, "unused" if drop else "ignore")


def unused(fn: _T) -> _T:
    """Marks a function (or property) the compiler should replace by a raise; eagerly, returns it unchanged."""
    if builtins.isinstance(fn, property):
        _marker(fn.fget, "unused")
        return fn
    return _marker(fn, "unused")


def export(fn: _T) -> _T:
    """Marks a method to be compiled as an entry point; eagerly, returns it unchanged."""
    return _marker(fn, "export")


def interface(obj: _T) -> _T:
    """Declares a TorchScript interface type; eagerly, returns the class unchanged."""
    if not inspect.isclass(obj):
        raise RuntimeError("interface must be applied to a class")
    return obj


def script_if_tracing(fn: _T) -> _T:
    """Compiles fn when first called under a tracer; tinytorch never traces, so fn is returned unchanged."""
    return fn


_script_if_tracing = script_if_tracing


def _overload(func: _T) -> _T:
    """Declares a TorchScript overload signature; eagerly, returns it unchanged."""
    return func


def _overload_method(func: _T) -> _T:
    """Declares a TorchScript method overload signature; eagerly, returns it unchanged."""
    return func


def _unwrap_optional(x: Optional[_T]) -> _T:
    """x, which must not be None (TorchScript's Optional refinement)."""
    if x is None:
        raise AssertionError("Unwrapping null optional")
    return x


def _type_matches(obj: Any, target: Any) -> bool:
    origin = typing.get_origin(target)
    args = typing.get_args(target)
    if target is Any:
        return True
    if target is None or target is type(None):
        return obj is None
    if origin is typing.Union or type(target).__name__ == "UnionType":
        return any(_type_matches(obj, a) for a in args)
    if origin in (list, tuple, dict) and not args:
        raise RuntimeError(f"Attempted to use {origin.__name__} without a contained type. Please add a contained "
                           f"type, e.g. {origin.__name__}[int]")
    if origin is list:
        return type(obj) is list and all(_type_matches(e, args[0]) for e in obj)
    if origin is dict:
        return type(obj) is dict and all(_type_matches(k, args[0]) and _type_matches(v, args[1])
                                         for k, v in obj.items())
    if origin is tuple:
        if not builtins.isinstance(obj, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_type_matches(e, args[0]) for e in obj)
        return len(obj) == len(args) and all(_type_matches(e, a) for e, a in zip(obj, args))
    if target in (list, tuple, dict, typing.List, typing.Tuple, typing.Dict):
        name = getattr(target, "__name__", None) or getattr(target, "_name", str(target)).lower()
        raise RuntimeError(f"Attempted to use {name} without a contained type. Please add a contained type, e.g. "
                           f"{name}[int]")
    return builtins.isinstance(obj, target)



def isinstance(obj: Any, target_type: Any) -> bool:  # noqa: A001 - PyTorch's name
    """Whether obj matches a TorchScript type, containers included (List[int], Dict[str, Tensor], Optional[...])."""
    return _type_matches(obj, target_type)


def fork(func: Callable[..., _T], *args: Any, **kwargs: Any) -> Future:
    """Run func(*args, **kwargs) and return a Future holding its result (or error). Like PyTorch's fork outside
    TorchScript, the call runs at once, on this thread."""
    fut = Future()
    try:
        result = func(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - handed to whoever waits on the future
        fut.set_exception(e)
    else:
        fut.set_result(result)
    return fut


def wait(future: Future) -> Any:
    """The value of a Future returned by fork (raising the error of the forked call, if it raised)."""
    return future.wait()


def _scripted(mod: Any, what: str) -> None:
    if not builtins.isinstance(mod, ScriptModule):
        raise RuntimeError(f"{what} expects a ScriptModule as input. Please use torch.jit.script or "
                           "torch.jit.trace to script your 'nn.Module'.")


def freeze(mod: ScriptModule, preserved_attrs: Optional[list] = None, optimize_numerics: bool = True) -> ScriptModule:
    """Inline a module's parameters as constants (PyTorch); eagerly there is nothing to inline: returns mod."""
    _scripted(mod, "Freezing")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. Please call .eval() "
                           "on your module before freezing.")
    return mod


def run_frozen_optimizations(mod: ScriptModule, optimize_numerics: bool = True,
                             preserved_methods: Optional[list] = None) -> None:
    """Graph optimizations of a frozen module; eagerly a no-op."""
    _scripted(mod, "run_frozen_optimizations")


def optimize_for_inference(mod: ScriptModule, other_methods: Optional[list] = None) -> ScriptModule:
    """Freeze and optimize a module for inference; eagerly, puts it in eval mode and returns it."""
    _scripted(mod, "optimize_for_inference")
    if mod.training:
        mod.eval()
    return mod


_fusion_strategy: list = [("STATIC", 2), ("DYNAMIC", 10)]
_onednn_fusion = False


def set_fusion_strategy(strategy: list) -> list:
    """Set the JIT fuser's specialization strategy; returns the previous one (no fuser runs in tinytorch)."""
    global _fusion_strategy
    for kind, depth in strategy:
        if kind not in ("STATIC", "DYNAMIC"):
            raise RuntimeError(f"Expected STATIC or DYNAMIC fusion type, got {kind}")
    previous, _fusion_strategy = _fusion_strategy, list(strategy)
    return previous


def enable_onednn_fusion(enabled: bool) -> None:
    """Switch the oneDNN JIT fuser (recorded only: no fuser runs in tinytorch)."""
    global _onednn_fusion
    _onednn_fusion = bool(enabled)


def onednn_fusion_enabled() -> bool:
    """Whether enable_onednn_fusion(True) was called."""
    return _onednn_fusion


@contextlib.contextmanager
def fuser(name: str) -> Iterator[None]:
    """Select the JIT fuser ('fuser0' none, 'fuser1' NNC, 'fuser2' nvFuser, 'fuser3' oneDNN) inside the block; no
    fuser runs in tinytorch, so only the name is checked."""
    if name not in ("fuser0", "fuser1", "fuser2", "fuser3", "none"):
        raise Exception(f"unrecognized fuser option (name: {name})")  # noqa: TRY002 - PyTorch's exception type
    yield


@contextlib.contextmanager
def optimized_execution(should_optimize: bool) -> Iterator[None]:
    """Switch the graph executor's optimizations inside the block; eagerly there are none."""
    yield


class strict_fusion:  # noqa: N801 - PyTorch's name
    """Inside TorchScript, asserts that the block fuses; eagerly (as in PyTorch outside TorchScript) warns once."""

    def __init__(self) -> None:
        import warnings
        warnings.warn("Only works in script mode", stacklevel=2)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None

