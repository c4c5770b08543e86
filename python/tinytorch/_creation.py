"""Making tensors: from data, filled, ranges, and random (Generator, manual_seed)."""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from ._device import CPU, cuda_context, device_of, move, to_device, xp_for
from ._dtype import (bool_, complex128, dtype as _dtype_cls, from_numpy_dtype, get_default_dtype, int64, promote_types,
                     to_dtype)
from ._tensor import Tensor, _set_requires_grad, _wrap
from . import _deterministic
from ._meta import namespace as meta_namespace


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        _set_requires_grad(t, True, _FACTORY_GRAD_ERROR)
    return t


_FACTORY_GRAD_ERROR = "Only Tensors of floating point and complex dtype can require gradients"


def _infer_dtype(data) -> _dtype_cls:
    """PyTorch's infer_scalar_type: Python floats take the default dtype, ints int64, bools bool, complex numbers the
    default complex; tensors and NumPy values their own dtype; a sequence the promotion of its items (the default
    dtype when empty)."""
    if isinstance(data, (list, tuple, range)):
        if not len(data):
            return get_default_dtype()
        kinds = set(map(type, data))
        if kinds <= _PY_SCALAR_DTYPES.keys():  # the common case, one pass over plain Python numbers
            return functools.reduce(promote_types, (_PY_SCALAR_DTYPES[k]() for k in kinds))
        out = None
        for v in data:
            if isinstance(v, str):  # a string inside a sequence: PyTorch's error (a bare one is a type error)
                raise ValueError(f"too many dimensions '{type(v).__name__}'")
            d = _infer_dtype(v)
            out = d if out is None else promote_types(out, d)
            if out is complex128:  # nothing promotes further
                break
        return out
    scalar = _PY_SCALAR_DTYPES.get(type(data))
    if scalar is not None:
        return scalar()
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, (np.ndarray, np.generic)):
        return from_numpy_dtype(data.dtype)
    for t in (bool, int, float, complex):  # subclasses of the Python number types
        if isinstance(data, t):
            return _PY_SCALAR_DTYPES[t]()
    if isinstance(data, str):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")


_PY_SCALAR_DTYPES = {bool: lambda: bool_, int: lambda: int64, float: get_default_dtype,
                     complex: lambda: get_default_dtype().to_complex()}


def _is_sequence(x) -> bool:
    return isinstance(x, (list, tuple, range)) or (isinstance(x, (np.ndarray, Tensor)) and x.ndim > 0)


def _raise_not_rectangular(data, dt: _dtype_cls) -> None:
    """PyTorch's error for nested data that is not rectangular: the shape comes from the first items, and the
    first item that disagrees with it is reported."""
    sizes = []
    x = data
    while _is_sequence(x):
        sizes.append(len(x))
        if not len(x):
            break
        x = x[0]

    def walk(x, d: int) -> None:
        if d == len(sizes):
            if _is_sequence(x):
                if dt._category == 1:
                    raise TypeError(f"'{type(x).__name__}' object cannot be interpreted as an integer")
                raise TypeError(f"must be real number, not {type(x).__name__}")
            return
        if not _is_sequence(x):
            raise TypeError("not a sequence")
        if len(x) != sizes[d]:
            raise ValueError(f"expected sequence of length {sizes[d]} at dim {d} (got {len(x)})")
        for v in x:
            walk(v, d + 1)
    walk(data, 0)


def _checked_integers(raw: np.ndarray, dt: _dtype_cls) -> np.ndarray:
    """raw (Python data as NumPy made it) as integer dtype dt, with PyTorch's overflow errors: a Python int must
    fit int64 and then dt (negative ones wrap into unsigned types, as C casts do); a float must lie within dt's
    range (and is truncated)."""
    kind = raw.dtype.kind
    if kind == "c":
        raise TypeError("'complex' object cannot be interpreted as an integer")
    if kind == "O" or (kind == "u" and raw.size and int(raw.max()) > np.iinfo(np.int64).max):
        raise ValueError("Overflow when unpacking long long")
    info = np.iinfo(dt.np)
    if kind == "f":
        bad = ~((raw >= info.min) & (raw <= info.max))  # NaN fails both comparisons
    elif kind in "iu" and dt.np != np.int64:
        lo = -info.max if info.min == 0 else info.min
        bad = (raw < lo) | (raw > info.max)
    else:
        bad = None
    if bad is not None and bad.any():
        raise RuntimeError(f"value cannot be converted to type {dt.name} without overflow")
    with np.errstate(invalid="ignore"):
        return raw.astype(dt.np)


def _from_python(data, dt: _dtype_cls) -> np.ndarray:
    """Nested Python data as an array of dtype dt, failing where PyTorch does (ragged nesting, overflow, complex
    into a real type)."""
    if isinstance(data, range):
        data = list(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            if dt._category == 1:
                return _checked_integers(np.array(data), dt)
            with np.errstate(over="ignore"):  # PyTorch stores an out-of-range float as inf, silently
                return np.array(data, dtype=dt.np)
    except np.exceptions.ComplexWarning:
        raise TypeError("must be real number, not complex") from None
    except (ValueError, TypeError):
        _raise_not_rectangular(data, dt)
        if dt._category == 2 and _infer_dtype(data).is_complex:
            raise TypeError("must be real number, not complex") from None
        raise


def _to_array(data, dt, dev):
    if isinstance(data, Tensor):
        arr = data._data
        arr = arr.astype(dt.np, copy=True) if dt is not None else arr.copy()
        return move(arr, dev)
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        arr = np.array(data, dtype=dt.np if dt is not None else None, copy=True)
        if dt is None:
            arr = arr.astype(from_numpy_dtype(arr.dtype).np, copy=False)
        return move(arr, dev)
    if hasattr(data, "__cuda_array_interface__") or type(data).__module__.startswith("cupy"):
        arr = data.astype(dt.np) if dt is not None else data.copy()
        return move(arr, dev)
    if dt is None:
        dt = _infer_dtype(data)
    if isinstance(data, (list, tuple)) and _holds_tensor(data):
        data = _nested_tensors_to_lists(data)
    return move(_from_python(data, dt), dev)


def _holds_tensor(data) -> bool:
    """Whether nested lists/tuples hold a Tensor anywhere (one set of item types per list, not a call per item)."""
    kinds = set(map(type, data))
    if kinds <= _PY_SCALAR_DTYPES.keys():
        return False
    return any(isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and _holds_tensor(v)) for v in data)


def _nested_tensors_to_lists(data):
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_nested_tensors_to_lists(v) for v in data]
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, scalars, NumPy/CuPy arrays, tensors)."""
    from ._ops._common import called_by_user
    if isinstance(data, Tensor) and called_by_user():
        import warnings
        from ._ops._common import user_stacklevel
        warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
                      "sourceTensor.detach().clone().requires_grad_(True), rather than torch.tensor(sourceTensor).",
                      UserWarning, stacklevel=user_stacklevel())
    dt = to_dtype(dtype) if dtype is not None else None
    dev = to_device(device) if device is not None else (data.device if isinstance(data, Tensor) else to_device(None))
    return _finish(_wrap(_to_array(data, dt, dev)), requires_grad)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like tensor(), but shares memory with a tensor or NumPy array when dtype and device allow."""
    dt = to_dtype(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        if (dt is None or data.dtype is dt) and (device is None or data.device == to_device(device)):
            return data
        return data.to(device=device, dtype=dt)
    if isinstance(data, np.ndarray) and (dt is None or data.dtype == dt.np) and \
            (device is None or to_device(device).type == "cpu"):
        from_numpy_dtype(data.dtype)
        return _wrap(data)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with a NumPy array."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    from_numpy_dtype(array.dtype)
    if any(st < 0 for st in array.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors with negative strides "
                         "are not currently supported. (You can probably work around this by making a copy of your "
                         "array  with array.copy().) ")
    if not array.flags.writeable and not _warned_read_only[0]:
        import warnings
        from ._ops._common import user_stacklevel
        _warned_read_only[0] = True  # once a program, as PyTorch
        warnings.warn("The given NumPy array is not writable, and PyTorch does not support non-writable tensors. This "
                      "means writing to this tensor will result in undefined behavior. You may want to copy the array "
                      "to protect its data or make it writable before converting it to a tensor. This type of "
                      "warning will be suppressed for the rest of this program.", UserWarning,
                      stacklevel=user_stacklevel())
    return _wrap(array)


_warned_read_only = [False]


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) or (isinstance(x, Tensor) and x.ndim == 0 and x.dtype._category <= 1)


def _size(args: tuple, fn: str, keyword: bool = False) -> tuple:
    """The shape given as several ints or one sequence of them, with PyTorch's argument errors naming `fn`."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        seq = args[0]
    elif len(args) == 1 and not _is_int(args[0]):
        where = "" if keyword else " (position 1)"
        raise TypeError(f"{fn}(): argument 'size'{where} must be tuple of ints, not {type(args[0]).__name__}")
    else:
        seq = args
    out = []
    for i, v in enumerate(seq):
        if not _is_int(v):
            raise TypeError(f"{fn}(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                            f"\"type must be tuple of ints,but got {type(v).__name__}\"")
        out.append(int(v))
    for v in out:
        if v < 0:
            if fn == "zeros":  # ATen's zeros checks its sizes itself, with its own words
                raise RuntimeError("zeros: Dimension size must be non-negative.")
            raise RuntimeError(f"Trying to create tensor with negative dimension {v}: {out}")
    return tuple(out)


def _factory(fill, fn: str):
    def make(*args, size=None, dtype=None, device=None, requires_grad=False, out=None, layout=None,
             pin_memory=False, memory_format=None):
        dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
        dev = to_device(device)
        xp = xp_for(dev)
        shape = _size(args, fn) if size is None else _size((size,), fn, keyword=True)
        with cuda_context(dev):
            arr = fill(xp, shape, dt.np)
        return _finish(_wrap(arr), requires_grad)
    make.__name__ = make.__qualname__ = fn
    return make


zeros = _factory(lambda xp, s, d: xp.zeros(s, d), "zeros")
ones = _factory(lambda xp, s, d: xp.ones(s, d), "ones")


def _uninitialized(xp, shape, dt):
    """xp.empty; under use_deterministic_algorithms(True) with utils.deterministic.fill_uninitialized_memory (the
    default), filled as PyTorch fills it: NaN for floating and complex dtypes, the largest value for integers (True for bool)."""
    arr = xp.empty(shape, dt)
    if _deterministic._mode[0] and xp is not meta_namespace:
        from .utils import deterministic
        if deterministic.fill_uninitialized_memory:
            k = np.dtype(dt).kind
            if k in "fcV":
                arr.fill(np.nan)
            elif k in "iu":
                arr.fill(np.iinfo(dt).max)
            elif k == "b":
                arr.fill(True)
    return arr


empty = _factory(_uninitialized, "empty")


zeros.__doc__ = "A tensor of zeros."
ones.__doc__ = "A tensor of ones."
empty.__doc__ = "An uninitialized tensor."


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor filled with fill_value (dtype inferred from it, as in PyTorch)."""
    return _full(size, fill_value, "full", dtype=dtype, device=device, requires_grad=requires_grad)


# The C++ type names PyTorch's checked scalar conversions print.
_C_TYPE_NAMES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t",
                 "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float", "float64": "double",
                 "bool": "bool", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def _check_scalar_fits(value, dt: _dtype_cls) -> None:
    """PyTorch's checked_convert of a fill value to dt: an integer type must hold it (negative ints wrap into
    unsigned types), a finite float must not overflow a float type."""
    if isinstance(value, Tensor) or isinstance(value, (bool, np.bool_)) or dt is bool_ or dt.is_complex:
        return
    if isinstance(value, complex):
        return
    v = value.item() if isinstance(value, np.generic) else value
    if dt._category == 1:
        info = np.iinfo(dt.np)
        if isinstance(v, float):
            bad = not (info.min <= v <= info.max)
        else:
            bad = v > info.max or v < (-info.max if info.min == 0 else info.min)
    else:
        finfo = np.finfo(dt.np)
        bad = math.isfinite(v) and abs(v) > float(finfo.max)
    if bad:
        raise RuntimeError(f"value cannot be converted to type {_C_TYPE_NAMES[dt.name]} without overflow")


def _full(size, fill_value, fn: str, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{fn}(): argument 'size' (position 1) must be tuple of ints, not {type(size).__name__}")
    if isinstance(fill_value, np.generic):  # a Scalar to PyTorch: its dtype is inferred as a Python number's
        fill_value = fill_value.item()
    if dtype is None:
        dtype = _infer_dtype(fill_value) if not isinstance(fill_value, Tensor) else fill_value.dtype
    dt = to_dtype(dtype)
    _check_scalar_fits(fill_value, dt)
    dev = to_device(device)
    shape = _size((size,), fn)
    value = fill_value.item() if isinstance(fill_value, Tensor) else fill_value
    with cuda_context(dev), np.errstate(over="ignore", invalid="ignore"):
        if dt._category == 1 and isinstance(value, int) and not isinstance(value, bool) and value < 0 \
                and np.iinfo(dt.np).min == 0:
            value += 1 << (8 * dt.itemsize)  # a negative int wraps into an unsigned type, as in C
        arr = xp_for(dev).full(shape, value, dt.np)
    return _finish(_wrap(arr), requires_grad)


def _dtensor_like(t: Tensor, local: Tensor) -> Tensor:
    """For a DTensor t: `local` (made with t's local shape) as a DTensor laid out like t (a pending sum's pieces
    become replicated values: ones_like(partial) is ones, not a sum of them)."""
    from .distributed.tensor._redistribute import normalize_for_grad
    out = t._like(local._data)
    out._placements = normalize_for_grad(t._placements)
    out._requires_grad = local._requires_grad
    return out


def _like(fn):
    def make(t: Tensor, dtype=None, device=None, requires_grad=False, memory_format=None, **kw):
        if getattr(t, "_placements", None) is not None:  # a DTensor: its local piece's shape
            return _dtensor_like(t, fn(*t._data.shape, dtype=dtype or t.dtype, device=device or t.device,
                                       requires_grad=requires_grad))
        return fn(*t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)
    return make


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(t: Tensor, fill_value, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    """A tensor shaped like t filled with fill_value."""
    if getattr(t, "_placements", None) is not None:
        return _dtensor_like(t, full(t._data.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device,
                                     requires_grad=requires_grad))
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def arange(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Values from start to end (exclusive) by step; integer dtype when all arguments are integers. Follows
    PyTorch's arange: the bounds and step are cast to the dtype first (an integer dtype truncates them), the length
    is computed in double, and element i is start + i * step."""
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if dtype is None:
        dtype = int64 if all(isinstance(v, (int, np.integer)) for v in vals) else get_default_dtype()
    dt = to_dtype(dtype)
    if dt is bool_ or dt.is_complex:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{_scalar_name(dt)}'")
    integral = dt._category == 1
    if integral:
        if any(isinstance(v, float) and not math.isfinite(v) for v in vals):
            raise RuntimeError(f"unsupported range: {_cnum(vals[0])} -> {_cnum(vals[1])}")
        xstart, xend, xstep = (int(v) for v in vals)
        if xstep == 0:
            # a fractional step that truncates to zero is rejected by PyTorch's Python layer, as a ValueError
            raise (ValueError if vals[2] != 0 else RuntimeError)("step must be nonzero")
    else:
        xstart, xend, xstep = (float(v) for v in vals)
        if not (xstep > 0 or xstep < 0):
            raise RuntimeError("step must be nonzero")
        if not (math.isfinite(xstart) and math.isfinite(xend)):
            raise RuntimeError(f"unsupported range: {_cnum(xstart)} -> {_cnum(xend)}")
    if not ((xstep > 0 and xend >= xstart) or (xstep < 0 and xend <= xstart)):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if integral:
        sgn = 1 if xstep > 0 else -1
        n = abs(xend - xstart + xstep - sgn) // abs(xstep)
    else:
        size_d = math.ceil((float(vals[1]) - float(vals[0])) / float(vals[2]))
        if size_d > np.iinfo(np.int64).max:
            raise RuntimeError("invalid size, possible overflow?")
        n = int(size_d)
    dev = to_device(device)
    xp = xp_for(dev)
    with cuda_context(dev), np.errstate(over="ignore", invalid="ignore"):
        if integral:
            arr = (xp.arange(n, dtype=np.int64) * xstep + xstart).astype(dt.np)  # wraps, as PyTorch's cast does
        else:
            arr = (xp.arange(n, dtype=np.float64) * xstep + xstart).astype(dt.np)
    return _finish(_wrap(arr), requires_grad)


def _cnum(v) -> str:
    """A number as C++ streams print it in PyTorch's messages (2.0 -> 2, inf -> inf)."""
    return str(v) if isinstance(v, (int, np.integer)) else f"{float(v):g}"


def _scalar_name(dt: _dtype_cls) -> str:
    """PyTorch's ScalarType name (Float, Long, ...), as its not-implemented errors print it."""
    from ._ops._common import _short
    return _short(dt)


def _range_values(start, end, steps: int, dt, xp):
    """PyTorch's linspace kernel: step = (end - start) / (steps - 1); the first half counts up from start and
    the second half down from end (so both ends are exact), computed in dt (in double for integer dtypes)."""
    if dt.is_complex:
        work = np.complex128 if dt.np == np.complex128 else np.complex64
    elif dt._category <= 1 or dt.np == np.float64:
        work = np.float64  # PyTorch's step is a double for integer dtypes
    else:
        work = np.float32  # (the half types too: PyTorch computes in them, a little less exactly)
    if dt._category == 1:
        _check_scalar_fits(start, dt)
        _check_scalar_fits(end, dt)
        start, end = int(start), int(end)
    a, b = work(start), work(end)
    if steps == 1:
        return xp.full(1, a, work)
    idx = xp.arange(steps)
    step = (b - a) / work(steps - 1)
    half = steps // 2
    with np.errstate(invalid="ignore", over="ignore"):
        up = a + step * idx.astype(work)
        down = b - step * (steps - idx - 1).astype(work)
        return xp.where(idx < half, up, down)


def _check_steps(start, end, steps, fn: str) -> None:
    if not _is_int(steps):
        kinds = ", ".join(type(v).__name__ for v in (start, end, steps))
        extra = ", float base = 10.0" if fn == "logspace" else ""
        forms = "".join(f" * ({a} start, {b} end, int steps{extra}, *, Tensor out = None, torch.dtype dtype = None, "
                        "torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
                        "bool requires_grad = False)\n"
                        for a, b in (("Tensor", "Tensor"), ("Number", "Tensor"), ("Tensor", "Number"),
                                     ("Number", "Number")))
        raise TypeError(f"{fn}() received an invalid combination of arguments - got ({kinds}), but expected one "
                        f"of:\n{forms}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """`steps` values evenly spaced from start to end (inclusive), computed as PyTorch's kernel does."""
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    _check_steps(start, end, steps, "linspace")
    if dtype is None:
        dtype = get_default_dtype().to_complex() if isinstance(start, complex) or isinstance(end, complex) \
            else get_default_dtype()
    dt = to_dtype(dtype)
    if dt is bool_:
        raise NotImplementedError(f"\"linspace_cpu\" not implemented for '{_scalar_name(dt)}'")
    dev = to_device(device)
    with cuda_context(dev), np.errstate(invalid="ignore", over="ignore"):
        arr = _range_values(start, end, steps, dt, xp_for(dev)).astype(dt.np)
    return _finish(_wrap(arr), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """base ** (PyTorch's linspace of the exponents, in double)."""
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    _check_steps(start, end, steps, "logspace")
    if dtype is None:
        dtype = get_default_dtype().to_complex() if isinstance(start, complex) or isinstance(end, complex) \
            else get_default_dtype()
    dt = to_dtype(dtype)
    if dt is bool_:
        raise NotImplementedError(f"\"logspace_cpu\" not implemented for '{_scalar_name(dt)}'")
    from ._dtype import float64
    work = complex128 if dt.is_complex else float64
    dev = to_device(device)
    with cuda_context(dev), np.errstate(invalid="ignore", over="ignore"):
        arr = (base ** _range_values(start, end, steps, work, xp_for(dev))).astype(dt.np)
    return _finish(_wrap(arr), requires_grad)


def float64_or(dtype):
    """float64 when dtype is None, else dtype."""
    from ._dtype import float64
    return float64 if dtype is None else dtype


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """An n x m identity matrix."""
    for name, v, pos in (("n", n, 1), ("m", m, 2)):
        if v is None:
            continue
        if not _is_int(v):
            raise TypeError(f"eye(): argument '{name}' (position {pos}) must be int, not {type(v).__name__}")
        if int(v) < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {int(v)}")
    dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
    dev = to_device(device)
    with cuda_context(dev):
        arr = xp_for(dev).eye(int(n), None if m is None else int(m), dtype=dt.np)
    return _finish(_wrap(arr), requires_grad)


# ------------------------------------------------------------------ random numbers

class Generator:
    """A source of random numbers (NumPy's PCG64 on CPU, CuPy's generator on CUDA); seed it for
    reproducible runs. The streams differ from PyTorch's: same seed, different numbers."""

    def __init__(self, device="cpu") -> None:
        self.device = to_device(device)
        self._seed = 67280421310721
        self.manual_seed(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        if self.device.type == "cpu":
            self._rng = np.random.Generator(np.random.PCG64(self._seed))
        else:
            from ._device import cupy
            with cuda_context(self.device):
                self._rng = cupy().random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        import secrets
        s = secrets.randbits(63)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        import pickle
        state = self._rng.bit_generator.state if self.device.type == "cpu" else None
        return _wrap(np.frombuffer(pickle.dumps(state), dtype=np.uint8).copy())

    def set_state(self, state: Tensor) -> "Generator":
        import pickle
        if self.device.type == "cpu":
            self._rng.bit_generator.state = pickle.loads(np.asarray(state._data, dtype=np.uint8).tobytes())
        return self


default_generator = Generator()
_cuda_generators: dict = {}
_cuda_seed: list = [None]  # the last seed given for CUDA: generators made later start from it


def manual_seed(seed: int) -> Generator:
    """Seed the default generators (CPU, and every CUDA device, including ones first used later)."""
    default_generator.manual_seed(seed)
    _seed_cuda(seed)
    return default_generator


def _seed_cuda(seed: int) -> None:
    """Seed every CUDA generator, and remember the seed for devices not used yet (cuda.manual_seed_all)."""
    _cuda_seed[0] = int(seed)
    for g in _cuda_generators.values():
        g.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the OS and return the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed of the default generator."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state."""
    return default_generator.get_state()


def set_rng_state(state: Tensor) -> None:
    """Restore the default generator's state."""
    default_generator.set_state(state)


def _generator_for(dev, generator):
    if dev.type == "meta":  # samples with a shape and no values (no draw from any generator)
        from ._meta import meta_generator
        return meta_generator
    if generator is not None:
        return generator._rng
    if dev.type == "cpu":
        return default_generator._rng
    return _cuda_generator(dev.index or 0)._rng


def _cuda_generator(index: int) -> Generator:
    """CUDA device `index`'s default generator, made on first use from the last CUDA seed (or the CPU's)."""
    if index not in _cuda_generators:
        first = _cuda_seed[0] if _cuda_seed[0] is not None else default_generator.initial_seed()
        _cuda_generators[index] = Generator(f"cuda:{index}").manual_seed(first)
    return _cuda_generators[index]


def _random(sample, fn: str, kernel: str):
    def make(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False, **kw):
        dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
        if dt._category <= 1:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{_scalar_name(dt)}'")
        dev = to_device(device)
        shape = _size(args, fn) if size is None else _size((size,), fn, keyword=True)
        with cuda_context(dev):
            arr = sample(_generator_for(dev, generator), shape, dt)
        return _finish(_wrap(arr), requires_grad)
    make.__name__ = make.__qualname__ = fn
    return make


def _float_sample(draw):
    def sample(rng, shape, dt):
        if dt.np in (np.float32, np.float64):
            return draw(rng, shape, dt.np)
        if dt.is_complex:  # real and imaginary parts drawn independently, each with half the variance
            part = np.float64 if dt.np == np.complex128 else np.float32
            return (draw(rng, shape + (2,), part) * _COMPLEX_PART_SCALE[draw]).view(dt.np).reshape(shape)
        return draw(rng, shape, np.float32).astype(dt.np)
    return sample


def _draw_uniform(rng, s, d):
    return rng.random(s, dtype=d)


def _draw_normal(rng, s, d):
    return rng.standard_normal(s, dtype=d)


# PyTorch's complex randn has E|z|^2 = 1 (each part N(0, 1/2)); its complex rand is uniform in each part.
_COMPLEX_PART_SCALE = {_draw_uniform: 1.0, _draw_normal: math.sqrt(0.5)}

rand = _random(_float_sample(_draw_uniform), "rand", "check_uniform_bounds")
randn = _random(_float_sample(_draw_normal), "randn", "normal_kernel_cpu")
rand.__doc__ = "Uniform samples in [0, 1)."
randn.__doc__ = "Standard normal samples."

_RANDINT_SIGNATURES = "".join(
    f" * ({args}, *, {gen}Tensor out = None, torch.dtype dtype = None, torch.layout layout = None, torch.device "
    "device = None, bool pin_memory = False, bool requires_grad = False)\n"
    for args in ("int high, tuple of ints size", "int low, int high, tuple of ints size")
    for gen in ("torch.Generator generator, ", ""))

# PyTorch's randint checks [low, high - 1] against the dtype's range and names the C++ type it failed.
_RANDINT_TYPE_NAMES = {"int8": "signed char", "int16": "short int", "int32": "int", "uint8": "unsigned char",
                       "bool": "bool", "float16": "c10::Half"}


def randint(low=None, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False) -> Tensor:
    """Integers uniform in [low, high) (randint(high, size) draws from [0, high))."""
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size), PyTorch's short form
        low, high, size = None, low, high
    if high is None:
        low, high = None, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    if not isinstance(size, (tuple, list)):
        kinds = ", ".join(type(v).__name__ for v in (low, high, size) if v is not None)
        raise TypeError(f"randint() received an invalid combination of arguments - got ({kinds}), but expected one "
                        f"of:\n{_RANDINT_SIGNATURES}")
    for name, v, pos in (("low", low, 1), ("high", high, 1 if low is None else 2)):
        if v is not None and not _is_int(v):
            raise TypeError(f"randint(): argument '{name}' (position {pos}) must be int, not {type(v).__name__}")
    low = 0 if low is None else int(low)
    high = int(high)
    for v in (low, high):
        if not -2 ** 63 <= v < 2 ** 63:
            raise ValueError("Overflow when unpacking long long")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dt = to_dtype(dtype) if dtype is not None else int64
    bounds = (0, 1) if dt is bool_ else (np.iinfo(dt.np).min, np.iinfo(dt.np).max) if dt._category == 1 \
        else (-65504, 65504) if dt.name == "float16" else None
    if bounds is not None and dt.name in _RANDINT_TYPE_NAMES:
        for name, v in (("from", low), ("to - 1", high - 1)):
            if not bounds[0] <= v <= bounds[1]:
                raise RuntimeError(f"{name} is out of bounds for {_RANDINT_TYPE_NAMES[dt.name]}")
    dev = to_device(device)
    shape = _size((size,), "randint")
    with cuda_context(dev):
        arr = _generator_for(dev, generator).integers(low, high, size=shape, dtype=np.int64)
    return _finish(_wrap(arr.astype(dt.np, copy=False)), requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A random permutation of 0..n-1."""
    dt = to_dtype(dtype) if dtype is not None else int64
    if dt is bool_:
        raise NotImplementedError(f"\"randperm\" not implemented for '{_scalar_name(dt)}'")
    _size((n,), "randperm")
    dev = to_device(device)
    with cuda_context(dev):
        arr = _generator_for(dev, generator).permutation(n)
    return _finish(_wrap(arr.astype(dt.np, copy=False)), requires_grad)


def _like_random(fn):
    return _like(fn)


rand_like = _like_random(rand)
randn_like = _like_random(randn)


def randint_like(t: Tensor, low, high=None, *, dtype=None, device=None) -> Tensor:
    """randint with t's shape."""
    return randint(low, high, tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device)


def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """1 with probability input (or with probability p for every element, in input's shape), else 0; input's
    dtype."""
    if p is not None:
        return input.detach().new_empty(input.shape).bernoulli_(p, generator=generator)
    if input.dtype._category <= 1:
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for '{_scalar_name(input.dtype)}'")
    probs = input._data
    if probs.size and not bool(((probs >= 0) & (probs <= 1)).all()):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
                           "improved?  If so, please report an enhancement request to PyTorch.)")
    rng = _generator_for(input.device, generator)
    with cuda_context(input.device):
        u = rng.random(probs.shape, dtype=np.float64 if probs.dtype == np.float64 else np.float32)
    return _wrap((u < probs).astype(probs.dtype))


def multinomial(probs: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Sample category indices in proportion to the (unnormalized) weights in each row."""
    if not probs.dtype.is_floating_point:
        from ._ops._common import _short
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {_short(probs.dtype)}")
    p = np.asarray(probs.detach().cpu()._data, dtype=np.float64)
    if p.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > p.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if not np.isfinite(p).all() or (p < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    rows = p.reshape(-1, p.shape[-1])
    if (rows.sum(-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = _generator_for(CPU, generator if generator is None or generator.device.type == "cpu" else None)
    out = np.empty((rows.shape[0], num_samples), dtype=np.int64)
    for i, row in enumerate(rows):
        nonzero = np.flatnonzero(row)
        k = num_samples if replacement else min(num_samples, len(nonzero))
        out[i, :k] = nonzero[rng.choice(len(nonzero), size=k, replace=replacement, p=row[nonzero] / row.sum())]
        if k < num_samples:  # without replacement, past the nonzero weights: PyTorch then draws the zero ones
            out[i, k:] = rng.permutation(np.flatnonzero(row == 0))[:num_samples - k]
    out = out.reshape(p.shape[:-1] + (num_samples,))
    return _wrap(move(out, probs.device))


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False,
           layout=None, pin_memory=False, out=None) -> Tensor:
    """Normal samples with the given mean and std (tensors, broadcast together, or numbers with a size)."""
    if isinstance(std, Tensor):
        if std._data.size and not bool((std._data >= 0).all()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_cnum(std)}")
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = _broadcast_pair(tuple(mean.shape) if isinstance(mean, Tensor) else (),
                                tuple(std.shape) if isinstance(std, Tensor) else ())
        return randn(*shape, generator=generator, dtype=ref.dtype, device=ref.device) * std + mean
    if size is None:
        raise TypeError(_NORMAL_SIGNATURES.format(types=f"{type(mean).__name__}, {type(std).__name__}"))
    return _finish(randn(*_size((size,), "normal"), generator=generator, dtype=dtype, device=device) * std + mean,
                   requires_grad)


def _broadcast_pair(a: tuple, b: tuple) -> tuple:
    """The broadcast shape of a and b, or PyTorch's error naming the first dimension that disagrees."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
                               f"dimension {i}")
    return tuple(max(x, y) if min(x, y) != 0 else 0 for x, y in zip(a, b))


_NORMAL_SIGNATURES = (
    "normal() received an invalid combination of arguments - got ({types}), but expected one of:\n"
    " * (Tensor mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (Tensor mean, float std = 1, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, Tensor std, *, torch.Generator generator = None, Tensor out = None)\n"
    " * (float mean, float std, tuple of ints size, *, torch.Generator generator = None, Tensor out = None, "
    "torch.dtype dtype = None, torch.layout layout = None, torch.device device = None, bool pin_memory = False, "
    "bool requires_grad = False)\n")


# ------------------------------------------------------------------ Tensor methods: new_* and in-place sampling

def _new_like_self(fn):
    def make(self: Tensor, *size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
        _size(size, "new_" + fn.__name__)
        return fn(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)
    make.__doc__ = "A new tensor of the given size with self's dtype and device unless told."
    return make


def _new_full(self: Tensor, size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """full(size, fill_value) with self's dtype and device unless told."""
    return _full(size, fill_value, "new_full", dtype=dtype or self.dtype, device=device or self.device,
                 requires_grad=requires_grad)


def _new_tensor(self: Tensor, data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """tensor(data) with self's dtype and device unless told."""
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


def _overwrite(t: Tensor, make_array, name: str) -> Tensor:
    """Replace t's values in place (uniform_, normal_, ...): fill_'s rules for autograd and the version counter."""
    from ._ops._common import check_inplace, commit_inplace, needs_grad, record
    dev = t.device
    with cuda_context(dev):
        arr = make_array(dev, t._data.shape)
    if needs_grad(t):
        check_inplace(t)
        out = _wrap(arr.astype(t._data.dtype, copy=False))
        record(name, lambda g: g * 0, out, (t,))
        return commit_inplace(t, out)
    t._data[...] = arr
    t._bump_version()
    return t


def _sample_dtype(t: Tensor):
    return np.float64 if t._data.dtype == np.float64 else np.float32


def _check_float_bounds(t: Tensor, v: float, name: str) -> None:
    finfo = np.finfo(np.float32 if t.dtype.name == "bfloat16" else t._data.dtype)
    if not -float(finfo.max) <= v <= float(finfo.max):
        raise RuntimeError(f"{name} is out of bounds for {_C_TYPE_NAMES[t.dtype.name]}")


def _uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from U(a, b), in place."""
    if t.dtype._category <= 1:
        raise NotImplementedError(f"\"check_uniform_bounds\" not implemented for '{_scalar_name(t.dtype)}'")
    if not t.dtype.is_complex:
        _check_float_bounds(t, a, "from")
        _check_float_bounds(t, b, "to")
    if not a <= b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={_cnum(a)} > to={_cnum(b)}")
    dt = _sample_dtype(t)
    return _overwrite(t, lambda dev, shape: _generator_for(dev, generator).random(shape, dtype=dt) * (b - a) + a,
                      "UniformBackward0")


def _normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from N(mean, std**2), in place."""
    if not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_cnum(std)}")
    if t.dtype._category <= 1:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{_scalar_name(t.dtype)}'")
    dt = _sample_dtype(t)
    return _overwrite(t, lambda dev, shape: _generator_for(dev, generator).standard_normal(shape, dtype=dt) * std
                      + mean, "NormalBackward0")


def _bernoulli_(t: Tensor, p: float = 0.5, *, generator=None) -> Tensor:
    """Fill with 1 (probability p) or 0, in place."""
    if not isinstance(p, Tensor) and not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_cnum(p)}")

    def draw(dev, shape):
        u = _generator_for(dev, generator).random(shape, dtype=np.float64)
        return u < (p._data if isinstance(p, Tensor) else p)
    return _overwrite(t, draw, "BernoulliBackward0")


def _exponential_(t: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from Exp(lambd), in place."""
    dt = _sample_dtype(t)
    return _overwrite(t, lambda dev, shape: _generator_for(dev, generator).standard_exponential(shape, dtype=dt)
                      / lambd, "ExponentialBackward0")


for _name, _fn in (("new_zeros", _new_like_self(zeros)), ("new_ones", _new_like_self(ones)),
                   ("new_empty", _new_like_self(empty)), ("new_full", _new_full), ("new_tensor", _new_tensor),
                   ("uniform_", _uniform_), ("normal_", _normal_), ("bernoulli_", _bernoulli_),
                   ("exponential_", _exponential_)):
    setattr(Tensor, _name, _fn)


def _legacy_tensor_init(self: Tensor, *args, **kwargs) -> None:
    """Tensor(data) copies data as the default float type; Tensor(2, 3) makes an uninitialized tensor."""
    dev = to_device(kwargs.get("device"))
    if len(args) == 1 and not isinstance(args[0], int):
        src = args[0]
        arr = _to_array(src, get_default_dtype() if not isinstance(src, Tensor) else None, dev)
    else:  # Tensor() is empty, of size (0,), as in PyTorch
        arr = xp_for(dev).empty(_size(args, "Tensor") if args else (0,), get_default_dtype().np)
    self._data = arr


__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "arange", "linspace", "logspace", "eye", "Generator",
           "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "rand",
           "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli", "multinomial",
           "normal"]
