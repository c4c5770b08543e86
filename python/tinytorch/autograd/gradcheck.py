"""gradcheck / gradgradcheck: compare autograd's Jacobians with central finite differences (float64).

tinytorch always checks the full Jacobian (`fast_mode` is accepted and ignored): the op tests use
small inputs, where the full check is cheap and reports exactly which entry is wrong.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .._tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck when an analytical Jacobian differs from the numerical one."""


def _as_tuple(x: Any) -> tuple:
    """x as a tuple (lists are converted, anything else becomes a 1-tuple)."""
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _host(a) -> np.ndarray:
    """A NumPy view/copy of a NumPy or CuPy array."""
    return a if isinstance(a, np.ndarray) else a.get()


def _float_outputs(outputs: Any) -> list:
    """The floating-point tensor outputs: the ones a Jacobian is defined for."""
    return [o for o in _as_tuple(outputs) if isinstance(o, Tensor) and o.dtype.is_floating_point]


def _differentiable_outputs(outputs: Any) -> list:
    """The outputs that carry a graph."""
    return [o for o in _as_tuple(outputs) if isinstance(o, Tensor) and o._requires_grad]


def _diff_input_indices(inputs: tuple) -> list:
    """Positions of the inputs gradcheck differentiates with respect to."""
    return [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t._requires_grad]


def _numerical_jacobians(fn: Callable, inputs: tuple, eps: float) -> dict:
    """{input index: [J_k of shape (numel(input), numel(output k)) for each float output k]}.

    Runs with grad mode as the caller has it: gradgradcheck's function itself calls autograd.grad.
    """
    outs = _float_outputs(fn(*inputs))
    jac = {}
    for i in _diff_input_indices(inputs):
        data = inputs[i]._data
        if not data.flags.c_contiguous:  # reshape would copy, and perturbing the copy changes nothing
            raise ValueError(f"gradcheck needs contiguous inputs; input {i} is not (call .contiguous())")
        flat = data.reshape(-1)
        per_out = [np.zeros((data.size, o._data.size)) for o in outs]
        for j in range(data.size):
            orig = flat[j].item()
            flat[j] = orig + eps
            plus = [_host(o._data).astype(np.float64).reshape(-1) for o in _float_outputs(fn(*inputs))]
            flat[j] = orig - eps
            minus = [_host(o._data).astype(np.float64).reshape(-1) for o in _float_outputs(fn(*inputs))]
            flat[j] = orig
            for k in range(len(outs)):
                per_out[k][j] = (plus[k] - minus[k]) / (2 * eps)
        jac[i] = per_out
    return jac


def _analytical_jacobians(fn: Callable, inputs: tuple) -> dict:
    """Autograd's Jacobians, one backward per output element, in the layout of _numerical_jacobians."""
    from .._creation import tensor
    from . import grad as autograd_grad
    outs = _float_outputs(fn(*inputs))
    diff = _diff_input_indices(inputs)
    jac = {i: [np.zeros((inputs[i]._data.size, o._data.size)) for o in outs] for i in diff}
    for k, out in enumerate(outs):
        if not out._requires_grad:
            continue  # constant output: its Jacobian is zero
        for m in range(out._data.size):
            seed = np.zeros(out._data.size, dtype=_host(out._data).dtype)
            seed[m] = 1
            g = tensor(seed.reshape(out._data.shape), device=out.device)
            grads = autograd_grad(out, [inputs[i] for i in diff], g, retain_graph=True, allow_unused=True)
            for i, gi in zip(diff, grads):
                if gi is None:
                    continue
                if gi._data.shape != inputs[i]._data.shape:
                    raise GradcheckError(f"Gradient for input {i} has shape {list(gi._data.shape)} but the input "
                                         f"has shape {list(inputs[i]._data.shape)}")
                jac[i][k][:, m] = _host(gi._data).astype(np.float64).reshape(-1)
    return jac


def _fail(msg: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(func: Callable, inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode: bool = False, masked=None) -> bool:
    """Check the gradients of func at inputs against finite differences; raises GradcheckError on a mismatch."""
    inputs = _as_tuple(inputs)
    diff = _diff_input_indices(inputs)
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for i in diff:
        if inputs[i].dtype.name != "float64":
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision floating point. ")
    if not check_backward_ad:
        return True
    numerical = _numerical_jacobians(func, inputs, eps)
    analytical = _analytical_jacobians(func, inputs)
    for i in diff:
        for k, (num, ana) in enumerate(zip(numerical[i], analytical[i])):
            if not np.allclose(ana, num, rtol=rtol, atol=atol):
                return _fail(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                             f"numerical:{num}\nanalytical:{ana}\n", raise_exception)
    # Backward must give the same answer twice for the same grad_output (up to nondet_tol).
    again = _analytical_jacobians(func, inputs)
    for i in diff:
        for first, second in zip(analytical[i], again[i]):
            if np.abs(first - second).max(initial=0.0) > nondet_tol:
                return _fail("Backward is not reentrant, i.e., running backward with same input and grad_output "
                             "multiple times gives different values, although analytical gradient matches "
                             f"numerical gradient. The tolerance for nondeterminism was {nondet_tol}.",
                             raise_exception)
    if check_undefined_grad:
        # Backward must cope with outputs whose gradient is zero: run it once with zero seeds.
        from .._creation import zeros_like
        from . import grad as autograd_grad
        outputs = _differentiable_outputs(func(*inputs))
        if outputs:
            grads = autograd_grad(outputs, [inputs[i] for i in diff], [zeros_like(o) for o in outputs],
                                  allow_unused=True)
            for i, g in zip(diff, grads):
                if g is not None and bool(np.any(_host(g._data) != 0)):
                    return _fail(f"Expected backward function to handle undefined output grads. Please look at "
                                 f"\"Notes about undefined output gradients\" in \"tools/autograd/derivatives.yaml\" "
                                 f"(input {i} got a non-zero gradient for zero grad_outputs)", raise_exception)
    return True


def gradgradcheck(func: Callable, inputs: Any, grad_outputs: Optional[Sequence[Tensor]] = None, *,
                  eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
                  check_grad_dtypes: bool = False, check_batched_grad=False, check_fwd_over_rev=False,
                  check_rev_over_rev=True, fast_mode: bool = False, masked=False) -> bool:
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> d(func)/d(inputs) . grad_outputs."""
    from .._creation import randn
    from . import grad as autograd_grad
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = _differentiable_outputs(func(*inputs))
        grad_outputs = tuple(randn(*o.shape, dtype=o.dtype, device=o.device, requires_grad=True) for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)
    diff = _diff_input_indices(inputs)

    def first_order(*args):
        ins, gos = args[:n], args[n:]
        outs = _differentiable_outputs(func(*ins))
        grads = autograd_grad(outs, [ins[i] for i in diff], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol, check_undefined_grad=False)


__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]
