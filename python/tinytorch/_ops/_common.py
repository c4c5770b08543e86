"""What every op module shares: recording a node, broadcasting gradients back, operand promotion,
and the in-place protocol (version bump, history rebase)."""
from __future__ import annotations

import numpy as np

from .. import _C
from .._C import _grad_enabled, _record  # noqa: F401  (re-exported for the op modules)
from .._meta import MetaArray
from .._dtype import from_numpy_dtype, get_default_dtype, promote_types, result_type
from .._tensor import Tensor, _view_of, _wrap  # noqa: F401

_new = object.__new__


def attach(**methods) -> None:
    """Make op functions Tensor methods (what `x.exp()` and `a * b` call)."""
    for name, fn in methods.items():
        setattr(Tensor, name, fn)


def as_tensor_like(x, like: Tensor) -> Tensor:
    """Turn a NumPy array/scalar or nested list into a tensor on `like`'s device."""
    if isinstance(x, Tensor):
        return x
    from .._creation import tensor as make_tensor
    return make_tensor(x, device=like.device)


def is_scalar(x) -> bool:
    t = type(x)
    return t is float or t is int or t is bool


def operands(a: Tensor, b):
    """The arrays (or Python scalars) to hand NumPy/CuPy so the result has PyTorch's dtype."""
    x = a._data
    tb = type(b)
    if tb is Tensor or isinstance(b, Tensor):
        y = b._data
        if x.dtype == y.dtype:
            if type(x) is not type(y):
                _device_mismatch(a, b)
            return x, y
        if type(x) is not type(y):
            if y.ndim == 0 and type(y) is np.ndarray:  # a CPU scalar tensor combines with a CUDA tensor
                return operands(a, y.item())
            if x.ndim == 0 and type(x) is np.ndarray:
                x2, y2 = operands(b, x.item())
                return y2, x2
            _device_mismatch(a, b)
        dt = result_type(a, b).np
        return x.astype(dt, copy=False), y.astype(dt, copy=False)
    if tb is float:
        if x.dtype.kind in _FLOAT_KINDS:
            return x, b
        return x.astype(get_default_dtype().np), b
    if tb is int or tb is bool:
        return x, b
    if tb is complex:  # a complex scalar makes a real tensor complex (float32 * 1j -> complex64)
        return (x if x.dtype.kind == "c" else x.astype(result_type(a, b).np)), b
    if isinstance(b, (np.generic, np.ndarray, list, tuple)):
        return operands(a, as_tensor_like(b, a))
    if isinstance(b, (float, int, complex)):  # float/int subclasses (numpy.float64 is a float)
        return operands(a, float(b) if isinstance(b, float) else int(b) if isinstance(b, int) else complex(b))
    raise TypeError(f"unsupported operand type for a Tensor op: '{type(b).__name__}'")


# ml_dtypes' bfloat16 is NumPy's only kind-'V' dtype a tensor can hold: testing the kind spares
# importing ml_dtypes (slow) just to recognise it. Complex ("c") counts too: it keeps its type where floats do.
_FLOAT_KINDS = ("f", "V", "c")


def _device_mismatch(a: Tensor, b: Tensor):
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                       f"{a.device} and {b.device}!")


def float_data(a: Tensor):
    """a's array, as floating point (ints and bools become the default dtype, as in PyTorch)."""
    x = a._data
    if x.dtype.kind in _FLOAT_KINDS:
        return x
    return x.astype(get_default_dtype().np)


def sum_to(g: Tensor, shape: tuple) -> Tensor:
    """Reduce a broadcast gradient back to an input's shape."""
    if g._data.shape == shape:
        return g
    if _grad_enabled():
        return g.sum_to_size(shape)
    return _wrap(sum_to_array(g._data, shape))


def sum_to_array(x, shape: tuple):
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    if axes:
        from . import _cpu
        r = _cpu.sum(x, axes, True) if type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE else None
        x = x.sum(axis=axes, keepdims=True) if r is None else r
    return x.reshape(shape)


def needs_grad(*tensors) -> bool:
    """Whether an op on these inputs must record a node."""
    for t in tensors:
        if isinstance(t, Tensor) and t._requires_grad:
            return _grad_enabled()
    return False


def device_index(t: Tensor):
    """The node's device for the engine: None (CPU) or the CUDA index."""
    d = t._data
    return None if type(d) is np.ndarray or type(d) is MetaArray else int(d.device.id)


_profile_op = None  # set by tinytorch.profiler while a profile is active: called with the node's name


def record(name: str, backward, outputs, inputs: tuple, saved=None):
    """Record a node, routing CUDA nodes to their device's engine thread."""
    if _profile_op is not None:
        _profile_op(name)
    first = outputs[0] if type(outputs) is tuple else outputs
    if type(first._data) is np.ndarray or type(first._data) is MetaArray:
        return _record(name, backward, outputs, inputs, saved)
    return _record(name, backward, outputs, inputs, saved, device_index(first))


def saved_output(alias: Tensor, recompute):
    """An op's saved output inside its backward. Normally the saved alias; when building a graph
    (create_graph), recompute it from the inputs so that double backward sees how it depends on them."""
    if _grad_enabled():
        return recompute()
    return alias


def alias(t: Tensor) -> Tensor:
    """A tensor sharing t's memory and version counter but not its graph: saving an op's own output
    this way avoids a cycle output -> node -> output."""
    a = _new(Tensor)
    a._data = t._data
    a._vc = t._shared_vc()
    return a


# ------------------------------------------------------------------ in-place ops

def check_inplace(t: Tensor) -> None:
    """Errors for in-place ops that autograd can't follow (PyTorch's messages where it has them)."""
    if t._grad_fn is None and t._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = t._base
    if base is not None:
        if base._grad_fn is None and base._requires_grad:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        raise RuntimeError(
            "tinytorch does not record in-place operations on views while grad is on (PyTorch's CopySlices): "
            "apply the op out of place, or index-assign into the base tensor (x[idx] = value).")


def commit_inplace(t: Tensor, result: Tensor) -> Tensor:
    """Write an out-of-place result into t's memory and make t take over the result's history."""
    try:
        _copy_into(t._data, result._data)
    except TypeError as e:
        raise RuntimeError(f"result type {_short(result.dtype)} can't be cast to the desired output type "
                           f"{_short(t.dtype)}") from e
    t._bump_version()
    if result._grad_fn is not None:
        t._grad_fn = result._grad_fn
        t._output_nr = result._output_nr
        t._requires_grad = True
    return t


def _copy_into(dst, src) -> None:
    if src.dtype != dst.dtype and np.can_cast(src.dtype, dst.dtype, "same_kind") is False and \
            (dst.dtype.kind not in _FLOAT_KINDS or src.dtype.kind == "c" and dst.dtype.kind != "c"):
        raise TypeError
    dst[...] = src


def _short(d) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
            "complex64": "ComplexFloat", "complex128": "ComplexDouble"}[d.name]


def inplace_binary(t: Tensor, other, numpy_inplace, out_of_place) -> Tensor:
    """In-place binary op: a NumPy in-place kernel when no graph is recorded, else out of place,
    written back, with t's history rebased onto the new node."""
    if (t._requires_grad or (isinstance(other, Tensor) and other._requires_grad)) and _grad_enabled():
        check_inplace(t)
        return commit_inplace(t, out_of_place(t.clone(), other))
    x = t._data
    y = other._data if isinstance(other, Tensor) else other
    if isinstance(other, Tensor) and type(y) is not type(x):
        if y.ndim == 0:
            y = y.item()
        else:
            _device_mismatch(t, other)
    try:
        numpy_inplace(x, y)
    except TypeError as e:  # NumPy's UFuncTypeError for float -> int and the like
        other_dt = other.dtype if isinstance(other, Tensor) else result_type(t, other)
        raise RuntimeError(f"result type {_short(promote_types(t.dtype, other_dt))} can't be cast to the desired "
                           f"output type {_short(t.dtype)}") from e
    except ValueError as e:
        if "broadcast" in str(e):
            raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape "
                               f"{list(np.broadcast_shapes(x.shape, np.shape(y)))}") from e
        raise
    t._bump_version()
    return t


def inplace_unary(t: Tensor, out_of_place, *args) -> Tensor:
    """In-place version of a unary op (relu_, clamp_, ...): compute, write back, rebase."""
    if t._requires_grad and _grad_enabled():
        check_inplace(t)
        return commit_inplace(t, out_of_place(t.clone(), *args))
    prev = _grad_enabled()
    _C._set_grad_enabled(False)
    try:
        r = out_of_place(t, *args)
    finally:
        _C._set_grad_enabled(prev)
    return commit_inplace(t, r)


def dtype_of_array(x):
    return from_numpy_dtype(x.dtype)

