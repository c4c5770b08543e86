"""vmap without batching rules: slice the batched inputs, run the function once per example, stack the results.

The result matches PyTorch's vmap for any function of tensors (in_dims/out_dims pytrees, nested vmap,
autograd through it), but it costs one call of `func` per example: it is correct, not fast.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from .._tensor import Tensor
from ..utils._pytree import _broadcast_to_and_flatten, tree_flatten

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def _name(func: Callable) -> str:
    return getattr(func, "__name__", repr(func))


def _is_dim(d: Any) -> bool:
    return isinstance(d, int) and not isinstance(d, bool)


def _batch_layout(func: Callable, in_dims: Any, args: tuple) -> tuple[list, Any, list, int]:
    """(argument leaves, their spec, in_dim per leaf with negatives resolved, batch size), with PyTorch's errors."""
    where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not _is_dim(in_dims) and not isinstance(in_dims, tuple):
        raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching the "
                         f"structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                         "trying to vmap over a function with no inputs. The latter is unsupported.")
    leaves, spec = tree_flatten(args)
    dims = _broadcast_to_and_flatten(in_dims, spec)
    if dims is None:
        raise ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims has structure "
                         f"{tree_flatten(in_dims)[1]!r} but inputs has structure {spec!r}.")
    resolved = []
    sizes = []
    for leaf, d in zip(leaves, dims):
        if d is None:
            resolved.append(None)
            continue
        if not _is_dim(d):
            raise ValueError(f"{where}: Got in_dim={d} for an input but in_dim must be either an integer dimension "
                             "or None.")
        if not isinstance(leaf, Tensor):
            raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type {type(leaf)}. We cannot "
                             "vmap over non-Tensor arguments, please use None as the respective in_dim")
        ndim = leaf.dim()
        if not -ndim <= d < ndim:
            raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a Tensor of dimensionality "
                             f"{ndim} so expected in_dim to satisfy -{ndim} <= in_dim < {ndim}.")
        d = d % ndim
        resolved.append(d)
        sizes.append(leaf.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return leaves, spec, resolved, sizes[0]


def _example(leaves: list, dims: list, spec: Any, i: Optional[int]) -> tuple:
    """The arguments of example i (i=None: a zero-filled stand-in, to learn the output layout of an empty batch)."""
    picked = []
    for leaf, d in zip(leaves, dims):
        if d is None:
            picked.append(leaf)
        elif i is None:
            shape = tuple(leaf.shape[:d]) + tuple(leaf.shape[d + 1:])
            picked.append(leaf.new_zeros(shape))
        else:
            picked.append(leaf.select(d, i))
    return spec.unflatten(picked)


def _unbatched(values: list) -> bool:
    """Whether an out_dims=None output is the same for every example (PyTorch: not a BatchedTensor)."""
    import tinytorch
    first = values[0]
    return all(v is first or (v.shape == first.shape and tinytorch.equal(v, first)) for v in values[1:])


def _combine(func: Callable, outputs: list, out_dims: Any, batch_size: int) -> Any:
    """Stack the per-example outputs at their out_dims, as one output pytree."""
    import tinytorch
    name = _name(func)
    per_example = [tree_flatten(o) for o in outputs]
    spec = per_example[0][1]
    if isinstance(outputs[0], Tensor) and isinstance(out_dims, tuple) and len(out_dims) == 1:
        out_dims = out_dims[0]  # PyTorch accepts out_dims=(d,) for a function returning one tensor
    dims = _broadcast_to_and_flatten(out_dims, spec)
    if dims is None:
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                         f"structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]!r} but outputs "
                         f"has structure {spec!r}.")
    result = []
    for j, d in enumerate(dims):
        column = [leaves[j] for leaves, _ in per_example]
        if d is None:
            if isinstance(column[0], Tensor) and not _unbatched(column):
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            result.append(column[0])
            continue
        if not isinstance(column[0], Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(column[0])}. "
                             "Did you mean to set out_dims= to None for output?")
        if batch_size == 0:
            ex = column[0]
            ndim = ex.dim() + 1
            if not -ndim <= d < ndim:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but "
                                 f"got {d})")
            d = d % ndim
            result.append(ex.new_zeros(tuple(ex.shape[:d]) + (0,) + tuple(ex.shape[d:])))
        else:
            result.append(tinytorch.stack(column, dim=d))
    return spec.unflatten(result)


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: Optional[int] = None) -> Callable:
    """Vectorize `func` over dimension in_dims of its inputs, putting the batch dimension at out_dims of its outputs.

    tinytorch has no batching rules, so the returned function calls `func` once per example on slices of the
    batched inputs and stacks the results: correct (autograd flows through it, vmaps nest), not fast.
    in_dims/out_dims are an int, None, or pytrees (tuples, lists, dicts) matching the inputs/outputs, where a
    leaf applies to the whole subtree below it; keyword arguments are passed unbatched. chunk_size is accepted
    for API compatibility: examples run one at a time anyway. randomness='error' raises if `func` draws random
    numbers, 'different' draws new ones per example, 'same' gives every example the same draws.
    """
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not _is_dim(chunk_size) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    if not (_is_dim(out_dims) or out_dims is None or isinstance(out_dims, (tuple, list, dict))):
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                         "collection of ints representing where in the outputs the vmapped dimension should appear.")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        import tinytorch
        leaves, spec, dims, batch_size = _batch_layout(func, in_dims, args)
        rng_before = tinytorch.get_rng_state() if randomness != "different" else None
        if batch_size == 0:
            outputs = [func(*_example(leaves, dims, spec, None), **kwargs)]
        else:
            outputs = []
            for i in range(batch_size):
                if randomness == "same":
                    tinytorch.set_rng_state(rng_before)
                outputs.append(func(*_example(leaves, dims, spec, i), **kwargs))
        if randomness == "error" and not tinytorch.equal(rng_before, tinytorch.get_rng_state()):
            raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                               "'same' or 'different' randomness flags on vmap or perform the randomness operation "
                               "out of vmap")
        return _combine(func, outputs, out_dims, batch_size)

    return wrapped
