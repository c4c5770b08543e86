"""Activation checkpointing: drop a segment's activations in forward, recompute them in backward.

Backward of a checkpointed segment reruns its forward with grad on and calls backward() inside the
running backward: the engine's reentrant path (recursion on this thread up to a depth limit, then
a pool thread). Both use_reentrant modes use this mechanism in tinytorch, so neither supports
autograd.grad() or backward(inputs=...) through a checkpoint (PyTorch's reentrant mode has the same limit).
"""
from __future__ import annotations

import contextlib
import threading

from .. import _C
from .._tensor import Tensor
from ..autograd.function import Function

_state = threading.local()


def _check_backward_allowed(partial: bool) -> None:
    """Called by backward()/grad(): remember whether this call wants only some inputs' gradients."""
    _state.partial = partial


def _rng_state():
    from .. import _creation
    return _creation.default_generator.get_state()


class CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.rng_state = _rng_state()
        ctx.inputs = [a if not isinstance(a, Tensor) else None for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)])
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if getattr(_state, "partial", False):
            raise RuntimeError("Checkpointing is not compatible with .grad() or when an `inputs` parameter is passed "
                               "to .backward(). Please use .backward() and do not pass its `inputs` argument.")
        from ..autograd import backward as autograd_backward
        from ..autograd.grad_mode import enable_grad
        args = list(ctx.inputs)
        detached = []
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            d = t.detach()
            d.requires_grad_(t._requires_grad)
            args[i] = d
            detached.append(d)
        with _preserved_rng(ctx):
            with enable_grad():
                outputs = ctx.run_function(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o._requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        autograd_backward([o for o, _ in pairs], [g for _, g in pairs])
        _state.partial = False
        return (None, None) + tuple(d._grad if isinstance(d, Tensor) else None for d in detached)


@contextlib.contextmanager
def _preserved_rng(ctx):
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


def checkpoint(function, *args, use_reentrant: bool | None = None, preserve_rng_state: bool = True, **kwargs):
    """Run function(*args) without keeping its activations; they are recomputed during backward."""
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not _C._grad_enabled():
        return function(*args)
    return CheckpointFunction.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs):
    """Checkpoint a Sequential (or list of modules) in `segments` chunks."""
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = max(1, len(functions) // segments)

    def run(start, end):
        def forward(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return forward
    end = -1
    for start in range(0, len(functions) - size, size):
        end = start + size
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant)
    return run(end + 1 if end >= 0 else 0, len(functions))(input) if end >= 0 else run(0, len(functions))(input)
