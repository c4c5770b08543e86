"""tinytorch.nn.utils.stateless: call a module with other tensors in place of its parameters and buffers.

_reparametrize_module swaps tensors into the module by dotted name and always swaps the originals back;
torch.func.functional_call is built on it.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator, Optional

from ..._tensor import Tensor

__all__ = ["functional_call"]

_MISSING = object()  # the module had no attribute of that name: swapping back deletes it


def _owner(module, path: str, memo: dict) -> tuple[Any, str]:
    """(submodule holding `path`'s tensor, the tensor's own name), with PyTorch's errors for bad paths."""
    from ..modules.module import Module
    prefix, _, name = path.rpartition(".")
    if prefix in memo:
        return memo[prefix], name
    mod = module
    walked = []
    for attr in prefix.split(".") if prefix else []:
        walked.append(attr)
        try:
            child = getattr(mod, attr)
        except AttributeError as ex:
            raise AttributeError(f"{mod._get_name()} has no attribute `{attr}`") from ex
        if not isinstance(child, Module):
            raise TypeError(f"submodule `{'.'.join(walked)}`: {child} is not an instance of torch.nn.Module")
        mod = child
    memo[prefix] = mod
    return mod, name


def _swap_tensor(module, name: str, tensor: Any) -> Any:
    """Put `tensor` (or _MISSING: remove) at module.<name>; returns what was there (or _MISSING)."""
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of torch.Tensor")
    if "." in name:
        raise KeyError('tensor name can\'t contain "."')
    if name == "":
        raise KeyError('tensor name can\'t be empty string ""')
    for table in (module._parameters, module._buffers):
        if name in table:
            orig = table[name]
            if tensor is _MISSING:
                del table[name]
            else:
                table[name] = tensor
            return orig
    orig = getattr(module, name) if hasattr(module, name) else _MISSING
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{name}`: {orig} is not an instance of torch.Tensor")
    if tensor is not _MISSING:
        setattr(module, name, tensor)
    elif hasattr(module, name):
        delattr(module, name)
    return orig


def _swap_all(module, named: dict, memo: dict) -> dict:
    """Swap every entry of `named` in; on error swap back what was already swapped and re-raise."""
    originals: dict = {}
    try:
        for path, tensor in named.items():
            owner, name = _owner(module, path, memo)
            originals[path] = _swap_tensor(owner, name, tensor)
    except Exception:
        for path, orig in originals.items():
            owner, name = _owner(module, path, memo)
            _swap_tensor(owner, name, orig)
        raise
    return originals


def _untie_named_tensors_map(module, parameters_and_buffers: dict) -> dict:
    """The given tensors plus, for every given name of a tied tensor, the same value under its other names."""
    names_of: dict[int, set] = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + \
            list(module.named_buffers(remove_duplicate=False)):
        names_of.setdefault(id(t), set()).add(name)
    tied = {name: names for names in names_of.values() if len(names) > 1 for name in names}
    given_tied = [name for name in parameters_and_buffers if name in tied]
    for name in given_tied:
        group = tied[name]
        values = {id(parameters_and_buffers[n]) for n in group if n in parameters_and_buffers}
        if len(values) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(group)}, which are tied. "
                             "Consider using tie_weights=False")
    untied = dict(parameters_and_buffers)
    for name in given_tied:
        for other in tied[name]:
            untied[other] = parameters_and_buffers[name]
    return untied


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers: dict, tie_weights: bool = False,
                          strict: bool = False) -> Iterator[None]:
    """Within the block, module's tensors named in parameters_and_buffers are the given ones; afterwards the
    originals are back and values the module reassigned during the block are written into the dict."""
    named = _untie_named_tensors_map(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        valid |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing, unexpected = sorted(valid - set(named)), sorted(set(named) - valid)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(),
                                                                                "\n\t".join(msgs)))
    memo: dict = {}
    originals = _swap_all(module, named, memo)
    try:
        yield
    finally:
        current = _swap_all(module, originals, memo)
        for k in parameters_and_buffers:
            if k in current and current[k] is not _MISSING:
                parameters_and_buffers[k] = current[k]


def _functional_call(module, parameters_and_buffers: dict, args: Any = None, kwargs: Optional[dict] = None, *,
                     tie_weights: bool = True, strict: bool = False) -> Any:
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(module, parameters_and_buffers: dict, args: Any = None, kwargs: Optional[dict] = None, *,
                    tie_weights: bool = True, strict: bool = False) -> Any:
    """Call `module` with the given tensors in place of its parameters and buffers (by dotted name).

    Deprecated since PyTorch 2.0 in favour of torch.func.functional_call, which it equals.
    """
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in "
                  "a future version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in "
                  "replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
