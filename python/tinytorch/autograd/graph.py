"""The recorded graph as Python sees it: Node (grad_fn objects) with PyTorch's hook API, and
queue_callback for work that must run once backward has finished (DDP waits for its buckets there)."""
from __future__ import annotations

import threading
from typing import Callable, Optional, Sequence

from .. import _C
from ..utils.hooks import RemovableHandle, add_hook
from . import _saved_tensors

Node = _C.Node


def _register_hook(self, fn) -> RemovableHandle:
    """fn(grad_inputs, grad_outputs) runs after this node; a returned tuple replaces grad_inputs."""
    hooks = self._hook_dict("post", -1)
    return add_hook(hooks, fn)


def _register_prehook(self, fn) -> RemovableHandle:
    """fn(grad_outputs) runs before this node; a returned tuple replaces grad_outputs."""
    hooks = self._hook_dict("pre", -1)
    return add_hook(hooks, fn)


def _node_repr(self) -> str:
    """`<SumBackward0 object at 0x...>`; the C++ namespace of name() (AccumulateGrad's) is not part of it."""
    return f"<{self.name().rpartition('::')[2]} object at {hex(id(self))}>"


Node.register_hook = _register_hook
Node.register_prehook = _register_prehook
Node.__repr__ = _node_repr


def queue_callback(callback) -> None:
    """Run callback() once the current backward pass has run every node, before backward() returns."""
    _C._queue_callback(callback)


def current_node():
    """The node whose backward formula is running on this thread (None outside backward)."""
    return _C._current_node()


__all__ = ["Node", "queue_callback", "current_node", "increment_version", "register_multi_grad_hook"]


def increment_version(tensor) -> None:
    """Mark `tensor` as modified in place by code autograd does not see (e.g. a NumPy/CuPy `out=` write),
    so that backward through a node that saved it raises instead of using the changed values."""
    for t in (tensor if isinstance(tensor, (list, tuple)) else (tensor,)):
        t._bump_version()


class _MultiHandle(RemovableHandle):
    """Removes every per-tensor hook of one register_multi_grad_hook call."""

    def __init__(self, handles: list) -> None:
        super().__init__({})
        self._handles = handles

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


def register_multi_grad_hook(tensors: Sequence, fn: Callable, *, mode: str = "all") -> RemovableHandle:
    """Call fn once per backward about the gradients of several tensors.

    mode="all": fn(grads) with one entry per tensor (None where that tensor got no gradient in this
    backward); tinytorch calls it when the backward call finishes (PyTorch: as soon as the last one
    is computed). mode="any": fn(grad) with the first of the tensors' gradients to be computed.
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    lock = threading.Lock()
    pending: dict = {}  # backward call id -> grads so far (or True once an "any" hook fired)

    def make_hook(i: int) -> Callable:
        def hook(grad):
            call = _C._current_graph_task_id()
            with lock:
                first = call not in pending
                if first:
                    pending[call] = [None] * len(tensors) if mode == "all" else True
                if mode == "all":
                    pending[call][i] = grad
            if mode == "any":
                if first:
                    queue_callback(lambda: _forget(call))
                    fn(grad)
            elif first:
                queue_callback(lambda: _fire(call))
        return hook

    def _forget(call: int) -> Optional[list]:
        with lock:
            return pending.pop(call, None)

    def _fire(call: int) -> None:
        grads = _forget(call)
        if grads is not None:
            fn(tuple(grads))

    handles = [t.register_hook(make_hook(i)) for i, t in enumerate(tensors) if t.requires_grad]
    return _MultiHandle(handles)


class saved_tensors_hooks:
    """Context manager: every tensor an op saves for backward while it is active goes through
    `pack_hook(tensor) -> anything`, and comes back through `unpack_hook(packed) -> tensor` when backward
    needs it (offloading, compression, activation checkpointing). Per thread; the innermost pair wins."""

    def __init__(self, pack_hook: Callable, unpack_hook: Callable) -> None:
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self) -> "saved_tensors_hooks":
        _saved_tensors.push(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc) -> None:
        _saved_tensors.pop()


class save_on_cpu(saved_tensors_hooks):
    """Keep saved tensors in host memory (optionally pinned) and move them back to their device in backward."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack_to_cpu(tensor):
            if not pin_memory:
                return tensor.device, tensor.cpu()
            # PyTorch copies into a fresh (page-locked where CUDA is) host tensor here, even from the CPU.
            return tensor.device, tensor.clone() if tensor.device.type == "cpu" else tensor.cpu()

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks:
    """Context manager: entering saved_tensors_hooks inside it raises RuntimeError(error_message)."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> None:
        self.prev = _saved_tensors.state.disabled
        _saved_tensors.state.disabled = self.error_message

    def __exit__(self, *exc) -> None:
        _saved_tensors.state.disabled = self.prev


__all__ += ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]
