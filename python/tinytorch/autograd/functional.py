"""tinytorch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp (PyTorch's API, reverse mode).

The structure, checks and error messages follow torch/autograd/functional.py. Everything is built on
autograd.grad; jvp and hvp use the double-backward trick (a vjp's gradient with respect to its grad_outputs).
`vectorize` and the forward-mode strategies are validated as PyTorch does, then computed one backward per
output element: the values are the same, only PyTorch's batching is missing.
"""
from __future__ import annotations

from typing import Any, Callable

from .._tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(inp: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    """(was it a tuple, inp as a tuple of tensors). Only a tuple counts as several tensors (a list is one
    wrong-typed value), as in PyTorch."""
    is_inp_tuple = isinstance(inp, tuple)
    items = inp if is_inp_tuple else (inp,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            if is_inp_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but"
                                f" the value at index {i} has type {type(el)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"the given {arg_name} has type {type(el)}.")
    return is_inp_tuple, items


def _tuple_postprocess(res: Any, to_unpack: Any) -> Any:
    """Undo _as_tuple: unwrap the levels (outputs, inputs) that were single tensors."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """New tensor objects for the inputs (so tensors the function captures are told apart from its arguments):
    differentiable back to the originals only when building a graph."""
    return tuple(inp.view_as(inp) if create_graph and inp.requires_grad else inp.detach().requires_grad_(need_graph)
                 for inp in inputs)


def _grad_postprocess(inputs: tuple, create_graph: bool) -> tuple:
    """Detach the results (recursively through tuples) unless the caller asked for a graph."""
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {el_other.size()} but got {el_v.size()}.")


def _check_requires_grad(inputs: tuple, input_type: str, strict: bool) -> None:
    """In strict mode, reject tensors that carry no graph; the message names the stage that lost it."""
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is not "
                               "allowed in strict mode.")
        if not inp.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(f"The hessian of the user-provided function with respect to input {i} is "
                                   "independent of the input. This is not allowed in strict mode. You should ensure "
                                   "that your function is thrice differentiable and that the hessian depends on the "
                                   "inputs.")
            if input_type == "jacobian":
                raise RuntimeError("While computing the hessian, found that the jacobian of the user-provided "
                                   f"function with respect to input {i} is independent of the input. This is not "
                                   "allowed in strict mode. You should ensure that your function is twice "
                                   "differentiable and that the jacobian depends on the inputs (this would be "
                                   "violated by a linear function for example).")
            if input_type == "grad_inputs":
                raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the "
                                   "user-provided function. This is not allowed in strict mode.")
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               "must be computed in a differentiable manner from the input when running in strict "
                               "mode.")


def _autograd_grad(outputs: tuple, inputs: tuple, grad_outputs: tuple | None = None, create_graph: bool = False,
                   retain_graph: bool | None = None) -> tuple:
    """autograd.grad that skips outputs without a graph (None entries included): None for unreached inputs."""
    from . import grad
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return grad([o for o, _ in pairs], inputs, [g for _, g in pairs], allow_unused=True, create_graph=create_graph,
                retain_graph=retain_graph)


def _grad(outputs: tuple, inputs: tuple, grad_outputs: tuple | None, create_graph: bool) -> tuple:
    """_autograd_grad keeping the graph for further calls (torch.func's transforms build on it)."""
    return _autograd_grad(outputs, inputs, grad_outputs, create_graph=create_graph, retain_graph=True)


_FILL_ERRORS = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict "
            "mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when using "
                  "the double backward trick to compute forward mode gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
                   "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the grad_jacobian. "
                         "This is not allowed in strict mode as it prevents from using the double backward trick to "
                         "replace forward mode AD.",
}


def _fill_in_zeros(grads: tuple, refs: tuple, strict: bool, create_graph: bool, stage: str) -> tuple:
    """Zeros for the None gradients (or, in strict mode, the error of the stage that produced them)."""
    from .._creation import zeros_like
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_FILL_ERRORS[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of input {i}. This is not "
                               "allowed in strict mode when create_graph=True.")
        res.append(g)
    return tuple(res)


def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`."""
    from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        elif len(outputs) != 1 or outputs[0].nelement() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                               "with a single element.")
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """(func(inputs), J v): the Jacobian-vector product, by differentiating a vjp w.r.t. its vector."""
    from .._creation import zeros_like
    from .grad_mode import enable_grad
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        elif len(inputs) != 1 or inputs[0].nelement() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The vjp is linear in grad_outputs, so their value never reaches the result: zeros suffice.
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    if create_graph:
        with enable_grad():
            grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
            result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    else:
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_outputs_tuple)


def _jacobian_rows(outputs: tuple, inputs: tuple, create_graph: bool, strict: bool) -> tuple:
    """((J(out i, in j) of shape out_i.shape + in_j.shape for each input) for each output): one backward per
    output element; detached unless create_graph (torch.func's jacrev uses it too)."""
    from .._creation import zeros_like
    from .._ops.shape import stack
    jacobian = []
    for i, out in enumerate(outputs):
        jac_i: tuple[list, ...] = tuple([] for _ in inputs)
        flat = out.reshape(-1)
        for k in range(out.nelement()):
            vj = _autograd_grad((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
            for el_idx, (jac_i_el, vj_el, inp_el) in enumerate(zip(jac_i, vj, inputs)):
                if vj_el is not None:
                    if strict and create_graph and not vj_el.requires_grad:
                        raise RuntimeError(f"The jacobian of the user-provided function is independent of input {i}. "
                                           "This is not allowed in strict mode when create_graph=True.")
                    jac_i_el.append(vj_el)
                else:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                           f"{el_idx}. This is not allowed in strict mode.")
                    jac_i_el.append(zeros_like(inp_el))
        jacobian.append(tuple(
            stack(jac_i_el, dim=0).view(out.size() + inputs[el_idx].size()) if jac_i_el
            else inputs[el_idx].new_zeros(out.size() + inputs[el_idx].size())  # an empty output
            for el_idx, jac_i_el in enumerate(jac_i)))
    return _grad_postprocess(tuple(jacobian), create_graph) if jacobian else ()


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
             strategy: str = "reverse-mode") -> Any:
    """The Jacobian of func at inputs: J[i][j] has shape outputs[i].shape + inputs[j].shape."""
    from .grad_mode import enable_grad
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        # PyTorch's forward-mode Jacobian exists only batched (vmap) and without strict or a graph; the
        # same Jacobian is computed here in reverse mode.
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` and "
                                      '`strategy="forward-mode"` are not supported together (yet). Please either set '
                                      '`create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are '
                               'not supported together (yet). Please either set `strict=False` or '
                               '`strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                                      "only implemented for `vectorize=True`.")
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        jac = _grad_postprocess(_jacobian_rows(outputs, inputs, create_graph, strict), create_graph)
    return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False, vectorize: bool = False,
            outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of a scalar func: H[i][j] has shape inputs[i].shape + inputs[j].shape (the Jacobian of
    its gradient)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(func: Callable, inputs: tuple, strict: bool, fn_name: str) -> tuple:
    """func(*inputs) as a 1-tuple, checked to be one single-element tensor (vhp and hvp need a scalar)."""
    is_outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].nelement() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")
    return is_outputs_tuple, outputs


def _prepare_hessian_product(inputs: Any, v: Any, create_graph: bool, fn_name: str) -> tuple:
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, inputs, is_inputs_tuple)
    elif len(inputs) != 1 or inputs[0].nelement() != 1:
        raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                           "Tensor with a single element.")
    return is_inputs_tuple, inputs, v


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """(func(inputs), v^T H) for a scalar func."""
    from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
    with enable_grad():
        is_inputs_tuple, inputs, v = _prepare_hessian_product(inputs, v, create_graph, "vhp")
        is_outputs_tuple, outputs = _scalar_output(func, inputs, strict, "vhp")
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False) -> tuple:
    """(func(inputs), H v) for a scalar func, by the double-backward trick on its gradient."""
    from .._creation import zeros_like
    from .grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
    with enable_grad():
        is_inputs_tuple, inputs, v = _prepare_hessian_product(inputs, v, create_graph, "hvp")
        is_outputs_tuple, outputs = _scalar_output(func, inputs, strict, "hvp")
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    result = _grad_postprocess(result, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(result, is_inputs_tuple)
