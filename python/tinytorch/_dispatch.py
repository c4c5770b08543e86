"""Route public functions called with a DTensor argument to DTensor's op dispatcher, and those called with an
instance of a Tensor subclass to its __torch_function__ (_torch_function.py).

tinytorch's ops compute on `._data`, and a DTensor's `_data` is only this rank's piece: a public function
(`torch.*`, `F.*`) that receives a DTensor must hand the call to DTensor's sharding rules instead (PyTorch
reaches the same place through `__torch_dispatch__`). `route(namespace)` wraps a namespace's op functions once;
until `tinytorch.distributed.tensor` is imported and sets `handler`, a call pays one Python frame (~0.15 us)
and a global test; after, also a scan of its arguments.
DTensor's own methods (`x.view`, `x + y`) are DTensor class attributes and do not come through here.
"""
from __future__ import annotations

from typing import Any, Callable

from . import _torch_function as _tf

handler: Callable | None = None  # handler(name, fn, args, kwargs), set by tinytorch.distributed.tensor
subclass: type | None = None  # the DTensor class


def routed(fn: Callable, module: str, name: str) -> Callable:
    """fn as the public function `module.name`: calls with a DTensor argument (also inside a list or tuple, or as
    a keyword argument) go to the handler. The test is written out inline: it runs on every call."""
    op = fn.__name__

    def public(*args: Any, **kwargs: Any) -> Any:
        if handler is not None:
            cls = subclass
            for a in args:
                t = type(a)
                if t is cls:
                    return handler(op, fn, args, kwargs)
                if t is list or t is tuple:
                    for e in a:
                        if type(e) is cls:
                            return handler(op, fn, args, kwargs)
            if kwargs:
                for v in kwargs.values():
                    if type(v) is cls:
                        return handler(op, fn, args, kwargs)
        if _tf.active and not _tf.disabled():  # a Tensor subclass exists: its instances go to __torch_function__
            relevant = _tf._relevant(args, kwargs)
            if relevant:
                from .overrides import handle_torch_function
                return handle_torch_function(public, relevant, *args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except AttributeError as e:
            if "'_data'" not in str(e):
                raise
            not_a_tensor(fn, name, args, kwargs, e)
            raise

    public.__name__, public.__qualname__, public.__module__ = name, name, module
    public.__doc__ = fn.__doc__
    public.__wrapped__ = fn
    public._routed = True
    return public


def not_a_tensor(fn: Callable, name: str, args: tuple, kwargs: dict, error: AttributeError) -> None:
    """Raise PyTorch's TypeError for a NumPy array, list or number where `fn` wanted a tensor (the op itself
    failed reaching for its `_data`); return if no argument explains the error."""
    import inspect

    from ._tensor import Tensor

    def kind(v: Any) -> str:
        t = type(v)
        return t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"

    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    for i, v in enumerate(args):
        if isinstance(v, Tensor) or v is None:
            continue
        if isinstance(v, (list, tuple)):
            for j, e in enumerate(v):
                if not isinstance(e, Tensor):
                    raise TypeError(f"expected Tensor as element {j} in argument {i}, but got {kind(e)}") from error
            continue
        if i == 0 or type(v).__module__.split(".")[0] == "numpy":
            pname = params[i] if i < len(params) else "input"
            pname = {"a": "input", "x": "input", "b": "other"}.get(pname, pname)  # PyTorch's parameter names
            raise TypeError(f"{name}(): argument '{pname}' (position {i + 1}) must be Tensor, not {kind(v)}") from error


def route(namespace: dict, module: str, sources: tuple = ("tinytorch._ops",)) -> None:
    """Wrap, in place, every function of `namespace` defined in one of the `sources` modules."""
    for name, obj in list(namespace.items()):
        if name.startswith("__") or not callable(obj) or isinstance(obj, type):
            continue
        origin = getattr(obj, "__module__", None) or ""
        if not getattr(obj, "_routed", False) and origin.startswith(sources):
            namespace[name] = routed(obj, module, name)
