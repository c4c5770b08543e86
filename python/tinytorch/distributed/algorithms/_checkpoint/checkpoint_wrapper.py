"""checkpoint_wrapper / apply_activation_checkpointing: wrap submodules so their forward runs under
utils.checkpoint (or activations are offloaded to host memory), as torchtitan and FSDP users do.

The wrapped module lives at `_checkpoint_wrapped_module`; state dicts drop that part of the keys (and
loading adds it back), so a checkpoint of a wrapped model loads into an unwrapped one and back.
"""
from __future__ import annotations

import enum
from functools import partial
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from .... import nn
from ....autograd.graph import save_on_cpu
from ....utils.checkpoint import checkpoint as torch_utils_checkpoint

_CHECKPOINT_WRAPPED_MODULE = "_checkpoint_wrapped_module"
_CHECKPOINT_PREFIX = _CHECKPOINT_WRAPPED_MODULE + "."


class CheckpointImpl(enum.Enum):
    REENTRANT = enum.auto()
    NO_REENTRANT = enum.auto()


def _replace_prefix(state_dict: Dict[str, Any], old: str, new: str) -> None:
    for key in [k for k in state_dict if k.startswith(old)]:
        state_dict[new + key[len(old):]] = state_dict.pop(key)


class ActivationWrapper(nn.Module):
    """What the checkpoint and offload wrappers share: attribute, indexing and state-dict transparency."""

    def __init__(self, mod: nn.Module) -> None:
        super().__init__()
        self._checkpoint_wrapped_module = mod
        self.register_state_dict_post_hook(self._post_state_dict_hook)
        self.register_load_state_dict_pre_hook(self._pre_load_state_dict_hook)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("Subclasses should implement forward().")

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._checkpoint_wrapped_module, name)

    def __getitem__(self, key: int) -> Any:
        return self._checkpoint_wrapped_module.__getitem__(key)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[Tuple[str, nn.Parameter]]:
        """The wrapped module's parameter names, without `_checkpoint_wrapped_module.`."""
        for name, param in super().named_parameters(*args, **kwargs):
            yield name.replace(_CHECKPOINT_PREFIX, ""), param

    @staticmethod
    def _post_state_dict_hook(module: nn.Module, state_dict: Dict[str, Any], prefix: str, *args: Any) -> Dict[str, Any]:
        _replace_prefix(state_dict, f"{prefix}{_CHECKPOINT_PREFIX}", prefix)
        return state_dict

    @staticmethod
    def _pre_load_state_dict_hook(module: nn.Module, state_dict: Dict[str, Any], prefix: str, *args: Any) -> None:
        _replace_prefix(state_dict, prefix, prefix + _CHECKPOINT_PREFIX)


class OffloadWrapper(ActivationWrapper):
    """Forward under save_on_cpu: saved activations wait in (pinned) host memory for backward."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with save_on_cpu(pin_memory=True):
            return self._checkpoint_wrapped_module(*args, **kwargs)


class CheckpointWrapper(ActivationWrapper):
    """Forward through `checkpoint_fn` (utils.checkpoint by default): activations recomputed in backward."""

    def __init__(self, mod: nn.Module, checkpoint_impl: CheckpointImpl = CheckpointImpl.NO_REENTRANT,
                 checkpoint_fn: Optional[Callable] = None, **checkpoint_fn_kwargs: Any) -> None:
        super().__init__(mod)
        self.checkpoint_impl = checkpoint_impl
        if checkpoint_fn is None:
            self.checkpoint_fn = partial(torch_utils_checkpoint,
                                         use_reentrant=checkpoint_impl == CheckpointImpl.REENTRANT,
                                         **checkpoint_fn_kwargs)
        else:
            self.checkpoint_fn = partial(checkpoint_fn, **checkpoint_fn_kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.checkpoint_impl == CheckpointImpl.REENTRANT and kwargs:
            # The reentrant variant takes positional tensors only: carry the keywords through as positions.
            keys = tuple(kwargs)
            flat = args + tuple(kwargs.values())

            def run(*inputs: Any) -> Any:
                n = len(inputs) - len(keys)
                return self._checkpoint_wrapped_module(*inputs[:n], **dict(zip(keys, inputs[n:])))
            return self.checkpoint_fn(run, *flat)
        return self.checkpoint_fn(self._checkpoint_wrapped_module, *args, **kwargs)


def offload_wrapper(module: nn.Module) -> nn.Module:
    """Wrap `module` so that the activations it saves are offloaded to host memory."""
    return OffloadWrapper(module)


def checkpoint_wrapper(module: nn.Module, checkpoint_impl: CheckpointImpl = CheckpointImpl.NO_REENTRANT,
                       checkpoint_fn: Optional[Callable] = None, **checkpoint_fn_kwargs: Any) -> nn.Module:
    """Wrap `module` so that every call runs under activation checkpointing."""
    return CheckpointWrapper(module, checkpoint_impl, checkpoint_fn, **checkpoint_fn_kwargs)


def _recursive_wrap(module: nn.Module, policy: Callable, wrapper: Callable, only_wrap_children: bool) -> Tuple[nn.Module, int]:
    """Post-order: wrap matching descendants first, then `module` itself if the policy still asks for it."""
    numel = sum(p.numel() for p in module.parameters())
    if not policy(module=module, recurse=True, nonwrapped_numel=numel):
        return module, 0
    wrapped = 0
    for name, child in list(module.named_children()):
        new_child, n = _recursive_wrap(child, policy, wrapper, False)
        setattr(module, name, new_child)
        wrapped += n
    if not only_wrap_children and policy(module=module, recurse=False, nonwrapped_numel=numel - wrapped):
        return wrapper(module), numel
    return module, wrapped


def apply_activation_checkpointing(model: nn.Module, checkpoint_wrapper_fn: Callable = checkpoint_wrapper,
                                   check_fn: Callable[[nn.Module], bool] = lambda _: True,
                                   auto_wrap_policy: Optional[Callable[..., bool]] = None) -> None:
    """Replace, in place, each submodule of `model` (never `model` itself) for which `check_fn` (or
    `auto_wrap_policy(module, recurse, nonwrapped_numel)`) says so by `checkpoint_wrapper_fn(submodule)`."""
    if auto_wrap_policy is not None:
        if not callable(auto_wrap_policy):
            raise ValueError(f"Expected {auto_wrap_policy} to be callable or be a pre-defined wrap policy")
        policy = auto_wrap_policy
    else:
        def policy(module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
            return recurse or check_fn(module)
    _recursive_wrap(model, policy, checkpoint_wrapper_fn, only_wrap_children=True)
