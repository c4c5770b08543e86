"""__torch_function__ for Tensor subclasses (PyTorch's subclassing protocol).

An op that receives an instance of a Tensor subclass goes through that class's `__torch_function__(func, types,
args, kwargs)`; Tensor's own (the default a subclass inherits or calls through super()) runs the op with the
protocol switched off and hands Tensor results back as the subclass. Plain tensors pay nothing for this: a
subclass gets wrappers of Tensor's methods installed on it when it is defined (Tensor.__init_subclass__), and the
public functions (`torch.*`, `F.*`, _dispatch.routed) look at their arguments only once some subclass that takes
part exists. Parameter, Buffer and DTensor opt out, as in PyTorch (`__torch_function__ =
_disabled_torch_function_impl`): their ops give plain tensors.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

active = False  # a subclass that takes part has been defined: public functions scan their arguments
_state = threading.local()  # depth of DisableTorchFunctionSubclass blocks on this thread


def _disabled_torch_function_impl(func: Callable, types, args=(), kwargs=None):
    """A class whose __torch_function__ is this one does not take part: its ops run as on a plain Tensor."""
    return func(*args, **(kwargs or {}))


class DisableTorchFunctionSubclass:
    """Within the block, ops on subclass instances run as on plain tensors (no __torch_function__); what Tensor's
    default __torch_function__ uses, and what overrides call around func(*args) to avoid recursing."""

    def __enter__(self) -> "DisableTorchFunctionSubclass":
        _state.depth = getattr(_state, "depth", 0) + 1
        return self

    def __exit__(self, *exc) -> None:
        _state.depth -= 1


def disabled() -> bool:
    """Whether a DisableTorchFunctionSubclass block is open on this thread."""
    return getattr(_state, "depth", 0) > 0


def takes_part(cls: type) -> bool:
    """Whether instances of cls (a Tensor subclass) dispatch through __torch_function__."""
    from ._tensor import Tensor
    f = cls.__torch_function__
    return cls is not Tensor and getattr(f, "__func__", f) is not _disabled_torch_function_impl


def _relevant(args: tuple, kwargs: dict) -> list:
    """The arguments (one level into lists and tuples, and keyword values) whose types take part."""
    from ._tensor import Tensor
    found = []
    for a in list(args) + list(kwargs.values()):
        items = a if type(a) in (list, tuple) else (a,)
        for e in items:
            t = type(e)
            if t is not Tensor and isinstance(e, Tensor) and takes_part(t):
                found.append(e)
    return found


def dispatch(func: Callable, args: tuple, kwargs: dict) -> Any:
    """func(*args, **kwargs) through the __torch_function__ of the subclass instances among the arguments (func runs
    directly when there are none, or while the protocol is disabled)."""
    if disabled():
        return func(*args, **kwargs)
    relevant = _relevant(args, kwargs)
    if not relevant:
        return func(*args, **kwargs)
    from .overrides import handle_torch_function
    return handle_torch_function(func, relevant, *args, **kwargs)


def convert(ret: Any, cls: type) -> Any:
    """ret with its Tensors made instances of cls (as_subclass: same memory, still in the graph); tuples and lists
    element by element. What Tensor's default __torch_function__ returns."""
    from ._tensor import Tensor
    if isinstance(ret, Tensor) and not isinstance(ret, cls):
        return ret.as_subclass(cls)
    if type(ret) in (tuple, list):
        return type(ret)(convert(r, cls) for r in ret)
    if isinstance(ret, tuple) and hasattr(ret, "_fields"):  # a named tuple of results (topk, sort, ...)
        return type(ret)(*(convert(r, cls) for r in ret))
    return ret


# Tensor methods that stay out of the protocol: object plumbing, printing, conversions to Python values, pickling,
# and the ones the default implementation itself calls.
_SKIP = {"__init__", "__new__", "__init_subclass__", "__class__", "__getattribute__", "__getattr__", "__setattr__",
         "__delattr__", "__dir__", "__sizeof__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
         "__hash__", "__repr__", "__str__", "__format__", "__deepcopy__", "__copy__", "__array__", "__array_wrap__",
         "__array_ufunc__", "__array_function__", "__bool__", "__float__", "__int__", "__index__", "__complex__",
         "__len__", "__iter__", "__contains__", "__dlpack__", "__dlpack_device__", "__torch_function__",
         "__subclasshook__", "__class_getitem__", "as_subclass", "data_ptr", "tolist", "item", "numpy", "dim",
         "size", "numel", "stride", "element_size", "is_contiguous", "is_floating_point", "is_complex", "type",
         "untyped_storage", "storage", "storage_offset", "get_device", "nelement", "ndimension"}


def _method(name: str, fn: Callable) -> Callable:
    def method(self, *args: Any, **kwargs: Any) -> Any:
        if disabled():
            return fn(self, *args, **kwargs)
        return dispatch(fn, (self,) + args, kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = fn.__doc__
    method.__wrapped__ = fn
    return method


def install(cls: type) -> None:
    """Give subclass cls wrappers of Tensor's methods that go through the protocol (cls's own definitions stay)."""
    global active
    import inspect

    from ._tensor import Tensor
    if not takes_part(cls):
        return
    active = True
    for name in dir(Tensor):
        if name in _SKIP or (name.startswith("_") and not (name.startswith("__") and name.endswith("__"))):
            continue
        if any(name in k.__dict__ for k in cls.__mro__ if k is not Tensor and k is not object):
            continue  # defined by the subclass (or a base between it and Tensor)
        attr = inspect.getattr_static(Tensor, name)
        if isinstance(attr, (property, staticmethod, classmethod)) or not callable(attr):
            continue
        setattr(cls, name, _method(name, getattr(Tensor, name)))
