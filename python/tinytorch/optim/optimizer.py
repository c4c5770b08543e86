"""Optimizer: parameter groups, per-parameter state, zero_grad and PyTorch's state_dict format."""
from __future__ import annotations

import contextlib
import functools
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain
from typing import Any, Callable, Iterable

import numpy as np

from .._meta import MetaArray, namespace as meta_namespace

from .._device import cupy
from .._tensor import Tensor
from ..utils.hooks import RemovableHandle, add_hook

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks a hyperparameter that every param group must give (SGD's lr in old PyTorch)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return obj.type()
    return type(obj).__qualname__


def _wrap_step(step: Callable) -> Callable:
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        pre, post = self._optimizer_step_pre_hooks, self._optimizer_step_post_hooks
        if pre:
            for hook in list(pre.values()):
                res = hook(self, args, kwargs)
                if res is not None:
                    if isinstance(res, tuple) and len(res) == 2:
                        args, kwargs = res
                    else:
                        raise RuntimeError(f"{step} must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {res}.")
        out = step(self, *args, **kwargs)
        self._opt_called = True
        if post:
            for hook in list(post.values()):
                hook(self, args, kwargs)
        return out
    wrapper._tinytorch_step_wrapper = True
    return wrapper


class Optimizer:
    """Base class of optimizers: holds param_groups (dicts of params + hyperparameters) and per-param state."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # Every subclass's step() runs the step hooks and marks the optimizer as stepped (LR schedulers
        # check that to warn about calling scheduler.step() first).
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_tinytorch_step_wrapper", False):
            cls.step = _wrap_step(step)

    def __init__(self, params, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self._optimizer_step_pre_hooks: dict = {}
        self._optimizer_step_post_hooks: dict = {}
        self._scratch: dict = {}
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {_typename(params)}")
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_optimizer_step_pre_hooks", {})
        self.__dict__.setdefault("_optimizer_step_post_hooks", {})
        self.__dict__.setdefault("_scratch", {})

    def __repr__(self) -> str:
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += "\n"
            format_string += f"Parameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        return format_string + ")"

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own hyperparameters (missing ones come from defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        # named_parameters() may be passed directly (PyTorch 2.6+): keep the names beside the params.
        plist = param_group["params"]
        if plist and all(isinstance(p, tuple) and len(p) == 2 for p in plist):
            param_group["param_names"] = [n for n, _ in plist]
            param_group["params"] = [p for _, p in plist]
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not self.defaults.get("differentiable", None) and not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the .grad of every optimized parameter: to None (default) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    if g._grad_fn is not None:
                        g.detach_()
                    else:
                        g._requires_grad = False
                    g._data[...] = 0
                    g._bump_version()

    def step(self, closure: Callable[[], Any] | None = None):
        """Update the parameters from their gradients (subclasses implement it)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- hooks
    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(optimizer, args, kwargs) before each step()."""
        return add_hook(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call hook(optimizer, args, kwargs) after each step()."""
        return add_hook(self._optimizer_step_post_hooks, hook)

    # ---------------------------------------------------------------- state_dict
    def state_dict(self) -> dict[str, Any]:
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]} (PyTorch's format).

        The state tensors are the optimizer's own (not copies), as in PyTorch.
        """
        param_mappings: dict[int, int] = {}
        start_index = 0

        def pack_group(group: dict) -> dict:
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": param_groups}

    @staticmethod
    def _process_value_according_to_param_policy(param: Tensor, value: Tensor, key: Any = None) -> Tensor:
        # 'step' stays a CPU tensor as PyTorch keeps it (read on the host every step); everything else
        # follows the parameter's device, and its dtype when floating.
        if key == "step":
            return value
        if param.is_floating_point() and value.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore state and hyperparameters saved by state_dict() into this optimizer's parameters."""
        state_dict = dict(state_dict)
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        param_lens = (len(g["params"]) for g in groups)
        saved_lens = (len(g["params"]) for g in saved_groups)
        if any(p_len != s_len for p_len, s_len in zip(param_lens, saved_lens)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def _cast(param: Tensor, value: Any, key: Any = None) -> Any:
            if isinstance(value, Tensor):
                return Optimizer._process_value_according_to_param_policy(param, value, key)
            if isinstance(value, dict):
                return {k: _cast(param, v, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(_cast(param, v) for v in value)
            return value

        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = _cast(param, v)
            else:
                state[k] = v

        def update_group(group: dict, new_group: dict) -> dict:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})

    # ---------------------------------------------------------------- helpers for subclasses
    def _scratch_like(self, a, size: int | None = None):
        """A scratch array shaped like `a` (or flat, of `size` elements), carved from one flat buffer per
        (device, dtype) that is reused across parameters and steps (a fresh allocation per step would
        page-fault on large arrays)."""
        xp = np if type(a) is np.ndarray else cupy()
        n = a.size if size is None else size
        key = (type(a), a.dtype, 0 if xp is np else a.device.id)
        buf = self._scratch.get(key)
        if buf is None or buf.size < n:
            if xp is np:
                buf = np.empty(n, a.dtype)
            else:
                with a.device:
                    buf = xp.empty(n, a.dtype)
            self._scratch[key] = buf
        return buf[:n] if size is not None else buf[:n].reshape(a.shape)


def _xp(a):
    if type(a) is np.ndarray:
        return np
    return meta_namespace if type(a) is MetaArray else cupy()


_NO_DEVICE = contextlib.nullcontext()


def _on_device(a):
    """A context making a CuPy array's GPU current (CuPy ufuncs and kernels run on the current device)."""
    return _NO_DEVICE if type(a) is np.ndarray or type(a) is MetaArray else a.device


def _use_closure(closure: Callable | None):
    """Run the closure with grad enabled (PyTorch re-enables grad for it) and return its loss."""
    if closure is None:
        return None
    from ..autograd.grad_mode import enable_grad
    with enable_grad():
        return closure()


def _group_params_with_grad(group: dict) -> Iterable[Tensor]:
    for p in group["params"]:
        if p._grad is not None:
            yield p
