"""torch.jit.script for tinytorch: no TorchScript compiler, so scripting wraps the function or module and runs it
eagerly, keeping what a user of a ScriptModule / ScriptFunction sees.

A scripted nn.Module is a new object whose class derives from both RecursiveScriptModule and the module's own
class: it shares the original's parameters and buffers (as PyTorch's does), has its own training flag and submodule
dict (each child scripted too), and passes `isinstance` checks for ScriptModule and for the original class (PyTorch's
does not pass the latter; here it costs nothing and keeps user type checks working). `.code` is the Python source of
forward; `.graph` raises, there being no TorchScript IR.
"""
from __future__ import annotations

import functools
import inspect
import textwrap
import warnings
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Dict, Optional, Tuple, Type

from ..nn.modules.module import Module

__all__ = ["Attribute", "RecursiveScriptModule", "ScriptFunction", "ScriptModule", "script", "script_method"]

Attribute = namedtuple("Attribute", ["value", "type"])
Attribute.__doc__ = """Declares a ScriptModule attribute with its type; run eagerly, the module stores the value."""


def _no_graph(what: str) -> NotImplementedError:
    return NotImplementedError(f"{what}: tinytorch runs scripted code eagerly and builds no TorchScript graph; "
                               "`.code` holds the Python source instead")


def _source(fn: Callable) -> str:
    """The dedented Python source of fn (what `.code` shows in place of TorchScript code)."""
    try:
        return textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
    except (OSError, TypeError) as e:
        raise RuntimeError(f"the Python source of {getattr(fn, '__qualname__', fn)!r} is not available, so it has "
                           f"no `.code`: {e}") from None


class ScriptModule(Module):
    """Base class of scripted and traced modules (and of legacy `class M(torch.jit.ScriptModule)` code)."""

    def __setattr__(self, name: str, value: Any) -> None:
        # torch.jit.Attribute(value, type) declares a typed attribute; eagerly only the value matters.
        if isinstance(value, Attribute):
            value = value.value
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            # Fallbacks looked up last, so an attribute of the user's own module named `code` or `graph` wins.
            if name == "code":
                return _source(type(self).forward)
            if name in ("graph", "inlined_graph", "code_with_constants"):
                raise _no_graph(f"{type(self).__name__}.{name}") from None
            raise

    def save(self, f: Any, **kwargs: Any) -> None:
        """torch.jit.save(self, f)."""
        from ._serialization import save
        save(self, f, **kwargs)

    def define(self, src: str) -> None:
        raise RuntimeError("ScriptModule.define compiles TorchScript source; tinytorch has no TorchScript compiler: "
                           "write the method in Python instead")


class RecursiveScriptModule(ScriptModule):
    """What torch.jit.script(module) returns; the concrete class also derives from the scripted module's class."""

    _original_class: Type[Module] = Module

    @property
    def original_name(self) -> str:
        return self._original_class.__name__

    def extra_repr(self) -> str:
        return f"original_name={self.original_name}"

    def __reduce_ex__(self, protocol: int) -> Tuple[Any, ...]:
        # The combined class is made at run time and cannot be found by name: pickle the module as an instance of
        # its original class and re-derive the combined class when it is loaded.
        plain = object.__new__(self._original_class)
        plain.__dict__.update(self.__dict__)
        return _rewrap, (plain, _wrapper_kind(type(self)))


_WRAPPER_CLASSES: Dict[Tuple[type, type], type] = {}


def _wrapper_kind(cls: type) -> type:
    """The tinytorch base (RecursiveScriptModule, TracedModule, ...) a combined class was made from."""
    return cls.__bases__[0]


def _wrapper_class(kind: type, original: type) -> type:
    """The class deriving from `kind` and from `original`, made once per pair."""
    cls = _WRAPPER_CLASSES.get((kind, original))
    if cls is None:
        cls = type(kind.__name__, (kind, original), {"_original_class": original, "__module__": kind.__module__,
                                                     "__qualname__": kind.__qualname__})
        _WRAPPER_CLASSES[(kind, original)] = cls
    return cls


def _rewrap(plain: Module, kind: type) -> Module:
    plain.__class__ = _wrapper_class(kind, type(plain))
    return plain


def _wrap_module(module: Module, kind: type, child_kind: type, memo: Dict[int, Module]) -> Module:
    """A `kind` wrapper of `module` sharing its parameters and buffers; children get `child_kind` wrappers."""
    if isinstance(module, ScriptModule):
        return module
    done = memo.get(id(module))
    if done is not None:
        return done
    wrapped = object.__new__(_wrapper_class(kind, type(module)))
    memo[id(module)] = wrapped
    state = {}
    for key, value in module.__dict__.items():
        # containers (parameter/buffer/module/hook dicts) are copied so that the two modules can diverge later
        state[key] = type(value)(value) if type(value) in (dict, OrderedDict, set) else value
    state["_modules"] = {name: None if child is None else _wrap_module(child, child_kind, child_kind, memo)
                         for name, child in module.__dict__["_modules"].items()}
    object.__setattr__(wrapped, "__dict__", state)
    return wrapped


class ScriptFunction:
    """What torch.jit.script(fn) and torch.jit.trace(fn, ...) return: calls run fn eagerly."""

    def __init__(self, fn: Callable) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    @property
    def name(self) -> str:
        return self._fn.__name__

    @property
    def qualified_name(self) -> str:
        return f"__torch__.{self._fn.__qualname__}"

    @property
    def code(self) -> str:
        return _source(self._fn)

    @property
    def graph(self) -> Any:
        raise _no_graph(f"ScriptFunction {self.name}.graph")

    @property
    def inlined_graph(self) -> Any:
        raise _no_graph(f"ScriptFunction {self.name}.inlined_graph")

    def save(self, f: Any, **kwargs: Any) -> None:
        """torch.jit.save(self, f)."""
        from ._serialization import save
        save(self, f, **kwargs)

    def __repr__(self) -> str:
        return f"<tinytorch.jit.ScriptFunction object at {hex(id(self))}>"

    def __reduce__(self) -> Tuple[Any, ...]:
        return _function_from_global, (self._fn.__module__, self._fn.__qualname__)


def _function_from_global(module: str, qualname: str) -> ScriptFunction:
    """Find a pickled ScriptFunction by the name of the function it wraps (decorated or not)."""
    import importlib
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj if isinstance(obj, ScriptFunction) else ScriptFunction(obj)


def script(obj: Any, optimize: Optional[bool] = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:
    """A ScriptModule (for an nn.Module) or ScriptFunction (for a function) that runs `obj` eagerly; classes, and
    objects already scripted, come back unchanged."""
    warnings.warn("`torch.jit.script` is deprecated. Please switch to `torch.compile` or `torch.export`.",
                  DeprecationWarning, stacklevel=1)
    if isinstance(obj, (ScriptModule, ScriptFunction)):
        return obj
    if isinstance(obj, Module):
        return _wrap_module(obj, RecursiveScriptModule, RecursiveScriptModule, {})
    if isinstance(obj, type):
        if issubclass(obj, Module):
            raise RuntimeError(f"Type '{obj}' cannot be compiled since it inherits from nn.Module, pass an instance "
                               "instead")
        return obj
    if callable(obj):
        return ScriptFunction(obj)
    raise TypeError(f"torch.jit.script expects an nn.Module instance, a function or a class, got "
                       f"{type(obj).__name__}")


def script_method(fn: Callable) -> Callable:
    """Marks a method of a ScriptModule subclass for compilation; run eagerly, the method itself."""
    warnings.warn("`torch.jit.script_method` is deprecated. Please switch to `torch.compile` or `torch.export`.",
                  DeprecationWarning, stacklevel=1)
    return fn
