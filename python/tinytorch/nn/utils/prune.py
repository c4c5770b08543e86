"""Magnitude and random pruning (PyTorch's torch.nn.utils.prune).

Pruning a parameter `name` re-parametrises it: the trained values move to the Parameter `name_orig`, a 0/1 buffer
`name_mask` records what is kept, and a forward pre-hook (the pruning method itself) recomputes the plain tensor
attribute `module.<name> = name_orig * name_mask` before every forward. Pruning the same tensor again wraps the
methods in a PruningContainer so each new method only acts on the entries (or channels) still unpruned.
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

from ... import _creation
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ..modules.module import Module
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


# ---------------------------------------------------------------- validation and small helpers
def _validate_pruning_amount_init(amount: Any) -> None:
    """Reject amounts that can never be valid: not a number, a negative int, or a float outside [0, 1]."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    is_int = isinstance(amount, numbers.Integral)
    if (is_int and amount < 0) or (not is_int and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_pruning_amount(amount: int, tensor_size: int) -> None:
    """An absolute amount must not exceed the number of units it is taken from."""
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _compute_nparams_toprune(amount: int | float, tensor_size: int) -> int:
    """The number of units to prune: an int amount as is, a float as a rounded fraction of tensor_size."""
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_structured_pruning(t: Tensor) -> None:
    """Channels only make sense for tensors with at least two dims."""
    shape = t.shape
    if len(shape) <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. Found tensor of "
                         f"shape {shape} with {len(shape)} dims")


def _validate_pruning_dim(t: Tensor, dim: int) -> None:
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _compute_norm(t: Tensor, n: int | float | str, dim: int) -> Tensor:
    """The L_n norm of each channel along `dim`, taken over all the other dims (torch.norm's p values)."""
    dims = list(range(t.dim()))
    dims.remove(dims[dim])
    if n == "nuc":
        from ... import linalg
        return linalg.matrix_norm(t, ord="nuc", dim=tuple(dims))
    return t.norm(p=n, dim=dims)


def _channel_index(ndim: int, dim: int, index) -> tuple:
    """An indexing tuple selecting `index` along `dim` and everything along the other dims."""
    slc: list = [slice(None)] * ndim
    slc[dim] = index
    return tuple(slc)


# ---------------------------------------------------------------- the methods
class BasePruningMethod(ABC):
    """Base class of pruning methods: subclasses define compute_mask (and PRUNING_TYPE); apply installs them.

    An instance is also the forward pre-hook that recomputes module.<name> from name_orig and name_mask.
    """

    _tensor_name: str | None = None
    PRUNING_TYPE: str

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask for `t` (importance scores), on top of `default_mask` from earlier pruning (same shape)."""

    def apply_mask(self, module: Module) -> Tensor:
        """The pruned tensor: module.<name>_orig times module.<name>_mask (differentiable in the original)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def _composite(cls, module: Module, name: str, *args, **kwargs) -> tuple[BasePruningMethod, Any]:
        """The method to install for module.<name>: a new one, or a container joining it to the existing hook.

        Also returns the (key, hook) that was taken off the module, so a failed pruning can put it back.
        """
        found = [(k, hook) for k, hook in module._forward_pre_hooks.items()
                 if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
        if len(found) > 1:
            raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                                 f"{module}. Use a PruningContainer.")
        for k, _ in found:
            del module._forward_pre_hooks[k]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        old = found[0][1] if found else None
        if isinstance(old, PruningContainer):
            old.add_pruning_method(method)
            method = old
        elif old is not None:
            container = PruningContainer(old)
            container.add_pruning_method(method)
            method = container
        return method, old

    @classmethod
    def apply(cls, module: Module, name: str, *args, importance_scores: Tensor | None = None,
              **kwargs) -> BasePruningMethod:
        """Prune module.<name> with a new `cls(*args, **kwargs)` and install the re-parametrisation and its hook."""
        method, old = cls._composite(module, name, *args, **kwargs)
        # Before the first pruning this is the Parameter; afterwards it is the current pruned tensor.
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(f"importance_scores should have the same shape as parameter {name} of "
                                     f"{module}, got {importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = _creation.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            with no_grad():
                mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            # Roll back: the module is left as it was before this call (PyTorch leaves an unhooked container).
            if first:
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
                module._buffers.pop(name + "_mask", None)
            else:
                if old is method:
                    old._pruning_methods = old._pruning_methods[:-1]
                module.register_forward_pre_hook(old)
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """`t` times the mask compute_mask gives for it (scores from importance_scores when given)."""
        if importance_scores is not None:
            if importance_scores.shape != t.shape:
                raise AssertionError("importance_scores should have the same shape as tensor t, "
                                     f"got {importance_scores.shape} vs {t.shape}")
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = _creation.ones_like(t)
        with no_grad():
            mask = self.compute_mask(importance_scores, default_mask=default_mask)
        return t * mask

    def remove(self, module: Module) -> None:
        """Make the pruning permanent: module.<name> becomes a plain Parameter holding orig * mask."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        # Reuse the original Parameter object, so optimizers holding it keep working.
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """The sequence of methods applied to one tensor; its mask is the latest method's, computed on what is left."""

    def __init__(self, *args: BasePruningMethod) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if args:
            # PyTorch takes the name from a single method; several methods share the first one's name.
            self._tensor_name = args[0]._tensor_name
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod) -> None:
        """Append `method`, which must act on the same tensor as the container."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                             f"to PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Iterator[BasePruningMethod]:
        return iter(self._pruning_methods)

    def __getitem__(self, idx: int) -> BasePruningMethod:
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """Run the latest method on the still-unpruned part of `t` and write its mask into default_mask.

        'unstructured' methods see the flat list of unmasked entries, 'structured' ones the channels along their
        dim that are not entirely masked, 'global' ones the whole tensor.
        """
        method = self._pruning_methods[-1]
        new_mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            slc = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                                     "`dim` defined.")
            n_dims = t.dim()
            dim = method.dim + n_dims if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {n_dims}")
            others = [d for d in range(n_dims) if d != dim]
            keep_channel = (default_mask.sum(dim=others) if others else default_mask) != 0
            slc = _channel_index(n_dims, dim, keep_channel)
        elif kind == "global":
            slc = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial_mask = method.compute_mask(t[slc], default_mask=default_mask[slc])
        new_mask[slc] = partial_mask.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Installs the re-parametrisation with a mask of ones (prunes nothing)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str) -> "Identity":  # type: ignore[override]
        return super().apply(module, name)


def _unstructured_mask(t: Tensor, default_mask: Tensor, amount: int | float, pick) -> Tensor:
    """default_mask with the k = amount (count or fraction of t) flat positions pick(k) names set to 0."""
    tensor_size = t.nelement()
    k = _compute_nparams_toprune(amount, tensor_size)
    _validate_pruning_amount(k, tensor_size)
    flat = default_mask.reshape(-1).clone()
    if k != 0:
        flat[pick(k)] = 0
    return flat.view(default_mask.shape)


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` (count or fraction) of the currently unpruned entries, chosen uniformly at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        # The entries drawing the k largest random scores are pruned.
        return _unstructured_mask(t, default_mask, self.amount,
                                  lambda k: _creation.rand_like(t).reshape(-1).topk(k).indices)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float) -> "RandomUnstructured":  # type: ignore[override]
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes `amount` (count or fraction) of the currently unpruned entries with the smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return _unstructured_mask(t, default_mask, self.amount,
                                  lambda k: t.abs().reshape(-1).topk(k, largest=False).indices)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,  # type: ignore[override]
              importance_scores: Tensor | None = None) -> "L1Unstructured":
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` (count or fraction) of the currently unpruned channels along `dim`, at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        nchannels = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, nchannels)
        _validate_pruning_amount(k, nchannels)
        if k == 0:
            return default_mask
        # The channels drawing the k smallest random scores are pruned.
        scores = _creation.rand(nchannels, device=t.device)
        mask = _creation.ones_like(t)
        mask[_channel_index(t.dim(), self.dim, scores.topk(k, largest=False).indices)] = 0
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float,  # type: ignore[override]
              dim: int = -1) -> "RandomStructured":
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes `amount` (count or fraction) of the currently unpruned channels along `dim` with the smallest L_n norm.

    `n` is any p accepted by torch.norm (int, float, inf, -inf, 'fro', 'nuc').
    """

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, n: int | float | str, dim: int = -1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        nchannels = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, nchannels)
        _validate_pruning_amount(k, nchannels)
        if k == 0:
            return default_mask
        # Keep the channels with the largest norms (ties resolved as torch.topk does).
        keep = _compute_norm(t, self.n, self.dim).topk(nchannels - k, largest=True).indices
        mask = _creation.zeros_like(t)
        mask[_channel_index(t.dim(), self.dim, keep)] = 1
        return mask * default_mask.to(dtype=mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float, n: int | float | str,  # type: ignore[override]
              dim: int, importance_scores: Tensor | None = None) -> "LnStructured":
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes with a given mask (combined with any earlier mask)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"default_mask shape {default_mask.shape} must match "
                                 f"self.mask shape {self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor) -> "CustomFromMask":  # type: ignore[override]
        return super().apply(module, name, mask=mask)


# ---------------------------------------------------------------- functional API
def identity(module: Module, name: str) -> Module:
    """Re-parametrise module.<name> as name_orig * name_mask with a mask of ones."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: int | float) -> Module:
    """Prune `amount` of the unpruned entries of module.<name> at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module: Module, name: str, amount: int | float,
                    importance_scores: Tensor | None = None) -> Module:
    """Prune `amount` of the unpruned entries of module.<name> with the smallest |importance score|."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: int | float, dim: int) -> Module:
    """Prune `amount` of the unpruned channels of module.<name> along `dim` at random."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module: Module, name: str, amount: int | float, n: int | float | str, dim: int,
                  importance_scores: Tensor | None = None) -> Module:
    """Prune `amount` of the unpruned channels of module.<name> along `dim` with the smallest L_n norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters: Iterable[tuple[Module, str]], pruning_method: type[BasePruningMethod],
                        importance_scores: dict | None = None, **kwargs) -> None:
    """Prune several (module, name) tensors as if they were one flat tensor, with an unstructured method.

    kwargs (e.g. amount) go to `pruning_method`; importance_scores maps (module, name) to a score tensor.
    """
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)  # walked three times below, so a generator is fine too
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")

    method = pruning_method(**kwargs)
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    method._tensor_name = "temp"
    container = PruningContainer()
    container._tensor_name = "temp"
    container.add_pruning_method(method)
    with no_grad():
        scores = parameters_to_vector([importance_scores.get((module, name), getattr(module, name))
                                       for module, name in parameters])
        # Entries pruned earlier stay pruned and are not counted again.
        default_mask = parameters_to_vector([getattr(module, name + "_mask") if hasattr(module, name + "_mask")
                                             else _creation.ones_like(getattr(module, name))
                                             for module, name in parameters])
        final_mask = container.compute_mask(scores, default_mask)

    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        num = param.numel()
        custom_from_mask(module, name, mask=final_mask[pointer:pointer + num].view_as(param))
        pointer += num


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune module.<name> with the given 0/1 mask (on top of any earlier pruning)."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module: Module, name: str) -> Module:
    """Make the pruning of module.<name> permanent: drop name_orig, name_mask and the hook, keep the zeros."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module: Module) -> bool:
    """Whether `module` or any submodule carries a pruning hook."""
    for _, submodule in module.named_modules():
        for hook in submodule._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False
