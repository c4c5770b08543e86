"""The remaining Tensor methods: in-place forms, strided views, storage queries, random fills, scatters into views."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _C
from .._meta import MetaArray
# Imported now, not lazily: _creation attaches its own exponential_ on import, which this module's must replace.
from .._creation import _exponential_, _generator_for, _overwrite
from .._creation import bernoulli as _bernoulli_fn, multinomial as _multinomial_fn
from .._tensor import Tensor, _view_of, _wrap, _wrap_dim
from ._common import (_grad_enabled, _new, _short, attach, check_inplace, inplace_unary, needs_grad, record,
                      sum_to)
from .decompositions import _return_type
from .pointwise import _inplace_call
from ._common import user_stacklevel as _user_stacklevel

_frexp_t = _return_type("frexp", "mantissa exponent")


def _xp(x):
    return np if type(x) is np.ndarray else x.__array_namespace__()


def _stride_tricks(x):
    if type(x) is np.ndarray:
        return np.lib.stride_tricks
    import cupy
    return cupy.lib.stride_tricks


# ------------------------------------------------------------------ in-place forms of existing ops

def _inplace_method(name: str):
    """x.<name>_(...): the out-of-place method written back into x (autograd rebased onto its node)."""
    def op(a: Tensor, *args, **kwargs) -> Tensor:
        return _inplace_call(a, lambda s: getattr(s, name)(*args, **kwargs), args + tuple(kwargs.values()))
    op.__name__ = name + "_"
    op.__doc__ = f"In-place {name}."
    return op


def _inplace_predicate(name: str, node: str):
    """x.eq_(y) and the like: the boolean result cast to x's dtype; the gradient through it is zero (as PyTorch's
    EqBackward0), so x's old history must not keep receiving gradients."""
    def out_of_place(s: Tensor, args: tuple) -> Tensor:
        prev = _grad_enabled()
        _C._set_grad_enabled(False)
        try:
            r = getattr(s, name)(*args)
        finally:
            _C._set_grad_enabled(prev)
        out = _wrap(r._data.astype(s._data.dtype))
        ins = (s,) + tuple(o for o in args if isinstance(o, Tensor))
        if needs_grad(*ins):
            shapes = [t._data.shape for t in ins]
            record(node, lambda g: tuple(_wrap(_xp(g._data).zeros(sh, g._data.dtype)) for sh in shapes), out, ins)
        return out

    def op(a: Tensor, *args) -> Tensor:
        return _inplace_call(a, lambda s: out_of_place(s, args), args)
    op.__name__ = name + "_"
    op.__doc__ = f"In-place {name}: x's values become the (0/1) result, in x's dtype."
    return op


def _inplace_view(name: str, node):
    """squeeze_, t_, transpose_, ...: x itself takes the view's shape and, under autograd, a node named as PyTorch's
    for the in-place form (node(args) gives the name; the gradient only undoes the view)."""
    def op(a: Tensor, *args) -> Tensor:
        record_grad = a._requires_grad and _grad_enabled()
        if record_grad:
            check_inplace(a)
        prev = _grad_enabled()
        _C._set_grad_enabled(False)
        try:
            r = getattr(a, name)(*args)
        finally:
            _C._set_grad_enabled(prev)
        old_shape, x_old = tuple(a._data.shape), _wrap(a._data)
        a._data = r._data
        a._bump_version()
        if record_grad:
            src = _new_history(a, x_old)
            if name in ("squeeze", "unsqueeze"):
                def backward(g: Tensor) -> Tensor:
                    return g.reshape(old_shape)
            else:  # t / transpose: swapping the same two dims back
                dims = (0, 1) if name == "t" else args

                def backward(g: Tensor) -> Tensor:
                    return g if g._data.ndim < 2 else g.transpose(*dims)
            record(node(args), backward, a, (src,))
        return a
    op.__name__ = name + "_"
    op.__doc__ = f"In-place {name}: changes x's shape, not its values."
    return op


def _new_history(a: Tensor, old) -> Tensor:
    """A stand-in for a's history before an in-place view op, so that a can be recorded as that op's output."""
    src = _new(Tensor)
    src._data = old._data
    src._grad_fn, src._output_nr, src._requires_grad = a._grad_fn, a._output_nr, True
    return src


def _squeeze_node(args: tuple) -> str:
    if not args:
        return "SqueezeBackward3"
    return "SqueezeBackward5" if isinstance(args[0], (tuple, list)) else "SqueezeBackward4"


# ------------------------------------------------------------------ metadata and storage queries

def positive(a: Tensor) -> Tensor:
    """+a: a itself (PyTorch rejects bool tensors)."""
    if a._data.dtype == np.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return a


def is_signed(a: Tensor) -> bool:
    """Whether a's dtype holds negative values."""
    return a.dtype.is_signed


def _root(x):
    """The array that owns x's memory: tinytorch's stand-in for PyTorch's storage."""
    root, kind = x, type(x)
    while True:
        b = root.base
        if isinstance(b, kind):
            root = b
        elif isinstance(getattr(b, "base", None), kind) and hasattr(b, "__array_interface__"):
            root = b.base  # through the stand-in object np.lib.stride_tricks.as_strided puts between
        else:
            return root


def _ptr(x) -> int:
    return x.ctypes.data if type(x) is np.ndarray else x.data.ptr


def _storage(x):
    """(flat storage array in x's dtype, x's offset into it in elements)."""
    root = _root(x)
    if not root.flags.c_contiguous or root.dtype != x.dtype or (_ptr(x) - _ptr(root)) % x.itemsize:
        return x.reshape(-1) if x.flags.c_contiguous else x.copy().reshape(-1), 0
    return root.reshape(-1), (_ptr(x) - _ptr(root)) // x.itemsize


def storage_offset(a: Tensor) -> int:
    """Where a's first element sits in its storage, in elements."""
    x = a._data
    # NumPy points every empty view at its base's start, so an empty view's offset is lost: PyTorch's may not be 0
    return _storage(x)[1] if x.size else 0


def is_nonzero(a: Tensor) -> bool:
    """The truth value of a one-element tensor."""
    n = a._data.size
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(a._data.reshape(()).item())


def is_same_size(a: Tensor, other: Tensor) -> bool:
    """Whether both tensors have the same shape."""
    return a._data.shape == other._data.shape


def _H(a: Tensor) -> Tensor:
    nd = a._data.ndim
    if nd == 0:
        return a.conj()
    if nd != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {nd}-D tensor."
                           + (" For batches of matrices, consider using tensor.mH" if nd > 2 else ""))
    return a.transpose(0, 1).conj()


class layout:
    """How a tensor's elements are laid out in memory (tinytorch has dense strided tensors only)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"torch.{self._name}"  # PyTorch's spelling, as for dtypes

    def __reduce__(self):
        return self._name


strided = layout("strided")


# ------------------------------------------------------------------ strided views

def _element_index(shape: tuple, strides: tuple, offset: int):
    """Storage position of every element of a view with this geometry (strides in elements)."""
    idx = np.full(shape, offset, dtype=np.int64)
    for d, (n, st) in enumerate(zip(shape, strides)):
        idx += (np.arange(n, dtype=np.int64) * st).reshape((n,) + (1,) * (len(shape) - d - 1))
    return idx


def as_strided(a: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A view of a's storage with the given sizes, strides and offset (in elements)."""
    x = a._data
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: "
                           f"{list(stride)}")
    flat, own = _storage(x)
    off = own if storage_offset is None else int(storage_offset)
    need = 0 if 0 in size else off + sum((n - 1) * s for n, s in zip(size, stride)) + 1
    if need > flat.size:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {off}, and "
                           f"itemsize {x.itemsize} requiring a storage size of {need * x.itemsize} are out of "
                           f"bounds for storage of size {flat.size * x.itemsize}")
    data = _stride_tricks(x).as_strided(flat[off:] if need else flat[:0], size, tuple(s * x.itemsize for s in stride))
    out = _view_of(a, data)
    if needs_grad(a):
        in_idx = _element_index(x.shape, tuple(s // x.itemsize for s in x.strides), own)
        out_idx = _element_index(size, stride, off)
        n = int(max(in_idx.max(initial=0), out_idx.max(initial=0))) + 1
        in_t, out_t = _wrap(in_idx.reshape(-1)).to(a.device), _wrap(out_idx.reshape(-1)).to(a.device)
        in_shape = x.shape

        def as_strided_backward(g: Tensor) -> Tensor:
            st = _wrap(_xp(g._data).zeros(n, g._data.dtype)).index_add(0, out_t, g.reshape(-1))
            return st.index_select(0, in_t).reshape(in_shape)
        record("AsStridedBackward0", as_strided_backward, out, (a,))
    return out


def unfold(a: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """All windows of `size` elements along `dimension`, `step` apart, as a view (window in a new last dim)."""
    x = a._data
    d = _wrap_dim(dimension, x.ndim)
    length = x.shape[d] if x.ndim else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if x.ndim == 0:
        return a.unsqueeze(0) if size == 1 else a
    n = (length - size) // step + 1
    shape = x.shape[:d] + (n,) + x.shape[d + 1:] + (size,)
    strides = x.strides[:d] + (x.strides[d] * step,) + x.strides[d + 1:] + (x.strides[d],)
    out = _view_of(a, _stride_tricks(x).as_strided(x, shape, strides))
    if needs_grad(a):
        idx = _wrap((np.arange(n)[:, None] * step + np.arange(size)).reshape(-1)).to(a.device)
        in_shape = x.shape

        def unfold_backward(g: Tensor) -> Tensor:
            gm = g.movedim(-1, d + 1).flatten(d, d + 1)
            return _wrap(_xp(g._data).zeros(in_shape, g._data.dtype)).index_add(d, idx, gm)
        record("UnfoldBackward0", unfold_backward, out, (a,))
    return out


# ------------------------------------------------------------------ filling and pointwise extras

def fill_diagonal_(a: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Write fill_value on the main diagonal, in place (tall 2-D matrices restart it every ncols+1 rows if wrap)."""
    x = a._data
    if x.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(x.shape, dtype=bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    m = _wrap(mask).to(a.device)
    return inplace_unary(a, lambda s: s.masked_fill(m, fill_value))


def frexp(a: Tensor):
    """(mantissa, exponent) with a = mantissa * 2**exponent and 0.5 <= |mantissa| < 1."""
    x = a._data
    if x.dtype.kind not in "fV":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    m, e = _xp(x).frexp(x)
    return _frexp_t(_wrap(m.astype(x.dtype)), _wrap(e.astype(np.int32)))


def ldexp(a: Tensor, other: Tensor) -> Tensor:
    """a * 2**other, in a and other's promoted floating dtype; 2**other is taken in double precision so that a
    factor past the dtype's range does not overflow a product within it (ldexp(half 2**-20, 17) is 0.125)."""
    from .._dtype import get_default_dtype, promote_types
    if not isinstance(other, Tensor):
        raise TypeError(f"ldexp(): argument 'other' must be Tensor, not {type(other).__name__}")
    dt = promote_types(a.dtype, other.dtype)
    if not (dt.is_floating_point or dt.is_complex):
        dt = get_default_dtype()
    wide = np.complex128 if dt.is_complex else np.float64
    e = other._data
    out = _wrap((a._data.astype(wide) * _xp(e).exp2(e.astype(wide))).astype(dt.np))
    if needs_grad(a, other):
        ra, ro = a._requires_grad, other._requires_grad

        def ldexp_backward(g: Tensor):
            scale = other.double().exp2().to(g.dtype)
            ga = sum_to(g * scale, tuple(a._data.shape)).to(a.dtype) if ra else None
            go = sum_to(g * a * scale * math.log(2.0), tuple(other._data.shape)).to(other.dtype) if ro else None
            return ga, go
        record("LdexpBackward0", ldexp_backward, out, (a, other), (a, other))
    return out


# ------------------------------------------------------------------ random fills

def _rng(a: Tensor, generator):
    return _generator_for(a.device, generator)


def _fill_with(a: Tensor, arr, name: str) -> Tensor:
    return _overwrite(a, lambda dev, shape: arr, name)


# The C++ type names PyTorch's cauchy_ puts in its dtype error (exponential_ uses the short names).
_CPP_NAMES = {"int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool"}


def _need_float(a: Tensor, what: str, name: str) -> None:
    if a._data.dtype.kind not in "fVc":
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {name}")


def _num(v) -> str:
    """A number as C++ streams print it in PyTorch's messages (2.0 -> 2, 1e-07 -> 1e-07)."""
    return f"{float(v):g}"


_FLOAT_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def random_(a: Tensor, *args, generator=None, **kwargs) -> Tensor:
    """Fill with integers uniform in [from, to) (random_(to) and random_() as in PyTorch), in place."""
    lo, hi = 0, None
    if "from" in kwargs:
        lo = kwargs.pop("from")
    if "to" in kwargs:
        hi = kwargs.pop("to")
    if kwargs:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if len(args) == 1:
        hi = args[0]
    elif len(args) == 2:
        lo, hi = args
    elif len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    for v in (lo, hi):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            raise TypeError(f"random_(): 'from' and 'to' must be ints, got {type(v).__name__}")
    dt = a._data.dtype
    endpoint = hi is None
    if hi is None:
        if dt == np.bool_:
            hi = 1
        elif dt.kind in "iu":
            hi = int(np.iinfo(dt).max)
        else:
            hi = 2 ** _FLOAT_DIGITS[a.dtype.name]
    if lo >= hi + endpoint:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= to={hi}")
    arr = _rng(a, generator).integers(lo, hi, size=a._data.shape, endpoint=endpoint, dtype=np.int64)
    return _fill_with(a, arr, "RandomBackward0")


def cauchy_(a: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from Cauchy(median, sigma), in place."""
    _need_float(a, "Cauchy", _CPP_NAMES.get(a.dtype.name, a.dtype.name))
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_num(sigma)}")
    return _fill_with(a, median + sigma * _rng(a, generator).standard_cauchy(a._data.shape), "CauchyBackward0")


def log_normal_(a: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill with exp(N(mean, std**2)) samples, in place."""
    if a._data.dtype.kind not in "fV":
        raise NotImplementedError(f"\"log_normal_cpu\" not implemented for '{_short(a.dtype)}'")
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_num(std)}")
    return _fill_with(a, _rng(a, generator).lognormal(mean, std, a._data.shape), "LogNormalBackward0")


def geometric_(a: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill with the number of Bernoulli(p) trials up to the first success (>= 1), in place."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_num(p)}")
    return _fill_with(a, _rng(a, generator).geometric(p, a._data.shape), "GeometricBackward0")


def exponential_(a: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from Exp(lambd), in place (floating dtypes only, as in PyTorch)."""
    _need_float(a, "Exponential", _short(a.dtype))
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_num(lambd)}")
    return _exponential_(a, lambd, generator=generator)


def _bernoulli(a: Tensor, p=None, *, generator=None) -> Tensor:
    """1 with probability p (a's own values when p is None), else 0, in a's shape and dtype."""
    if p is None:
        return _bernoulli_fn(a, generator=generator)
    return a.detach().new_empty(a.shape).bernoulli_(p, generator=generator)


def _multinomial(a: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    return _multinomial_fn(a, num_samples, replacement, generator=generator)


def put(a: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """a with source written (or added, if accumulate) at flat positions `index` of a's row-major order."""
    n = a._data.size
    idx = index._data.reshape(-1).astype(np.int64)
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad[0])} on a tensor of {n} elements.")
    if index._data.size != source._data.size:
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source._data.size}, index.numel() = {index._data.size}")
    i = _wrap(idx % max(n, 1))
    src = source.reshape(-1)
    flat = a.reshape(-1)
    out = flat.index_add(0, i, src) if accumulate else flat.index_copy(0, i, src)
    return out.reshape(a.shape)


def put_(a: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """put, in place."""
    return _inplace_call(a, lambda s: put(s, index, source, accumulate), (source,))


def msort(a: Tensor) -> Tensor:
    """a sorted along its first dimension."""
    return a.sort(dim=0).values


def split_with_sizes(a: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Pieces of the given sizes along dim (they must add up to its length)."""
    d = _wrap_dim(dim, a._data.ndim)
    sizes = [int(s) for s in split_sizes]
    if sum(sizes) != a._data.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {a._data.shape[d]} (input tensor's "
                           f"size at dimension {d}), but got split_sizes={sizes}")
    return a.split(sizes, d)


def new_empty_strided(a: Tensor, size, stride, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """empty_strided with a's dtype and device unless told."""
    from .shape import empty_strided
    return empty_strided(size, stride, dtype=dtype or a.dtype, device=device or a.device,
                         requires_grad=requires_grad)


# ------------------------------------------------------------------ index_reduce

_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")
_index_reduce_warned = [False]


def index_reduce(a: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """A copy of a with the slices of source reduced ('prod', 'mean', 'amax', 'amin') into a's slices at `index`
    along dim; include_self=False leaves a's own values out of the slices that receive any."""
    from .._dtype import int32, int64
    from .shape import _scatter_reduce_grads, scatter_reduce
    if not _index_reduce_warned[0]:  # PyTorch warns once per process
        _index_reduce_warned[0] = True
        warnings.warn("index_reduce() is in beta and the API may change at any time.", UserWarning, stacklevel=_user_stacklevel())
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if not isinstance(index, Tensor):
        raise TypeError(f"index_reduce(): argument 'index' (position 2) must be Tensor, not {type(index).__name__}")
    if not isinstance(source, Tensor):
        raise TypeError(f"index_reduce(): argument 'source' (position 3) must be Tensor, not {type(source).__name__}")
    x, src = a._data, source._data
    d = _wrap_dim(dim, x.ndim)
    if index._data.ndim > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: {index._data.ndim} with "
                         f"type: {_short(index.dtype)} and size: {list(index._data.shape)}")
    if index.dtype not in (int32, int64):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: {_short(index.dtype)}")
    if a.dtype is not source.dtype:
        raise RuntimeError(f"index_reduce_(): self ({_short(a.dtype)}) and source ({_short(source.dtype)}) must have "
                           f"the same scalar type")
    n = index._data.size
    along = src.shape[d] if src.ndim else 1
    if n != along:
        raise RuntimeError(f"index_reduce_(): Number of indices ({n}) should be equal to source.size(dim): "
                           f"({along}), for dim: {d}")
    if src.ndim != x.ndim or any(i != d and p != q for i, (p, q) in enumerate(zip(x.shape, src.shape))):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(x.shape)} source.shape = {list(src.shape)}")
    if x.dtype.kind in "bc":
        raise NotImplementedError(f"\"index_func_\" not implemented for '{_short(a.dtype)}'")
    idx = index.reshape(-1).to(int64)
    size = x.shape[d] if x.ndim else 1
    if n and (int(idx._data.min()) < 0 or int(idx._data.max()) >= size):
        raise IndexError("index out of range in self")
    if x.ndim == 0:
        return index_reduce(a.reshape(1), 0, idx, source.reshape(1), reduce, include_self=include_self).reshape(())
    # index_reduce is scatter_reduce with index spread over source's shape: slice i of source goes to index[i]
    spread = idx.reshape((1,) * d + (n,) + (1,) * (x.ndim - d - 1)).expand(*src.shape)
    prev = _grad_enabled()
    _C._set_grad_enabled(False)
    try:
        out = scatter_reduce(a, d, spread, source, reduce, include_self=include_self)
    finally:
        _C._set_grad_enabled(prev)
    if needs_grad(a, source):
        from ._common import alias, saved_output
        ra, rs = a._requires_grad, source._requires_grad
        out_alias = alias(out)

        def index_reduce_backward(g: Tensor):
            result = saved_output(out_alias, lambda: index_reduce(a, d, idx, source, reduce,
                                                                  include_self=include_self))
            ga, gs = _scatter_reduce_grads(g, a, d, spread, source, reduce, include_self, result)
            if not include_self:
                ga = ga.index_fill(d, idx, 0.0)
            return (ga if ra else None), (gs if rs else None)
        record("IndexReduceBackward0", index_reduce_backward, out, (a, source), (a, source, out_alias))
    return out


def index_reduce_(a: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                  include_self: bool = True) -> Tensor:
    """index_reduce, in place."""
    return _inplace_call(a, lambda s: index_reduce(s, dim, index, source, reduce, include_self=include_self),
                         (source,))


# ------------------------------------------------------------------ resize_

def _resize_sizes(sizes: tuple) -> tuple:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    out = []
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"resize_(): argument 'size' (position 1) must be tuple of ints, not {type(s).__name__}")
        out.append(int(s))
    if any(s < 0 for s in out):
        raise RuntimeError(f"numel: integer multiplication overflow (resize_ got the negative size {out}; sizes must "
                           f"be >= 0)")
    return tuple(out)


def resize_(a: Tensor, *sizes, memory_format=None) -> Tensor:
    """Give a the shape `sizes`, contiguous from its storage offset: the elements already there keep their values, a
    larger size grows the storage (new elements are uninitialised; other tensors keep the old storage).
    memory_format is accepted for PyTorch's signature: tinytorch lays every resized tensor out row-major."""
    if not sizes:
        raise TypeError('resize_() missing 1 required positional arguments: "size"')
    shape = _resize_sizes(sizes)
    if a._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    x = a._data
    if tuple(x.shape) == shape:
        return a
    if type(x) is MetaArray:
        a._data = MetaArray(shape, x.dtype)
    else:
        flat, off = _storage(x)
        need = off + int(np.prod(shape, dtype=np.int64))
        if need > flat.size:
            grown = _xp(x).zeros(need, dtype=x.dtype)
            grown[:flat.size] = flat
            flat = grown
        strides = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * x.itemsize for i in range(len(shape)))
        a._data = _stride_tricks(x).as_strided(flat[off:], shape, strides)
    a._bump_version()
    return a


def resize_as_(a: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """resize_ to the_template's shape (a keeps its dtype)."""
    if not isinstance(the_template, Tensor):
        raise TypeError(f"resize_as_(): argument 'the_template' (position 1) must be Tensor, not "
                        f"{type(the_template).__name__}")
    return resize_(a, tuple(the_template._data.shape), memory_format=memory_format)


attach(
    put=put, put_=put_, index_reduce=index_reduce, index_reduce_=index_reduce_, resize_=resize_,
    resize_as_=resize_as_, msort=msort, split_with_sizes=split_with_sizes, new_empty_strided=new_empty_strided,
    absolute_=_inplace_method("abs"), acos_=_inplace_method("acos"), arccos_=_inplace_method("acos"),
    asin_=_inplace_method("asin"), arcsin_=_inplace_method("asin"), atan_=_inplace_method("atan"),
    arctan_=_inplace_method("atan"), atan2_=_inplace_method("atan2"), arctan2_=_inplace_method("atan2"),
    cosh_=_inplace_method("cosh"), sinh_=_inplace_method("sinh"), tan_=_inplace_method("tan"),
    expm1_=_inplace_method("expm1"), exp2_=_inplace_method("exp2"), log10_=_inplace_method("log10"),
    log1p_=_inplace_method("log1p"), log2_=_inplace_method("log2"), frac_=_inplace_method("frac"),
    fmod_=_inplace_method("fmod"), sgn_=_inplace_method("sgn"), conj_physical_=_inplace_method("conj_physical"),
    negative_=_inplace_method("neg"), cumsum_=_inplace_method("cumsum"), cumprod_=_inplace_method("cumprod"),
    true_divide_=_inplace_method("div"), addmm_=_inplace_method("addmm"), baddbmm_=_inplace_method("baddbmm"),
    ldexp_=_inplace_method("ldexp"), bitwise_not_=_inplace_method("bitwise_not"),
    eq_=_inplace_predicate("eq", "EqBackward0"), ne_=_inplace_predicate("ne", "NeBackward0"),
    not_equal_=_inplace_predicate("ne", "NeBackward0"), lt_=_inplace_predicate("lt", "LtBackward0"),
    less_=_inplace_predicate("lt", "LtBackward0"), le_=_inplace_predicate("le", "LeBackward0"),
    less_equal_=_inplace_predicate("le", "LeBackward0"), gt_=_inplace_predicate("gt", "GtBackward0"),
    greater_=_inplace_predicate("gt", "GtBackward0"), ge_=_inplace_predicate("ge", "GeBackward0"),
    greater_equal_=_inplace_predicate("ge", "GeBackward0"),
    logical_and_=_inplace_predicate("logical_and", "LogicalAndBackward0"),
    logical_or_=_inplace_predicate("logical_or", "LogicalOrBackward0"),
    logical_xor_=_inplace_predicate("logical_xor", "LogicalXorBackward0"),
    logical_not_=_inplace_predicate("logical_not", "LogicalNotBackward0"),
    squeeze_=_inplace_view("squeeze", _squeeze_node),
    unsqueeze_=_inplace_view("unsqueeze", lambda args: "UnsqueezeBackward1"),
    t_=_inplace_view("t", lambda args: "TBackward1"),
    transpose_=_inplace_view("transpose", lambda args: "TransposeBackward1"),
    swapaxes_=_inplace_view("transpose", lambda args: "TransposeBackward1"),
    swapdims_=_inplace_view("transpose", lambda args: "TransposeBackward1"),
    positive=positive, __pos__=positive, is_signed=is_signed, storage_offset=storage_offset, is_nonzero=is_nonzero,
    is_same_size=is_same_size, as_strided=as_strided, unfold=unfold, fill_diagonal_=fill_diagonal_,
    frexp=frexp, ldexp=ldexp, random_=random_, cauchy_=cauchy_, log_normal_=log_normal_, geometric_=geometric_,
    exponential_=exponential_, bernoulli=_bernoulli, multinomial=_multinomial,
    itemsize=property(lambda a: a._data.itemsize, doc="Bytes per element."),
    nbytes=property(lambda a: a._data.size * a._data.itemsize, doc="Bytes the elements take."),
    H=property(_H, doc="The conjugate transpose of a matrix."),
    layout=property(lambda a: strided, doc="The memory layout (always tinytorch.strided)."),
)


# ------------------------------------------------------------------ Python callables applied elementwise

def _python_map(a: Tensor, fn, others: tuple, name: str) -> Tensor:
    """a[i] = fn(a[i], *(o[i] for o in others)), in place, one Python call per element (CPU tensors only)."""
    if a._requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() instead.")
    if not callable(fn):
        raise TypeError(f"'{type(fn).__name__}' object is not callable")
    if not a.is_cpu:
        raise TypeError(f"{name} is only implemented on CPU tensors")
    x = a._data
    arrays = []
    for arg, o in zip(("'other'",) if len(others) == 1 else ("argument 'x'", "argument 'y'"), others):
        if not isinstance(o, Tensor):
            raise TypeError(f"{name}(): {arg} must be Tensor, not {type(o).__name__}")
        if o.dtype is not a.dtype:
            raise TypeError(f"{name}: expected {a.type()} for {arg} (got {o.type()})")
        arrays.append(o.detach().expand(*x.shape)._data)
    for i in np.ndindex(x.shape):
        v = fn(x[i].item(), *(arr[i].item() for arr in arrays))
        if not isinstance(v, (bool, int, float, complex, np.generic)):
            raise TypeError(f"must be real number, not {type(v).__name__}")
        x[i] = v
    a._bump_version()
    return a


def apply_(a: Tensor, callable) -> Tensor:  # noqa: A002  (PyTorch's parameter name)
    """Replace every element v of a with callable(v), in place (slow: one Python call per element)."""
    return _python_map(a, callable, (), "apply_")


def map_(a: Tensor, tensor: Tensor, callable) -> Tensor:  # noqa: A002
    """a[i] = callable(a[i], tensor[i]) with tensor broadcast to a's shape, in place."""
    return _python_map(a, callable, (tensor,), "map_")


def map2_(a: Tensor, x: Tensor, y: Tensor, callable) -> Tensor:  # noqa: A002
    """a[i] = callable(a[i], x[i], y[i]) with x and y broadcast to a's shape, in place."""
    return _python_map(a, callable, (x, y), "map2_")


# ------------------------------------------------------------------ bit shifts

def _shift(input, other, left: bool) -> Tensor:
    """input << other (or >>) in the promoted integer dtype; shifts outside [0, bits) give PyTorch's results (0, or
    the sign for a right shift) instead of the C undefined behaviour."""
    from .._dtype import result_type
    ref = input if isinstance(input, Tensor) else other
    if not isinstance(ref, Tensor):
        raise TypeError(f"bitwise_{'left' if left else 'right'}_shift(): expected a Tensor argument")
    dt = result_type(input, other)
    if dt.np.kind not in "iu":
        raise NotImplementedError(f"\"{'l' if left else 'r'}shift_cpu\" not implemented for '{_short(dt)}'")
    xp = _xp(ref._data)
    x = input._data.astype(dt.np, copy=False) if isinstance(input, Tensor) else xp.asarray(input, dtype=dt.np)
    y = other._data.astype(dt.np, copy=False) if isinstance(other, Tensor) else xp.asarray(other, dtype=dt.np)
    bits = dt.np.itemsize * 8
    clipped = xp.clip(y, 0, bits - 1)
    if left:
        out = xp.where((y < 0) | (y >= bits), 0, xp.left_shift(x, clipped))
    else:
        out = xp.right_shift(x, clipped)
        out = xp.where((y < 0) | ((y >= bits) & (x >= 0)), 0, out)
    return _wrap(out.astype(dt.np, copy=False))


def bitwise_left_shift(input, other) -> Tensor:
    """input shifted left by other bits, elementwise (integer dtypes)."""
    return _shift(input, other, True)


def bitwise_right_shift(input, other) -> Tensor:
    """input shifted right by other bits (arithmetic shift for signed dtypes), elementwise."""
    return _shift(input, other, False)


def _shift_(a: Tensor, other, left: bool) -> Tensor:
    from ._common import commit_inplace
    return commit_inplace(a, _shift(a, other, left))


# ------------------------------------------------------------------ incomplete gamma

def _check_igamma(a: Tensor, other: Tensor, name: str) -> None:
    from .._dtype import result_type
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    dt = result_type(a, other)
    if dt.np.kind not in "fV":
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{_short(dt)}'")


def _igamma(a: Tensor, other: Tensor, upper: bool) -> Tensor:
    """P(a, x) (or Q(a, x) = 1 - P when upper), differentiable in x only, as in PyTorch."""
    from .._dtype import result_type
    from .._device import move
    from ..distributions._special import _continued_fraction_q, _lgamma, gammainc_array, host
    name = "igammac" if upper else "igamma"
    _check_igamma(a, other, name)
    dt = result_type(a, other)
    av, xv = np.broadcast_arrays(host(a), host(other))
    p = gammainc_array(av, xv)
    if upper:
        q = 1 - p
        tail = (xv >= av + 1) & np.isfinite(xv)  # Q straight from its continued fraction: 1 - P loses Q's digits
        if tail.any():
            q[tail] = _continued_fraction_q(av[tail], xv[tail])
        p = q
    out = _wrap(move(p.astype(dt.np), other.device))
    if needs_grad(a, other):
        ra = a._requires_grad
        sign = -1.0 if upper else 1.0

        def igamma_backward(g: Tensor):
            if ra:
                raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
            with np.errstate(all="ignore"):
                pdf = np.exp((av - 1) * np.log(xv) - xv - _lgamma(av))
            d = _wrap(move((sign * np.where(xv > 0, pdf, 0.0)).astype(dt.np), other.device))
            return None, sum_to(g * d, tuple(other._data.shape))
        record("IgammacBackward0" if upper else "IgammaBackward0", igamma_backward, out, (a, other))
    return out


def igamma(a: Tensor, other: Tensor) -> Tensor:
    """The regularized lower incomplete gamma function P(a, other) (torch.special.gammainc)."""
    return _igamma(a, other, False)


def igammac(a: Tensor, other: Tensor) -> Tensor:
    """The regularized upper incomplete gamma function Q(a, other) = 1 - P(a, other) (torch.special.gammaincc)."""
    return _igamma(a, other, True)


# ------------------------------------------------------------------ storage: set_, storage(), as_strided_

# The C++ names PyTorch's set_ puts in its dtype error.
_SET_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>"}


def _not_differentiable(name: str):
    def backward(g: Tensor):
        raise RuntimeError(f"derivative for aten::{name} is not implemented")
    return backward


def set_(a: Tensor, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:
    """Make a use source's memory: a tensor (a takes its data, shape and strides), a storage (viewed with the given
    offset, size and stride; the whole storage as 1-D by default) or nothing (a becomes empty). Not differentiable."""
    from ..storage import TypedStorage
    x = a._data
    if source is None:
        data = _xp(x).empty((0,), dtype=x.dtype)
    elif isinstance(source, Tensor):
        if source._data.dtype != x.dtype:
            raise RuntimeError(f"Could not set tensor of type {_SET_NAMES[source.dtype.name]} to a tensor of type "
                               f"{_SET_NAMES[a.dtype.name]}")
        data = source._data
    elif isinstance(source, TypedStorage):
        flat = source._array
        if flat.dtype != x.dtype:
            if flat.dtype != np.uint8:
                raise RuntimeError(f"Expected a Storage of type {a.dtype} or an UntypedStorage, but got "
                                   f"{source.dtype}")
            flat = flat[:flat.size - flat.size % x.itemsize].view(x.dtype)
        shape = (flat.size - int(storage_offset),) if size is None else tuple(int(s) for s in size)
        if stride is None:
            stride = tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
        data = as_strided(_wrap(flat), shape, stride, storage_offset)._data
    else:
        raise TypeError(f"set_(): argument 'source' must be Tensor or Storage, not {type(source).__name__}")
    record_grad = _grad_enabled() and (a._requires_grad or (isinstance(source, Tensor) and source._requires_grad))
    if record_grad:
        check_inplace(a)
    a._data = data
    a._bump_version()
    if record_grad:
        ins = tuple(t for t in (a, source) if isinstance(t, Tensor) and t._requires_grad)
        record("NotImplemented", _not_differentiable("set_"), a, ins)
    return a


def is_set_to(a: Tensor, tensor: Tensor) -> bool:
    """Whether both tensors view the same memory with the same shape and strides."""
    x, y = a._data, tensor._data
    if type(x) is not type(y) or x.dtype != y.dtype or x.shape != y.shape or x.strides != y.strides:
        return False
    return _ptr(x) == _ptr(y) and _ptr(_root(x)) == _ptr(_root(y))


def untyped_storage(a: Tensor):
    """The bytes a views (its base array's memory), as an UntypedStorage."""
    from ..storage import UntypedStorage
    return UntypedStorage(_storage(a._data)[0])


def storage(a: Tensor):
    """The memory a views, as a TypedStorage of a's dtype."""
    from ..storage import TypedStorage
    return TypedStorage(_storage(a._data)[0], a.dtype)


def as_strided_(a: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """a itself becomes as_strided(a, size, stride, storage_offset)."""
    record_grad = a._requires_grad and _grad_enabled()
    if record_grad:
        check_inplace(a)
        r = as_strided(_new_history(a, _wrap(a._data)), size, stride, storage_offset)
        view = r
    else:
        prev = _grad_enabled()
        _C._set_grad_enabled(False)
        try:
            r = as_strided(a, size, stride, storage_offset)
        finally:
            _C._set_grad_enabled(prev)
    a._data = r._data
    a._bump_version()
    if record_grad:
        # a is the output of a node named as PyTorch's in-place form, behind the out-of-place view's node
        a._grad_fn = None
        record("AsStridedBackward1", lambda g: g, a, (view,))
    return a


def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A copy of input (read as a contiguous storage) with src written where as_strided(size, stride, offset)
    would look."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if tuple(src._data.shape) != size:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src._data.shape)}, slice size = {list(size)}")
    base = input.contiguous()
    off = 0 if storage_offset is None else int(storage_offset)
    # The out-of-bounds checks of as_strided, on input's own storage.
    as_strided(base.detach(), size, stride, off)
    idx = _wrap(_xp(input._data).asarray(_element_index(size, stride, off).reshape(-1)))
    prev = _grad_enabled()
    _C._set_grad_enabled(False)
    try:
        out = base.reshape(-1).index_copy(0, idx, src.reshape(-1).to(input.dtype)).reshape(input.shape)
    finally:
        _C._set_grad_enabled(prev)
    if needs_grad(input, src):
        shape = tuple(input._data.shape)

        def as_strided_scatter_backward(g: Tensor):
            flat = g.reshape(-1)
            return flat.index_fill(0, idx, 0).reshape(shape), flat.index_select(0, idx).reshape(size)
        record("AsStridedScatterBackward0", as_strided_scatter_backward, out, (input, src))
    return out


# ------------------------------------------------------------------ legacy constructors: Tensor.new, torch.FloatTensor

def _legacy_new(dtype, device, args: tuple, what: str = "new()") -> Tensor:
    """PyTorch's legacy constructor: () empty, ints or a Size a shape (uninitialized), a sequence the data, a tensor
    of this dtype itself (sharing its memory)."""
    from .._creation import empty, tensor
    from .._tensor import Size
    if not args:
        return empty(0, dtype=dtype, device=device)
    if len(args) == 1:
        arg = args[0]
        if isinstance(arg, Tensor):
            if arg.dtype is not dtype:
                raise TypeError(f"{what}: expected a tensor of dtype {dtype} (got {arg.dtype})")
            out = _new(Tensor)
            out._data = arg._data
            out._vc = arg._shared_vc()
            return out
        if isinstance(arg, Size):
            return empty(tuple(arg), dtype=dtype, device=device)
        if isinstance(arg, (list, tuple, np.ndarray)):
            return tensor(arg, dtype=dtype, device=device)
        if not isinstance(arg, (int, np.integer)) or isinstance(arg, bool):
            raise TypeError(f"new(): data must be a sequence (got {type(arg).__name__})")
    for s in args:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{what} received an invalid combination of arguments: sizes must be ints, got "
                            f"{type(s).__name__}")
    return empty(tuple(int(s) for s in args), dtype=dtype, device=device)


def new(a: Tensor, *args, device=None) -> Tensor:
    """The legacy constructor with a's dtype and device: x.new(2, 3), x.new([1, 2]), x.new()."""
    return _legacy_new(a.dtype, a.device if device is None else device, args)


# ------------------------------------------------------------------ small queries and aliases

def dim_order(a: Tensor, *, ambiguity_check: bool = False) -> tuple:
    """The dims from outermost to innermost in memory (largest stride first; ties keep their order)."""
    if not isinstance(ambiguity_check, bool):
        raise TypeError("The ambiguity_check argument must be a bool or a list of memory formats.")
    st = a.stride()
    return tuple(sorted(range(len(st)), key=lambda d: -st[d]))


def module_load(a: Tensor, other: Tensor, assign: bool = False) -> Tensor:
    """What load_state_dict swaps in for a parameter or buffer a: other detached (assign) or a with other's values."""
    if assign:
        return other.detach()
    prev = _grad_enabled()
    _C._set_grad_enabled(False)
    try:
        return a.copy_(other).detach()
    finally:
        _C._set_grad_enabled(prev)


def to_dense(a: Tensor, dtype=None, *, masked_grad: bool | None = None) -> Tensor:
    """a itself (tinytorch's tensors are all dense), cast to dtype if given."""
    return a if dtype is None else a.to(dtype)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """nonzero's (n, ndim) indices cut or padded with fill_value to exactly `size` rows (a shape known up front)."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    prev = _grad_enabled()
    _C._set_grad_enabled(False)
    try:
        idx = input.nonzero()._data[:size]
    finally:
        _C._set_grad_enabled(prev)
    pad = _xp(idx).full((size - idx.shape[0], idx.shape[1]), fill_value, dtype=np.int64)
    return _wrap(_xp(idx).concatenate([idx, pad]))


def _removed(name: str, replacement: str):
    def fn(*args, **kwargs):
        raise RuntimeError(f"This function was deprecated since version 1.9 and is now removed. {replacement}")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Removed in PyTorch 1.9 (raises, as PyTorch does): {replacement}"
    return fn


eig = _removed("eig", "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than real "
                      "tensors mimicking complex tensors: use torch.linalg.eig or torch.linalg.eigvals.")
symeig = _removed("symeig", "Use torch.linalg.eigh or torch.linalg.eigvalsh (they read the lower triangle by "
                            "default).")
lstsq = _removed("lstsq", "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`. `torch.linalg.lstsq` has "
                          "reversed arguments and does not return the QR decomposition in the returned tuple.")
solve = _removed("solve", "`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` has its "
                          "arguments reversed and does not return the LU factorization.")


def _resize_view(a: Tensor, shape: tuple) -> Tensor:
    n = int(np.prod(shape, dtype=np.int64))
    if n != a._data.size:
        raise RuntimeError(f"requested resize to {'x'.join(map(str, shape))} ({n} elements in total), but the given "
                           f"tensor has a size of {'x'.join(map(str, a._data.shape))} ({a._data.size} elements). "
                           f"autograd's resize can only change the shape of a given tensor, while preserving the "
                           f"number of elements. ")
    return a.contiguous().view(shape)


def resize(a: Tensor, *sizes) -> Tensor:
    """The deprecated out-of-place resize: a tensor sharing a's memory in the new shape (same number of elements)."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=_user_stacklevel())
    return _resize_view(a, _resize_sizes(sizes))


def resize_as(a: Tensor, tensor: Tensor) -> Tensor:
    """The deprecated out-of-place resize_as."""
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=_user_stacklevel())
    return _resize_view(a, tuple(tensor._data.shape))


def _false(doc: str) -> property:
    return property(lambda a: False, doc=doc)


attach(
    apply_=apply_, map_=map_, map2_=map2_,
    bitwise_left_shift=bitwise_left_shift, bitwise_right_shift=bitwise_right_shift,
    bitwise_left_shift_=lambda a, other: _shift_(a, other, True),
    bitwise_right_shift_=lambda a, other: _shift_(a, other, False),
    __lshift__=bitwise_left_shift, __rshift__=bitwise_right_shift,
    __rlshift__=lambda a, other: _shift(other, a, True), __rrshift__=lambda a, other: _shift(other, a, False),
    __ilshift__=lambda a, other: _shift_(a, other, True), __irshift__=lambda a, other: _shift_(a, other, False),
    igamma=igamma, igammac=igammac, igamma_=_inplace_method("igamma"), igammac_=_inplace_method("igammac"),
    set_=set_, is_set_to=is_set_to, storage=storage, untyped_storage=untyped_storage, as_strided_=as_strided_,
    as_strided_scatter=as_strided_scatter, new=new, dim_order=dim_order, module_load=module_load, to_dense=to_dense,
    nonzero_static=nonzero_static, eig=eig, symeig=symeig, lstsq=lstsq, solve=solve,
    resize=resize, resize_as=resize_as,
    const_data_ptr=lambda a: a.data_ptr(), is_distributed=lambda a: False,
    dense_dim=lambda a: a._data.ndim, sparse_dim=lambda a: 0,
    unsafe_chunk=lambda a, chunks, dim=0: a.chunk(chunks, dim),
    unsafe_split=lambda a, split_size, dim=0: a.split(split_size, dim),
    unsafe_split_with_sizes=lambda a, split_sizes, dim=0: split_with_sizes(a, split_sizes, dim),
    is_sparse=_false("Always False: tinytorch's tensors are dense."),
    is_sparse_csr=_false("Always False: tinytorch's tensors are dense."),
    is_quantized=_false("Always False: tinytorch has no quantized tensors."),
    is_nested=_false("Always False: tinytorch has no nested tensors."),
    is_mkldnn=_false("Always False: tinytorch has no MKL-DNN layout."),
    **{f"is_{d}": _false(f"Always False: tinytorch has no {d} device.")
       for d in ("mps", "xpu", "xla", "vulkan", "mtia", "maia", "ipu")},
)

__all__ = ["index_reduce", "as_strided", "frexp", "ldexp", "positive", "is_nonzero", "is_same_size", "msort", "layout",
           "strided"]
