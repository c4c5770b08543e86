"""Lazy modules: layers whose input size is read from the first batch (LazyLinear, LazyConv*, LazyBatchNorm*, ...).

Until its first forward a lazy module holds UninitializedParameter/UninitializedBuffer placeholders; the forward
pre-hook materialises them from the input's shape, removes itself and turns the module into its regular class
(cls_to_become), as PyTorch's LazyModuleMixin does.
"""
from __future__ import annotations

import itertools
import os
import sys
from typing import Any

from ... import _dispatch, _tensor
from ..._creation import empty, tensor
from ..._ops import convert as _convert
from ..._tensor import Tensor
from ..._torch_function import _disabled_torch_function_impl
from ...autograd.grad_mode import no_grad
from .. import parameter as _parameter
from ..parameter import Parameter
from . import module as _module
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _long, _NormBase
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]

# Code that may read an uninitialised tensor's (empty) array: what PyTorch's UninitializedTensorMixin allows
# (dtype/device queries, size(), casts and moves) and the Module plumbing that moves or replaces parameters.
_TRUSTED_FILES = frozenset({_convert.__file__, _module.__file__, _parameter.__file__})
_TRUSTED_TENSOR_METHODS = frozenset({"dtype", "device", "is_cuda", "is_meta", "is_cpu", "ndim", "size",
                                     "get_device", "data"})
_PACKAGE_DIR = os.path.dirname(_tensor.__file__) + os.sep


def _entry_point(frame) -> str:
    """The name of the outermost tinytorch function on the stack (the op the user called), past the
    dispatch wrappers, which all share one code object."""
    name = frame.f_code.co_name
    frame = frame.f_back
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        if frame.f_code.co_filename != _dispatch.__file__:
            name = frame.f_code.co_name
        frame = frame.f_back
    return name


class UninitializedTensorMixin:
    """A placeholder tensor of unknown shape: only its dtype/device can be queried or changed until materialize()."""

    cls_to_become: type = Tensor
    # out of the subclass protocol: reading _data (below) is what refuses ops on a placeholder
    __torch_function__ = staticmethod(_disabled_torch_function_impl)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # everything happens in __new__; the base classes' __init__ would take the arguments as data

    def __getattribute__(self, name: str) -> Any:
        if name == "_data":
            # Every op reads `_data`, so this is where use before initialisation is caught (PyTorch's
            # __torch_function__ check): only the allowed queries and the Module plumbing get through.
            frame = sys._getframe(1)
            code = frame.f_code
            if code.co_filename not in _TRUSTED_FILES and not (
                    code.co_filename == _tensor.__file__ and code.co_name in _TRUSTED_TENSOR_METHODS):
                raise ValueError(
                    f"Attempted to use an uninitialized parameter in {_entry_point(frame)}. This error happens "
                    "when you are using a `LazyModule` or explicitly manipulating `torch.nn.parameter."
                    f"{type(self).__name__}` objects. When using LazyModules Call `forward` with a dummy batch "
                    "to initialize the parameters before calling torch functions")
        return object.__getattribute__(self, name)

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the tensor storage of `shape` (uninitialised values) and turn it into its regular class."""
        if device is None:
            device = self.device
        if dtype is None:
            dtype = self.dtype
        self._data = empty(shape, device=device, dtype=dtype)._data
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
            "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
            "`forward` to initialize the parameters before accessing their attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize "
                           "the parameters before calling `module.share_memory()`.")

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}>"

    def __reduce_ex__(self, proto):
        return (self.__class__, (self.requires_grad,))


def is_lazy(param: Any) -> bool:
    """Whether param is an UninitializedParameter or UninitializedBuffer."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape is not known yet (a lazy module's weight before its first forward)."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None) -> "UninitializedParameter":
        p = object.__new__(cls)
        p._data = empty(0, device=device, dtype=dtype)._data
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __deepcopy__(self, memo: dict) -> "UninitializedParameter":
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (a lazy norm's running statistics before its first forward)."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None,
                persistent: bool = True) -> "UninitializedBuffer":
        b = object.__new__(cls)
        b._data = empty(0, device=device, dtype=dtype)._data
        if requires_grad:
            b.requires_grad_(True)
        b.persistent = persistent
        return b

    def to(self, *args, **kwargs) -> "UninitializedBuffer":
        """Cast and/or move; the result stays an UninitializedBuffer (Module.to() swaps buffers for it)."""
        moved = _convert.to(self, *args, **kwargs)
        if moved is self:
            return self
        return type(self)(self.requires_grad, moved.device, moved.dtype, self.persistent)

    def __deepcopy__(self, memo: dict) -> "UninitializedBuffer":
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype, self.persistent)
        return memo[id(self)]


class LazyModuleMixin:
    """Mixin for modules whose parameters get their shape from the first input (see the module docstring)."""

    cls_to_become: type | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._load_hook = self.register_load_state_dict_pre_hook(type(self)._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        # Uninitialised entries are saved as they are: detaching them would be a use before initialisation.
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if is_lazy(param) or keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if is_lazy(buf) or keep_vars else buf.detach()

    def _lazy_load_hook(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                        missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        """load_state_dict pre-hook: materialise each uninitialised entry that the state_dict holds initialised."""
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and is_lazy(param) and not is_lazy(state_dict[key]):
                with no_grad():
                    param.materialize(state_dict[key].shape)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        # An uninitialised entry loaded into a still uninitialised tensor has nothing to copy (PyTorch skips its
        # shape checks): set such pairs aside so Module's loader, which compares shapes, never sees them.
        held = {name: prefix + name for name, t in itertools.chain(self._parameters.items(), self._buffers.items())
                if is_lazy(t) and is_lazy(state_dict.get(prefix + name))}
        if not held:
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs)
            return
        params, buffers = dict(self._parameters), dict(self._buffers)
        entries = {key: state_dict.pop(key) for key in held.values()}
        for name in held:
            self._parameters.pop(name, None)
            self._buffers.pop(name, None)
        try:
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                          unexpected_keys, error_msgs)
        finally:
            state_dict.update(entries)
            self._parameters.clear()
            self._parameters.update(params)
            self._buffers.clear()
            self._buffers.update(buffers)

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        """Materialise the parameters from the first input (each lazy module defines it)."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer is still uninitialised."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args: tuple, kwargs: dict | None = None) -> None:
        """Forward pre-hook: initialise from this input, drop the lazy hooks and become cls_to_become."""
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose in_features is input.shape[-1] of the first input; it becomes a Linear then."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        # bias=False and 0 features: nothing is allocated for the placeholders to replace.
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """Linear's initialisation, once the shapes are known."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """weight (out_features, input.shape[-1]) and bias (out_features,), then Linear's initialisation."""
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:  # initialised by load_state_dict: in_features is read from the input now
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                                     f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


class _LazyConvXdMixin(LazyModuleMixin):
    """in_channels from the first input's channel dim; weight and bias materialised with the conv's layout."""

    def reset_parameters(self) -> None:
        """The conv's initialisation, once the shapes are known."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args: Any, **kwargs: Any) -> None:
        """Materialise weight and bias for input's channels, then the conv's initialisation."""
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                self.weight.materialize((self.in_channels, self.out_channels // self.groups, *self.kernel_size))
            else:
                self.weight.materialize((self.out_channels, self.in_channels // self.groups, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _get_in_channels(self, input: Tensor) -> int:
        num_dims_no_batch = self._nd + 1
        num_dims_batch = num_dims_no_batch + 1
        if input.dim() not in (num_dims_no_batch, num_dims_batch):
            raise RuntimeError(f"Expected {num_dims_no_batch}D (unbatched) or {num_dims_batch}D (batched) input to "
                               f"{self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == num_dims_batch else input.shape[0]


class _LazyConv(_LazyConvXdMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        # bias=False and 0 channels: nothing is allocated for the placeholders to replace.
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device=device,
                         dtype=dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode,
                         device=device, dtype=dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A Conv1d whose in_channels is read from the first input; it becomes a Conv1d then."""
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A Conv2d whose in_channels is read from the first input; it becomes a Conv2d then."""
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A Conv3d whose in_channels is read from the first input; it becomes a Conv3d then."""
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A ConvTranspose1d whose in_channels is read from the first input; it becomes a ConvTranspose1d then."""
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A ConvTranspose2d whose in_channels is read from the first input; it becomes a ConvTranspose2d then."""
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A ConvTranspose3d whose in_channels is read from the first input; it becomes a ConvTranspose3d then."""
    cls_to_become = ConvTranspose3d


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """num_features from the first input's dim 1; weight, bias and running statistics materialised then."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        # affine and track_running_stats off at first: nothing is allocated for the placeholders to replace.
        super().__init__(0, eps, momentum, False, False, device=device, dtype=dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=_long(), device=device)

    def reset_parameters(self) -> None:
        """The norm's initialisation, once the shapes are known."""
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """Materialise weight, bias and running statistics for input.shape[1] features, then reset them."""
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            if self.affine:
                self.weight.materialize((self.num_features,))
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A BatchNorm1d whose num_features is read from the first input; it becomes a BatchNorm1d then."""
    cls_to_become = BatchNorm1d
    _check_input_dim = BatchNorm1d._check_input_dim


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    """A BatchNorm2d whose num_features is read from the first input; it becomes a BatchNorm2d then."""
    cls_to_become = BatchNorm2d
    _check_input_dim = BatchNorm2d._check_input_dim


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    """A BatchNorm3d whose num_features is read from the first input; it becomes a BatchNorm3d then."""
    cls_to_become = BatchNorm3d
    _check_input_dim = BatchNorm3d._check_input_dim


class LazyInstanceNorm1d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm1d whose num_features is read from the first input; it becomes an InstanceNorm1d then."""
    cls_to_become = InstanceNorm1d
    _no_batch_dim = InstanceNorm1d._no_batch_dim
    _check_input_dim = InstanceNorm1d._check_input_dim


class LazyInstanceNorm2d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm2d whose num_features is read from the first input; it becomes an InstanceNorm2d then."""
    cls_to_become = InstanceNorm2d
    _no_batch_dim = InstanceNorm2d._no_batch_dim
    _check_input_dim = InstanceNorm2d._check_input_dim


class LazyInstanceNorm3d(_LazyNormBase, _InstanceNorm):
    """An InstanceNorm3d whose num_features is read from the first input; it becomes an InstanceNorm3d then."""
    cls_to_become = InstanceNorm3d
    _no_batch_dim = InstanceNorm3d._no_batch_dim
    _check_input_dim = InstanceNorm3d._check_input_dim
