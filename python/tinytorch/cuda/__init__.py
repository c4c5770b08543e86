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


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current GPU computes in bfloat16 (compute capability 8.0+; False without a GPU)."""
    if not is_available():
        return False
    import cupy
    major = int(cupy.cuda.Device().compute_capability[:-1] or 0)
    return major >= 8 or bool(including_emulation)


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
