"""Elementwise ops with broadcasting: each forward beside its derivative (PyTorch's derivatives.yaml).

Backward formulas are written with tensor ops, so under create_graph they record a graph of their
own (higher-order gradients) and otherwise run as plain NumPy/CuPy work under no_grad.
"""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from .. import _autocast
from .. import _C
from .._tensor import Tensor, _inference_contexts, _mark_inference
from . import _common, _cpu
from ._common import (alias, attach, check_inplace, commit_inplace, float_data, inplace_binary, inplace_unary,
                      is_scalar, needs_grad, operands, record, saved_output, sum_to, _grad_enabled)

_new = object.__new__
_ND = np.ndarray
_record = _C._record
_GENERIC = np.generic


def _result(r) -> Tensor:
    """Wrap an op's result array. NumPy returns a scalar (np.float32, not a 0-d array) when every
    operand is 0-d; a tensor must hold an array, or it would pass for a CUDA tensor."""
    t = _new(Tensor)
    t._data = r if type(r) is _ND or not isinstance(r, _GENERIC) else np.asarray(r)
    if _inference_contexts[0]:
        _mark_inference(t)
    return t


def _shape_of(v) -> tuple:
    return v._data.shape if isinstance(v, Tensor) else np.shape(v)


def broadcast_error(a, b, cause: Exception | None = None) -> RuntimeError:
    """PyTorch's error for operands whose shapes don't broadcast (built only on the failure path).
    When the shapes do broadcast, the NumPy error had another cause: keep its message."""
    return broadcast_error_shapes(_shape_of(a), _shape_of(b), cause)


def broadcast_error_shapes(sa: tuple, sb: tuple, cause: Exception | None = None) -> RuntimeError:
    """broadcast_error for two shapes."""
    n = len(sa) if len(sa) > len(sb) else len(sb)
    for i in range(n - 1, -1, -1):
        off = n - 1 - i
        da = sa[len(sa) - 1 - off] if off < len(sa) else 1
        db = sb[len(sb) - 1 - off] if off < len(sb) else 1
        if da != db and da != 1 and db != 1:
            return RuntimeError(f"The size of tensor a ({da}) must match the size of tensor b ({db}) at "
                                f"non-singleton dimension {i}")
    if cause is not None:
        return RuntimeError(str(cause))
    return RuntimeError(f"shapes {list(sa)} and {list(sb)} cannot be broadcast together")


def _fit(g: Tensor, shape: tuple, dtype) -> Tensor:
    """A gradient for an input of `shape` and `dtype` (undo broadcasting and type promotion). A real input of
    a complex result gets the real part: how a real loss changes with it (PyTorch's handle_r_to_c)."""
    g = sum_to(g, shape)
    if g._data.dtype != dtype:
        if g._data.dtype.kind == "c" and dtype.kind != "c":
            g = g.real
        g = g.to(_dt(dtype))
    return g


def _dt(np_dtype):
    from .._dtype import from_numpy_dtype
    return from_numpy_dtype(np_dtype)


def _binary(op: int, x, y, numpy_op):
    """x op y: on the intra-op pool for large float arrays (_cpu.binary), else NumPy's operator."""
    r = _cpu.binary(op, x, y) if (type(x) is _ND and x.size >= _cpu.MIN_SIZE) or \
        (type(y) is _ND and y.size >= _cpu.MIN_SIZE) else None
    return numpy_op(x, y) if r is None else r


def _lhs(a, b):
    """Functional forms accept a scalar first (tinytorch.mul(2, t)): make the left side a tensor."""
    if isinstance(a, Tensor):
        return a
    if isinstance(a, (list, tuple)):  # [1., 2.] ** t, torch.add([1.], t): PyTorch refuses sequences
        raise TypeError(f"argument 'input' must be Tensor or Number, not {type(a).__name__}")
    from .._creation import tensor
    from .._dtype import result_type
    if isinstance(b, Tensor) and isinstance(a, (bool, int, float, complex)):
        # the number in the op's result dtype, as PyTorch's wrapped numbers: mul(1.1, float64) keeps 1.1's double
        return tensor(a, dtype=result_type(b, a), device=b.device)
    return tensor(a, device=b.device if isinstance(b, Tensor) else None)


# ------------------------------------------------------------------ out= (the torch.* functional forms)

# ATen's C type names, which some out= dtype errors print (mm, bmm, max(dim))
_C_TYPE = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
           "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
           "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _castable_out(res, out) -> None:
    """TensorIterator's out= dtype rule: the result may be cast to out's dtype unless that loses its kind
    (torch.can_cast: not floating -> integral, complex -> real, or non-bool -> bool)."""
    if res._category > out._category:
        raise RuntimeError(f"result type {_common._short(res)} can't be cast to the desired output type "
                           f"{_common._short(out)}")


def _same_dtype_out(template: str):
    """An out= dtype check for ops that write only their result's dtype. The template names the dtypes as
    {res}/{out} (Float) or {res_c}/{out_c} (ATen's C type names, float): each op words it its own way."""
    def check(res, out) -> None:
        if res != out:
            raise RuntimeError(template.format(res=_common._short(res), out=_common._short(out),
                                               res_c=_C_TYPE[res.name], out_c=_C_TYPE[out.name]))
    return check


_found_dtype = _same_dtype_out("Found dtype {out} but expected {res}")  # abs, neg, frac, clamp
_where_dtype = _same_dtype_out("Expected out type to be {res} but got {out}")
_ctype_dtype = _same_dtype_out("Expected out tensor to have dtype {res_c}, but got {out_c} instead")  # mm, max(dim)


def _write_out(name: str, result: Tensor, out, check=_castable_out, inputs: tuple = ()) -> Tensor:
    """PyTorch's out= for an op whose result is computed: refuse autograd, check out's dtype with `check` (None:
    any cast), resize out to the result's shape (a warning when it had elements), copy the result in; returns out.
    `inputs` are tested for requires_grad too, for ops whose result records no graph (div with rounding_mode)."""
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if _grad_enabled() and (result._requires_grad or out._requires_grad or needs_grad(*inputs)):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")
    if check is not None:
        check(result.dtype, out.dtype)
    shape, had = result._data.shape, out._data.shape
    if had != shape:
        if out._data.size:
            import warnings
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(had)}, "
                          f"which does not match the required output shape {list(shape)}. This behavior is deprecated, "
                          "and in a future PyTorch release outputs will not be resized unless they have zero elements. "
                          "You can explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
                          "t.resize_(0).", UserWarning, stacklevel=_common.user_stacklevel())
        _resize_out(out, shape)
    return copy_(out, result)


def _resize_out(out: Tensor, shape: tuple) -> None:
    """Give out= tensor `shape` (resize_: it keeps its memory when that is large enough)."""
    if out._requires_grad:  # only under no_grad: resize_ refuses such a tensor, PyTorch's out= gives it new memory
        x = out._data
        out._data = (np if type(x) is _ND else x.__array_namespace__()).empty(shape, x.dtype)
        out._bump_version()
    else:
        from .tensor_methods import resize_
        resize_(out, shape)


# ------------------------------------------------------------------ arithmetic

# add and mul start with a fast path for a CPU float tensor (of at least one dim) and a Python float:
# the hot path of scalar arithmetic (W1), where promotion, 0-d results and devices need no checks.

def _record_cpu(name: str, backward, out: Tensor, a: Tensor) -> None:
    if _common._profile_op is not None:
        _common._profile_op(name)
    _record(name, backward, out, (a,))


def _identity(g):
    return g


def add(a, b, *, alpha=1, out=None) -> Tensor:
    """a + alpha * b."""
    if out is not None:
        return _write_out("add", add(a, b, alpha=alpha), out)
    if type(b) is float and type(a) is Tensor and alpha == 1:
        x = a._data
        if type(x) is _ND and x.ndim and x.dtype.kind == "f":
            out = _new(Tensor)
            out._data = x + b if x.size < _cpu.MIN_SIZE else _binary(_cpu.ADD, x, b, operator.add)
            if a._requires_grad and _grad_enabled():
                _record_cpu("AddBackward0", _identity, out, a)
            elif _inference_contexts[0]:  # never while recording: inference_mode turns grad off
                _mark_inference(out)
            return out
    if not isinstance(a, Tensor):
        a = _lhs(a, b)
    if isinstance(alpha, np.generic):  # a NumPy scalar counts as the number it holds (no float64 promotion)
        alpha = alpha.item()
    x, y = operands(a, b)
    try:
        out = _result(_binary(_cpu.ADD, x, y, operator.add) if alpha == 1 else x + alpha * y)
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if a._requires_grad or (isinstance(b, Tensor) and b._requires_grad):
        if _grad_enabled():
            if isinstance(b, Tensor):
                sa, da, sb, db = a._data.shape, a._data.dtype, b._data.shape, b._data.dtype
                ra, rb = a._requires_grad, b._requires_grad

                def add_backward(g):
                    return (_fit(g, sa, da) if ra else None,
                            _fit(g if alpha == 1 else g * alpha, sb, db) if rb else None)
                record("AddBackward0", add_backward, out, (a, b))
            else:
                sa, da = a._data.shape, a._data.dtype
                record("AddBackward0", (lambda g: g) if da == out._data.dtype else (lambda g: _fit(g, sa, da)),
                       out, (a,))
    return out


def sub(a, b, *, alpha=1, out=None) -> Tensor:
    """a - alpha * b."""
    if out is not None:
        return _write_out("sub", sub(a, b, alpha=alpha), out)
    a = _lhs(a, b)
    if a._data.dtype.kind == "b" or type(b) is bool or (isinstance(b, Tensor) and b._data.dtype.kind == "b"):
        _sub_bool_error(a, b)
    if isinstance(alpha, np.generic):
        alpha = alpha.item()
    x, y = operands(a, b)
    try:
        out = _result(_binary(_cpu.SUB, x, y, operator.sub) if alpha == 1 else x - alpha * y)
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if needs_grad(a, b):
        if isinstance(b, Tensor):
            sa, da, sb, db = a._data.shape, a._data.dtype, b._data.shape, b._data.dtype
            ra, rb = a._requires_grad, b._requires_grad

            def sub_backward(g):
                return (_fit(g, sa, da) if ra else None, _fit(-g if alpha == 1 else g * -alpha, sb, db) if rb else None)
            record("SubBackward0", sub_backward, out, (a, b))
        else:
            sa, da = a._data.shape, a._data.dtype
            record("SubBackward0", (lambda g: g) if da == out._data.dtype else (lambda g: _fit(g, sa, da)), out,
                   (a,))
    return out


def _sub_bool_error(a, b):
    if isinstance(b, Tensor) and a._data.dtype.kind == "b" and b._data.dtype.kind == "b":
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
                       "invert a mask, use the `~` or `logical_not()` operator instead.")


def rsub(a: Tensor, b, *, alpha=1) -> Tensor:
    """b - alpha * a (Python's `2 - t`)."""
    if a._data.dtype.kind == "b" or type(b) is bool:
        _sub_bool_error(a, b)
    if isinstance(b, Tensor) or not isinstance(b, (int, float)):
        return add(neg(a) if alpha == 1 else mul(a, -alpha), b)
    x, y = operands(a, b)  # b - alpha * a for a number b: one node, PyTorch's RsubBackward1
    out = _result(y - x if alpha == 1 else y - alpha * x)
    if needs_grad(a):
        sa, da = a._data.shape, a._data.dtype
        record("RsubBackward1", lambda g: _fit(-g if alpha == 1 else g * -alpha, sa, da), out, (a,))
    return out


def mul(a, b, *, out=None) -> Tensor:
    """a * b."""
    if out is not None:
        return _write_out("mul", mul(a, b), out)
    if type(b) is float and type(a) is Tensor:
        x = a._data
        if type(x) is _ND and x.ndim and x.dtype.kind == "f":
            out = _new(Tensor)
            out._data = x * b if x.size < _cpu.MIN_SIZE else _binary(_cpu.MUL, x, b, operator.mul)
            if a._requires_grad and _grad_enabled():
                _record_cpu("MulBackward0", lambda g: g * b, out, a)
            elif _inference_contexts[0]:
                _mark_inference(out)
            return out
    if not isinstance(a, Tensor):
        a = _lhs(a, b)
    x, y = operands(a, b)
    try:
        out = _result(_binary(_cpu.MUL, x, y, operator.mul))
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if a._requires_grad or (isinstance(b, Tensor) and b._requires_grad):
        if _grad_enabled():
            if isinstance(b, Tensor):
                sa, da, sb, db = a._data.shape, a._data.dtype, b._data.shape, b._data.dtype
                ra, rb = a._requires_grad, b._requires_grad

                # conj: PyTorch's convention for complex inputs (conjugate Wirtinger); a no-op on real tensors
                def mul_backward(g):
                    return (_fit(g * b.conj(), sa, da) if ra else None, _fit(g * a.conj(), sb, db) if rb else None)
                record("MulBackward0", mul_backward, out, (a, b), (a, b))
            else:
                yc, sa, da = y.conjugate(), a._data.shape, a._data.dtype
                record("MulBackward0", lambda g: _fit(g * yc, sa, da), out, (a,))
    return out


def _int_divisor(x, y) -> None:
    """Integer floor/trunc division and modulus by zero: PyTorch raises where NumPy gives 0 (and a warning)."""
    if type(x) is _ND and x.dtype.kind in "iu" and not isinstance(y, float) and \
            (y.dtype.kind in "iu" if type(y) is _ND else type(y) is int) and not np.all(y):
        raise RuntimeError("ZeroDivisionError")


def div(a, b, *, rounding_mode=None, out=None) -> Tensor:
    """a / b (true division; 'floor' and 'trunc' rounding modes have no gradient)."""
    if out is not None:  # PyTorch refuses inputs that require grad even when rounding leaves no gradient
        return _write_out("div", div(a, b, rounding_mode=rounding_mode), out, inputs=(a, b))
    a = _lhs(a, b)
    if rounding_mode is not None:
        x, y = operands(a, b)
        _int_divisor(x, y)
        if rounding_mode == "floor":
            return _result(np.floor_divide(x, y) if x.dtype.kind in "iub"
                           else np.floor(x / y).astype(np.result_type(x, y)))
        if rounding_mode == "trunc":
            q = np.trunc(np.true_divide(x, y))
            return _result(q.astype(np.result_type(x, y)) if x.dtype.kind in "iub" else q.astype(np.result_type(x, y)))
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"'{rounding_mode}'")
    x, y = operands(a, b)
    if x.dtype.kind in "biu":  # integer division is true division, as in PyTorch
        from .._dtype import get_default_dtype
        x = x.astype(get_default_dtype().np)
        if type(y) is not float and type(y) is not int and type(y) is not bool:
            y = y.astype(x.dtype)
    try:
        out = _result(_binary(_cpu.DIV, x, y, operator.truediv))
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if needs_grad(a, b):
        if isinstance(b, Tensor):
            sa, da, sb, db = a._data.shape, a._data.dtype, b._data.shape, b._data.dtype
            ra, rb = a._requires_grad, b._requires_grad

            def div_backward(g):
                return (_fit(g / b.conj(), sa, da) if ra else None,
                        _fit(-g * (a / (b * b)).conj(), sb, db) if rb else None)
            record("DivBackward0", div_backward, out, (a, b), (a, b))
        else:
            yc, sa, da = y.conjugate(), a._data.shape, a._data.dtype
            record("DivBackward0", lambda g: _fit(g / yc, sa, da), out, (a,))
    return out


def rdiv(a: Tensor, b) -> Tensor:
    """b / a (Python's `2 / t`)."""
    if _autocast.active:
        return _autocast.dispatch("__rtruediv__", rdiv, a, b)
    return mul(reciprocal(a), b)


def neg(a: Tensor, *, out=None) -> Tensor:
    """-a."""
    if out is not None:
        return _write_out("neg", neg(a), out, _found_dtype)
    if a.dtype.name == "bool":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    x = a._data
    r = _cpu.unary(_cpu.NEG, x) if type(x) is _ND and x.size >= _cpu.MIN_SIZE else None
    out = _result(-x if r is None else r)
    if needs_grad(a):
        record("NegBackward0", lambda g: -g, out, (a,))
    return out


def pow(a, b, *, out=None) -> Tensor:
    """a ** b, for a tensor or scalar exponent."""
    if out is not None:
        return _write_out("pow", pow(a, b), out)
    if _autocast.active:
        return _autocast.dispatch("pow", pow, a, b)
    if not isinstance(a, Tensor):
        return _rpow(b, a)
    if isinstance(b, np.ndarray):  # t ** array: the array as a tensor, as PyTorch takes it
        from .._creation import tensor
        b = tensor(b, device=a.device)
    if isinstance(b, Tensor):
        x, y = operands(a, b)
        try:
            out = _result(np.power(x, y))
        except ValueError as e:
            if x.dtype.kind not in "iu" or not (y < 0).any():
                raise broadcast_error(a, b, e) from None
            out = _result(_int_pow_negative(x, y))
        if needs_grad(a, b):
            sa, da, sb, db = a._data.shape, a._data.dtype, b._data.shape, b._data.dtype
            ra, rb = a._requires_grad, b._requires_grad
            out_alias = alias(out)

            def pow_backward(g):
                ga = gb = None
                if ra:  # 0 where b == 0 (PyTorch's rule: 0 ** 0 has slope 0, not 0 * inf)
                    ga = _fit((g * b * a.pow(b - 1)).masked_fill(b == 0, 0.0), sa, da)
                if rb:
                    res = saved_output(out_alias, lambda: a.pow(b))
                    # d/db a^b = a^b log a; PyTorch defines it as 0 where a == 0 and b >= 0
                    mask = (a == 0) & (b >= 0)
                    gb = _fit((g * res * a.log()).masked_fill(mask, 0.0), sb, db)
                return ga, gb
            record("PowBackward1", pow_backward, out, (a, b), (a, b, out_alias))
        return out
    x, e = operands(a, b)
    if isinstance(e, int) and x.dtype.kind in "iu" and e < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if e == 2:
        out = _result(x * x)
    elif e == 0.5:
        out = _result(np.sqrt(x))
    elif x.dtype.kind in "fc" and e in (3, -1, -2, -0.5):
        # ATen's special exponents, as products and reciprocals: NumPy's power calls pow() per element, 100x
        # slower for 3 on negative float32 bases (glibc's slow path)
        with np.errstate(divide="ignore", invalid="ignore"):  # inf and nan, silently, as pow gives them
            out = _result(_special_power(x, e))
    else:
        out = _result(np.power(x, e))
    if needs_grad(a):
        def pow_scalar_backward(g):
            if e == 0:
                return g * 0
            if e == 2 and not _grad_enabled():
                return g * (a * 2)
            # PyTorch's formula, also for 2: under create_graph the slope stays a function of a (a ** 1), so a
            # Hessian's strict check and requires_grad see x ** 2's second derivative depend on x, as there
            return g * (e * a.pow(e - 1))
        record("PowBackward0", pow_scalar_backward, out, (a,), (a,))
    return out


def _special_power(x, e):
    """x ** e for e in (3, -1, -2, -0.5): products, a reciprocal, an rsqrt; large arrays on the pool."""
    r = _cpu.unary({3: _cpu.CUBE, -1: _cpu.RECIPROCAL, -0.5: _cpu.RSQRT, -2: _cpu.SQUARE}[e], x)
    if r is None:
        sq = x * x
        return sq * x if e == 3 else 1 / x if e == -1 else 1 / sq if e == -2 else 1 / np.sqrt(x)
    return _cpu.unary(_cpu.RECIPROCAL, r) if e == -2 else r


def _int_pow_negative(x, y):
    """Integer ** integer tensor with negative exponents: NumPy refuses; PyTorch gives 1 / x**|y| truncated
    (so 0, except for bases 1 and -1)."""
    xp = np if type(x) is np.ndarray else x.__array_namespace__()
    neg = y < 0
    r = xp.power(x, xp.where(neg, 0, y))
    small = xp.where(x == 1, 1, xp.where(x == -1, xp.where(y % 2 == 0, 1, -1), 0))
    return xp.where(neg, small, r).astype(r.dtype, copy=False)


def _rpow(b: Tensor, base) -> Tensor:
    """base ** b for a scalar base (Python's `2 ** t`)."""
    x, s = operands(b, base)
    out = _result(np.power(s, float_data(b) if isinstance(s, float) or x.dtype.kind == "f" else x))
    if needs_grad(b):
        out_alias = alias(out)
        log_base = math.log(base) if base > 0 else -math.inf if base == 0 else math.nan

        def rpow_backward(g):
            res = saved_output(out_alias, lambda: _rpow(b, base))
            if base == 0:  # PyTorch's rule: 0 where the exponent is >= 0, else inf * log(0) = -inf
                return g * (res * log_base).masked_fill(b >= 0, 0.0)
            return g * res * log_base
        record("PowBackward2", rpow_backward, out, (b,), (out_alias,))
    return out


def rpow(a: Tensor, base) -> Tensor:
    """base ** a for a scalar base (Python's `2 ** t`)."""
    if _autocast.active:
        return _autocast.dispatch("__rpow__", rpow, a, base)
    return _rpow(a, base)


def _extremum(a, b, pick, name: str) -> Tensor:
    a = _lhs(a, b)
    if not isinstance(b, Tensor):
        from .._creation import tensor
        b = tensor(b, dtype=a.dtype, device=a.device)
    x, y = operands(a, b)
    try:
        out = _result(pick(x, y))
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if needs_grad(a, b):
        sa, da, sb, db = a._data.shape, a._data.dtype, b._data.shape, b._data.dtype
        ra, rb = a._requires_grad, b._requires_grad
        greater = pick is np.maximum

        def extremum_backward(g):
            # PyTorch's formula: a tie splits g, the loser gets 0, and a NaN pair (neither wins) gives g to both
            shared = where(a == b, g * 0.5, g)
            ga = _fit(shared.masked_fill((a < b) if greater else (a > b), 0.0), sa, da) if ra else None
            gb = _fit(shared.masked_fill((a > b) if greater else (a < b), 0.0), sb, db) if rb else None
            return ga, gb
        record(name, extremum_backward, out, (a, b), (a, b))
    return out


def maximum(a, b, *, out=None) -> Tensor:
    """Elementwise max (ties split the gradient evenly, as in PyTorch)."""
    if out is not None:
        return _write_out("maximum", maximum(a, b), out)
    return _extremum(a, b, np.maximum, "MaximumBackward0")


def minimum(a, b, *, out=None) -> Tensor:
    """Elementwise min."""
    if out is not None:
        return _write_out("minimum", minimum(a, b), out)
    return _extremum(a, b, np.minimum, "MinimumBackward0")


def remainder(a, b) -> Tensor:
    """Python-style modulus (sign of the divisor); gradient 1 w.r.t. a."""
    a = _lhs(a, b)
    x, y = operands(a, b)
    _int_divisor(x, y)
    try:
        out = _result(np.mod(x, y))
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if needs_grad(a, b):
        if isinstance(b, Tensor) and b._requires_grad:
            sb, db = b._data.shape, b._data.dtype
            ra = a._requires_grad

            def rem_backward(g):
                return (_fit(g, a._data.shape, a._data.dtype) if ra else None,
                        _fit(-g * (a / b).floor(), sb, db))
            record("RemainderBackward0", rem_backward, out, (a, b), (a, b))
        else:
            record("RemainderBackward0", lambda g: _fit(g, a._data.shape, a._data.dtype), out, (a,))
    return out


def fmod(a, b) -> Tensor:
    """C-style modulus (sign of the dividend); d/db = -trunc(a / b)."""
    a = _lhs(a, b)
    x, y = operands(a, b)
    _int_divisor(x, y)
    try:
        out = _result(np.fmod(x, y))
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if needs_grad(a, b):
        sa, da = a._data.shape, a._data.dtype
        if isinstance(b, Tensor) and b._requires_grad:
            sb, db = b._data.shape, b._data.dtype
            ra = a._requires_grad

            def fmod_backward(g):
                return (_fit(g, sa, da) if ra else None, _fit(-g * (a / b).trunc(), sb, db))
            record("FmodBackward1", fmod_backward, out, (a, b), (a, b))
        else:
            record("FmodBackward0", lambda g: _fit(g, sa, da), out, (a,))
    return out


def floor_divide(a, b, *, out=None) -> Tensor:
    """a // b: division rounded toward negative infinity (no gradient)."""
    if out is not None:
        return _write_out("floor_divide", floor_divide(a, b), out)
    return div(a, b, rounding_mode="floor")


# ------------------------------------------------------------------ unary math

def _unary(name: str, kernel, derivative=None, uses="x", floating=True, integer_ok=False, cpu_op=None,
           holomorphic=True, out_check=_castable_out):
    """Build a unary op: out = kernel(x); derivative(g, x, y) -> grad, with y the op's output.
    `cpu_op` names the op in _cpu.unary, which runs large float arrays on the intra-op pool.
    On complex input a holomorphic op's derivative is evaluated at conj(x), conj(y): for functions with
    real Taylor coefficients f'(conj z) = conj(f'(z)), which is PyTorch's grad * conj(f'(z)). A
    non-holomorphic op (abs) gets x and y as they are and its derivative handles complex itself.

    `uses` names what the derivative reads: "x" (the input), "y" (the output) or "xy".
    Under create_graph a saved output is recomputed from x so that its own graph is known.
    `out_check` is the op's out= dtype rule (see _write_out).
    """
    node_name = name.capitalize() + "Backward0"

    def op(a: Tensor, *, out=None) -> Tensor:
        if out is not None:
            return _write_out(name, op(a), out, out_check)
        if _autocast.active:
            return _autocast.dispatch(name, op, a)
        x = float_data(a) if floating else a._data
        if floating and x.dtype.itemsize == 2:
            # float16/bfloat16: compute in float32 and round once, as PyTorch's CPU kernels do
            out = _result(kernel(x.astype(np.float32)).astype(x.dtype))
        else:
            r = _cpu.unary(cpu_op, x) if cpu_op is not None and type(x) is _ND and x.size >= _cpu.MIN_SIZE else None
            out = _result(kernel(x) if r is None else r)
        if derivative is not None and a._requires_grad and _grad_enabled():
            if x.dtype.kind == "c":
                return _record_complex_unary(node_name, derivative, holomorphic, op, a, out)
            if uses == "x":
                record(node_name, lambda g: derivative(g, a, None), out, (a,), (a,))
            else:
                y_alias = alias(out)
                keep_x = "x" in uses

                def backward(g):
                    y = saved_output(y_alias, lambda: op(a))
                    return derivative(g, a if keep_x else None, y)
                record(node_name, backward, out, (a,), (a, y_alias) if keep_x else (y_alias,))
        return out
    op.__name__ = name
    op.__doc__ = f"Elementwise {name}."
    return op


def _record_complex_unary(node_name: str, derivative, holomorphic: bool, op, a: Tensor, out: Tensor) -> Tensor:
    """Record a unary op of a complex tensor (see _unary). It saves both x and y whatever the formula reads:
    one rule for every op, at the cost of one saved tensor more than some need."""
    y_alias = alias(out)

    def backward(g):
        y = saved_output(y_alias, lambda: op(a))
        return derivative(g, a.conj(), y.conj()) if holomorphic else derivative(g, a, y)
    record(node_name, backward, out, (a,), (a, y_alias))
    return out


abs = _unary("abs", np.abs, lambda g, x, y: g * x.sgn(), floating=False, cpu_op=_cpu.ABS, holomorphic=False,
             out_check=_found_dtype)
exp = _unary("exp", np.exp, lambda g, x, y: g * y, uses="y", cpu_op=_cpu.EXP)
exp2 = _unary("exp2", np.exp2, lambda g, x, y: g * y * math.log(2.0), uses="y")
expm1 = _unary("expm1", np.expm1, lambda g, x, y: g * (y + 1), uses="y")
log = _unary("log", np.log, lambda g, x, y: g / x, cpu_op=_cpu.LOG)
log2 = _unary("log2", np.log2, lambda g, x, y: g / (x * math.log(2.0)))
log10 = _unary("log10", np.log10, lambda g, x, y: g / (x * math.log(10.0)))
log1p = _unary("log1p", np.log1p, lambda g, x, y: g / (x + 1))
sqrt = _unary("sqrt", np.sqrt, lambda g, x, y: g / (y * 2), uses="y", cpu_op=_cpu.SQRT)
rsqrt = _unary("rsqrt", lambda x: 1 / np.sqrt(x), lambda g, x, y: g * y.pow(3) * -0.5, uses="y", cpu_op=_cpu.RSQRT)
reciprocal = _unary("reciprocal", lambda x: 1 / x, lambda g, x, y: -g * y * y, uses="y", cpu_op=_cpu.RECIPROCAL)
square = _unary("square", lambda x: x * x, lambda g, x, y: g * x * 2, floating=False, cpu_op=_cpu.SQUARE)
sin = _unary("sin", np.sin, lambda g, x, y: g * x.cos())
cos = _unary("cos", np.cos, lambda g, x, y: -g * x.sin())
tan = _unary("tan", np.tan, lambda g, x, y: g * (y * y + 1), uses="y")
asin = _unary("asin", np.arcsin, lambda g, x, y: g * (1 - x * x).rsqrt())
acos = _unary("acos", np.arccos, lambda g, x, y: -g * (1 - x * x).rsqrt())
atan = _unary("atan", np.arctan, lambda g, x, y: g / (x * x + 1))
sinh = _unary("sinh", np.sinh, lambda g, x, y: g * x.cosh())
cosh = _unary("cosh", np.cosh, lambda g, x, y: g * x.sinh())


def _fused_grad(op: int, g: Tensor, v: Tensor, composite):
    """A unary op's input gradient in one pass (_cpu.unary_backward) when it need not be differentiable itself
    (no create_graph) and the arrays suit the kernel; else the composite, made of tensor ops."""
    if not _grad_enabled():
        r = _cpu.unary_backward(op, g._data, v._data)
        if r is not None:
            return _result(r)
    return composite()


tanh = _unary("tanh", np.tanh, lambda g, x, y: _fused_grad(_cpu.TANH_BACKWARD, g, y, lambda: g * (1 - y * y)),
              uses="y", cpu_op=_cpu.TANH)


def _sigmoid_kernel(x):
    # exp of a non-positive argument only: no overflow warnings for large |x|.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


sigmoid = _unary("sigmoid", _sigmoid_kernel,
                 lambda g, x, y: _fused_grad(_cpu.SIGMOID_BACKWARD, g, y, lambda: g * y * (1 - y)), uses="y",
                 cpu_op=_cpu.SIGMOID)


def _relu_kernel(x):
    return np.maximum(x, 0)


def _relu_grad(g, y):
    """g where y > 0 or y is NaN (PyTorch's threshold_backward); one pass on the pool for large arrays, except
    under create_graph, which needs the graph."""
    if not _grad_enabled():
        gd = g._data
        if type(gd) is _ND and gd.size >= _cpu.MIN_SIZE and not gd.flags.c_contiguous:
            gd = _cpu.copy(gd)  # e.g. sum()'s gradient, a broadcast view
        r = _cpu.relu_backward(gd, y._data)
        if r is not None:
            return _result(r)
    return g.masked_fill(y <= 0, 0.0)


relu = _unary("relu", _relu_kernel, lambda g, x, y: _relu_grad(g, y), uses="y", floating=False, cpu_op=_cpu.RELU)


def sign(a: Tensor) -> Tensor:
    """Elementwise sign (zero gradient)."""
    x = a._data
    if x.dtype.kind == "c":
        raise RuntimeError("Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
                           "torch.sgn instead.")
    if x.dtype.kind == "b":  # NumPy has no sign for bool
        out = _result(x.copy())
    else:  # (0 < x) - (x < 0), as ATen: NaN has sign 0
        s = np.sign(x)
        if x.dtype.kind in "fV":
            s = np.where(s != s, 0, s).astype(x.dtype, copy=False)
        out = _result(s)
    if needs_grad(a):
        record("SignBackward0", lambda g: g * 0, out, (a,))
    return out


def _rounding(name, kernel):
    def op(a: Tensor) -> Tensor:
        out = _result(kernel(a._data))
        if needs_grad(a):
            record(name.capitalize() + "Backward0", lambda g: g * 0, out, (a,))
        return out
    op.__name__ = name
    op.__doc__ = f"Elementwise {name} (zero gradient almost everywhere)."
    return op


floor = _rounding("floor", np.floor)
ceil = _rounding("ceil", np.ceil)
trunc = _rounding("trunc", np.trunc)
frac = _unary("frac", lambda x: x - np.trunc(x), lambda g, x, y: g, out_check=_found_dtype)


def round(a: Tensor, decimals: int = 0) -> Tensor:
    """Round half to even, as PyTorch does."""
    return _rounding("round", lambda x: np.round(x, decimals))(a)


def clamp(a: Tensor, min=None, max=None, *, out=None) -> Tensor:
    """Limit values to [min, max]; min and max may be scalars or tensors."""
    if out is not None:
        return _write_out("clamp", clamp(a, min, max), out, _found_dtype)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    x = a._data
    lo = min._data if isinstance(min, Tensor) else min
    hi = max._data if isinstance(max, Tensor) else max
    from .._dtype import result_type
    dt = result_type(a, min, max).np  # PyTorch promotes: an int tensor clamped to 0.5 becomes float32
    if x.dtype != dt:
        x = x.astype(dt)
    if lo is not None and type(lo) is not float and type(lo) is not int and lo.dtype != dt:
        lo = lo.astype(dt)
    if hi is not None and type(hi) is not float and type(hi) is not int and hi.dtype != dt:
        hi = hi.astype(dt)
    y = _cpu.clamp(x, lo, hi) if type(x) is _ND and x.size >= _cpu.MIN_SIZE else None
    try:
        if y is None:
            y = x
            if lo is not None:
                y = np.maximum(y, lo)
            if hi is not None:
                y = np.minimum(y, hi)
    except ValueError:
        raise broadcast_error(a, min if lo is not None and np.ndim(lo) else max) from None
    out = _result(y)
    if needs_grad(a, min, max):
        ra = a._requires_grad
        rmin = isinstance(min, Tensor) and min._requires_grad
        rmax = isinstance(max, Tensor) and max._requires_grad

        def clamp_backward(g):
            inside = None
            if min is not None:
                inside = a >= min
            if max is not None:
                upper = a <= max
                inside = upper if inside is None else inside & upper
            grads = [_fit(g * inside, a._data.shape, a._data.dtype) if ra else None]
            # PyTorch's clamp_backward_min_max: when min > max the result is max, so max takes the gradient
            if isinstance(min, Tensor):
                below = a < min
                if max is not None:
                    below = below & (min < max)
                grads.append(_fit(g * below, min._data.shape, min._data.dtype) if rmin else None)
            if isinstance(max, Tensor):
                above = a > max
                if min is not None:
                    above = above | (max < min)
                grads.append(_fit(g * above, max._data.shape, max._data.dtype) if rmax else None)
            return tuple(grads) if len(grads) > 1 else grads[0]
        inputs = (a,) + tuple(t for t in (min, max) if isinstance(t, Tensor))
        record("ClampBackward1", clamp_backward, out, inputs, inputs)
    return out


clip = clamp


def clamp_min(a: Tensor, min) -> Tensor:
    """clamp(a, min=min)."""
    return clamp(a, min=min)


def clamp_max(a: Tensor, max) -> Tensor:
    """clamp(a, max=max)."""
    return clamp(a, max=max)


def where(condition, a=None, b=None, *, out=None) -> Tensor:
    """Pick a where condition holds, else b (a and b may be scalars); where(condition) alone is
    nonzero(condition, as_tuple=True)."""
    if a is None and b is None and out is None:
        return condition.nonzero(as_tuple=True)
    if out is not None:
        return _write_out("where", where(condition, a, b), out, _where_dtype)
    if not isinstance(condition, Tensor):
        raise TypeError("where(): argument 'condition' must be a Tensor")
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        from .._creation import tensor
        a = tensor(a, device=condition.device)
    ref = a if isinstance(a, Tensor) else b
    cond = condition._data
    if cond.dtype != np.bool_:
        if cond.dtype != np.uint8:  # PyTorch still takes uint8 (deprecated), nothing else
            from ._common import _short
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                               f"{_short(condition.dtype)}")
        cond = cond.astype(bool)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        x, y = operands(a, b)
    elif isinstance(a, Tensor):
        x, y = operands(a, b)
    else:
        y, x = operands(b, a)
    try:
        r = _cpu.where(cond, x, y) if cond.size >= _cpu.MIN_SIZE else None
        out = _result(np.where(cond, x, y) if r is None else r)
    except ValueError:
        sa, sb = _shape_of(a), _shape_of(b)
        try:
            np.broadcast_shapes(sa, sb)
        except ValueError as e:
            raise broadcast_error(a, b, e) from None
        raise broadcast_error(condition, x if len(np.shape(x)) >= len(np.shape(y)) else y) from None
    if needs_grad(a, b):
        ra = isinstance(a, Tensor) and a._requires_grad
        rb = isinstance(b, Tensor) and b._requires_grad
        mask = condition if cond is condition._data else _result(cond)  # a uint8 condition, as bool

        def where_backward(g):
            grads = []
            if isinstance(a, Tensor):
                grads.append(_fit(g.masked_fill(mask.logical_not(), 0.0), a._data.shape, a._data.dtype) if ra else None)
            if isinstance(b, Tensor):
                grads.append(_fit(g.masked_fill(mask, 0.0), b._data.shape, b._data.dtype) if rb else None)
            return tuple(grads) if len(grads) > 1 else grads[0]
        inputs = tuple(t for t in (a, b) if isinstance(t, Tensor))
        record("WhereBackward0", where_backward, out, inputs)
    del ref
    return out


def masked_fill(a: Tensor, mask: Tensor, value) -> Tensor:
    """a with `value` where mask is True (mask broadcasts to a)."""
    if not isinstance(mask, Tensor) or mask.dtype.name != "bool":
        from .linalg import _CPP_NAMES  # ATen's C++ spelling of the dtype ("long int")
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_CPP_NAMES.get(mask.dtype.name) if isinstance(mask, Tensor) else type(mask).__name__}")
    if isinstance(value, Tensor):
        if value._data.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value._data.ndim} dimension(s).")
        v = value._data.astype(a._data.dtype)
    else:
        v = np.asarray(value).astype(a._data.dtype) if type(a._data) is np.ndarray else value
    m, ad = mask._data, a._data
    try:
        r = _cpu.where(m, v, ad) if type(ad) is _ND and ad.size >= _cpu.MIN_SIZE else None
        if r is not None:
            out = _result(r)
        elif type(ad) is _ND and type(m) is _ND and np.broadcast_shapes(m.shape, ad.shape) == ad.shape:
            data = ad.copy()  # copy, then write the masked places: twice as fast as np.where's select
            np.copyto(data, v, where=m)
            out = _result(data)
        else:
            out = _result(np.where(m, v, ad))  # a mask with more dims broadcasts the result, as in PyTorch
    except ValueError:
        raise broadcast_error(mask, a) from None
    if needs_grad(a, value):
        ra, sa, da = a._requires_grad, a._data.shape, a._data.dtype
        if isinstance(value, Tensor) and value._requires_grad:
            def masked_fill_backward(g):
                return (_fit(g.masked_fill(mask, 0.0), sa, da) if ra else None, (g * mask).sum())
            record("MaskedFillBackward1", masked_fill_backward, out, (a, value))
        else:
            record("MaskedFillBackward0", lambda g: _fit(g.masked_fill(mask, 0.0), sa, da), out, (a,))
    return out


def _fused3(op: int, a: Tensor, b, c, w, inplace: bool = False):
    """lerp/addcmul/addcdiv in one pass on the pool (_cpu.ternary) when nothing is recorded and the operands are
    large same-shape CPU arrays of one float dtype with a scalar weight; the result (a itself when `inplace`), or
    None for the composite path."""
    if not (isinstance(b, Tensor) and isinstance(c, Tensor)) or type(w) not in (float, int):
        return None
    if _grad_enabled() and (a._requires_grad or b._requires_grad or c._requires_grad):
        return None
    if inplace and not (type(a._data) is np.ndarray and a._data.flags.writeable):
        return None
    r = _cpu.ternary(op, a._data, b._data, c._data, w, out=a._data if inplace else None)
    if r is None:
        return None
    if inplace:
        a._bump_version()
        return a
    return _result(r)


def lerp(a: Tensor, end, weight) -> Tensor:
    """a + weight * (end - a), as ATen computes it: from `end` back when |weight| >= 0.5, so weight 1 gives end."""
    r = _fused3(_cpu.LERP, a, end, end, weight)
    if r is not None:
        return r
    if type(weight) in (float, int) and builtins.abs(weight) >= 0.5:
        return end - (end - a) * (1 - weight)
    return a + (end - a) * weight


def addcmul(a: Tensor, t1: Tensor, t2: Tensor, *, value=1) -> Tensor:
    """a + value * t1 * t2."""
    if _autocast.active:
        return _autocast.dispatch("addcmul", addcmul, a, t1, t2, value=value)
    r = _fused3(_cpu.ADDCMUL, a, t1, t2, value)
    if r is not None:
        return r
    return a + t1 * t2 * value if value != 1 else a + t1 * t2


def addcdiv(a: Tensor, t1: Tensor, t2: Tensor, *, value=1) -> Tensor:
    """a + value * t1 / t2."""
    if _autocast.active:
        return _autocast.dispatch("addcdiv", addcdiv, a, t1, t2, value=value)
    r = _fused3(_cpu.ADDCDIV, a, t1, t2, value)
    if r is not None:
        return r
    return a + t1 / t2 * value if value != 1 else a + t1 / t2


def nan_to_num(a: Tensor, nan: float = 0.0, posinf=None, neginf=None) -> Tensor:
    """Replace nan, +inf and -inf with finite numbers (gradient 1 where a is finite)."""
    out = _result(np.nan_to_num(a._data, nan=nan, posinf=posinf, neginf=neginf))
    if needs_grad(a):
        record("NanToNumBackward0", lambda g: g * a.isfinite(), out, (a,), (a,))
    return out


# ------------------------------------------------------------------ comparisons and logic (no gradient)

def _compare(kernel):
    def op(a, b) -> Tensor:
        if not isinstance(a, Tensor):
            a = _lhs(a, b)
        x, y = operands(a, b)
        try:
            return _result(kernel(x, y))
        except ValueError as e:
            raise broadcast_error(a, b, e) from None
    return op


eq = _compare(np.equal)
ne = _compare(np.not_equal)
lt = _compare(np.less)
le = _compare(np.less_equal)
gt = _compare(np.greater)
ge = _compare(np.greater_equal)


def _logical(kernel):
    def op(a, b=None) -> Tensor:
        if b is None:
            return _result(kernel(a._data.astype(bool, copy=False)))
        x = a._data.astype(bool, copy=False)
        y = b._data.astype(bool, copy=False) if isinstance(b, Tensor) else bool(b)
        try:
            return _result(kernel(x, y))
        except ValueError as e:
            raise broadcast_error(a, b, e) from None
    return op


logical_and = _logical(np.logical_and)
logical_or = _logical(np.logical_or)
logical_xor = _logical(np.logical_xor)
logical_not = _logical(np.logical_not)


def _bitwise(kernel, name):
    def op(a, b) -> Tensor:
        a = _lhs(a, b)
        x, y = operands(a, b)
        if x.dtype.kind not in "biu":  # bool & bool stays bool; bool & int promotes, as in PyTorch
            from ._common import _short
            from .._dtype import from_numpy_dtype
            raise NotImplementedError(f'"{name}_cpu" not implemented for \'{_short(from_numpy_dtype(x.dtype))}\'')
        try:
            return _result(kernel(x, y))
        except ValueError as e:
            raise broadcast_error(a, b, e) from None
    return op


def _short_name(a: Tensor) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}.get(a.dtype.name,
                                                                                                  a.dtype.name)


bitwise_and = _bitwise(np.bitwise_and, "bitwise_and")
bitwise_or = _bitwise(np.bitwise_or, "bitwise_or")
bitwise_xor = _bitwise(np.bitwise_xor, "bitwise_xor")


def bitwise_not(a: Tensor) -> Tensor:
    """Elementwise ~ of an integer or bool tensor."""
    if a.dtype.is_floating_point:
        raise NotImplementedError(f"\"bitwise_not_cpu\" not implemented for '{_short_name(a)}'")
    return _result(np.invert(a._data))


def _invert(a: Tensor) -> Tensor:
    if a.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return _result(np.invert(a._data))


def atan2(a, b) -> Tensor:
    """Elementwise angle of the point (b, a), in (-pi, pi]."""
    if _autocast.active:
        return _autocast.dispatch("atan2", atan2, a, b)
    a = _lhs(a, b)
    x, y = operands(a, b)
    if x.dtype.kind in "biu":
        from .._dtype import get_default_dtype
        x = x.astype(get_default_dtype().np)
        y = y if type(y) is float or type(y) is int else y.astype(x.dtype)
    try:
        out = _result(np.arctan2(x, y))
    except ValueError as e:
        raise broadcast_error(a, b, e) from None
    if needs_grad(a, b):
        sa, da = a._data.shape, a._data.dtype
        rb = isinstance(b, Tensor) and b._requires_grad
        ra = a._requires_grad

        def atan2_backward(g):
            r2 = a * a + b * b
            scale = (g / r2).masked_fill(r2 == 0, 0.0)  # PyTorch's gradient at the origin: 0
            ga = _fit(scale * b, sa, da) if ra else None
            if not isinstance(b, Tensor):
                return ga
            return ga, (_fit(-scale * a, b._data.shape, b._data.dtype) if rb else None)
        record("Atan2Backward0", atan2_backward, out, (a, b) if isinstance(b, Tensor) else (a,))
    return out


arctan2 = atan2


def isnan(a: Tensor) -> Tensor:
    """Where a is nan."""
    return _result(np.isnan(a._data))


def isinf(a: Tensor) -> Tensor:
    """Where a is +inf or -inf."""
    return _result(np.isinf(a._data))


def isfinite(a: Tensor) -> Tensor:
    """Where a is neither nan nor infinite."""
    return _result(np.isfinite(a._data))


def _is_equal(a: Tensor, b) -> Tensor:
    # `==` between a tensor and what is neither a tensor nor a number (None, a string, a list) falls back to
    # identity, False, as in PyTorch (whose __eq__ returns NotImplemented for them).
    if b is None or isinstance(b, (str, list, tuple)):
        return False
    return eq(a, b)


def _is_not_equal(a: Tensor, b) -> Tensor:
    if b is None or isinstance(b, (str, list, tuple)):
        return True
    return ne(a, b)


# PyTorch's alternative names, as functions (tinytorch.divide, ...) as well as methods.
true_divide = divide = div
multiply = mul
subtract = sub
negative = neg
absolute = abs
arcsin, arccos, arctan = asin, acos, atan
greater, less, greater_equal, less_equal, not_equal = gt, lt, ge, le, ne


# ------------------------------------------------------------------ methods and operators

def _swap(fn):
    return lambda a, b: fn(b, a) if isinstance(b, Tensor) else fn(_lhs(b, a), a)


attach(
    add=add, sub=sub, subtract=sub, mul=mul, multiply=mul, div=div, divide=div, true_divide=div, pow=pow,
    neg=neg, negative=neg, maximum=maximum, minimum=minimum, remainder=remainder, fmod=fmod,
    floor_divide=floor_divide, abs=abs, absolute=abs, exp=exp, exp2=exp2, expm1=expm1, log=log, log2=log2,
    log10=log10, log1p=log1p, sqrt=sqrt, rsqrt=rsqrt, reciprocal=reciprocal, square=square, sin=sin, cos=cos,
    tan=tan, asin=asin, acos=acos, atan=atan, arcsin=asin, arccos=acos, arctan=atan, sinh=sinh, cosh=cosh,
    tanh=tanh, sigmoid=sigmoid, relu=relu, sign=sign, floor=floor, ceil=ceil, trunc=trunc, frac=frac,
    round=round, clamp=clamp, clip=clamp, clamp_min=clamp_min, clamp_max=clamp_max, masked_fill=masked_fill,
    lerp=lerp, addcmul=addcmul, addcdiv=addcdiv, nan_to_num=nan_to_num,
    eq=eq, ne=ne, lt=lt, le=le, gt=gt, ge=ge, greater=gt, less=lt, greater_equal=ge, less_equal=le,
    not_equal=ne, logical_and=logical_and, logical_or=logical_or, logical_xor=logical_xor,
    logical_not=logical_not, bitwise_and=bitwise_and, bitwise_or=bitwise_or, bitwise_xor=bitwise_xor,
    bitwise_not=bitwise_not, atan2=atan2, arctan2=atan2, isnan=isnan, isinf=isinf, isfinite=isfinite,
    where=lambda cond_self, condition, other: where(condition, cond_self, other),
    __add__=add, __radd__=add, __sub__=sub, __rsub__=lambda a, b: rsub(a, b), __mul__=mul, __rmul__=mul,
    __truediv__=div, __rtruediv__=lambda a, b: rdiv(a, b), __floordiv__=floor_divide,
    __rfloordiv__=_swap(floor_divide), __mod__=remainder, __rmod__=_swap(remainder), __pow__=pow,
    __rpow__=rpow, __neg__=neg, __pos__=lambda a: a, __abs__=abs,
    __eq__=_is_equal, __ne__=_is_not_equal, __lt__=lt, __le__=le, __gt__=gt, __ge__=ge,
    __and__=bitwise_and, __or__=bitwise_or, __xor__=bitwise_xor, __rand__=bitwise_and, __ror__=bitwise_or,
    __rxor__=bitwise_xor, __invert__=_invert,
)


# In-place variants: a NumPy in-place kernel when nothing is recorded, else out of place + rebase.
def _check_no_internal_overlap(a: Tensor) -> None:
    """PyTorch refuses in-place writes into a tensor whose elements share memory (an expand()ed view);
    NumPy marks those arrays read-only."""
    x = a._data
    if type(x) is np.ndarray and not x.flags.writeable and \
            any(st == 0 and n > 1 for st, n in zip(x.strides, x.shape)):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           "single memory location. Please clone() the tensor before performing the operation.")


def _inplace(a: Tensor, b, kernel, out_of_place) -> Tensor:
    try:
        return inplace_binary(a, b, kernel, out_of_place)
    except ValueError:  # shapes: PyTorch's messages instead of NumPy's
        _check_no_internal_overlap(a)
        sa, sb = a._data.shape, _shape_of(b)
        try:
            target = np.broadcast_shapes(sa, sb)
        except ValueError as e:
            raise broadcast_error(a, b, e) from None
        raise RuntimeError(f"output with shape {list(sa)} doesn't match the broadcast shape {list(target)}") from None


def _on_pool(op: int, numpy_op):
    """An in-place kernel x op= y that runs large float arrays on the intra-op pool (_cpu.binary into x)."""
    def kernel(x, y):
        if type(x) is _ND and x.size >= _cpu.MIN_SIZE and (type(y) is not _ND or y.size <= x.size) and \
                _cpu.binary(op, x, y, out=x) is not None:
            return x
        return numpy_op(x, y)
    return kernel


_iadd, _isub, _imul, _idiv = (_on_pool(_cpu.ADD, operator.iadd), _on_pool(_cpu.SUB, operator.isub),
                              _on_pool(_cpu.MUL, operator.imul), _on_pool(_cpu.DIV, operator.itruediv))


def add_(a: Tensor, b, *, alpha=1) -> Tensor:
    """a += alpha * b, in place."""
    if alpha == 1:
        return _inplace(a, b, _iadd, add)
    return _inplace(a, b, lambda x, y: x.__iadd__(y * alpha), lambda s, o: add(s, o, alpha=alpha))


def sub_(a: Tensor, b, *, alpha=1) -> Tensor:
    """a -= alpha * b, in place."""
    if alpha == 1:
        return _inplace(a, b, _isub, sub)
    return _inplace(a, b, lambda x, y: x.__isub__(y * alpha), lambda s, o: sub(s, o, alpha=alpha))


def mul_(a: Tensor, b) -> Tensor:
    """a *= b, in place."""
    return _inplace(a, b, _imul, mul)


def div_(a: Tensor, b, *, rounding_mode=None) -> Tensor:
    """a /= b, in place (true division needs a floating-point a, as in PyTorch)."""
    if rounding_mode is not None:
        return inplace_unary(a, lambda s: div(s, b, rounding_mode=rounding_mode))
    if a._data.dtype.kind in "biu":
        from ._common import _short
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_short(a.dtype)}")
    return _inplace(a, b, _idiv, div)


def pow_(a: Tensor, b) -> Tensor:
    """a **= b, in place."""
    return _inplace(a, b, operator.ipow, pow)


def _checked(kernel):
    """An in-place integer division kernel that refuses a zero divisor, as the out-of-place op does."""
    def run(x, y):
        _int_divisor(x, y)
        return kernel(x, y)
    return run


_imod, _ifloordiv = _checked(operator.imod), _checked(operator.ifloordiv)


def remainder_(a: Tensor, b) -> Tensor:
    """a %= b, in place."""
    return _inplace(a, b, _imod, remainder)


def floor_divide_(a: Tensor, b) -> Tensor:
    """a //= b, in place."""
    return _inplace(a, b, _ifloordiv, floor_divide)


def _bitwise_inplace(kernel, out_of_place):
    def op(a: Tensor, b) -> Tensor:
        if a._data.dtype.kind not in "biu" or (isinstance(b, Tensor) and b._data.dtype.kind not in "biu") or \
                type(b) is float:
            out_of_place(a, b)  # raises PyTorch's NotImplementedError for floating operands
        return _inplace(a, b, kernel, out_of_place)
    return op


bitwise_and_ = _bitwise_inplace(operator.iand, bitwise_and)
bitwise_or_ = _bitwise_inplace(operator.ior, bitwise_or)
bitwise_xor_ = _bitwise_inplace(operator.ixor, bitwise_xor)


def fill_(a: Tensor, value) -> Tensor:
    """Set every element to `value` (a number or a 0-d tensor), in place."""
    if isinstance(value, Tensor) and value._data.ndim != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value._data.ndim} dimensions.")
    if needs_grad(a, value):
        check_inplace(a)
        return commit_inplace(a, _filled(a, value))
    x = a._data
    _check_no_internal_overlap(a)
    if isinstance(value, Tensor):
        v = value._data
        x[...] = v if type(v) is type(x) else v.item()  # a CPU 0-d value may fill a CUDA tensor
    elif not (x.size >= _cpu.MIN_SIZE and _cpu.fill(x, value)):
        x[...] = value
    a._bump_version()
    return a


def _filled(a: Tensor, value) -> Tensor:
    """Out-of-place fill for the recorded path: zero gradient to a's history, the sum to a value tensor."""
    x = a._data
    xp = np if type(x) is np.ndarray else x.__array_namespace__()
    v = value.item() if isinstance(value, Tensor) else value
    out = _result(xp.full(x.shape, v, dtype=x.dtype))
    if isinstance(value, Tensor) and value._requires_grad:
        ra, vdt = a._requires_grad, value.dtype
        record("FillBackward3", lambda g: (g * 0 if ra else None, g.sum().to(vdt)), out, (a, value))
    else:
        record("FillBackward2", lambda g: g * 0, out, (a,))
    return out


def zero_(a: Tensor) -> Tensor:
    """Set every element to zero, in place."""
    return fill_(a, 0)


def copy_(a: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """Copy src into a, in place: src broadcasts to a's shape and is cast to a's dtype and device."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not {type(src).__name__}")
    x, y = a._data, src._data
    if y.shape != x.shape:
        try:
            target = np.broadcast_shapes(x.shape, y.shape)
        except ValueError:
            raise broadcast_error(a, src) from None
        if target != x.shape:
            raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape {list(target)}")
    if needs_grad(a, src):
        check_inplace(a)
        return commit_inplace(a, _copied(a, src))
    _check_no_internal_overlap(a)
    if type(y) is not type(x):
        from .._device import move
        y = move(y, a.device)
    elif type(x) is _ND and np.may_share_memory(x, y) and not (
            x.__array_interface__["data"][0] == y.__array_interface__["data"][0] and x.strides == y.strides and
            x.shape == y.shape) and np.shares_memory(x, y):
        # t[1:].copy_(t[:-1]): NumPy would buffer it; PyTorch refuses a partial overlap (its result depends on
        # the copy order there)
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor refer "
                           "to a single memory location. Please clone() the tensor before performing the operation.")
    x[...] = y  # NumPy/CuPy cast and broadcast on assignment
    a._bump_version()
    return a


def _copied(a: Tensor, src: Tensor) -> Tensor:
    """Out-of-place copy_ for the recorded path: a's old history gets zeros, src gets g summed to its shape."""
    prev = _grad_enabled()
    from .. import _C
    _C._set_grad_enabled(False)
    try:
        moved = src.to(a.device, a.dtype)
    finally:
        _C._set_grad_enabled(prev)
    xp = np if type(a._data) is np.ndarray else a._data.__array_namespace__()
    out = _result(xp.array(xp.broadcast_to(moved._data, a._data.shape), copy=True))
    ra, rs = a._requires_grad, src._requires_grad
    s_shape, s_dt, s_dev = src._data.shape, src.dtype, src.device

    def copy_backward(g):
        gs = sum_to(g, s_shape).to(s_dev, s_dt) if rs else None
        return (g * 0 if ra else None), gs
    record("CopyBackwards", copy_backward, out, (a, src))
    return out


def _inplace_call(a: Tensor, out_of_place, others) -> Tensor:
    """inplace_unary, except that a tensor argument requiring grad (clamp_(min=t), addcmul_(t1, t2), ...)
    makes the op recorded even when `a` itself does not require grad, as in PyTorch."""
    if not a._requires_grad and _grad_enabled():
        for o in others:
            if isinstance(o, Tensor) and o._requires_grad:
                check_inplace(a)
                return commit_inplace(a, out_of_place(a.clone()))
    return inplace_unary(a, out_of_place)


def _fused3_(op: int, a: Tensor, b, c, w, out_of_place) -> Tensor:
    """lerp_, addcmul_, addcdiv_: one pass into a's memory when _fused3 takes them, else out of place and back."""
    r = _fused3(op, a, b, c, w, inplace=True)
    return r if r is not None else _inplace_call(a, out_of_place, (b, c, w))


def _inplace_of(fn):
    def op(a: Tensor, *args, **kwargs) -> Tensor:
        return _inplace_call(a, lambda s: fn(s, *args, **kwargs), args + tuple(kwargs.values()))
    op.__name__ = fn.__name__ + "_"
    op.__doc__ = f"In-place {fn.__name__}."
    return op


attach(
    fill_=fill_, zero_=zero_, copy_=copy_,
    add_=add_, sub_=sub_, subtract_=sub_, mul_=mul_, multiply_=mul_, div_=div_, divide_=div_, pow_=pow_,
    __iadd__=add_, __isub__=sub_, __imul__=mul_, __itruediv__=div_, __ipow__=pow_,
    remainder_=remainder_, floor_divide_=floor_divide_, __imod__=remainder_, __ifloordiv__=floor_divide_,
    bitwise_and_=bitwise_and_, bitwise_or_=bitwise_or_, bitwise_xor_=bitwise_xor_,
    __iand__=bitwise_and_, __ior__=bitwise_or_, __ixor__=bitwise_xor_,
    neg_=_inplace_of(neg), abs_=_inplace_of(abs), exp_=_inplace_of(exp), log_=_inplace_of(log),
    sqrt_=_inplace_of(sqrt), rsqrt_=_inplace_of(rsqrt), sin_=_inplace_of(sin), cos_=_inplace_of(cos),
    tanh_=_inplace_of(tanh), sigmoid_=_inplace_of(sigmoid), relu_=_inplace_of(relu), floor_=_inplace_of(floor),
    ceil_=_inplace_of(ceil), round_=_inplace_of(round), trunc_=_inplace_of(trunc), sign_=_inplace_of(sign),
    reciprocal_=_inplace_of(reciprocal), square_=_inplace_of(square), clamp_=_inplace_of(clamp),
    clip_=_inplace_of(clamp), clamp_min_=_inplace_of(clamp_min), clamp_max_=_inplace_of(clamp_max),
    masked_fill_=lambda a, mask, value: _inplace_call(a, lambda s: masked_fill(s, mask, value), (value,)),
    lerp_=lambda a, end, weight: _fused3_(_cpu.LERP, a, end, end, weight, lambda s: lerp(s, end, weight)),
    addcmul_=lambda a, t1, t2, value=1: _fused3_(_cpu.ADDCMUL, a, t1, t2, value,
                                                 lambda s: addcmul(s, t1, t2, value=value)),
    addcdiv_=lambda a, t1, t2, value=1: _fused3_(_cpu.ADDCDIV, a, t1, t2, value,
                                                 lambda s: addcdiv(s, t1, t2, value=value)),
    nan_to_num_=lambda a, nan=0.0, posinf=None, neginf=None: inplace_unary(
        a, lambda s: nan_to_num(s, nan, posinf, neginf)),
)

__all__ = [n for n in dir() if not n.startswith("_") and callable(globals()[n]) and n not in (
    "attach", "alias", "check_inplace", "commit_inplace", "broadcast_error", "broadcast_error_shapes", "copy_",
    "float_data", "inplace_binary", "inplace_unary", "is_scalar", "needs_grad", "operands",
    "record", "saved_output", "sum_to", "Tensor", "math", "np", "operator")]
