"""The meta device: arrays with a shape, dtype and strides but no data (PyTorch's device("meta")).

A meta tensor's `_data` is a `MetaArray`. It speaks enough of NumPy's array API (attributes, methods,
operators, `__array_ufunc__`, `__array_function__`, `__array_namespace__`) that the op modules run
unchanged on it and produce meta results: every op computes only the result's shape and dtype.

Shapes of elementwise ops come from broadcasting; dtypes from running the same NumPy call on one-element
stand-ins (so promotion is NumPy's, hence the CPU path's). Views (transpose, slicing, expand, diagonal, ...)
are computed by NumPy itself on a *layout proxy*: an ndarray with the meta array's shape and strides whose
data pointer points at nothing. NumPy computes such a view's shape, strides and offset without reading
memory; the proxy is read-only and private to this module, and only pure view operations touch it.
Reshape is the exception: NumPy's reshape copies when it must (reading), so reshapes use PyTorch's own
stride rule (`_view_strides`) instead.
"""
from __future__ import annotations

import operator

import numpy as np

NO_DATA = "Cannot copy out of meta tensor; no data!"  # PyTorch's words (nn.Module.to adds a hint)

# The fake address layout proxies start at: never dereferenced (the proxies are read-only and only viewed).
_FAKE_ADDRESS = 1 << 40


class _Interface:
    """Carries an __array_interface__ so np.asarray builds a proxy without a buffer."""

    def __init__(self, interface: dict) -> None:
        self.__array_interface__ = interface


def _contiguous_strides(shape: tuple, itemsize: int) -> tuple:
    strides = []
    acc = itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def _proxy_dtype(itemsize: int) -> np.dtype:
    return np.dtype(f"u{itemsize}") if itemsize in (1, 2, 4, 8) else np.dtype(f"V{itemsize}")


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "writeable", "owndata")

    def __init__(self, c: bool, f: bool, own: bool) -> None:
        self.c_contiguous, self.f_contiguous, self.writeable, self.owndata = c, f, True, own

    def __getitem__(self, key: str) -> bool:
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous, "WRITEABLE": True,
                "OWNDATA": self.owndata}[key.upper()]


def _is_contiguous(shape: tuple, strides: tuple, itemsize: int, order: str = "C") -> bool:
    dims = range(len(shape) - 1, -1, -1) if order == "C" else range(len(shape))
    if any(s == 0 for s in shape):
        return True
    expected = itemsize
    for d in dims:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


class MetaArray:
    """An array with shape, dtype and strides (in bytes, as NumPy) and no storage."""

    __slots__ = ("_shape", "dtype", "strides", "offset", "base")
    __array_priority__ = 1000

    def __init__(self, shape, dtype, strides: tuple | None = None, offset: int = 0, base=None) -> None:
        self._shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = _contiguous_strides(self._shape, self.dtype.itemsize) if strides is None else tuple(strides)
        self.offset = offset
        self.base = base

    # ------------------------------------------------------------ attributes
    @property
    def shape(self) -> tuple:
        return self._shape

    @shape.setter
    def shape(self, new) -> None:
        # As ndarray.shape = ...: in place, and AttributeError when the strides need a copy. Computed here,
        # not on the layout proxy: NumPy's setter copies first and compares afterwards (it would read).
        new = _resolve_shape((int(new),) if isinstance(new, (int, np.integer)) else tuple(int(x) for x in new),
                             self.size)
        strides = _view_strides(self._shape, self.strides, new, self.itemsize)
        if strides is None:
            raise AttributeError("Incompatible shape for in-place modification. Use `.reshape()` to make a copy "
                                 "with the desired shape.")
        self._shape, self.strides = new, strides

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def flags(self) -> _Flags:
        return _Flags(_is_contiguous(self.shape, self.strides, self.itemsize, "C"),
                      _is_contiguous(self.shape, self.strides, self.itemsize, "F"), self.base is None)

    @property
    def T(self) -> "MetaArray":
        return self.transpose()

    @property
    def mT(self) -> "MetaArray":
        return self.swapaxes(-1, -2)

    def __repr__(self) -> str:
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # ------------------------------------------------------------ no data to read
    def _no_data(self, *args, **kwargs):
        raise NotImplementedError(NO_DATA)

    get = item = tolist = tobytes = __array__ = __iter__ = __bool__ = __float__ = __int__ = __index__ = _no_data
    nonzero = _no_data

    def __reduce_ex__(self, protocol):
        return (MetaArray, (self.shape, self.dtype, self.strides))

    def __array_namespace__(self, api_version=None):
        return namespace

    # ------------------------------------------------------------ views, computed by NumPy on the layout proxy
    def _proxy(self) -> np.ndarray:
        interface = {"shape": self.shape, "strides": self.strides, "typestr": _proxy_dtype(self.itemsize).str,
                     "data": (_FAKE_ADDRESS + self.offset, True), "version": 3}
        return np.asarray(_Interface(interface))

    def _view_from(self, proxy: np.ndarray, dtype=None) -> "MetaArray":
        return MetaArray(proxy.shape, self.dtype if dtype is None else dtype, proxy.strides,
                         proxy.__array_interface__["data"][0] - _FAKE_ADDRESS,
                         self if self.base is None else self.base)

    def view(self, dtype=None, type=None) -> "MetaArray":
        if dtype is None or np.dtype(dtype) == self.dtype:
            base = self if self.base is None else self.base
            return MetaArray(self.shape, self.dtype, self.strides, self.offset, base)
        dt = np.dtype(dtype)
        if dt.itemsize == self.itemsize:
            out = self.view()
            out.dtype = dt
            return out
        p = self._proxy().view(_proxy_dtype(dt.itemsize))  # NumPy's checks and the new last dim
        return self._view_from(p, dt)

    def reshape(self, *shape, order: str = "C", copy=None) -> "MetaArray":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = _resolve_shape(tuple(int(s) for s in shape), self.size)
        strides = _view_strides(self._shape, self.strides, shape, self.itemsize)
        if strides is None:
            return MetaArray(shape, self.dtype)  # NumPy (and PyTorch's reshape) would copy
        return MetaArray(shape, self.dtype, strides, self.offset, self if self.base is None else self.base)

    def transpose(self, *axes) -> "MetaArray":
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return self._view_from(self._proxy().transpose(axes or None))

    def swapaxes(self, a: int, b: int) -> "MetaArray":
        return self._view_from(self._proxy().swapaxes(a, b))

    def squeeze(self, axis=None) -> "MetaArray":
        return self._view_from(self._proxy().squeeze(axis))

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> "MetaArray":
        return self._view_from(self._proxy().diagonal(offset, axis1, axis2))

    def ravel(self, order: str = "C") -> "MetaArray":
        return self.reshape(-1)

    def flatten(self, order: str = "C") -> "MetaArray":
        return MetaArray((self.size,), self.dtype)

    def __getitem__(self, key) -> "MetaArray":
        key = key if isinstance(key, tuple) else (key,)
        if any(_is_advanced(k) for k in key):
            return MetaArray(_advanced_index_shape(self.shape, key), self.dtype)
        if not any(k is Ellipsis for k in key):
            key = key + (Ellipsis,)  # a 0-d view rather than a scalar read when every dim gets an int
        return self._view_from(self._proxy()[key])

    def __setitem__(self, key, value) -> None:
        pass  # writing into no storage: nothing to do

    def fill(self, value) -> None:
        pass

    # ------------------------------------------------------------ copies
    def copy(self, order: str = "C") -> "MetaArray":
        return MetaArray(self.shape, self.dtype)

    def astype(self, dtype, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> "MetaArray":
        dt = np.dtype(dtype)
        if not copy and dt == self.dtype:
            return self
        np.zeros(1, self.dtype).astype(dt, casting=casting)  # NumPy's casting errors
        return MetaArray(self.shape, dt)

    # ------------------------------------------------------------ reductions
    def _reduce(self, name: str, axis=None, dtype=None, out=None, keepdims: bool = False, **kw):
        tiny = np.zeros((1,) * self.ndim, self.dtype)
        if dtype is not None:
            kw["dtype"] = dtype
        with np.errstate(all="ignore"):
            rdt = np.asarray(getattr(tiny, name)(axis=axis, keepdims=True, **kw)).dtype
        if axis is None:
            axes = set(range(self.ndim))
        else:
            axes = {operator.index(a) % max(self.ndim, 1) for a in (axis if isinstance(axis, tuple) else (axis,))}
        shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape)) if keepdims else \
            tuple(s for i, s in enumerate(self.shape) if i not in axes)
        return out if out is not None else MetaArray(shape, rdt)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return self._reduce("sum", axis, dtype, out, keepdims, **kw)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return self._reduce("prod", axis, dtype, out, keepdims, **kw)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return self._reduce("mean", axis, dtype, out, keepdims, **kw)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return self._reduce("var", axis, dtype, out, keepdims, ddof=ddof, **kw)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        return self._reduce("std", axis, dtype, out, keepdims, ddof=ddof, **kw)

    def max(self, axis=None, out=None, keepdims=False, **kw):
        return self._reduce("max", axis, None, out, keepdims, **kw)

    def min(self, axis=None, out=None, keepdims=False, **kw):
        return self._reduce("min", axis, None, out, keepdims, **kw)

    def any(self, axis=None, out=None, keepdims=False, **kw):
        return self._reduce("any", axis, None, out, keepdims, **kw)

    def all(self, axis=None, out=None, keepdims=False, **kw):
        return self._reduce("all", axis, None, out, keepdims, **kw)

    def argmax(self, axis=None, out=None, keepdims=False):
        return self._reduce("argmax", axis, None, out, keepdims)

    def argmin(self, axis=None, out=None, keepdims=False):
        return self._reduce("argmin", axis, None, out, keepdims)

    def _scan(self, name: str, axis=None, dtype=None, out=None):
        rdt = getattr(np.zeros((1,) * max(self.ndim, 1), self.dtype), name)(dtype=dtype).dtype
        return MetaArray(self.shape if axis is not None else (self.size,), rdt)

    def cumsum(self, axis=None, dtype=None, out=None):
        return self._scan("cumsum", axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        return self._scan("cumprod", axis, dtype, out)

    def argsort(self, axis=-1, kind=None, order=None, **kw):
        return MetaArray(self.shape if axis is not None else (self.size,), np.intp)

    def sort(self, axis=-1, kind=None, order=None, **kw) -> None:
        pass  # in place on no data

    def clip(self, min=None, max=None, out=None, **kw):
        return np.clip(self, min, max, out=out, **kw)

    def round(self, decimals: int = 0, out=None):
        return np.round(self, decimals, out=out)

    def conj(self):
        return self

    # ------------------------------------------------------------ NumPy's protocols
    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if out is not None and not isinstance(out, tuple):
            out = (out,)
        if method == "__call__":
            return _ufunc_call(ufunc, inputs, out, kwargs)
        if method == "reduce":
            a = inputs[0]
            axis = kwargs.pop("axis", 0)
            kwargs.pop("initial", None)
            kwargs.pop("where", None)
            keepdims = kwargs.pop("keepdims", False)
            return _ufunc_reduce(ufunc, _as_meta(a), axis, keepdims, kwargs.get("dtype"), out)
        if method == "accumulate":
            a = _as_meta(inputs[0])
            rdt = ufunc.accumulate(np.zeros((1,) * max(a.ndim, 1), a.dtype), dtype=kwargs.get("dtype")).dtype
            return out[0] if out else MetaArray(a.shape, rdt)
        if method == "at":
            return None  # in-place scatter into no storage
        if method == "outer":
            a, b = (_as_meta(x) for x in inputs)
            rdt = ufunc.outer(np.zeros(1, a.dtype), np.zeros(1, b.dtype)).dtype
            return MetaArray(a.shape + b.shape, rdt)
        return NotImplemented

    def __array_function__(self, func, types, args, kwargs):
        impl = _FUNCTIONS.get(func)
        if impl is None:
            raise NotImplementedError(f"Could not run '{func.__name__}' with arguments from the 'Meta' backend: "
                                      "it has no shape-only implementation in tinytorch.")
        return impl(*args, **kwargs)


def _as_meta(x) -> MetaArray:
    if isinstance(x, MetaArray):
        return x
    a = np.asarray(x)
    return MetaArray(a.shape, a.dtype)


def _view_strides(old: tuple, old_strides: tuple, new: tuple, itemsize: int):
    """The strides of `new` viewing memory laid out as (old, old_strides), or None when a copy is needed
    (PyTorch's computeStride, in bytes)."""
    if not old:
        return tuple(itemsize for _ in new)
    numel = 1
    for s in old:
        numel *= s
    if numel == 0:
        return old_strides if old == new else _contiguous_strides(new, itemsize)
    out = [0] * len(new)
    view_d = len(new) - 1
    chunk_base = old_strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and old_strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * chunk_base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = old_strides[d - 1]
                tensor_numel = view_numel = 1
    return tuple(out) if view_d == -1 else None


def _resolve_shape(shape: tuple, size: int) -> tuple:
    if -1 in shape:
        rest = 1
        for s in shape:
            if s != -1:
                rest *= s
        if shape.count(-1) > 1 or rest == 0 or size % rest:
            raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // rest if s == -1 else s for s in shape)
    n = 1
    for s in shape:
        n *= s
    if n != size:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


# ------------------------------------------------------------------ advanced indexing: the result's shape

def _is_advanced(k) -> bool:
    return isinstance(k, (MetaArray, np.ndarray, list)) or (hasattr(k, "shape") and hasattr(k, "dtype")
                                                           and not isinstance(k, np.generic))


def _advanced_index_shape(shape: tuple, key: tuple) -> tuple:
    """NumPy's result shape for a key mixing basic and advanced indices (without reading anything)."""
    items = []  # (kind, value): kind in "new", "slice", "adv"
    n_consumed = sum(0 if k is None or k is Ellipsis else
                     (np.ndim(k) if _is_bool_index(k) else 1) for k in key)
    expanded = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - n_consumed))
        else:
            expanded.append(k)
    if not any(k is Ellipsis for k in key):
        expanded.extend([slice(None)] * (len(shape) - n_consumed))
    dim = 0
    adv_shapes = []
    for k in expanded:
        if k is None:
            items.append(("new", 1))
        elif isinstance(k, slice):
            items.append(("slice", len(range(*k.indices(shape[dim])))))
            dim += 1
        elif _is_bool_index(k):
            if isinstance(k, MetaArray):
                raise NotImplementedError("boolean mask indexing of a meta tensor has a data-dependent shape")
            nz = np.asarray(k).nonzero()
            adv_shapes.append((len(nz[0]),))
            items.append(("adv", None))
            dim += np.ndim(k)
        else:
            adv_shapes.append(np.shape(k) if not isinstance(k, MetaArray) else k.shape)
            items.append(("adv", None))
            dim += 1
    bshape = np.broadcast_shapes(*adv_shapes)
    adv_pos = [i for i, (kind, _) in enumerate(items) if kind == "adv"]
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1))
    rest = [v for kind, v in items if kind != "adv"]
    if contiguous:
        before = sum(1 for kind, _ in items[:adv_pos[0]] if kind != "adv")
        return tuple(rest[:before]) + tuple(bshape) + tuple(rest[before:])
    return tuple(bshape) + tuple(rest)


def _is_bool_index(k) -> bool:
    if isinstance(k, (MetaArray, np.ndarray)):
        return k.dtype == np.bool_
    if isinstance(k, list):
        return len(k) > 0 and all(isinstance(v, (bool, np.bool_)) for v in k)
    return isinstance(k, (bool, np.bool_))


# ------------------------------------------------------------------ ufuncs

def _tiny(x, ndim: int | None = None):
    """A one-element stand-in with x's dtype (Python scalars stay as they are: NumPy treats them as weak)."""
    if isinstance(x, MetaArray) or isinstance(x, np.ndarray):
        return np.zeros((1,) if ndim is None else (1,) * ndim, x.dtype)
    if isinstance(x, np.generic):
        return x
    if hasattr(x, "dtype") and hasattr(x, "shape"):  # a CuPy array next to a meta one
        return np.zeros((1,), x.dtype)
    return x


def _shape(x) -> tuple:
    if isinstance(x, (MetaArray, np.ndarray)):
        return x.shape
    if hasattr(x, "shape") and not isinstance(x, np.generic):
        return tuple(x.shape)
    return np.shape(x) if isinstance(x, (list, tuple)) else ()


def _matmul_shape(sa: tuple, sb: tuple) -> tuple:
    if not sa or not sb:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    a = sa if len(sa) > 1 else (1,) + sa
    b = sb if len(sb) > 1 else sb + (1,)
    if a[-1] != b[-2]:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
                         f"(n?,k),(k,m?)->(n?,m?) (size {b[-2]} is different from {a[-1]})")
    batch = np.broadcast_shapes(a[:-2], b[:-2])
    out = batch + (a[-2] if len(sa) > 1 else None, b[-1] if len(sb) > 1 else None)
    return tuple(s for s in out if s is not None)


def _ufunc_call(ufunc, inputs, out, kwargs):
    if ufunc is np.matmul:
        shape = _matmul_shape(_shape(inputs[0]), _shape(inputs[1]))
        tiny = [np.zeros((1, 1), x.dtype) if hasattr(x, "dtype") else x for x in inputs]
    else:
        shape = np.broadcast_shapes(*(_shape(x) for x in inputs))
        tiny = [_tiny(x) for x in inputs]
    if "where" in kwargs:
        kwargs = dict(kwargs, where=True)
    tiny_out = None
    if out is not None:
        for o in out:
            if o is not None and tuple(o.shape) != shape:
                raise ValueError(f"non-broadcastable output operand with shape {tuple(o.shape)} doesn't match the "
                                 f"broadcast shape {shape}")
        tiny_out = tuple(None if o is None else np.zeros((1, 1) if ufunc is np.matmul else (1,), o.dtype)
                         for o in out)
        kwargs = dict(kwargs, out=tiny_out)
    with np.errstate(all="ignore"):
        r = ufunc(*tiny, **kwargs)
    rs = r if ufunc.nout > 1 else (r,)
    results = tuple(out[i] if out is not None and out[i] is not None else MetaArray(shape, np.asarray(v).dtype)
                    for i, v in enumerate(rs))
    return results if ufunc.nout > 1 else results[0]


def _ufunc_reduce(ufunc, a: MetaArray, axis, keepdims: bool, dtype, out):
    rdt = ufunc.reduce(np.zeros((1,) * max(a.ndim, 1), a.dtype), axis=0, dtype=dtype).dtype
    if axis is None:
        axes = set(range(a.ndim))
    else:
        axes = {operator.index(x) % max(a.ndim, 1) for x in (axis if isinstance(axis, tuple) else (axis,))}
    shape = tuple(1 if i in axes else s for i, s in enumerate(a.shape)) if keepdims else \
        tuple(s for i, s in enumerate(a.shape) if i not in axes)
    return out[0] if out else MetaArray(shape, rdt)


def _binary(ufunc, reflected: bool = False, inplace: bool = False):
    if inplace:
        def op(self, other):
            return ufunc(self, other, out=(self,))
    elif reflected:
        def op(self, other):
            return ufunc(other, self)
    else:
        def op(self, other):
            return ufunc(self, other)
    return op


for _name, _uf in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                   ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                   ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                   ("lshift", np.left_shift), ("rshift", np.right_shift)):
    setattr(MetaArray, f"__{_name}__", _binary(_uf))
    setattr(MetaArray, f"__r{_name}__", _binary(_uf, reflected=True))
    setattr(MetaArray, f"__i{_name}__", _binary(_uf, inplace=True))
for _name, _uf in (("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                   ("eq", np.equal), ("ne", np.not_equal)):
    setattr(MetaArray, f"__{_name}__", _binary(_uf))
MetaArray.__hash__ = object.__hash__
MetaArray.__neg__ = lambda self: np.negative(self)
MetaArray.__pos__ = lambda self: self.copy()
MetaArray.__abs__ = lambda self: np.absolute(self)
MetaArray.__invert__ = lambda self: np.invert(self)


# ------------------------------------------------------------------ array functions (np.* called on meta arrays)

def _same_shape(fn, flatten_when_axis_none: bool = False, default_axis=-1):
    """A function whose result has its first argument's shape; the dtype comes from a same-rank stand-in."""
    def impl(a, *args, **kwargs):
        a = _as_meta(a)
        args = [_tiny(x, a.ndim) if isinstance(x, MetaArray) else x for x in args]
        with np.errstate(all="ignore"):
            rdt = np.asarray(fn(np.zeros((1,) * a.ndim, a.dtype), *args, **kwargs)).dtype
        if flatten_when_axis_none and kwargs.get("axis", args[0] if args else default_axis) is None:
            return MetaArray((a.size,), rdt)
        return MetaArray(a.shape, rdt)
    return impl


def _concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = [_as_meta(a) for a in arrays]
    rdt = np.concatenate([np.zeros((1,) * max(a.ndim, 1), a.dtype) for a in arrays], axis=0 if axis is None else
                         axis, dtype=dtype, casting=casting).dtype
    if axis is None:
        return MetaArray((sum(a.size for a in arrays),), rdt)
    first = arrays[0].shape
    ax = axis % len(first)
    for a in arrays[1:]:
        if len(a.shape) != len(first) or any(x != y for i, (x, y) in enumerate(zip(a.shape, first)) if i != ax):
            raise ValueError("all the input array dimensions except for the concatenation axis must match exactly")
    return MetaArray(first[:ax] + (sum(a.shape[ax] for a in arrays),) + first[ax + 1:], rdt)


def _stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = [_as_meta(a) for a in arrays]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError("all input arrays must have the same shape")
    ax = axis % (arrays[0].ndim + 1)
    return _concatenate([a.reshape(a.shape[:ax] + (1,) + a.shape[ax:]) for a in arrays], ax, dtype=dtype,
                        casting=casting)


def _where(cond, x=None, y=None):
    if x is None and y is None:
        raise NotImplementedError("where(condition) on a meta tensor has a data-dependent shape")
    shape = np.broadcast_shapes(_shape(cond), _shape(x), _shape(y))
    rdt = np.where(True, _tiny(x), _tiny(y)).dtype
    return MetaArray(shape, rdt)


def _clip(a, a_min=None, a_max=None, out=None, **kw):
    shape = np.broadcast_shapes(_shape(a), _shape(a_min), _shape(a_max))
    rdt = np.clip(_tiny(a), _tiny(a_min), _tiny(a_max), **kw).dtype
    return out if out is not None else MetaArray(shape, rdt)


def _like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    a = _as_meta(a)
    return MetaArray(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    return _like(a, dtype=dtype, shape=shape)


def _take(a, indices, axis=None, out=None, mode="raise"):
    a = _as_meta(a)
    ishape = _shape(indices)
    if axis is None:
        return MetaArray(ishape, a.dtype)
    ax = axis % a.ndim
    return MetaArray(a.shape[:ax] + tuple(ishape) + a.shape[ax + 1:], a.dtype)


def _take_along_axis(arr, indices, axis=-1):
    a = _as_meta(arr)
    ishape = _shape(indices)
    ax = axis % a.ndim
    shape = np.broadcast_shapes(a.shape[:ax] + (1,) + a.shape[ax + 1:], ishape[:ax] + (1,) + ishape[ax + 1:])
    return MetaArray(shape[:ax] + (ishape[ax],) + shape[ax + 1:], a.dtype)


def _tile(a, reps):
    a = _as_meta(a)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    n = max(len(reps), a.ndim)
    s = (1,) * (n - a.ndim) + a.shape
    r = (1,) * (n - len(reps)) + reps
    return MetaArray(tuple(x * y for x, y in zip(s, r)), a.dtype)


def _repeat(a, repeats, axis=None):
    a = _as_meta(a)
    if axis is None:
        a, axis = MetaArray((a.size,), a.dtype), 0
    ax = axis % a.ndim
    if isinstance(repeats, MetaArray):
        raise NotImplementedError("repeat with tensor repeats on a meta tensor has a data-dependent shape")
    n = a.shape[ax] * repeats if np.ndim(repeats) == 0 else int(np.sum(repeats))
    return MetaArray(a.shape[:ax] + (n,) + a.shape[ax + 1:], a.dtype)


def _einsum(subscripts, *operands, **kw):
    ops = [_as_meta(o) for o in operands]
    spec = subscripts.replace(" ", "")
    if "..." in spec:
        raise NotImplementedError("einsum with '...' has no meta implementation in tinytorch")
    ins, _, out = spec.partition("->")
    terms = ins.split(",")
    sizes: dict = {}
    for term, o in zip(terms, ops):
        for letter, n in zip(term, o.shape):
            if sizes.get(letter, n) != n and n != 1 and sizes[letter] != 1:
                raise ValueError(f"operands could not be broadcast together with remapped shapes for '{letter}'")
            sizes[letter] = max(n, sizes.get(letter, n))
    if not _:
        counts = {c: ins.count(c) for c in sizes}
        out = "".join(sorted(c for c, k in counts.items() if k == 1))
    rdt = np.result_type(*(o.dtype for o in ops))
    return MetaArray(tuple(sizes[c] for c in out), rdt)


def _moveaxis(a, source, destination):
    a = _as_meta(a)
    return a._view_from(np.moveaxis(a._proxy(), source, destination))


def _expand_dims(a, axis):
    a = _as_meta(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    n = a.ndim + len(axes)
    axes = {x % n for x in axes}
    dims = iter(a.shape)
    return a.reshape(tuple(1 if i in axes else next(dims) for i in range(n)))  # our reshape: never reads


def _view_fn(name):
    def impl(a, *args, **kwargs):
        a = _as_meta(a)
        return a._view_from(getattr(np, name)(a._proxy(), *args, **kwargs))
    return impl


def _dtype_args(*args, **kwargs):
    return tuple(a.dtype if isinstance(a, MetaArray) else a for a in args), kwargs


def _data_dependent(name):
    def impl(*args, **kwargs):
        raise NotImplementedError(f"{name} on a meta tensor has a data-dependent result: meta tensors hold no data")
    return impl


_FUNCTIONS = {
    np.shape: lambda a: _as_meta(a).shape,
    np.ndim: lambda a: _as_meta(a).ndim,
    np.size: lambda a, axis=None: _as_meta(a).size if axis is None else _as_meta(a).shape[axis],
    np.reshape: lambda a, shape=None, order="C", **kw: _as_meta(a).reshape(kw.get("newshape", shape)),
    np.transpose: lambda a, axes=None: _as_meta(a).transpose(axes),
    np.swapaxes: lambda a, x, y: _as_meta(a).swapaxes(x, y),
    np.squeeze: lambda a, axis=None: _as_meta(a).squeeze(axis),
    np.ravel: lambda a, order="C": _as_meta(a).ravel(),
    np.moveaxis: _moveaxis,
    np.expand_dims: _expand_dims,
    np.broadcast_to: _view_fn("broadcast_to"),
    np.diagonal: _view_fn("diagonal"),
    np.concatenate: _concatenate,
    np.stack: _stack,
    np.where: _where,
    np.clip: _clip,
    np.empty_like: _like, np.zeros_like: _like, np.ones_like: _like, np.full_like: _full_like,
    np.copyto: lambda dst, src, casting="same_kind", where=True: None,
    np.result_type: lambda *args: np.result_type(*_dtype_args(*args)[0]),
    np.can_cast: lambda from_, to, casting="safe": np.can_cast(from_.dtype if isinstance(from_, MetaArray) else
                                                               from_, to, casting),
    np.copy: lambda a, order="K", subok=False: _as_meta(a).copy(),
    np.ascontiguousarray: lambda a, dtype=None, **kw: _as_meta(a).astype(dtype or _as_meta(a).dtype),
    np.asfortranarray: lambda a, dtype=None, **kw: _as_meta(a).astype(dtype or _as_meta(a).dtype),
    np.sum: lambda a, *args, **kw: _as_meta(a).sum(*args, **kw),
    np.prod: lambda a, *args, **kw: _as_meta(a).prod(*args, **kw),
    np.mean: lambda a, *args, **kw: _as_meta(a).mean(*args, **kw),
    np.var: lambda a, *args, **kw: _as_meta(a).var(*args, **kw),
    np.std: lambda a, *args, **kw: _as_meta(a).std(*args, **kw),
    np.max: lambda a, *args, **kw: _as_meta(a).max(*args, **kw),
    np.min: lambda a, *args, **kw: _as_meta(a).min(*args, **kw),
    np.amax: lambda a, *args, **kw: _as_meta(a).max(*args, **kw),
    np.amin: lambda a, *args, **kw: _as_meta(a).min(*args, **kw),
    np.any: lambda a, *args, **kw: _as_meta(a).any(*args, **kw),
    np.all: lambda a, *args, **kw: _as_meta(a).all(*args, **kw),
    np.argmax: lambda a, *args, **kw: _as_meta(a).argmax(*args, **kw),
    np.argmin: lambda a, *args, **kw: _as_meta(a).argmin(*args, **kw),
    np.cumsum: lambda a, axis=None, dtype=None, out=None: _as_meta(a).cumsum(axis, dtype),
    np.cumprod: lambda a, axis=None, dtype=None, out=None: _as_meta(a).cumprod(axis, dtype),
    np.argsort: lambda a, axis=-1, **kw: _as_meta(a).argsort(axis),
    np.sort: _same_shape(np.sort, flatten_when_axis_none=True),
    np.flip: _same_shape(np.flip), np.roll: _same_shape(np.roll), np.tril: _same_shape(np.tril),
    np.triu: _same_shape(np.triu), np.nan_to_num: _same_shape(np.nan_to_num), np.round: _same_shape(np.round),
    np.around: _same_shape(np.around), np.isneginf: _same_shape(np.isneginf), np.isposinf: _same_shape(np.isposinf),
    np.take: _take, np.take_along_axis: _take_along_axis, np.tile: _tile, np.repeat: _repeat, np.einsum: _einsum,
    np.nonzero: _data_dependent("nonzero"), np.argwhere: _data_dependent("argwhere"),
    np.unique: _data_dependent("unique"), np.bincount: _data_dependent("bincount"),
    np.count_nonzero: lambda a, axis=None, keepdims=False: _as_meta(a).astype(np.bool_).sum(axis, np.intp,
                                                                                            keepdims=keepdims)
    if axis is not None else MetaArray((), np.intp),
    np.dot: lambda a, b, out=None: np.matmul(a, b),
}


# ------------------------------------------------------------------ the meta array module (xp for device("meta"))

def _creation_shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


class _Namespace:
    """What `xp` is for meta tensors: NumPy's functions, with the creation ones making meta arrays."""

    @staticmethod
    def empty(shape, dtype=float, order="C", **kw) -> MetaArray:
        return MetaArray(_creation_shape(shape), dtype)

    zeros = ones = empty

    @staticmethod
    def full(shape, fill_value, dtype=None, order="C", **kw) -> MetaArray:
        return MetaArray(_creation_shape(shape), dtype if dtype is not None else np.asarray(fill_value).dtype)

    @staticmethod
    def arange(start, stop=None, step=1, dtype=None, **kw) -> MetaArray:
        if stop is None:
            start, stop = 0, start
        n = max(0, int(np.ceil((stop - start) / step)))
        return MetaArray((n,), dtype if dtype is not None else np.arange(0, 1, dtype=np.result_type(
            start, stop, step)).dtype)

    @staticmethod
    def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, **kw) -> MetaArray:
        return MetaArray((int(num),), dtype if dtype is not None else np.float64)

    @staticmethod
    def eye(N, M=None, k=0, dtype=float, **kw) -> MetaArray:
        return MetaArray((N, N if M is None else M), dtype)

    @staticmethod
    def asarray(a, dtype=None, **kw) -> MetaArray:
        m = _as_meta(a) if not isinstance(a, MetaArray) else a
        return m if dtype is None or np.dtype(dtype) == m.dtype else m.astype(dtype)

    array = asarray

    def __getattr__(self, name: str):
        return getattr(np, name)


namespace = _Namespace()


class MetaGenerator:
    """The random source for meta tensors: samples have a shape and a dtype and no values."""

    def random(self, size=None, dtype=np.float64, out=None) -> MetaArray:
        return MetaArray(_creation_shape(() if size is None else size), dtype)

    def standard_normal(self, size=None, dtype=np.float64, out=None) -> MetaArray:
        return MetaArray(_creation_shape(() if size is None else size), dtype)

    standard_exponential = standard_normal

    def uniform(self, low=0.0, high=1.0, size=None) -> MetaArray:
        return MetaArray(_creation_shape(() if size is None else size), np.float64)

    normal = uniform

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False) -> MetaArray:
        return MetaArray(_creation_shape(() if size is None else size), dtype)

    def permutation(self, n) -> MetaArray:
        return MetaArray((int(n),), np.int64)

    def choice(self, a, size=None, replace=True, p=None) -> MetaArray:
        return MetaArray(_creation_shape(() if size is None else size), np.int64)


meta_generator = MetaGenerator()


def like(array) -> MetaArray:
    """A meta array with `array`'s shape and dtype (NumPy, CuPy or meta)."""
    return MetaArray(tuple(array.shape), array.dtype)
