"""Forward-mode AD with PyTorch's dual-tensor API (torch.autograd.forward_ad), on top of reverse mode.

make_dual(p, t) returns p plus a hidden zero leaf s, so everything computed from the dual records how it depends
on s; unpack_dual(y) gives y's tangent J_s(y) @ t by differentiating a vjp with respect to its cotangent (the
"double-vjp" trick func.jvp uses). Tangents therefore flow only through operations autograd records: results
computed under no_grad/inference_mode carry no tangent, and a dual reports requires_grad=True.
"""
from __future__ import annotations

import threading
from typing import Any, NamedTuple, Optional

from .._tensor import Tensor

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual"]

_state = threading.local()


def _levels() -> list:
    """This thread's open dual levels, innermost last: each a list of (hidden seed, tangent, dual, primal)."""
    if not hasattr(_state, "levels"):
        _state.levels = []
    return _state.levels


def enter_dual_level() -> int:
    """Open a new dual level (PyTorch supports one at a time) and return its index."""
    levels = _levels()
    if levels:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    levels.append([])
    return len(levels) - 1


def exit_dual_level(*, level: Optional[int] = None) -> None:
    """Close the current dual level: its duals lose their tangents."""
    levels = _levels()
    if level is None:
        level = len(levels) - 1
    if level != len(levels) - 1 or level < 0:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is "
                           "not supported.")
    levels.pop()


class dual_level:
    """Context manager around enter_dual_level/exit_dual_level: `with dual_level(): ...`."""

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc: Any) -> None:
        exit_dual_level()


class UnpackedDualTensor(NamedTuple):
    """What unpack_dual returns: the primal and its tangent (None when the tensor has none)."""
    primal: Tensor
    tangent: Optional[Tensor]


def make_dual(tensor: Tensor, tangent: Tensor, *, level: Optional[int] = None) -> Tensor:
    """A tensor equal to `tensor` whose forward gradient is `tangent`: results computed from it carry tangents."""
    from .._creation import zeros_like
    levels = _levels()
    if not levels:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not (tangent.dtype.is_floating_point or tangent.dtype.is_complex):
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tuple(tensor.shape) != tuple(tangent.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    from .grad_mode import enable_grad
    seed = zeros_like(tensor).requires_grad_()
    with enable_grad():
        dual = tensor + seed
    levels[-1 if level is None else level].append((seed, tangent, dual, tensor))
    return dual


def unpack_dual(tensor: Tensor, *, level: Optional[int] = None) -> UnpackedDualTensor:
    """(primal, tangent) of `tensor` at the current level; tangent is None if it does not depend on a dual."""
    from . import grad
    from .._creation import zeros_like
    from .grad_mode import enable_grad
    levels = _levels()
    if not levels or not isinstance(tensor, Tensor) or tensor.grad_fn is None:
        return UnpackedDualTensor(tensor, None)
    duals = levels[-1 if level is None else level]
    for seed, tangent, dual, primal in duals:
        if dual is tensor:
            return UnpackedDualTensor(primal, tangent)
    if not duals:
        return UnpackedDualTensor(tensor, None)
    seeds = [d[0] for d in duals]
    with enable_grad():
        cotangent = zeros_like(tensor).requires_grad_()
        vjps = grad(tensor, seeds, cotangent, create_graph=True, allow_unused=True)
        terms = [(v * t).sum() for v, (_, t, _, _) in zip(vjps, duals) if v is not None and v.requires_grad]
        if not terms:
            # Reached the seeds only through ops whose vjp does not depend on the cotangent's graph: zero tangent
            # if some seed was reached at all, none otherwise.
            used = any(v is not None for v in vjps)
            return UnpackedDualTensor(tensor, zeros_like(tensor) if used else None)
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        tangent, = grad(total, cotangent, allow_unused=True)
    return UnpackedDualTensor(tensor, zeros_like(tensor) if tangent is None else tangent.detach())
