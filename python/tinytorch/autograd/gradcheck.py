"""gradcheck / gradgradcheck: compare autograd's Jacobians with central finite differences (float64)."""
from __future__ import annotations

import warnings

import numpy as np

from .._tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck when an analytical Jacobian differs from the numerical one."""


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,) if not isinstance(x, list) else tuple(x)


def _differentiable_outputs(outputs) -> list:
    return [o for o in _as_tuple(outputs) if isinstance(o, Tensor) and o._requires_grad]


def _host(a):
    return a if isinstance(a, np.ndarray) else a.get()


def _numerical_jacobians(fn, inputs: tuple, eps: float) -> list:
    """J[i][k] of shape (numel(input i), numel(output k)) by central differences."""
    from .grad_mode import no_grad
    with no_grad():
        outs = [o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor)]
        jac = []
        for inp in inputs:
            if not (isinstance(inp, Tensor) and inp._requires_grad):
                jac.append(None)
                continue
            data = inp._data
            flat = data.reshape(-1) if data.flags.c_contiguous else None
            if flat is None:
                raise ValueError("gradcheck needs contiguous inputs")
            per_out = [np.zeros((data.size, o._data.size)) for o in outs]
            for j in range(data.size):
                orig = flat[j].item()
                flat[j] = orig + eps
                plus = [_host(o._data).astype(np.float64).reshape(-1) for o in _as_tuple(fn(*inputs))
                        if isinstance(o, Tensor)]
                flat[j] = orig - eps
                minus = [_host(o._data).astype(np.float64).reshape(-1) for o in _as_tuple(fn(*inputs))
                         if isinstance(o, Tensor)]
                flat[j] = orig
                for k in range(len(outs)):
                    per_out[k][j] = (plus[k] - minus[k]) / (2 * eps)
            jac.append(per_out)
    return jac


def _analytical_jacobians(fn, inputs: tuple) -> tuple:
    from . import grad as autograd_grad
    outputs = _as_tuple(fn(*inputs))
    all_outs = [o for o in outputs if isinstance(o, Tensor)]
    diff_inputs = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t._requires_grad]
    jac = [None if not (isinstance(t, Tensor) and t._requires_grad) else
           [np.zeros((t._data.size, o._data.size)) for o in all_outs] for t in inputs]
    for k, out in enumerate(all_outs):
        if not out._requires_grad:
            continue
        for m in range(out._data.size):
            seed = np.zeros(out._data.size, dtype=_host(out._data).dtype)
            seed[m] = 1
            from .._creation import tensor
            g = tensor(seed.reshape(out._data.shape), device=out.device)
            grads = autograd_grad(out, [inputs[i] for i in diff_inputs], g, retain_graph=True, allow_unused=True)
            for i, gi in zip(diff_inputs, grads):
                if gi is not None:
                    jac[i][k][:, m] = _host(gi._data).astype(np.float64).reshape(-1)
    return jac, all_outs


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode: bool = False, masked=None) -> bool:
    """Check the gradients of func at inputs against finite differences; raises GradcheckError on a mismatch."""
    inputs = _as_tuple(inputs)
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t._requires_grad and t.dtype.name != "float64":
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision floating point.")
    numerical = _numerical_jacobians(func, inputs, eps)
    analytical, outs = _analytical_jacobians(func, inputs)
    for i, (num, ana) in enumerate(zip(numerical, analytical)):
        if num is None:
            continue
        for k in range(len(outs)):
            if not np.allclose(ana[k], num[k], rtol=rtol, atol=atol):
                msg = (f"Jacobian mismatch for output {k} with respect to input {i},\n"
                       f"numerical:{num[k]}\nanalytical:{ana[k]}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    if check_undefined_grad:
        # Backward must cope with outputs whose gradient is zero/absent: run it once with zero seeds.
        from . import grad as autograd_grad
        from .._creation import zeros_like
        outputs = _differentiable_outputs(func(*inputs))
        diff_inputs = [t for t in inputs if isinstance(t, Tensor) and t._requires_grad]
        if outputs and diff_inputs:
            autograd_grad(outputs, diff_inputs, [zeros_like(o) for o in outputs], allow_unused=True)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  gen_non_contig_grad_outputs: bool = False, raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode: bool = False, masked=False) -> bool:
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> d(func)/d(inputs) . grad_outputs."""
    from . import grad as autograd_grad
    from .._creation import randn
    inputs = _as_tuple(inputs)
    outputs = _differentiable_outputs(func(*inputs))
    if grad_outputs is None:
        grad_outputs = tuple(randn(*o.shape, dtype=o.dtype, device=o.device, requires_grad=True) for o in outputs)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t._requires_grad]

    def first_order(*args):
        ins, gos = args[:n], args[n:]
        outs = _differentiable_outputs(func(*ins))
        grads = autograd_grad(outs, [ins[i] for i in diff_idx], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_order, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, check_undefined_grad=False)


__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]
