"""Module: the base class of every layer, with PyTorch's registration, state_dict, hooks and repr."""
from __future__ import annotations

import functools
import itertools
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator

from ..._meta import NO_DATA, MetaArray
from ..._tensor import Tensor
from ..._C import _grad_enabled
from ...autograd.grad_mode import no_grad
from ...utils.hooks import RemovableHandle, add_hook
from ..parameter import Buffer, Parameter
from ..._ops._common import user_stacklevel

__all__ = ["Module", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook",
           "register_module_backward_hook",
           "register_module_buffer_registration_hook", "register_module_module_registration_hook",
           "register_module_parameter_registration_hook"]

# Hooks common to every module (PyTorch's debugging/profiling globals); they run before each module's own.
_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()
_global_forward_hooks_with_kwargs: dict = OrderedDict()
_global_forward_hooks_always_called: dict = OrderedDict()
_global_backward_pre_hooks: dict = OrderedDict()
_global_backward_hooks: dict = OrderedDict()
_global_is_full_backward_hook: bool | None = None  # the global backward hooks are full ones, or legacy ones
_global_buffer_registration_hooks: dict = OrderedDict()
_global_module_registration_hooks: dict = OrderedDict()
_global_parameter_registration_hooks: dict = OrderedDict()


def register_module_forward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Call hook(module, args) before every module's forward (before its own pre-hooks); a result
    replaces the positional inputs."""
    return add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook: Callable[..., Any], *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """Call hook(module, args, output) (or with kwargs) after every module's forward, before its own
    forward hooks; a result replaces the output."""
    handle = RemovableHandle(_global_forward_hooks,
                             extra_dict=[_global_forward_hooks_with_kwargs, _global_forward_hooks_always_called])
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Call hook(module, grad_output) for every module, before the module's own backward pre-hooks."""
    return add_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Call hook(module, grad_input, grad_output) for every module, before the module's own backward hooks."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is False:
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
                           "Please use only one of them.")
    _global_is_full_backward_hook = True
    return add_hook(_global_backward_hooks, hook)


def register_module_backward_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Deprecated: Module.register_backward_hook for every module."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is True:
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as a global Module hook. "
                           "Please use only one of them.")
    _global_is_full_backward_hook = False
    return add_hook(_global_backward_hooks, hook)


def register_module_buffer_registration_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Call hook(module, name, buffer) on every buffer registration; a result replaces the buffer."""
    return add_hook(_global_buffer_registration_hooks, hook)


def register_module_module_registration_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Call hook(module, name, submodule) on every submodule registration; a result replaces the submodule."""
    return add_hook(_global_module_registration_hooks, hook)


def register_module_parameter_registration_hook(hook: Callable[..., Any]) -> RemovableHandle:
    """Call hook(module, name, param) on every parameter registration; a result replaces the parameter."""
    return add_hook(_global_parameter_registration_hooks, hook)


def _run_registration_hooks(hooks: dict, module: "Module", name: str, value):
    for hook in list(hooks.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: the keys the module lacked and the keys it did not expect."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _typename(obj) -> str:
    """PyTorch's torch.typename: 'torch.FloatTensor' for tensors, the qualified class name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"


def _addindent(s_: str, num_spaces: int) -> str:
    s = s_.split("\n")
    if len(s) == 1:
        return s_
    first = s.pop(0)
    s = [(num_spaces * " ") + line for line in s]
    return first + "\n" + "\n".join(s)


def _forward_unimplemented(self, *input: Any) -> None:
    raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')


class Module:
    """Base class for all neural network modules; assign Parameters, buffers and Modules as attributes."""

    dump_patches: bool = False
    _version: int = 1
    training: bool
    call_super_init: bool = False
    forward: Callable[..., Any] = _forward_unimplemented

    def __init__(self, *args, **kwargs) -> None:
        if kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        if args:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but "
                            f"{len(args) + 1} were given")
        sa = object.__setattr__
        sa(self, "training", True)
        sa(self, "_parameters", {})
        sa(self, "_buffers", {})
        sa(self, "_non_persistent_buffers_set", set())
        sa(self, "_modules", {})
        sa(self, "_forward_pre_hooks", OrderedDict())
        sa(self, "_forward_pre_hooks_with_kwargs", {})
        sa(self, "_forward_hooks", OrderedDict())
        sa(self, "_forward_hooks_with_kwargs", {})
        sa(self, "_forward_hooks_always_called", {})
        sa(self, "_state_dict_hooks", OrderedDict())
        sa(self, "_state_dict_pre_hooks", OrderedDict())
        sa(self, "_load_state_dict_pre_hooks", OrderedDict())
        sa(self, "_load_state_dict_post_hooks", OrderedDict())
        sa(self, "_backward_hooks", OrderedDict())
        sa(self, "_backward_pre_hooks", OrderedDict())
        sa(self, "_is_full_backward_hook", None)  # the module's backward hooks are full ones, or legacy ones

    # ---------------------------------------------------------------- registration
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is part of the module's state but not a parameter (e.g. running stats)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent
            tensor = tensor.detach()
        tensor = _run_registration_hooks(_global_buffer_registration_hooks, self, name, tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or None) under `name`."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be created "
                f"explicitly. To express '{name}' as a function of another Tensor, compute the value in the "
                "forward() method.")
        self._parameters[name] = _run_registration_hooks(_global_parameter_registration_hooks, self, name, param)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module under `name` (reachable as an attribute)."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = _run_registration_hooks(_global_module_registration_hooks, self, name, module)

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The submodule at dotted path `target` ('' is self)."""
        if target == "":
            return self
        mod: Module = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Put `module` at dotted path `target` (replacing what is there; with strict, only replacing)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        atoms = target.split(".")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self if len(atoms) == 1 else self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(parent._get_name() + " has no attribute `" + atoms[-1] + "`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError("`" + atoms[-1] + "` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path `target`."""
        module_path, _, param_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, param_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(mod, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path `target`."""
        module_path, _, buffer_name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, buffer_name):
            raise AttributeError(mod._get_name() + " has no attribute `" + buffer_name + "`")
        buffer = getattr(mod, buffer_name)
        if buffer_name not in mod._buffers:
            raise AttributeError("`" + buffer_name + "` is not a buffer")
        return buffer

    # ---------------------------------------------------------------- attribute protocol
    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails; reading __dict__ directly keeps copy/pickle (which
        # probe attributes before __init__ ran) from recursing.
        d = self.__dict__
        if "_parameters" in d:
            p = d["_parameters"]
            if name in p:
                return p[name]
        if "_buffers" in d:
            b = d["_buffers"]
            if name in b:
                return b[name]
        if "_modules" in d:
            m = d["_modules"]
            if name in m:
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = self.__dict__.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = _run_registration_hooks(_global_module_registration_hooks, self, name, value)
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(torch.nn.Module or None expected)")
                modules[name] = _run_registration_hooks(_global_module_registration_hooks, self, name, value)
            else:
                buffers = self.__dict__.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(torch.Tensor or None expected)")
                    if isinstance(value, Buffer):
                        persistent = value.persistent
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    remove_from(self.__dict__, self._parameters, self._modules)
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        attrs = list(object.__dir__(self))
        keys = attrs + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        # Modules pickled by an older layout may lack newer hook dicts.
        for name in ("_forward_pre_hooks", "_forward_hooks", "_state_dict_hooks", "_state_dict_pre_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks", "_backward_hooks",
                     "_backward_pre_hooks"):
            self.__dict__.setdefault(name, OrderedDict())
        for name in ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
                     "_forward_hooks_always_called"):
            self.__dict__.setdefault(name, {})
        self.__dict__.setdefault("_non_persistent_buffers_set", set())
        self.__dict__.setdefault("_is_full_backward_hook", None)

    # ---------------------------------------------------------------- traversal
    def _named_members(self, get_members_fn, prefix: str = "", recurse: bool = True,
                       remove_duplicate: bool = True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield module_prefix + ("." if module_prefix else "") + k, v

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The module's parameters (each shared parameter once)."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix=prefix, recurse=recurse,
                                       remove_duplicate=remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The module's buffers."""
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs."""
        yield from self._named_members(lambda m: m._buffers.items(), prefix=prefix, recurse=recurse,
                                       remove_duplicate=remove_duplicate)

    def children(self) -> Iterator["Module"]:
        """The immediate child modules."""
        for _, module in self.named_children():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """(name, module) for the immediate children, each module once."""
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def modules(self) -> Iterator["Module"]:
        """This module and every module below it, each once."""
        for _, module in self.named_modules():
            yield module

    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True):
        """(dotted name, module) for this module and every module below it."""
        if memo is None:
            memo = set()
        if id(self) not in memo:
            if remove_duplicate:
                memo.add(id(self))
            yield prefix, self
            for name, module in self._modules.items():
                if module is None:
                    continue
                submodule_prefix = prefix + ("." if prefix else "") + name
                yield from module.named_modules(memo, submodule_prefix, remove_duplicate)

    # ---------------------------------------------------------------- modes and conversion
    def train(self, mode: bool = True) -> "Module":
        """Set training mode on this module and all below it."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        """Set evaluation mode (Dropout off, ...)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Turn gradient recording for every parameter on or off."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's .grad: to None (default) or to zeros."""
        for p in self.parameters():
            if p._grad is None:
                continue
            if set_to_none:
                p._grad = None
            else:
                g = p._grad
                if g._grad_fn is not None:
                    g.detach_()
                else:
                    g._requires_grad = False
                g._data[...] = 0
                g._bump_version()

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call fn on every submodule (children first) and then on self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> "Module":
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in list(self._parameters.items()):
            if param is None:
                continue
            with no_grad():
                new = fn(param)
            if (type(new._data) is MetaArray) != (type(param._data) is MetaArray):
                # Into or out of the meta device a parameter is replaced, as PyTorch does (the storages are
                # not interchangeable): a new Parameter with the same requires_grad.
                out = Parameter(new, requires_grad=param.requires_grad)
                self._parameters[key] = out
                if param._grad is not None:
                    with no_grad():
                        out._grad = fn(param._grad)
                continue
            # Parameters keep their identity (optimizers hold them); only the array behind them changes.
            if new._data is not param._data:
                param._data = new._data
            if param._grad is not None:
                with no_grad():
                    g = fn(param._grad)
                param._grad._data = g._data
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """Move and/or cast parameters and buffers: to(device), to(dtype) (floating only), to(tensor)."""
        from ..._ops.convert import _parse_to
        device, dtype = _parse_to(args, dict(kwargs))
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtype}")

        fmt = kwargs.get("memory_format")

        def convert(t: Tensor) -> Tensor:
            if fmt is not None and t.dim() in (4, 5):  # PyTorch converts only the 4-D and 5-D ones (conv weights)
                return t.to(device=device, dtype=dtype if t.is_floating_point() else None, memory_format=fmt)
            if t.is_floating_point():
                return t.to(device=device, dtype=dtype)
            return t.to(device=device)
        try:
            return self._apply(convert)
        except NotImplementedError as e:
            if str(e) == NO_DATA:  # PyTorch's hint for a model built on the meta device
                raise NotImplementedError(f"{e} Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() "
                                          "when moving module from meta to a different device.") from None
            raise

    def to_empty(self, *, device, recurse: bool = True) -> "Module":
        """Move parameters and buffers to `device` without copying values: uninitialised storage, e.g. to
        materialise a model built on the meta device (then call reset_parameters())."""
        from ..._creation import empty_like
        return self._apply(lambda t: empty_like(t, device=device), recurse=recurse)

    def cuda(self, device=None) -> "Module":
        """Move every parameter and buffer to a CUDA device."""
        from ..._device import device as _device
        dev = _device("cuda", device) if isinstance(device, int) else (device or "cuda")
        return self._apply(lambda t: t.to(dev))

    def cpu(self) -> "Module":
        """Move every parameter and buffer to the CPU."""
        return self._apply(lambda t: t.to("cpu"))

    def _cast_floating(self, dtype) -> "Module":
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> "Module":
        """Cast floating-point parameters and buffers to float32."""
        from ... import float32
        return self._cast_floating(float32)

    def double(self) -> "Module":
        """Cast floating-point parameters and buffers to float64."""
        from ... import float64
        return self._cast_floating(float64)

    def half(self) -> "Module":
        """Cast floating-point parameters and buffers to float16."""
        from ... import float16
        return self._cast_floating(float16)

    def bfloat16(self) -> "Module":
        """Cast floating-point parameters and buffers to bfloat16."""
        from ... import bfloat16
        return self._cast_floating(bfloat16)

    def type(self, dst_type) -> "Module":
        """Cast all parameters and buffers to dst_type."""
        return self._apply(lambda t: t.type(dst_type))

    def share_memory(self) -> "Module":
        """Move every parameter, buffer and gradient into shared memory (Tensor.share_memory_), so that processes
        started afterwards (torch.multiprocessing, Hogwild training) update the same storage."""
        for t in list(self.parameters()) + list(self.buffers()):
            t.share_memory_()
            if t.grad is not None:
                t.grad.share_memory_()
        return self

    # ---------------------------------------------------------------- hooks and calling
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call hook(module, args) (or hook(module, args, kwargs)) before forward; a result replaces the inputs."""
        handle = RemovableHandle(self._forward_pre_hooks, extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call hook(module, args, output) (or with kwargs) after forward; a result replaces the output."""
        handle = RemovableHandle(self._forward_hooks, extra_dict=[self._forward_hooks_with_kwargs,
                                                                  self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call hook(module, grad_output) when the gradients w.r.t. the module's outputs are ready (before
        the module's own backward); a returned tuple replaces grad_output."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call hook(module, grad_input, grad_output) once the gradients w.r.t. the module's tensor inputs are
        computed; a returned tuple replaces grad_input."""
        if self._is_full_backward_hook is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        self._is_full_backward_hook = True
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """Deprecated: call hook(module, grad_input, grad_output) from the autograd node that produced the output,
        grad_input being that node's input gradients (not necessarily the module's); prefer
        register_full_backward_hook."""
        if self._is_full_backward_hook is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks on a single Module. "
                               "Please use only one of them.")
        self._is_full_backward_hook = False
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    def _get_backward_hooks(self) -> tuple[list, list]:
        """(full backward hooks, legacy ones): the global hooks first, then the module's."""
        full: list = []
        legacy: list = []
        if _global_backward_hooks:
            (full if _global_is_full_backward_hook else legacy).extend(_global_backward_hooks.values())
        if self._backward_hooks:
            (full if self._is_full_backward_hook else legacy).extend(self._backward_hooks.values())
        return full, legacy

    def _call_impl(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks
                or _global_forward_pre_hooks or _global_forward_hooks or _global_backward_hooks
                or _global_backward_pre_hooks):
            try:
                return self.forward(*args, **kwargs)
            except AttributeError as e:  # model(np_batch): PyTorch's TypeError, not an internal AttributeError
                if "'_data'" in str(e):
                    from ..._dispatch import not_a_tensor
                    not_a_tensor(self.forward, type(self).__name__, args, kwargs, e)
                raise
        return self._call_with_hooks(args, kwargs)

    __call__ = _call_impl

    _compiled_call_impl: Callable | None = None

    def compile(self, *args, **kwargs) -> None:
        """torch.compile this module's calls. tinytorch compiles nothing (its compile returns the callable
        unchanged), so calls stay eager; _compiled_call_impl is set as in PyTorch, which libraries inspect."""
        from ... import compile as _compile
        self._compiled_call_impl = _compile(self._call_impl, *args, **kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        pre = [*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()]
        post = [*_global_forward_hooks.items(), *self._forward_hooks.items()]
        with_kwargs = {**_global_forward_hooks_with_kwargs, **self._forward_hooks_with_kwargs}
        always_called = {**_global_forward_hooks_always_called, **self._forward_hooks_always_called}
        for hook_id, hook in pre:
            if hook_id in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if isinstance(res, tuple) and len(res) == 2:
                        args, kwargs = res
                    else:
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                           f"new_kwargs), but got {res}.")
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        bw = None
        full_hooks, legacy_hooks = self._get_backward_hooks()
        pre_hooks = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
        if (full_hooks or pre_hooks) and _grad_enabled():
            # Identity nodes around the inputs and outputs call the backward hooks when gradients reach them.
            bw = _BackwardHook(self, full_hooks, pre_hooks)
            args = bw.setup_input_hook(args)
        called = set()
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, hook in post:
                called.add(hook_id)
                if hook_id in with_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
        except Exception:
            # always_call hooks run even when forward (or an earlier hook) raised, as in PyTorch.
            for hook_id, hook in post:
                if hook_id in always_called and hook_id not in called:
                    try:
                        if hook_id in with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:
                        pass
            raise
        if bw is not None:
            result = bw.setup_output_hook(result)
        if legacy_hooks and _grad_enabled():
            self._attach_legacy_backward_hooks(legacy_hooks, args, result)
        return result

    def _attach_legacy_backward_hooks(self, hooks: list, args: tuple, result: Any) -> None:
        """register_backward_hook's behaviour: the hooks go on the node that made the first output tensor."""
        var = result
        while not isinstance(var, Tensor):
            var = next(v for v in var.values() if isinstance(v, Tensor)) if isinstance(var, dict) else var[0]
        grad_fn = var.grad_fn
        if grad_fn is None:
            return
        for hook in hooks:
            grad_fn.register_hook(functools.partial(hook, self))
        self._maybe_warn_non_full_backward_hook(args, result, grad_fn)

    def _maybe_warn_non_full_backward_hook(self, inputs: Any, result: Any, grad_fn: Any) -> None:
        """PyTorch's FutureWarnings for the cases where a legacy backward hook misses gradients."""
        import warnings
        if not isinstance(result, Tensor):
            if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
                warnings.warn("Using non-full backward hooks on a Module that does not return a single Tensor or a "
                              "tuple of Tensors is deprecated and will be removed in future versions. This hook will "
                              "be missing some of the grad_output. Please use register_full_backward_hook to get the "
                              "documented behavior.", FutureWarning, stacklevel=user_stacklevel())
                return
        else:
            result = (result,)
        if not isinstance(inputs, Tensor):
            if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
                warnings.warn("Using non-full backward hooks on a Module that does not take as input a single Tensor "
                              "or a tuple of Tensors is deprecated and will be removed in future versions. This hook "
                              "will be missing some of the grad_input. Please use register_full_backward_hook to get "
                              "the documented behavior.", FutureWarning, stacklevel=user_stacklevel())
                return
        else:
            inputs = (inputs,)
        out_grad_fn = {r.grad_fn for r in result if r.grad_fn is not None}
        if len(out_grad_fn) == 0 or (len(out_grad_fn) == 1 and grad_fn not in out_grad_fn):
            warnings.warn("Using a non-full backward hook when outputs are nested in python data structure is "
                          "deprecated and will be removed in future versions. This hook will be missing some "
                          "grad_output.", FutureWarning, stacklevel=user_stacklevel())
        elif len(out_grad_fn) > 1:
            warnings.warn("Using a non-full backward hook when outputs are generated by different autograd Nodes is "
                          "deprecated and will be removed in future versions. This hook will be missing some "
                          "grad_output. Please use register_full_backward_hook to get the documented behavior.",
                          FutureWarning, stacklevel=user_stacklevel())
        else:
            inputs_grad_fn = {i.grad_fn for i in inputs if i.grad_fn is not None}
            next_functions = {n[0] for n in grad_fn.next_functions}
            if inputs_grad_fn != next_functions:
                warnings.warn("Using a non-full backward hook when the forward contains multiple autograd Nodes is "
                              "deprecated and will be removed in future versions. This hook will be missing some "
                              "grad_input. Please use register_full_backward_hook to get the documented behavior.",
                              FutureWarning, stacklevel=user_stacklevel())

    # ---------------------------------------------------------------- state_dict
    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, prefix, keep_vars) before state_dict() collects this module's entries."""
        return add_hook(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, state_dict, prefix, local_metadata) after state_dict() collected this module."""
        return add_hook(self._state_dict_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors) first."""
        return add_hook(self._load_state_dict_pre_hooks, hook)

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(module, incompatible_keys) after load_state_dict (it may edit the key lists)."""
        return add_hook(self._load_state_dict_post_hooks, hook)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        extra = prefix + "_extra_state"
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[extra] = self.get_extra_state()

    def get_extra_state(self) -> Any:
        """Extra picklable state to include in state_dict (override together with set_extra_state)."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state: Any) -> None:
        """Restore what get_extra_state returned."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    def state_dict(self, *args, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict:
        """An OrderedDict of every parameter and persistent buffer, keyed by dotted name (detached)."""
        if args:  # PyTorch's deprecated positional form state_dict(destination, prefix, keep_vars)
            destination = args[0] if len(args) > 0 else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            # Each module's version, keyed by its prefix: load_state_dict passes it to _load_from_state_dict so
            # that modules can upgrade checkpoints saved by older versions (BatchNorm's num_batches_tracked).
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, local_metadata)
            if res is not None:
                destination = res
        return destination

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        for hook in self._load_state_dict_pre_hooks.values():
            hook(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        # As PyTorch: load_state_dict's assign travels in local_metadata, so subclasses that override this method
        # with PyTorch's signature keep working.
        assign = local_metadata.get("assign_to_params_buffers", False)
        persistent_buffers = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent_buffers.items())
                       if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                  f"Tensor-like object from checkpoint but received {type(input_param)}")
                continue
            if len(param.shape) == 0 and len(input_param.shape) == 1:
                input_param = input_param[0]  # PyTorch's backward compatibility for 0-d parameters
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                if assign:
                    if isinstance(param, Parameter):
                        if isinstance(input_param, Parameter):
                            new = input_param.requires_grad_(param.requires_grad)
                        else:
                            new = Parameter(input_param, requires_grad=param.requires_grad)
                        self._parameters[name] = new
                    else:
                        self._buffers[name] = input_param
                else:
                    if type(param._data) is MetaArray and type(input_param._data) is not MetaArray:
                        import warnings
                        warnings.warn(f"for {key}: copying from a non-meta parameter in the checkpoint to a meta "
                                      "parameter in the current model, which is a no-op. (Did you mean to pass "
                                      "`assign=True` to assign items in the state dictionary to their corresponding "
                                      "key in the module instead of copying them in place?)", stacklevel=2)
                    _copy_into(param, input_param)
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.size()} and whose dimensions in the checkpoint are "
                                  f"{input_param.size()}, an exception occurred : {ex.args}.")
        extra_key = prefix + "_extra_state"
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix) and key != extra_key:
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from state_dict; with strict, keys must match exactly."""
        from collections.abc import Mapping
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys: list = []
        unexpected_keys: list = []
        error_msgs: list = []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)

        def load(module: Module, local_state_dict: dict, prefix: str = "") -> None:
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True,
                                         missing_keys, unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    load(child, child_state, child_prefix)
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, incompatible)

        load(self, state_dict)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self.__class__.__name__, "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ---------------------------------------------------------------- repr
    def _get_name(self) -> str:
        return self.__class__.__name__

    def extra_repr(self) -> str:
        """The module-specific part of repr (override in layers)."""
        return ""

    def __repr__(self) -> str:
        extra_lines = []
        extra_repr = self.extra_repr()
        if extra_repr:
            extra_lines = extra_repr.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"


class _BackwardHook:
    """Identity autograd nodes around one module call that run its full backward (pre-)hooks, as
    PyTorch's torch.utils.hooks.BackwardHook does."""

    def __init__(self, module: Module, hooks: list, pre_hooks: list) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        self.input_positions: list[int] | None = None
        self.grad_outputs: tuple | None = None

    @staticmethod
    def _identity(tensors: list, on_backward: Callable):
        from ...autograd.function import Function

        class BackwardHookFunction(Function):
            @staticmethod
            def forward(ctx, *ts):
                ctx.set_materialize_grads(False)
                return ts

            @staticmethod
            def backward(ctx, *grads):
                return on_backward(grads)
        return BackwardHookFunction.apply(*tensors)

    def setup_input_hook(self, args: tuple) -> tuple:
        self.n_inputs = len(args)
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not positions or not self.hooks:
            return args
        self.input_positions = positions
        outs = self._identity([args[i] for i in positions], self._on_input_grads)
        new = list(args)
        for i, o in zip(positions, outs):
            new[i] = o
        return tuple(new)

    def _on_input_grads(self, grads: tuple) -> tuple:
        full = [None] * self.n_inputs
        for i, g in zip(self.input_positions, grads):
            full[i] = g
        grad_inputs = tuple(full)
        for hook in self.hooks:
            res = hook(self.module, grad_inputs, self.grad_outputs)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_inputs):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(res)}, "
                                       f"but expected {len(grad_inputs)}")
                grad_inputs = res
        return tuple(grad_inputs[i] for i in self.input_positions)

    def setup_output_hook(self, result):
        single = isinstance(result, Tensor)
        items = [result] if single else (list(result) if isinstance(result, tuple) else None)
        if items is None:
            return result
        positions = [i for i, r in enumerate(items) if isinstance(r, Tensor) and r.requires_grad]
        if not positions:
            return result
        n_out = len(items)

        def on_output_grads(grads: tuple) -> tuple:
            full = [None] * n_out
            for i, g in zip(positions, grads):
                full[i] = g
            grad_outputs = tuple(full)
            for hook in self.pre_hooks:
                res = hook(self.module, grad_outputs)
                if res is not None:
                    grad_outputs = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            self.grad_outputs = grad_outputs
            if self.input_positions is None and self.hooks:
                # No input needs a gradient: the hooks run now, with grad_input all None (PyTorch's rule).
                import warnings
                warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                              "outputs since no inputs require gradients. See https://docs.pytorch.org/docs/main/"
                              "generated/torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more "
                              "details.", stacklevel=user_stacklevel())
                none_inputs = (None,) * self.n_inputs
                for hook in self.hooks:
                    res = hook(self.module, none_inputs, grad_outputs)
                    if res is not None and not all(r is None for r in res):
                        raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                           "always return None or None for all gradients.")
            return tuple(grad_outputs[i] for i in positions)

        outs = self._identity([items[i] for i in positions], on_output_grads)
        for i, o in zip(positions, outs):
            items[i] = o
        return items[0] if single else tuple(items)


def _copy_into(dst: Tensor, src: Tensor) -> None:
    """dst.copy_(src) under no_grad: cast and move src into dst's array, then record the write."""
    from ..._device import move
    data = src._data
    if type(data) is not type(dst._data) or src.device != dst.device:
        data = move(data, dst.device)
    dst._data[...] = data
    dst._bump_version()
