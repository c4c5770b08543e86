"""Making tensors: from data, filled, ranges, and random (Generator, manual_seed)."""
from __future__ import annotations

import numpy as np

from ._device import CPU, cuda_context, device_of, move, to_device, xp_for
from ._dtype import bool_, dtype as _dtype_cls, from_numpy_dtype, get_default_dtype, int64, to_dtype
from ._tensor import Tensor, _set_requires_grad, _wrap


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        _set_requires_grad(t, True, _FACTORY_GRAD_ERROR)
    return t


_FACTORY_GRAD_ERROR = "Only Tensors of floating point and complex dtype can require gradients"


def _infer_dtype(data) -> _dtype_cls:
    """PyTorch's inference for Python data: any complex -> the default float's complex type, any float -> default
    float, else int64, all bools -> bool."""
    kinds = set()

    def walk(x):
        if isinstance(x, Tensor):
            kinds.add(x.dtype)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, bool) or isinstance(x, np.bool_):
            kinds.add(bool_)
        elif isinstance(x, (int, np.integer)):
            kinds.add(int64)
        elif isinstance(x, (float, np.floating)):
            kinds.add(get_default_dtype())
        elif isinstance(x, (complex, np.complexfloating)):
            kinds.add(get_default_dtype().to_complex())
        else:
            raise TypeError(f"Could not infer dtype of {type(x).__name__}")
    walk(data)
    if not kinds:
        return get_default_dtype()
    if any(k.is_complex for k in kinds):
        cplx = [k for k in kinds if k.is_complex]
        return cplx[0] if len(cplx) == 1 else get_default_dtype().to_complex()
    if any(k.is_floating_point for k in kinds):
        floats = [k for k in kinds if k.is_floating_point]
        return floats[0] if len(floats) == 1 else get_default_dtype()
    if int64 in kinds or any(k._category == 1 for k in kinds):
        return int64
    return bool_


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
    if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flatten(data)):
        data = _nested_tensors_to_lists(data)
    arr = np.array(data, dtype=dt.np)
    return move(arr, dev)


def _flatten(data):
    if isinstance(data, (list, tuple)):
        for v in data:
            yield from _flatten(v)
    else:
        yield data


def _nested_tensors_to_lists(data):
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_nested_tensors_to_lists(v) for v in data]
    return data


def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, scalars, NumPy/CuPy arrays, tensors)."""
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
    return _wrap(array)


def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s.item())
        if not isinstance(s, (int, np.integer)):
            raise TypeError(f"size must be a tuple of ints, but got element of type {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
        out.append(int(s))
    return tuple(out)


def _factory(fill):
    def make(*args, size=None, dtype=None, device=None, requires_grad=False, out=None, layout=None,
             pin_memory=False, memory_format=None):
        dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
        dev = to_device(device)
        xp = xp_for(dev)
        with cuda_context(dev):
            arr = fill(xp, _size(args if size is None else (size,)), dt.np)
        return _finish(_wrap(arr), requires_grad)
    return make


zeros = _factory(lambda xp, s, d: xp.zeros(s, d))
ones = _factory(lambda xp, s, d: xp.ones(s, d))
empty = _factory(lambda xp, s, d: xp.empty(s, d))
zeros.__doc__ = "A tensor of zeros."
ones.__doc__ = "A tensor of ones."
empty.__doc__ = "An uninitialized tensor."


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor filled with fill_value (dtype inferred from it, as in PyTorch)."""
    if dtype is None:
        dtype = _infer_dtype(fill_value) if not isinstance(fill_value, Tensor) else fill_value.dtype
    dt = to_dtype(dtype)
    dev = to_device(device)
    with cuda_context(dev):
        arr = xp_for(dev).full(_size((size,) if isinstance(size, int) else tuple(size)), fill_value, dt.np)
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
    """Values from start to end (exclusive) by step; integer dtype when all arguments are integers."""
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dtype is None:
        dtype = int64 if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals) \
            else get_default_dtype()
    dt = to_dtype(dtype)
    dev = to_device(device)
    with cuda_context(dev):
        n = max(0, int(np.ceil((vals[1] - vals[0]) / vals[2])))
        arr = (xp_for(dev).arange(n, dtype=np.float64) * vals[2] + vals[0]).astype(dt.np) if dt.is_floating_point \
            else xp_for(dev).arange(vals[0], vals[1], vals[2], dtype=dt.np)
    return _finish(_wrap(arr), requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """`steps` values evenly spaced from start to end (inclusive)."""
    dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
    dev = to_device(device)
    with cuda_context(dev):
        arr = xp_for(dev).linspace(start, end, steps, dtype=np.float64).astype(dt.np)
    return _finish(_wrap(arr), requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """base ** linspace(start, end, steps)."""
    t = linspace(start, end, steps, dtype=float64_or(dtype), device=device)
    return _finish(_wrap((base ** t._data).astype(to_dtype(dtype).np if dtype else get_default_dtype().np)),
                   requires_grad)


def float64_or(dtype):
    """float64 when dtype is None, else dtype."""
    from ._dtype import float64
    return float64 if dtype is None else dtype


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """An n x m identity matrix."""
    dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
    dev = to_device(device)
    with cuda_context(dev):
        arr = xp_for(dev).eye(n, m, dtype=dt.np)
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
    key = dev.index or 0
    if key not in _cuda_generators:
        first = _cuda_seed[0] if _cuda_seed[0] is not None else default_generator.initial_seed()
        _cuda_generators[key] = Generator(dev).manual_seed(first)
    return _cuda_generators[key]._rng


def _random(sample):
    def make(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False, **kw):
        dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
        dev = to_device(device)
        with cuda_context(dev):
            arr = sample(_generator_for(dev, generator), _size(args if size is None else (size,)), dt)
        return _finish(_wrap(arr), requires_grad)
    return make


def _float_sample(draw):
    def sample(rng, shape, dt):
        if dt.np in (np.float32, np.float64):
            return draw(rng, shape, dt.np)
        return draw(rng, shape, np.float32).astype(dt.np)
    return sample


rand = _random(_float_sample(lambda rng, s, d: rng.random(s, dtype=d)))
randn = _random(_float_sample(lambda rng, s, d: rng.standard_normal(s, dtype=d)))
rand.__doc__ = "Uniform samples in [0, 1)."
randn.__doc__ = "Standard normal samples."


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Integers uniform in [low, high)."""
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size), PyTorch's short form
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    dt = to_dtype(dtype) if dtype is not None else int64
    dev = to_device(device)
    with cuda_context(dev):
        arr = _generator_for(dev, generator).integers(low, high, size=_size(tuple(size)), dtype=np.int64)
    return _finish(_wrap(arr.astype(dt.np, copy=False)), requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A random permutation of 0..n-1."""
    dt = to_dtype(dtype) if dtype is not None else int64
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


def bernoulli(p: Tensor, *, generator=None) -> Tensor:
    """1 with probability p, else 0 (p's shape and dtype)."""
    rng = _generator_for(p.device, generator)
    with cuda_context(p.device):
        u = rng.random(p._data.shape, dtype=np.float64 if p._data.dtype == np.float64 else np.float32)
    return _wrap((u < p._data).astype(p._data.dtype))


def multinomial(probs: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Sample category indices in proportion to the (unnormalized) weights in each row."""
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


def normal(mean, std, size=None, *, generator=None) -> Tensor:
    """Normal samples with the given mean and std (tensors or numbers)."""
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        return randn_like(ref, generator=generator) * std + mean if generator is None else \
            randn(*ref.shape, generator=generator, dtype=ref.dtype, device=ref.device) * std + mean
    return randn(*size, generator=generator) * std + mean


# ------------------------------------------------------------------ Tensor methods: new_* and in-place sampling

def _new_like_self(fn):
    def make(self: Tensor, *size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
        return fn(*size, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)
    make.__doc__ = "A new tensor of the given size with self's dtype and device unless told."
    return make


def _new_full(self: Tensor, size, fill_value, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """full(size, fill_value) with self's dtype and device unless told."""
    return full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


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


def _uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from U(a, b), in place."""
    dt = _sample_dtype(t)
    return _overwrite(t, lambda dev, shape: _generator_for(dev, generator).random(shape, dtype=dt) * (b - a) + a,
                      "UniformBackward0")


def _normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill with samples from N(mean, std**2), in place."""
    dt = _sample_dtype(t)
    return _overwrite(t, lambda dev, shape: _generator_for(dev, generator).standard_normal(shape, dtype=dt) * std
                      + mean, "NormalBackward0")


def _bernoulli_(t: Tensor, p: float = 0.5, *, generator=None) -> Tensor:
    """Fill with 1 (probability p) or 0, in place."""
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
    else:
        arr = xp_for(dev).empty(_size(args), get_default_dtype().np)
    self._data = arr


__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "zeros", "ones", "empty", "full", "zeros_like",
           "ones_like", "empty_like", "full_like", "arange", "linspace", "logspace", "eye", "Generator",
           "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "rand",
           "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli", "multinomial",
           "normal"]
