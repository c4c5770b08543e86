"""What saved_tensors_hooks act on: the tensors a recorded node keeps for its backward.

An op's backward is a Python closure; what it saved are the tensors and arrays in its closure cells
(and, for a custom Function, in `ctx.saved_tensors`). While hooks are active, the engine hands every
new node's backward to `pack_node`, which passes each saved value through the pack hook, leaves the
packed object in its place (so the node itself holds no activation) and returns a `PackedBackward`
that unpacks them just for the call. Packing order is the closure's cell order, so two recordings of
the same ops pack in the same order: non-reentrant checkpointing matches recomputed tensors by it.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from .. import _C
from .._meta import MetaArray
from .._tensor import Tensor, _wrap


class _State(threading.local):
    def __init__(self) -> None:
        self.stack: List[Tuple[Callable, Callable]] = []  # (pack_hook, unpack_hook), innermost last
        self.disabled: Optional[str] = None  # disable_saved_tensors_hooks' message


state = _State()


def push(pack_hook: Callable, unpack_hook: Callable) -> None:
    if state.disabled is not None:
        raise RuntimeError(state.disabled)
    state.stack.append((pack_hook, unpack_hook))
    _C._set_saved_tensors_hooks_active(True)


def pop() -> None:
    state.stack.pop()
    _C._set_saved_tensors_hooks_active(bool(state.stack))


def _is_array(v: Any) -> bool:
    t = type(v)
    return t is np.ndarray or t is MetaArray or t.__module__.startswith("cupy")


class _Packed:
    """One saved value as the pack hook returned it; `array` marks a bare array (packed as a tensor); `history`
    is the saved tensor's place in the graph (grad_fn, output_nr, leaf accumulator), or None."""
    __slots__ = ("value", "array", "history")

    def __init__(self, value: Any, array: bool, history: Optional[tuple] = None) -> None:
        self.value, self.array, self.history = value, array, history


def _history(t: Tensor) -> Optional[tuple]:
    """What the unpacked tensor needs to stand in the graph where t stood (PyTorch's SavedVariable keeps the
    same): a create_graph backward then differentiates through it even when the pack hook detached it."""
    if t._grad_fn is not None:
        return t._grad_fn, t._output_nr, None
    if t._requires_grad:
        return None, 0, _C._grad_accumulator(t)
    return None


def _rejoin(t: Tensor, history: tuple) -> Tensor:
    """A tensor over t's memory with the saved tensor's history."""
    grad_fn, output_nr, acc = history
    if t._grad_fn is grad_fn and (acc is None or t._grad_acc is acc):
        return t
    out = object.__new__(Tensor)
    out._data, out._vc = t._data, t._shared_vc()
    out._grad_fn, out._output_nr, out._requires_grad = grad_fn, output_nr, True
    if acc is not None:
        out._grad_acc = acc  # the leaf's AccumulateGrad (it holds the leaf weakly): gradients reach its .grad
    return out


class _PackedSeq:
    """A tuple or list of saved values, some of them packed."""
    __slots__ = ("kind", "items")

    def __init__(self, kind: type, items: list) -> None:
        self.kind, self.items = kind, items


def _pack_value(v: Any, pack: Callable) -> Any:
    """v with every tensor/array in it packed, or None when v holds none."""
    if isinstance(v, Tensor):
        return _Packed(pack(v), False, _history(v))
    if _is_array(v):
        return _Packed(pack(_wrap(v)), True)
    if type(v) is tuple or type(v) is list:
        items = [_pack_value(x, pack) for x in v]
        if any(p is not None for p in items):
            return _PackedSeq(type(v), [x if p is None else p for x, p in zip(v, items)])
    return None


def _unpack_value(p: Any, unpack: Callable) -> Any:
    if type(p) is _Packed:
        t = unpack(p.value)
        if not isinstance(t, Tensor):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(t).__name__}")
        if p.array:
            return t._data
        return t if p.history is None else _rejoin(t, p.history)
    if type(p) is _PackedSeq:
        return p.kind(_unpack_value(x, unpack) for x in p.items)
    return p


def _collect(fn: Any, pack: Callable, slots: list, seen: set) -> None:
    """Pack the saved values of closure `fn` (and of closures and Function contexts it holds) into `slots`."""
    if id(fn) in seen:
        return
    seen.add(id(fn))
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:  # a cell not yet bound
            continue
        packed = _pack_value(v, pack)
        if packed is not None:
            cell.cell_contents = packed
            slots.append((cell, "cell_contents", packed))
        elif callable(v) and getattr(v, "__closure__", None):
            _collect(v, pack, slots, seen)
        elif hasattr(v, "_saved") and hasattr(v, "save_for_backward"):  # a custom Function's ctx
            packed = _pack_value(tuple(v._saved), pack)
            if packed is not None:
                v._saved = packed
                slots.append((v, "_saved", packed))


class PackedBackward:
    """A node's backward whose saved values stay packed except while it runs."""
    __slots__ = ("fn", "slots", "unpack", "versions")

    def __init__(self, fn: Callable, slots: list, unpack: Callable, versions: list) -> None:
        self.fn, self.slots, self.unpack, self.versions = fn, slots, unpack, versions

    def __call__(self, *grads: Any) -> Any:
        for counter, version, dtype, shape in self.versions:
            if counter[0] != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{dtype} {list(shape)}] is at version {counter[0]}; expected version {version} "
                    "instead. Hint: the tensor was saved under saved_tensors_hooks; find the in-place change that "
                    "came after.")
        for holder, attr, packed in self.slots:
            setattr(holder, attr, _unpack_value(packed, self.unpack))
        try:
            return self.fn(*grads)
        finally:  # drop the unpacked values again: a retained graph unpacks anew next time
            for holder, attr, packed in self.slots:
                setattr(holder, attr, packed)


def pack_node(fn: Callable, saved: Optional[tuple]) -> Callable:
    """The engine's packer (see module docstring): called while recording a node under active hooks."""
    pack, unpack = state.stack[-1]
    slots: list = []
    _collect(fn, pack, slots, set())
    if not slots:
        return fn
    # Version counters (not the tensors) are kept, so an in-place change is still caught, as PyTorch does.
    versions = [(vc, vc[0], t.dtype, t._data.shape) for t in saved or () if isinstance(t, Tensor)
                for vc in (t._shared_vc(),)]
    return PackedBackward(fn, slots, unpack, versions)


_C._set_saved_tensors_packer(pack_node)
