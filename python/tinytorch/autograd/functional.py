"""tinytorch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp (PyTorch's API, reverse mode).

Everything is built on autograd.grad; jvp uses the double-backward trick (a vjp's gradient with
respect to its grad_outputs), so it needs no forward-mode AD. `vectorize` and the forward-mode
strategies are accepted and ignored: rows of a Jacobian are computed one backward at a time.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .._tensor import Tensor


def _as_tuple(x: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    """(was it a tuple, x as a tuple of tensors); PyTorch's type errors otherwise."""
    is_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but"
                                f" the value at index {i} has type {type(t)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"the given {arg_name} has type {type(t)}.")
    return is_tuple, items


def _prepare_inputs(inputs: tuple, create_graph: bool) -> tuple:
    """Fresh graph roots: differentiable back to the originals only when building a graph."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _finish(values: tuple, create_graph: bool) -> tuple:
    return values if create_graph else tuple(v.detach() for v in values)


def _fill(grads: tuple, like: tuple, strict: bool, what: str) -> tuple:
    """Replace None gradients (independent inputs) by zeros, or raise in strict mode."""
    from .._creation import zeros_like
    out = []
    for i, (g, ref) in enumerate(zip(grads, like)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   f"not allowed in strict mode{what}.")
            g = zeros_like(ref)
        out.append(g)
    return tuple(out)


def _check_v(v: Any, outputs: tuple, fn_name: str) -> tuple:
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the user-provided function returns a single "
                               f"Tensor with a single element.")
        from .._creation import ones_like
        return (ones_like(outputs[0]),)
    _, vs = _as_tuple(v, "v", fn_name)
    if len(vs) != len(outputs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outputs)} but got {len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, outputs)):
        if a.shape != b.shape:
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {b.shape} but got {a.shape}.")
    return vs


def _grad(outputs: tuple, inputs: tuple, grad_outputs: Optional[tuple], create_graph: bool) -> tuple:
    """autograd.grad over the outputs that carry a graph (None for inputs nothing reached)."""
    from . import grad
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs or (None,) * len(outputs)) if o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return grad([o for o, _ in pairs], inputs, [g for _, g in pairs], retain_graph=True, create_graph=create_graph,
                allow_unused=True)


def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`."""
    from .grad_mode import enable_grad
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        ins = _prepare_inputs(ins, create_graph)
        is_out_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function", "vjp")
        vs = _check_v(v, outs, "vjp")
        grads = _fill(_grad(outs, ins, vs, create_graph), ins, strict, "")
    outs = _finish(outs, create_graph)
    grads = _finish(grads, create_graph)
    return (outs if is_out_tuple else outs[0]), (grads if is_in_tuple else grads[0])


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v): the Jacobian-vector product, by differentiating a vjp w.r.t. its vector."""
    from .._creation import zeros_like
    from .grad_mode import enable_grad
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        if len(ins) != 1 or ins[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        from .._creation import ones_like
        vs = (ones_like(ins[0]),)
    else:
        _, vs = _as_tuple(v, "v", "jvp")
        if len(vs) != len(ins):
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(ins)} but got {len(vs)}.")
    with enable_grad():
        ins = _prepare_inputs(ins, create_graph)
        is_out_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function", "jvp")
        dummies = tuple(zeros_like(o, requires_grad=True) for o in outs)
        grads_in = _grad(outs, ins, dummies, create_graph=True)
        pairs = [(g, vi) for g, vi in zip(grads_in, vs) if g is not None and g.requires_grad]
        if pairs:
            from . import grad
            result = grad([g for g, _ in pairs], dummies, [vi for _, vi in pairs], create_graph=create_graph,
                          allow_unused=True)
        else:
            result = (None,) * len(outs)
        result = _fill(result, outs, strict, " (the Jacobian-vector product is zero)")
    outs = _finish(outs, create_graph)
    result = _finish(result, create_graph)
    return (outs if is_out_tuple else outs[0]), (result if is_out_tuple else result[0])


def _jacobian_rows(outs: tuple, ins: tuple, create_graph: bool, strict: bool) -> list:
    """[[J(out i, in j) of shape out_i.shape + in_j.shape]]: one backward per output element."""
    from .._creation import zeros, zeros_like
    from .._ops.shape import stack
    table = []
    for i, out in enumerate(outs):
        rows: list[list] = [[] for _ in ins]
        flat_seed = zeros(out.numel(), dtype=out.dtype, device=out.device)
        for k in range(out.numel()):
            seed = flat_seed.clone()
            seed[k] = 1.0
            grads = _grad((out,), ins, (seed.reshape(out.shape),), create_graph)
            for j, (g, ref) in enumerate(zip(grads, ins)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}. "
                                           "This is not allowed in strict mode.")
                    g = zeros_like(ref)
                rows[j].append(g)
        per_input = []
        for j, ref in enumerate(ins):
            if rows[j]:
                jac = stack(rows[j]).reshape(tuple(out.shape) + tuple(ref.shape))
            else:  # an empty output
                jac = zeros(tuple(out.shape) + tuple(ref.shape), dtype=ref.dtype, device=ref.device)
            per_input.append(jac if create_graph else jac.detach())
        table.append(per_input)
    return table


def _shape_result(table: list, is_out_tuple: bool, is_in_tuple: bool):
    if is_out_tuple:
        return tuple(tuple(row) if is_in_tuple else row[0] for row in table)
    return tuple(table[0]) if is_in_tuple else table[0][0]


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode"):
    """The Jacobian of func at inputs: J[i][j] has shape outputs[i].shape + inputs[j].shape."""
    from .grad_mode import enable_grad
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
    with enable_grad():
        ins = _prepare_inputs(ins, create_graph)
        is_out_tuple, outs = _as_tuple(func(*ins), "outputs of the user-provided function", "jacobian")
        table = _jacobian_rows(outs, ins, create_graph, strict)
    return _shape_result(table, is_out_tuple, is_in_tuple)


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar func: H[i][j] has shape inputs[i].shape + inputs[j].shape."""
    from . import grad
    from .grad_mode import enable_grad
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "hessian")
    with enable_grad():
        ins = _prepare_inputs(ins, create_graph)
        out = func(*ins)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with a single element")
        first = _fill(grad(out, ins, create_graph=True, allow_unused=True) if out.requires_grad
                      else (None,) * len(ins), ins, strict, "")
        table = _jacobian_rows(first, ins, create_graph, strict)
    return _shape_result(table, is_in_tuple, is_in_tuple)


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a scalar func."""
    from . import grad
    from .grad_mode import enable_grad
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "vhp")
    if v is None:
        if len(ins) != 1 or ins[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        from .._creation import ones_like
        vs = (ones_like(ins[0]),)
    else:
        _, vs = _as_tuple(v, "v", "vhp")
    with enable_grad():
        ins = _prepare_inputs(ins, create_graph)
        out = func(*ins)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError("The function given to vhp should return a single Tensor with a single element")
        first = grad(out, ins, create_graph=True, allow_unused=True) if out.requires_grad else (None,) * len(ins)
        pairs = [(g, vi) for g, vi in zip(first, vs) if g is not None and g.requires_grad]
        second = grad([g for g, _ in pairs], ins, [vi for _, vi in pairs], create_graph=create_graph,
                      allow_unused=True) if pairs else (None,) * len(ins)
        second = _fill(second, ins, strict, "")
    value = out if create_graph else out.detach()
    second = _finish(second, create_graph)
    return value, (second if is_in_tuple else second[0])


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v) for a scalar func (equal to vhp: the Hessian of a C^2 function is symmetric)."""
    return vhp(func, inputs, v, create_graph=create_graph, strict=strict)


__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]
