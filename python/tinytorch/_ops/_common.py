"""What every op module shares: recording a node, broadcasting gradients back, operand promotion,
and the in-place protocol (version bump, history rebase)."""
from __future__ import annotations

import os
import sys

import numpy as np

from .. import _C
from .._C import _grad_enabled, _record  # noqa: F401  (re-exported for the op modules)
from .._meta import MetaArray
from .._dtype import from_numpy_dtype, get_default_dtype, promote_types, result_type
from .._tensor import Tensor, _track_view, _view_of, _wrap  # noqa: F401

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
        if tb is int and x.dtype.kind in "iu" and x.dtype.itemsize < 8:
            lo, span = _INT_RANGE[x.dtype.char]
            if not lo <= b < lo + span:  # PyTorch wraps the scalar into the tensor's dtype; NumPy 2 refuses it
                b = (b - lo) % span + lo
        return x, b
    if tb is complex:  # a complex scalar makes a real tensor complex (float32 * 1j -> complex64)
        return (x if x.dtype.kind == "c" else x.astype(result_type(a, b).np)), b
    if isinstance(b, np.generic) and b.dtype.kind in "biufc":
        # A NumPy scalar (np.sqrt(d), np.log(10000.0)) combines as the Python number it holds, as in PyTorch:
        # np.float64 does not make a float32 tensor float64
        return operands(a, b.item())
    if isinstance(b, (np.generic, np.ndarray)):
        return operands(a, as_tensor_like(b, a))
    if isinstance(b, (list, tuple)):  # PyTorch takes a tensor or a number here, never a sequence
        raise TypeError(f"argument 'other' must be Tensor or Number, not {type(b).__name__}")
    if isinstance(b, (float, int, complex)):  # float/int subclasses (numpy.float64 is a float)
        return operands(a, float(b) if isinstance(b, float) else int(b) if isinstance(b, int) else complex(b))
    raise TypeError(f"unsupported operand type for a Tensor op: '{type(b).__name__}'")


# (lowest value, number of values) of the integer dtypes narrower than 64 bits, by NumPy type code
_INT_RANGE = {np.dtype(t).char: (int(np.iinfo(t).min), 1 << (8 * np.dtype(t).itemsize))
              for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)}

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
#
# An in-place op that autograd records runs out of place; commit_inplace writes the result back. On a tensor
# that owns its memory, the tensor takes over the result's history. On a view (PyTorch's CopySlices), the write
# lands in the base's memory, so the *base* takes a new history: a "CopySlices" node whose inputs are the base's
# old history and the result, and whose backward hands the old base the gradient with the view's region zeroed
# and the result the gradient's view region. The view then becomes an as_strided view of the new base. The
# region is found from the view's place in the base's memory (pointers, strides), so every view kind is covered.
#
# Differences from PyTorch: CopySlices' second input is the op's own node (PyTorch splices in that node's inputs,
# so next_functions differ; gradients do not). Other views of the base get a new history eagerly, at the in-place
# op, where PyTorch regenerates it when read; only views taken while the base had a history are known, so a view
# taken before its base joined the graph (v = buf[0]; buf[:, 0].copy_(x)) keeps requires_grad=False, where
# PyTorch's turns True. PyTorch refuses in-place ops on the outputs of split/chunk/unbind and on views made under
# no_grad; tinytorch records them (it cannot tell those views from others).

def check_inplace(t: Tensor) -> None:
    """Errors for in-place ops that autograd can't follow (PyTorch's messages); on a view, its history is renewed
    from the base's current one, so that the op's out-of-place form reads the view's latest value."""
    if t._grad_fn is None and t._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = t._base
    if base is not None:
        if base._grad_fn is None and base._requires_grad:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        geo = _geometry(t, base, strict=True)
        if geo is None:
            return
        if geo.overlaps_itself:
            raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                               "single memory location. Please clone() the tensor before performing the operation.")
        if base._requires_grad:
            _set_view_history(t, base, geo)
        else:
            t._grad_fn, t._output_nr, t._requires_grad = None, 0, False


def commit_inplace(t: Tensor, result: Tensor) -> Tensor:
    """Write an out-of-place result into t's memory and rebase the history: t takes over the result's, or,
    when t is a view, its base takes a CopySlices node (see above)."""
    try:
        _copy_into(t._data, result._data)
    except TypeError as e:
        raise RuntimeError(f"result type {_short(result.dtype)} can't be cast to the desired output type "
                           f"{_short(t.dtype)}") from e
    t._bump_version()
    if result._grad_fn is not None:
        base = t._base
        if base is not None:
            geo = _geometry(t, base)
            if geo is not None:
                _copy_slices(t, base, geo, result)
                return t
        old_fn, old_nr = t._grad_fn, t._output_nr
        t._grad_fn = result._grad_fn
        t._output_nr = result._output_nr
        t._requires_grad = True
        if t._retains_grad:
            _move_retain_hook(t, old_fn, old_nr)
        if t._views:
            _renew_views(t, None, None)
    return t


def _move_retain_hook(t: Tensor, old_fn, old_nr: int) -> None:
    """retain_grad() follows t to its new history: t.grad is the gradient of t's latest value, as in PyTorch."""
    hook = old_fn._hook_dict("retains_grad", 0).pop(old_nr, None) if old_fn is not None else None
    if hook is not None:
        t._grad_fn._hook_dict("retains_grad", 0)[t._output_nr] = hook


class _ViewGeometry:
    """Where a view's elements lie in its base's memory: shapes, strides and offsets, in elements, into one flat
    buffer spanning the base's memory. Built from the arrays' pointers, so any view kind (slice, select,
    transpose, narrow, diagonal, reshape, as_strided, .real) maps the same way."""
    __slots__ = ("base_shape", "base_strides", "base_offset", "span", "contiguous", "shape", "strides", "offset",
                 "real_view", "lo", "hi", "overlaps_itself")

    def _at(self, buf, view: bool):
        """The base (view=False) or the view (view=True) laid over a flat buffer."""
        if view:
            if self.real_view:  # a real view of a complex base: the buffer as (re, im) pairs
                buf = buf.view(buf.real.dtype)
            return _strided(buf, self.shape, self.strides, self.offset)
        return _strided(buf, self.base_shape, self.base_strides, self.base_offset)

    def take(self, g):
        """The view's region of a base-shaped array, as a new C-contiguous array."""
        if self.contiguous:
            buf = _xp(g).ascontiguousarray(g).reshape(-1)
        else:
            buf = _xp(g).zeros(self.span, g.dtype)
            self._at(buf, False)[...] = g
        return self._at(buf, True).copy()

    def put(self, g, r, dtype):
        """A base-shaped array: g (zeros of `dtype` when None) with the view's region set to r."""
        xp = _xp(r if g is None else g)
        if self.contiguous:
            out = xp.zeros(self.base_shape, dtype) if g is None else g.copy(order="C")
            buf = out.reshape(-1)
        else:
            out = None
            buf = xp.zeros(self.span, dtype if g is None else g.dtype)
            if g is not None:
                self._at(buf, False)[...] = g
        self._at(buf, True)[...] = r
        return out if out is not None else self._at(buf, False).copy()


def _xp(a):
    return np if type(a) is np.ndarray else a.__array_namespace__()


def _strided(buf, shape: tuple, strides: tuple, offset: int):
    """A strided array over the flat, contiguous buffer `buf` (strides and offset in its elements)."""
    it = buf.itemsize
    st = tuple(s * it for s in strides)
    if type(buf) is np.ndarray:
        return np.ndarray(shape, buf.dtype, buffer=buf, offset=offset * it, strides=st)
    import cupy
    return cupy.lib.stride_tricks.as_strided(buf[offset:], shape, st)


def _pointer(a) -> int:
    return a.__array_interface__["data"][0] if type(a) is np.ndarray else a.data.ptr


def _extent(ptr: int, shape: tuple, strides: tuple, itemsize: int) -> tuple:
    """The bytes [lo, hi) an array's elements span."""
    lo = hi = ptr
    for n, s in zip(shape, strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + itemsize


def _geometry(t: Tensor, base: Tensor, strict: bool = False):
    """t's _ViewGeometry in base, or None when t's memory does not lie in base's (set_ or .data = moved it) or t
    reinterprets it as another dtype (view(dtype)), which raises instead when strict."""
    x, b = t._data, base._data
    kind = type(x)
    if kind is not type(b) or kind is MetaArray or b.size == 0:
        return None
    bi, xi = b.itemsize, x.itemsize
    bp = _pointer(b)
    lo, hi = _extent(bp, b.shape, b.strides, bi)
    g = _ViewGeometry()
    if x.size:
        xp_ = _pointer(x)
        g.lo, g.hi = _extent(xp_, x.shape, x.strides, xi)
        if g.lo < lo or g.hi > hi:
            return None
        if x.dtype != b.dtype and not (b.dtype.kind == "c" and x.dtype.kind == "f" and 2 * xi == bi):
            if not strict:
                return None
            raise RuntimeError(f"tinytorch does not record in-place operations on a {x.dtype} view of a {b.dtype} "
                               "tensor while grad is on: apply the op out of place.")
        g.shape, g.strides, g.offset = x.shape, tuple(s // xi for s in x.strides), (xp_ - lo) // xi
        g.overlaps_itself = any(s == 0 and n > 1 for n, s in zip(x.shape, x.strides))
    else:  # NumPy points empty views anywhere in their base: there is no region to place
        g.lo = g.hi = lo
        g.shape, g.strides, g.offset, g.overlaps_itself = x.shape, (0,) * x.ndim, 0, False
    g.real_view = x.dtype != b.dtype
    g.base_shape, g.base_strides, g.base_offset = b.shape, tuple(s // bi for s in b.strides), (bp - lo) // bi
    g.span = (hi - lo) // bi
    g.contiguous = bool(b.flags.c_contiguous)
    return g


def _region_take(g: Tensor, geo: _ViewGeometry) -> Tensor:
    """The view's region of a base-shaped gradient (differentiable: a double backward goes through it)."""
    out = _wrap(geo.take(g._data))
    if needs_grad(g):
        record("AsStridedBackward0", lambda gg: _region_put(None, geo, gg), out, (g,))
    return out


def _region_put(g: Tensor | None, geo: _ViewGeometry, r) -> Tensor:
    """g (zeros when None) with the view's region replaced by r, a tensor or 0 (differentiable)."""
    rt = r if isinstance(r, Tensor) else None
    if g is None:
        dt = rt._data.dtype
        if geo.real_view:
            dt = np.result_type(dt, np.complex64)
        out = _wrap(geo.put(None, rt._data, dt))
    else:
        out = _wrap(geo.put(g._data, r if rt is None else rt._data, None))
    if needs_grad(g, rt):
        rg, rr = g is not None and g._requires_grad, rt is not None and rt._requires_grad

        def as_strided_scatter_backward(gg):
            return (_region_put(gg, geo, 0) if rg else None), (_region_take(gg, geo) if rr else None)
        record("AsStridedScatterBackward0", as_strided_scatter_backward, out, (g, rt))
    return out


def _set_view_history(v: Tensor, base: Tensor, geo: _ViewGeometry) -> None:
    """Make v an as_strided view of base's current history (base requires grad)."""
    old_fn, old_nr = v._grad_fn, v._output_nr
    v._output_nr = 0
    record("AsStridedBackward0", lambda g: _region_put(None, geo, g), v, (base,))
    if v._retains_grad:
        _move_retain_hook(v, old_fn, old_nr)
    _track_view(base, v)


def _copy_slices(t: Tensor, base: Tensor, geo: _ViewGeometry, result: Tensor) -> None:
    """Give base (whose region t now holds `result`) and t their histories after an in-place op on t."""
    old = None
    if base._requires_grad:  # a stand-in carrying the base's history before the op
        old = _new(Tensor)
        old._data = base._data
        old._grad_fn, old._output_nr, old._requires_grad = base._grad_fn, base._output_nr, True
    keep_old = old is not None
    r_dtype = result.dtype

    def copy_slices_backward(g: Tensor):
        gr = _region_take(g, geo)
        if gr.dtype != r_dtype:
            gr = gr.to(r_dtype)
        return (_region_put(g, geo, 0) if keep_old else None), gr
    old_fn, old_nr = base._grad_fn, base._output_nr
    base._output_nr = 0
    record("torch::autograd::CopySlices", copy_slices_backward, base, (old, result))
    if base._retains_grad:
        _move_retain_hook(base, old_fn, old_nr)
    _set_view_history(t, base, geo)
    _renew_views(base, t, geo)


def _renew_views(base: Tensor, skip, written) -> None:
    """Give base's other live views with a history a new one from base's current history; with `written` (the
    region an op on a view wrote), only those whose memory meets it (the rest still read the old values)."""
    for ref in list(base._views.values()):
        w = ref()
        if w is None or w is skip or w._grad_fn is None:
            continue
        geo = _geometry(w, base)
        if geo is None or written is not None and (geo.hi <= written.lo or written.hi <= geo.lo):
            continue
        _set_view_history(w, base, geo)


def _copy_into(dst, src) -> None:
    if src.dtype != dst.dtype and np.can_cast(src.dtype, dst.dtype, "same_kind") is False and \
            (dst.dtype.kind not in _FLOAT_KINDS or src.dtype.kind == "c" and dst.dtype.kind != "c"):
        raise TypeError
    dst[...] = src


def _short(d) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "uint16": "UInt16",
            "uint32": "UInt32", "uint64": "UInt64", "bool": "Bool", "complex64": "ComplexFloat",
            "complex128": "ComplexDouble"}[d.name]


def _type_name(d) -> str:
    """A dtype as PyTorch's argument checks name it: the legacy tensor type (torch.FloatTensor) where the dtype
    has one, else the CPU type (CPUBoolType)."""
    short = _short(d)
    legacy = ("Byte", "Char", "Short", "Int", "Long", "Half", "Float", "Double")
    return f"torch.{short}Tensor" if short in legacy else f"CPU{short}Type"


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


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def called_by_user() -> bool:
    """Whether the function calling this one was called from outside tinytorch (directly, or through the public
    wrapper of _dispatch.py): a warning about how the user called it should not fire for tinytorch's own calls."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.endswith(os.sep + "_dispatch.py"):
        frame = frame.f_back
    return frame is None or not os.path.abspath(frame.f_code.co_filename).startswith(_ROOT + os.sep)


def user_stacklevel() -> int:
    """The warnings.warn stacklevel of the innermost caller outside tinytorch, for an op's warning: PyTorch's
    points at the user's line, and here the op may sit under the public wrapper, a module's forward, a loss."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_ROOT + os.sep):
        frame, level = frame.f_back, level + 1
    return level
