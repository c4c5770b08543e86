"""Parameter: a Tensor that a Module registers as one of its learnable weights."""
from __future__ import annotations

from .._tensor import Tensor
from .._torch_function import _disabled_torch_function_impl

_new = object.__new__


class _ParameterMeta(type):
    # As in PyTorch, a tensor of another class marked as a parameter (a DTensor made by Parameter(dtensor))
    # is an instance of Parameter, so Module registers it and user code treats it as one.
    def __instancecheck__(cls, instance) -> bool:
        if cls is Parameter and isinstance(instance, Tensor) and instance.__dict__.get("_is_param", False):
            return True
        return super().__instancecheck__(instance)


class Parameter(Tensor, metaclass=_ParameterMeta):
    """A leaf tensor that Modules register as a parameter when assigned as an attribute.

    Like PyTorch's, it shares memory with the tensor it is made from and requires grad by default.
    Parameter(dtensor) is the DTensor itself, marked as a parameter (FSDP's sharded parameters).
    """

    _is_param = True
    __torch_function__ = staticmethod(_disabled_torch_function_impl)  # ops on parameters give plain tensors

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            from .._creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        from ..distributed.tensor._api import DTensor
        if isinstance(data, DTensor):
            d = DTensor._make(data._data, data._mesh, data._placements, data._gshape, vc=data._shared_vc())
            d._is_param = True
            if requires_grad:
                d.requires_grad_(True)
            return d
        p = _new(cls)
        p._data = data._data
        # Share the version counter too: an in-place write through either name is seen by both.
        p._vc = data._shared_vc()
        if requires_grad:
            from .._tensor import _set_requires_grad
            _set_requires_grad(p, True, "Only Tensors of floating point and complex dtype can require gradients")
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned as an attribute (torch.nn.Buffer)."""

    __torch_function__ = staticmethod(_disabled_torch_function_impl)

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> "Buffer":
        if data is None:
            from .._creation import empty
            data = empty(0)
        b = _new(cls)
        b._data = data._data
        b._vc = data._shared_vc()
        b.persistent = persistent
        return b

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True) -> None:
        pass


def __getattr__(name: str):
    # The lazy modules' placeholders live with them (nn/modules/lazy.py imports this module, so not at the top).
    if name in ("UninitializedParameter", "UninitializedBuffer", "UninitializedTensorMixin", "is_lazy"):
        from .modules import lazy
        return getattr(lazy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
