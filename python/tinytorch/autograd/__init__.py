"""tinytorch.autograd: backward(), grad(), custom Functions, gradcheck and anomaly detection.

The graph is run by the C++ engine (csrc/engine); this module turns user arguments into engine
calls and engine results into PyTorch's return values and errors.
"""
from __future__ import annotations

import warnings
from typing import Optional, Sequence, Union

import numpy as np

from .. import _C
from .._tensor import Tensor, _wrap
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        is_multithreading_enabled, no_grad, set_grad_enabled, set_multithreading_enabled)

_TensorOrTensors = Union[Tensor, Sequence[Tensor]]


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """Legacy alias kept for old code: Variable(t) is a new leaf sharing t's memory (t itself is left alone),
    requiring grad when asked; every Tensor is an instance of Variable, as in PyTorch since 0.4."""

    def __new__(cls, data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        out = data.detach()
        if requires_grad:
            if not (out.dtype.is_floating_point or out.dtype.is_complex):
                raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
            out.requires_grad_(True)
        return out


def _tensors(x) -> tuple:
    """A tensor or a sequence of tensors, as a tuple."""
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


def _make_grads(outputs: tuple, grads, is_grads_batched: bool = False) -> list:
    """Seed gradients: ones for scalar outputs, else the given ones (checked against the outputs)."""
    from .._creation import ones_like
    if grads is None:
        grads = (None,) * len(outputs)
    elif isinstance(grads, Tensor):
        grads = (grads,)
    grads = tuple(grads)
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    result = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        if g is None:
            d = out._data
            if not out._requires_grad:  # before the dtype: an integer output never requires grad (argmax())
                raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
            if out._requires_grad and out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if d.dtype.kind != "f" and not out.dtype.is_floating_point:
                raise RuntimeError(f"grad can be implicitly created only for real scalar outputs but got {out.dtype}")
            # The common `loss.backward()`: a NumPy one without the generic factory's argument handling.
            g = _wrap(np.ones_like(d)) if type(d) is np.ndarray and out._placements is None else ones_like(out)
        elif not isinstance(g, Tensor):
            from .._creation import tensor
            g = tensor(g, dtype=out.dtype, device=out.device)
        else:
            if g._data.shape != out._data.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] "
                                   f"has a shape of {out.shape}.")
            if g.dtype.is_floating_point != out.dtype.is_floating_point:
                raise TypeError(f"For complex Tensors, both grad_output and output are required to have the same "
                                f"dtype. Mismatch in dtype: grad_output[{i}] has a dtype of {g.dtype} and "
                                f"output[{i}] has a dtype of {out.dtype}.")
        result.append(g)
    return result


_cycle_warned = False


def _warn_create_graph_cycle() -> None:
    """PyTorch's once-per-process warning: .grad built with a graph refers back to its parameter, and
    the C++ nodes in between are invisible to Python's cycle collector."""
    global _cycle_warned
    if not _cycle_warned:
        _cycle_warned = True
        warnings.warn("Using backward() with create_graph=True will create a reference cycle between the parameter "
                      "and its gradient which can cause a memory leak. We recommend using autograd.grad when creating "
                      "the graph to avoid this. If you have to use this function, make sure to reset the .grad fields "
                      "of your parameters to None after use to break the cycle and avoid the leak.", stacklevel=3)


def backward(tensors: _TensorOrTensors, grad_tensors=None, retain_graph: Optional[bool] = None,
             create_graph: bool = False, grad_variables=None, inputs=None) -> None:
    """Accumulate the gradients of `tensors` into the .grad of the leaves (or only of `inputs`)."""
    outputs = _tensors(tensors)
    if grad_variables is not None:
        grad_tensors = grad_variables
    if inputs is not None:
        inputs = _tensors(inputs)
        if len(inputs) == 0:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    grads = _make_grads(outputs, grad_tensors)
    if retain_graph is None:
        retain_graph = create_graph
    if create_graph:
        _warn_create_graph_cycle()
    if inputs:
        for t in inputs:
            # As PyTorch: a non-leaf in `inputs` gets its .grad through retain_grad (the engine captures
            # its gradient where it is computed and does not run the nodes beyond it).
            if isinstance(t, Tensor) and t._grad_fn is not None:
                t.retain_grad()
    # PyTorch's formulas give inf and nan silently (d sqrt(x)/dx is inf at 0): NumPy's floating-point warnings
    # are off while the engine runs this thread's CPU nodes, for one errstate per backward, not per node
    with np.errstate(all="ignore"):
        _C._run_backward(outputs, grads, retain_graph, create_graph, True, inputs or ())


def grad(outputs: _TensorOrTensors, inputs: _TensorOrTensors, grad_outputs=None, retain_graph: Optional[bool] = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: Optional[bool] = None,
         is_grads_batched: bool = False, materialize_grads: bool = False) -> tuple:
    """The gradients of `outputs` with respect to `inputs`, without touching any .grad."""
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    outs = _tensors(outputs)
    ins = _tensors(inputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    for t in ins:
        if not isinstance(t, Tensor):
            raise TypeError(f"grad(): inputs must be Tensors, got {type(t).__name__}")
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _make_grads(outs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    with np.errstate(all="ignore"):  # as in backward()
        captured = _C._run_backward(outs, grads, retain_graph, create_graph, False, ins)
    result = []
    for i, (t, g) in enumerate(zip(ins, captured)):
        if g is None:
            if materialize_grads:
                from .._creation import zeros_like
                g = zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior.")
        result.append(g)
    return tuple(result)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """grad(..., is_grads_batched=True): the first dimension of every grad_output indexes a batch of seeds; one
    backward per seed (torch.func.vmap's result, without its batching rules), the gradients stacked along it."""
    from .._ops.shape import stack
    seeds = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs or ())
    if not seeds or any(not isinstance(g, Tensor) or g.dim() == 0 for g in seeds):
        raise RuntimeError("grad(): is_grads_batched=True expects every grad_output to be a tensor with a batch "
                           "dimension first")
    batch = seeds[0].shape[0]
    if any(g.shape[0] != batch for g in seeds):
        raise RuntimeError(f"grad(): is_grads_batched=True expects every grad_output to have the batch size {batch}, "
                           f"got {[g.shape[0] for g in seeds]}")
    keep = create_graph if retain_graph is None else retain_graph
    per_seed = [grad(outputs, inputs, tuple(g[i] for g in seeds), retain_graph=keep or i < batch - 1,
                     create_graph=create_graph, allow_unused=allow_unused, materialize_grads=materialize_grads)
                for i in range(batch)]
    return tuple(None if col[0] is None else stack(col) for col in zip(*per_seed))


from . import forward_ad, functional, graph  # noqa: E402
from .anomaly_mode import detect_anomaly, set_detect_anomaly  # noqa: E402
from .function import Function, FunctionCtx, once_differentiable  # noqa: E402
from .gradcheck import gradcheck, gradgradcheck  # noqa: E402

__all__ = ["backward", "grad", "functional", "Function", "FunctionCtx", "once_differentiable", "gradcheck",
           "gradgradcheck", "detect_anomaly", "set_detect_anomaly", "graph", "no_grad", "enable_grad", "set_grad_enabled",
           "inference_mode", "is_grad_enabled", "is_inference_mode_enabled", "set_multithreading_enabled",
           "is_multithreading_enabled", "Variable"]


def __getattr__(name: str):
    # torch.autograd.profiler on first use: it builds on tinytorch.profiler, which imports after autograd
    if name == "profiler":
        import importlib
        return importlib.import_module(__name__ + ".profiler")
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
