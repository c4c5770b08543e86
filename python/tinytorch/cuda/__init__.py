"""tinytorch.cuda: device queries and memory statistics, answered by CuPy (imported only when asked)."""
from __future__ import annotations

import functools


class OutOfMemoryError(RuntimeError):
    """A device allocation failed (PyTorch's torch.cuda.OutOfMemoryError, also torch.OutOfMemoryError)."""


@functools.lru_cache(maxsize=None)
def is_available() -> bool:
    """Whether CuPy is installed and sees at least one GPU (never raises)."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def device_count() -> int:
    if not is_available():
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def current_device() -> int:
    from .._device import cupy
    return cupy().cuda.Device().id


def set_device(device) -> None:
    from .._device import cupy, to_device
    d = to_device(device) if not isinstance(device, int) else None
    cupy().cuda.Device(device if isinstance(device, int) else (d.index or 0)).use()


def synchronize(device=None) -> None:
    """Wait for all work queued on the GPU."""
    from .._device import cupy
    cupy().cuda.Device().synchronize() if device is None else cupy().cuda.Device(
        device if isinstance(device, int) else (device.index or 0)).synchronize()


def _pool():
    from .._device import cupy
    return cupy().get_default_memory_pool()


_peak = [0]


def memory_allocated(device=None) -> int:
    """Bytes held by live CUDA tensors (CuPy's pool: used bytes)."""
    if not is_available():
        return 0
    used = _pool().used_bytes()
    _peak[0] = max(_peak[0], used)
    return used


def max_memory_allocated(device=None) -> int:
    """The most bytes memory_allocated() has reported since the last reset (sampled at each query)."""
    memory_allocated(device)
    return _peak[0]


def reset_peak_memory_stats(device=None) -> None:
    _peak[0] = memory_allocated(device)


def memory_reserved(device=None) -> int:
    return _pool().total_bytes() if is_available() else 0


def empty_cache() -> None:
    if is_available():
        _pool().free_all_blocks()


def manual_seed(seed: int) -> None:
    """Seed the CUDA generators (every device: a process normally drives one), including devices used later."""
    from .. import _creation
    _creation._seed_cuda(seed)


manual_seed_all = manual_seed


def _require(what: str):
    """CuPy, for a call that needs a GPU: a clear error naming the call when there is none."""
    if not is_available():
        raise RuntimeError(f"torch.cuda.{what}: CUDA is not available (tinytorch reaches GPUs through CuPy, and "
                           f"it is not installed or sees no GPU)")
    import cupy
    return cupy


def seed() -> None:
    """Seed the current device's generator from the OS (nothing without a GPU, as PyTorch's lazy seeding)."""
    if is_available():
        import secrets
        from .. import _creation
        _creation._cuda_generator(current_device()).manual_seed(secrets.randbits(63))


def seed_all() -> None:
    """Seed every device's generator from the OS, one seed for all (nothing without a GPU)."""
    if is_available():
        import secrets
        manual_seed_all(secrets.randbits(63))


def initial_seed() -> int:
    """The seed of the current device's generator."""
    _require("initial_seed")
    from .. import _creation
    return _creation._cuda_generator(current_device()).initial_seed()


def get_rng_state(device="cuda"):
    """A device generator's state: CuPy's generator has none to save, so this says so rather than return one
    that would not restore."""
    _require("get_rng_state")
    raise NotImplementedError("torch.cuda.get_rng_state: CuPy's random generator has no state to save; reseed "
                              "with torch.cuda.manual_seed to reproduce a run")


def set_rng_state(new_state, device="cuda") -> None:
    _require("set_rng_state")
    raise NotImplementedError("torch.cuda.set_rng_state: CuPy's random generator has no state to restore; "
                              "reseed with torch.cuda.manual_seed")


def get_rng_state_all() -> list:
    """Every device's generator state ([] without a GPU)."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def max_memory_reserved(device=None) -> int:
    """The most bytes CuPy's pool has held (its current total: the pool only grows until emptied)."""
    return memory_reserved(device)


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes of the device, as CUDA reports them."""
    cupy = _require("mem_get_info")
    with cupy.cuda.Device(_index(device)):
        free, total = cupy.cuda.runtime.memGetInfo()
    return int(free), int(total)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A short text report of the memory statistics above."""
    mib = 1 << 20
    return (f"tinytorch CUDA memory (device {_index(device) if is_available() else 'none'})\n"
            f"  allocated:     {memory_allocated(device) / mib:10.1f} MiB\n"
            f"  max allocated: {max_memory_allocated(device) / mib:10.1f} MiB\n"
            f"  reserved:      {memory_reserved(device) / mib:10.1f} MiB\n")


class device:
    """Context manager making `device` current inside the block (None or a negative index: no change)."""

    def __init__(self, device) -> None:
        self.idx = -1 if device is None else _index(device) if not isinstance(device, int) else device
        self.prev_idx = -1

    def __enter__(self) -> "device":
        if self.idx >= 0:
            _require("device")
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                set_device(self.idx)
        return self

    def __exit__(self, *exc) -> None:
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)


class Stream:
    """A CUDA stream (CuPy's): work queued while it is current (`with torch.cuda.stream(s):`) runs on it."""

    def __init__(self, device=None, priority: int = 0, _cupy_stream=None) -> None:
        cupy = _require("Stream")
        self.device_index = current_device() if device is None else _index(device)
        if _cupy_stream is None:
            with cupy.cuda.Device(self.device_index):
                _cupy_stream = cupy.cuda.Stream(non_blocking=True)
        self._s = _cupy_stream

    @property
    def cuda_stream(self) -> int:
        return int(self._s.ptr)

    def synchronize(self) -> None:
        self._s.synchronize()

    def query(self) -> bool:
        return bool(self._s.done)

    def wait_event(self, event: "Event") -> None:
        self._s.wait_event(event._e)

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and self.cuda_stream == other.cuda_stream

    def __hash__(self) -> int:
        return hash(self.cuda_stream)


class Event:
    """A CUDA event (CuPy's): record() on a stream, synchronize(), elapsed_time(end) in milliseconds."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        cupy = _require("Event")
        self._e = cupy.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)

    def record(self, stream: Stream | None = None) -> None:
        self._e.record(None if stream is None else stream._s)

    def wait(self, stream: Stream | None = None) -> None:
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        return bool(self._e.done)

    def synchronize(self) -> None:
        self._e.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        import cupy
        return float(cupy.cuda.get_elapsed_time(self._e, end_event._e))


def current_stream(device=None) -> Stream:
    """The stream CUDA work is queued on now."""
    cupy = _require("current_stream")
    with cupy.cuda.Device(_index(device)):
        return Stream(device, _cupy_stream=cupy.cuda.get_current_stream())


def default_stream(device=None) -> Stream:
    cupy = _require("default_stream")
    return Stream(device, _cupy_stream=cupy.cuda.Stream.null)


class stream:
    """Context manager making `s` the current stream inside the block (None: no change)."""

    def __init__(self, s: Stream | None) -> None:
        self.s = s

    def __enter__(self) -> Stream | None:
        if self.s is not None:
            self.s._s.__enter__()
        return self.s

    def __exit__(self, *exc) -> None:
        if self.s is not None:
            self.s._s.__exit__(*exc)


def set_stream(s: Stream) -> None:
    s._s.use()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current GPU computes in bfloat16 (compute capability 8.0+; False without a GPU)."""
    if not is_available():
        return False
    import cupy
    major = int(cupy.cuda.Device().compute_capability[:-1] or 0)
    return major >= 8 or bool(including_emulation)


def get_arch_list() -> list:
    """The CUDA architectures kernels are built for: tinytorch compiles src/*.cu at run time (NVRTC) for the
    devices present, so this lists theirs (['sm_90']); [] without CUDA, as PyTorch."""
    if not is_available():
        return []
    return sorted({"sm_%d%d" % get_device_capability(i) for i in range(device_count())})


def get_device_capability(device=None) -> tuple:
    """(major, minor) compute capability of device (default: current)."""
    import cupy
    idx = device if isinstance(device, int) else (getattr(device, "index", None) or 0) if device is not None else None
    cc = (cupy.cuda.Device() if idx is None else cupy.cuda.Device(idx)).compute_capability
    return int(cc[:-1]), int(cc[-1])


def get_device_name(device=None) -> str:
    """The GPU's name as CUDA reports it (device: index, 'cuda:N' or tinytorch.device; default current)."""
    import cupy
    return cupy.cuda.runtime.getDeviceProperties(_index(device))["name"].decode()


def get_device_properties(device=None):
    """name, total_memory, major, minor and multi_processor_count of a GPU (PyTorch's field names)."""
    import types

    import cupy
    p = cupy.cuda.runtime.getDeviceProperties(_index(device))
    return types.SimpleNamespace(name=p["name"].decode(), total_memory=int(p["totalGlobalMem"]),
                                 major=int(p["major"]), minor=int(p["minor"]),
                                 multi_processor_count=int(p["multiProcessorCount"]))


def is_initialized() -> bool:
    """Whether CUDA is usable in this process (tinytorch initialises it on first use through CuPy)."""
    return is_available()


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    from .._device import to_device
    return to_device(device).index or 0


from . import amp  # noqa: E402,F401  (tinytorch.cuda.amp: PyTorch's deprecated AMP spellings)
