"""Activation checkpointing: drop a segment's activations in forward, recompute them in backward.

Backward of a checkpointed segment reruns its forward with grad on and calls backward() inside the
running backward: the engine's reentrant path (recursion on this thread up to a depth limit, then
a pool thread). Both `use_reentrant` modes use this mechanism. They differ as PyTorch's do when no
tensor argument requires grad: use_reentrant=True then records nothing (parameters the function
closes over get no gradient, with PyTorch's warning); use_reentrant=False (the default here) still
records the segment, so those parameters get their gradients. Neither supports autograd.grad() or
backward(inputs=...) through a checkpoint (PyTorch's non-reentrant mode does; see docs).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterable, Iterator, Optional

from .. import _C
from .._tensor import Tensor
from ..autograd.function import Function


def _rng_state() -> Tensor:
    from .. import _creation
    return _creation.default_generator.get_state()


@contextlib.contextmanager
def _preserved_rng(ctx: Any) -> Iterator[None]:
    """Replay the forward's random numbers (dropout) during recomputation, then restore the stream."""
    if not ctx.preserve_rng_state:
        yield
        return
    from .. import _creation
    saved = _creation.default_generator.get_state()
    _creation.default_generator.set_state(ctx.rng_state)
    try:
        yield
    finally:
        _creation.default_generator.set_state(saved)


class CheckpointFunction(Function):
    """forward: run the segment without a graph; backward: rerun it with one and backpropagate."""

    @staticmethod
    def forward(ctx, run_function: Callable, preserve_rng_state: bool, anchor: Optional[Tensor], *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.rng_state = _rng_state()
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if not _C._is_checkpoint_valid():
            raise RuntimeError("Checkpointing is not compatible with .grad() or when an `inputs` parameter is passed "
                               "to .backward(). Please use .backward() and do not pass its `inputs` argument.")
        from ..autograd import backward as autograd_backward
        from ..autograd.grad_mode import enable_grad
        args = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            d = t.detach()
            d.requires_grad_(t._requires_grad)
            args[i] = d
        with _preserved_rng(ctx), enable_grad():
            outputs = ctx.run_function(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o._requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        # The reentrant call: accumulates into the segment's parameters and into the detached inputs.
        autograd_backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None) + tuple(a._grad if isinstance(a, Tensor) else None for a in args)


def checkpoint(function: Callable, *args: Any, use_reentrant: Optional[bool] = None, context_fn: Any = None,
               determinism_check: str = "default", debug: bool = False, preserve_rng_state: bool = True,
               **kwargs: Any) -> Any:
    """Run function(*args) without keeping its activations; they are recomputed during backward."""
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not _C._grad_enabled():
        return function(*args)
    any_requires_grad = any(isinstance(a, Tensor) and a._requires_grad for a in args)
    anchor = None
    if not any_requires_grad:
        if use_reentrant:
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")
        else:
            # A requires-grad dummy input makes the node record, so closed-over parameters get gradients.
            from .._creation import empty
            anchor = empty(0, requires_grad=True)
    return CheckpointFunction.apply(function, preserve_rng_state, anchor, *args)


def checkpoint_sequential(functions: Iterable[Callable], segments: int, input: Any,
                          use_reentrant: Optional[bool] = None, **kwargs: Any) -> Any:
    """Run `functions` in order, checkpointing each of `segments` chunks except the last."""
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children"):  # Sequential: its layers, in order
        functions = functions.children()
    functions = list(functions)
    if segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be at least 1, got {segments}")
    segments = min(segments, len(functions)) or 1

    def run(start: int, end: int) -> Callable:
        def forward(x: Any) -> Any:
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward

    size = len(functions) // segments
    start = 0
    for _ in range(segments - 1):
        input = checkpoint(run(start, start + size), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve_rng_state)
        start += size
    return run(start, len(functions))(input)  # the last segment's activations are needed right away anyway
