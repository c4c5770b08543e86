"""FSDP1's auto-wrap policies (torch.distributed.fsdp.wrap): which submodules get a sharding group of their own.

A policy is called as policy(module=, recurse=, nonwrapped_numel=): with recurse=True it says whether to look at
module's children, with recurse=False whether module itself becomes a group (nonwrapped_numel: the parameters
below it not yet in a group)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Set, Type

from ...nn import Module, ModuleDict, ModuleList, MultiheadAttention

__all__ = ["always_wrap_policy", "lambda_auto_wrap_policy", "transformer_auto_wrap_policy",
           "size_based_auto_wrap_policy", "ModuleWrapPolicy", "CustomPolicy"]


def always_wrap_policy(*args: Any, **kwargs: Any) -> bool:
    """Every submodule becomes a group."""
    return True


def lambda_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int, lambda_fn: Callable) -> bool:
    """Modules for which lambda_fn(module) is true become groups (use with functools.partial)."""
    return True if recurse else bool(lambda_fn(module))


def transformer_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int,
                                 transformer_layer_cls: Iterable[Type[Module]]) -> bool:
    """Instances of transformer_layer_cls (the transformer blocks) become groups."""
    return True if recurse else isinstance(module, tuple(transformer_layer_cls))


def size_based_auto_wrap_policy(module: Module, recurse: bool, nonwrapped_numel: int, min_num_params: int = int(1e8),
                                force_leaf_modules: Optional[Set[Type[Module]]] = None,
                                exclude_wrap_modules: Optional[Set[Type[Module]]] = None) -> bool:
    """A module whose not-yet-grouped parameters number at least min_num_params becomes a group; containers
    (ModuleList, ModuleDict) never do, and MultiheadAttention is not looked into."""
    force_leaf = tuple(size_based_auto_wrap_policy.FORCE_LEAF_MODULES if force_leaf_modules is None
                       else force_leaf_modules)
    exclude = tuple(size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES if exclude_wrap_modules is None
                    else exclude_wrap_modules)
    big = nonwrapped_numel >= min_num_params
    if recurse:
        return big and not isinstance(module, force_leaf)
    return big and not isinstance(module, exclude)


size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = {ModuleList, ModuleDict}  # type: ignore[attr-defined]
size_based_auto_wrap_policy.FORCE_LEAF_MODULES = {MultiheadAttention}  # type: ignore[attr-defined]


class ModuleWrapPolicy:
    """Instances of the given module classes become groups."""

    def __init__(self, module_classes: Iterable[Type[Module]]) -> None:
        self._module_classes = tuple(set(module_classes))

    def __call__(self, module: Module, recurse: bool, *args: Any, **kwargs: Any) -> bool:
        return True if recurse else isinstance(module, self._module_classes)

    def __repr__(self) -> str:
        return f"ModuleWrapPolicy({', '.join(c.__name__ for c in self._module_classes)})"


class CustomPolicy:
    """lambda_fn(module) -> bool (or a dict of FSDP keyword arguments for that module, which tinytorch refuses:
    every group takes the root's settings)."""

    def __init__(self, lambda_fn: Callable[[Module], Any]) -> None:
        self._lambda_fn = lambda_fn

    def __call__(self, module: Module, recurse: bool, *args: Any, **kwargs: Any) -> bool:
        if recurse:
            return True
        r = self._lambda_fn(module)
        if isinstance(r, dict):
            raise NotImplementedError("CustomPolicy: per-module FSDP arguments are not supported by tinytorch; "
                                      "return True or False")
        return bool(r)


def _recursive_wrap(module: Module, policy: Callable, wrap: Callable[[Module], None], ignored: Set[int],
                    is_root: bool = True) -> int:
    """Apply `wrap` bottom-up to the submodules `policy` selects (never to the root, which the caller wraps);
    returns how many parameters ended up in groups."""
    from ._fully_shard import FSDPModule, _managed_params
    nonwrapped = sum(p.numel() for p, _, _ in _managed_params(module) if id(p) not in ignored)
    if not policy(module=module, recurse=True, nonwrapped_numel=nonwrapped):
        return 0
    wrapped = 0
    for child in module.children():
        if not isinstance(child, FSDPModule):
            wrapped += _recursive_wrap(child, policy, wrap, ignored, is_root=False)
    if not is_root and policy(module=module, recurse=False, nonwrapped_numel=nonwrapped - wrapped):
        wrap(module)
        return nonwrapped
    return wrapped


def _as_policy(auto_wrap_policy: Any) -> Optional[Callable]:
    """A policy callable from what FSDP accepts: a function (often a functools.partial) or a policy object."""
    if auto_wrap_policy is None or callable(auto_wrap_policy):
        return auto_wrap_policy
    raise TypeError(f"auto_wrap_policy must be a callable or a ModuleWrapPolicy, got {type(auto_wrap_policy).__name__}")

