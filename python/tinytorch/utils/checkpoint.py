"""Activation checkpointing: drop a segment's activations in forward, recompute them in backward.

Two variants, as PyTorch has them:
- use_reentrant=False: the segment runs with grad on, its graph is recorded, but every tensor its ops
  save goes through saved_tensors_hooks (autograd/graph.py) that keep only a placeholder. The first
  backward node of the segment that needs one reruns the segment's forward (same RNG and autocast
  state) and takes the recomputed tensors by the order they were saved in. The graph is an ordinary
  graph, so grad(), backward(inputs=...) and nested checkpoints work through it.
- use_reentrant=True: forward runs without a graph; backward of a CheckpointFunction node reruns it
  with one and calls backward() inside the running backward: the engine's reentrant path (recursion on
  this thread up to a depth limit, then a pool thread). grad() and inputs= raise through it.
Without use_reentrant, PyTorch warns and takes the reentrant variant; so does tinytorch.
"""
from __future__ import annotations

import contextlib
import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator, Optional

from .. import _C
from .._tensor import Tensor
from ..autograd.function import Function


def _rng_state() -> Tensor:
    from .. import _creation
    return _creation.default_generator.get_state()


class CheckpointFunction(Function):
    """forward: run the segment without a graph; backward: rerun it with one and backpropagate."""

    @staticmethod
    def forward(ctx, run_function: Callable, preserve_rng_state: bool, *args):
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
        replay = _replayed_rng(ctx.rng_state) if ctx.preserve_rng_state else contextlib.nullcontext()
        with replay, enable_grad():
            outputs = ctx.run_function(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o._requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        # The reentrant call: accumulates into the segment's parameters and into the detached inputs.
        autograd_backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a._grad if isinstance(a, Tensor) else None for a in args)


class CheckpointError(RuntimeError):
    """The recomputation did not save what the forward saved (non-deterministic segment)."""


def noop_context_fn() -> tuple:
    return contextlib.nullcontext(), contextlib.nullcontext()


_early_stop_override: Optional[bool] = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Override checkpoint()'s early_stop: whether a non-reentrant recomputation stops as soon as it has
    produced every tensor backward needs (default) or runs the whole segment."""
    global _early_stop_override
    prev, _early_stop_override = _early_stop_override, enable
    try:
        yield
    finally:
        _early_stop_override = prev


_debug_enabled: Optional[bool] = None


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: Optional[bool]) -> Iterator[None]:
    """PyTorch's override of checkpoint(debug=...) within the block (None: each call's own). tinytorch keeps no
    operator trace for debug mode, so the setting is recorded and restored, nothing more."""
    global _debug_enabled
    prev, _debug_enabled = _debug_enabled, enabled
    try:
        yield
    finally:
        _debug_enabled = prev


class _Holder:
    """What the forward leaves in place of one saved tensor: per backward call, a key into the recomputed ones."""
    __slots__ = ("handles", "__weakref__")

    def __init__(self) -> None:
        self.handles: dict = {}


class _StopRecomputation(Exception):
    pass


def _metadata(t: Tensor) -> tuple:
    return tuple(t.shape), t.dtype, t.device


class _Frame:
    """One non-reentrant checkpoint call: its inputs, forward state and the holders of what it saved."""

    def __init__(self, function: Callable, args: tuple, kwargs: dict, preserve_rng_state: bool,
                 recompute_context: Any, determinism_check: str, early_stop: bool) -> None:
        from .. import _autocast
        from ..autograd import _saved_tensors
        self.function, self.args, self.kwargs = function, args, kwargs
        # Unpacked inputs come back detached: the recomputation gives them their requires_grad again.
        self.requires_grad = [isinstance(a, Tensor) and a._requires_grad for a in args]
        self.unpack_args = None
        if _saved_tensors.state.stack:
            # Inside another checkpoint (or other hooks): the inputs are saved tensors of the enclosing
            # segment, packed by its hooks, so that an outer checkpoint does not keep them alive either.
            pack, unpack = _saved_tensors.state.stack[-1]
            packed = _saved_tensors._pack_value(args, pack)
            if packed is not None:
                self.args, self.unpack_args = packed, unpack
        self.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            self.rng_state = _rng_state()
        self.autocast = {d: (_autocast.is_autocast_enabled(d), _autocast.get_autocast_dtype(d))
                         for d in ("cpu", "cuda")}
        self.recompute_context = recompute_context
        self.check = determinism_check != "none"
        self.early_stop = early_stop
        self.holders: list = []  # weak references, in the order the forward saved
        self.forward_metadata: list = []
        self.recomputed: dict = {}  # backward call id -> {handle: tensor}

    def pack(self, t: Tensor) -> _Holder:
        holder = _Holder()
        self.holders.append(weakref.ref(holder))
        if self.check:
            self.forward_metadata.append(_metadata(t))
        return holder

    def unpack(self, holder: _Holder) -> Tensor:
        gid = _C._current_graph_task_id()
        if gid not in self.recomputed:
            self.recomputed = {gid: {}}  # an earlier backward call's leftovers are of no use now
            self._recompute(gid)
        key = holder.handles.get(gid)
        if key is None:
            raise CheckpointError("torch.utils.checkpoint: Unpack is being triggered for a tensor that was already "
                                  "unpacked once. If you are calling ctx.saved_tensors in backward, make sure to do so "
                                  "only once. Otherwise please open an issue with details on your use case.")
        holder.handles[gid] = None
        return self.recomputed[gid].pop(key)

    def _recompute(self, gid: int) -> None:
        from .. import autocast
        from ..autograd.graph import saved_tensors_hooks
        from ..autograd.grad_mode import enable_grad
        store = self.recomputed[gid]
        saved_metadata: list = []

        def pack(t: Tensor) -> Tensor:
            i = len(saved_metadata)
            if i >= len(self.holders):
                raise CheckpointError("torch.utils.checkpoint: trying to save more tensors during recomputation than "
                                      "during the original forward pass.")
            x = t.detach() if t._requires_grad else t
            saved_metadata.append(_metadata(x) if self.check else None)
            holder = self.holders[i]()
            if holder is not None:  # else the node that saved it is gone: nothing will ask for it
                holder.handles[gid] = i
                store[i] = x
            if self.early_stop and i + 1 == len(self.holders):
                raise _StopRecomputation
            return x

        args = self.args
        if self.unpack_args is not None:
            from ..autograd import _saved_tensors
            args = _saved_tensors._unpack_value(args, self.unpack_args)
        args = tuple(_detached(a, rg) for a, rg in zip(args, self.requires_grad))
        with contextlib.ExitStack() as stack:
            if self.preserve_rng_state:
                stack.enter_context(_replayed_rng(self.rng_state))
            stack.enter_context(enable_grad())
            for device, (enabled, dtype) in self.autocast.items():
                if enabled:
                    stack.enter_context(autocast(device, dtype=dtype))
            stack.enter_context(self.recompute_context)
            stack.enter_context(saved_tensors_hooks(pack, lambda x: x))
            try:
                self.function(*args, **self.kwargs)
            except _StopRecomputation:
                pass
        if self.check and saved_metadata != self.forward_metadata[:len(saved_metadata)] or \
                len(saved_metadata) != len(self.holders):
            diffs = [f"tensor at position {i}:\nsaved metadata: {a}\nrecomputed metadata: {b}"
                     for i, (a, b) in enumerate(zip(self.forward_metadata, saved_metadata)) if a != b]
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have different metadata than "
                "during the forward pass.\n" + "\n".join(diffs) if diffs else
                f"torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.holders)}\n"
                f"Number of tensors saved during recomputation: {len(saved_metadata)}")


def _detached(a: Any, requires_grad: bool) -> Any:
    if not isinstance(a, Tensor):
        return a
    d = a.detach()
    d.requires_grad_(requires_grad)
    return d


@contextlib.contextmanager
def _replayed_rng(state: Tensor) -> Iterator[None]:
    from .. import _creation
    saved = _creation.default_generator.get_state()
    _creation.default_generator.set_state(state)
    try:
        yield
    finally:
        _creation.default_generator.set_state(saved)


def _checkpoint_without_reentrant(function: Callable, preserve_rng_state: bool, context_fn: Callable,
                                  determinism_check: str, early_stop: bool, args: tuple, kwargs: dict) -> Any:
    from ..autograd.graph import saved_tensors_hooks
    forward_context, recompute_context = context_fn()
    if _early_stop_override is not None:
        early_stop = _early_stop_override
    frame = _Frame(function, args, kwargs, preserve_rng_state, recompute_context, determinism_check, early_stop)
    with forward_context, saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


def checkpoint(function: Callable, *args: Any, use_reentrant: Optional[bool] = None,
               context_fn: Callable = noop_context_fn, determinism_check: str = "default", debug: bool = False,
               early_stop: bool = True, **kwargs: Any) -> Any:
    """Run function(*args, **kwargs) without keeping its activations; they are recomputed during backward."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
                      "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
                      "the two variants.", stacklevel=2)
        use_reentrant = True
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if not _C._grad_enabled():
            return function(*args)
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    if not _C._grad_enabled():
        return function(*args, **kwargs)
    return _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, early_stop,
                                         args, kwargs)


def checkpoint_sequential(functions: Iterable[Callable], segments: int, input: Any,
                          use_reentrant: Optional[bool] = None, **kwargs: Any) -> Any:
    """Run `functions` in order, checkpointing each of `segments` chunks except the last."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
                      "explicitly. In version 2.9 we will raise an exception if use_reentrant is not passed. "
                      "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
                      "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
                      "the two variants.", stacklevel=2)
        use_reentrant = True
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


def detach_variable(inputs: tuple) -> tuple:
    """The tensors of a tuple detached, each keeping its requires_grad (other items as they are)."""
    if not isinstance(inputs, tuple):
        raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: ", type(inputs).__name__)
    out = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            x = inp.detach()
            x.requires_grad = inp.requires_grad
            inp = x
        out.append(inp)
    return tuple(out)


def check_backward_validity(inputs: Iterable[Any]) -> None:
    """Warn when no input tensor requires grad (a checkpointed segment would then get no gradients)."""
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")


__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction", "check_backward_validity",
           "set_checkpoint_debug_enabled",
           "detach_variable", "noop_context_fn", "set_checkpoint_early_stop"]
