"""The recorded graph as Python sees it: Node (grad_fn objects) with PyTorch's hook API, and
queue_callback for work that must run once backward has finished (DDP waits for its buckets there)."""
from __future__ import annotations

from .. import _C
from ..utils.hooks import RemovableHandle

Node = _C.Node


def _register_hook(self, fn) -> RemovableHandle:
    """fn(grad_inputs, grad_outputs) runs after this node; a returned tuple replaces grad_inputs."""
    hooks = self._hook_dict("post", -1)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


def _register_prehook(self, fn) -> RemovableHandle:
    """fn(grad_outputs) runs before this node; a returned tuple replaces grad_outputs."""
    hooks = self._hook_dict("pre", -1)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


Node.register_hook = _register_hook
Node.register_prehook = _register_prehook


def queue_callback(callback) -> None:
    """Run callback() once the current backward pass has run every node, before backward() returns."""
    _C._queue_callback(callback)


def current_node():
    """The node whose backward formula is running on this thread (None outside backward)."""
    return _C._current_node()


__all__ = ["Node", "queue_callback", "current_node", "increment_version"]


def increment_version(tensor) -> None:
    """Mark `tensor` as modified in place by code autograd does not see (e.g. a NumPy/CuPy `out=` write),
    so that backward through a node that saved it raises instead of using the changed values."""
    for t in (tensor if isinstance(tensor, (list, tuple)) else (tensor,)):
        t._bump_version()
