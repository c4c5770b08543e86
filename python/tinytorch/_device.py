"""Devices and the array module behind each: NumPy for "cpu", CuPy (imported on first use) for "cuda"."""
from __future__ import annotations

import threading

import numpy as np


# PyTorch's device types, in its order: each names a device object; tensors live on cpu, cuda and meta only
# (xp_for refuses the others as a PyTorch build without them does), so that device-picking code
# (`torch.device("mps" if torch.backends.mps.is_available() else "cpu")`) runs unchanged.
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla",
                "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class device:
    """A device like PyTorch's: device("cpu"), device("cuda"), device("cuda:1"), device("cuda", 1)."""

    __slots__ = ("type", "index")

    def __init__(self, type_or_spec, index: int | None = None) -> None:
        if isinstance(type_or_spec, device):
            self.type, self.index = type_or_spec.type, type_or_spec.index
            return
        if isinstance(type_or_spec, int):
            self.type, self.index = "cuda", type_or_spec
            return
        spec = str(type_or_spec)
        if ":" in spec:
            kind, _, idx = spec.partition(":")
            if index is not None:
                raise RuntimeError(f"type (string) must not include an index because index was passed explicitly: {spec}")
            # PyTorch's grammar: plain decimal digits, no sign, spaces or leading zeros ('cpu:-1' is invalid)
            if not (idx.isascii() and idx.isdigit()) or (len(idx) > 1 and idx[0] == "0"):
                raise RuntimeError(f"Invalid device string: '{spec}'")
            index = int(idx)
        else:
            kind = spec
        if kind not in DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: "
                               f"{spec}")
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        # The index is kept for cpu too, as PyTorch: device('cpu:0').index == 0 and device('cpu:0') != device('cpu')
        self.type = kind
        self.index = index

    def __enter__(self) -> "device":
        # As PyTorch: inside `with device(...)`, factory functions called without device= make tensors here.
        stack = _default.__dict__.setdefault("stack", [])
        stack.append(getattr(_default, "device", None))
        _default.device = self
        return self

    def __exit__(self, *exc) -> None:
        _default.device = _default.stack.pop()

    def __eq__(self, other) -> bool:
        # a device never equals a string (torch.device('cpu') == 'cpu' is False in PyTorch): compare .type
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = device("cpu")
META = device("meta")
_cupy = None
# The default device of factory functions, per thread as PyTorch's (None: cpu).
_default = threading.local()


def set_default_device(d) -> None:
    """Make factory functions called without device= create tensors on `d` (None restores cpu), in this thread."""
    _default.device = None if d is None else to_device(d)


def get_default_device() -> device:
    """The device factory functions use when not given one."""
    return getattr(_default, "device", None) or CPU


def cupy():
    """Import CuPy on first use, with an error that says what to install when it can't be used."""
    global _cupy
    if _cupy is None:
        try:
            import cupy as cp
        except ImportError as e:
            raise RuntimeError(
                "CUDA tensors need CuPy, which is not installed. Install the build matching your CUDA "
                "toolkit: pip install cupy-cuda12x (CUDA 12) or pip install cupy-cuda13x (CUDA 13)."
            ) from e
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # CuPy raises its own CUDARuntimeError when no driver/GPU is present
            raise RuntimeError(f"CuPy is installed but no CUDA GPU is usable here: {e}") from e
        if n == 0:
            raise RuntimeError("CuPy is installed but no CUDA GPU is present.")
        _cupy = cp
    return _cupy


def to_device(d) -> device:
    """Normalise a device argument (device, str, int or None -> the default device, cpu unless set) of an op that
    puts memory there: a device type tinytorch has no backend for is refused here."""
    if d is None:
        return getattr(_default, "device", None) or CPU
    if isinstance(d, device):
        return d if d.type in _BACKENDS else supported(d)
    return supported(device(d))


_BACKENDS = ("cpu", "cuda", "meta")


def supported(dev: device) -> device:
    """dev, when tinytorch can hold tensors there; else the error a PyTorch build without that backend raises."""
    if dev.type in _BACKENDS:
        return dev
    if dev.type == "xpu":
        raise AssertionError("Torch not compiled with XPU enabled")
    raise RuntimeError(f"tinytorch is not linked with support for {dev.type} devices (it has cpu, cuda and meta)")


def xp_for(dev: device):
    """The array module (numpy or cupy; the meta namespace for "meta") that holds tensors on `dev`."""
    if dev.type == "cpu":
        return np
    if dev.type == "meta":
        from ._meta import namespace
        return namespace
    supported(dev)
    return cupy()


def device_of(array) -> device:
    """The device an array lives on."""
    if type(array) is np.ndarray:
        return CPU
    if type(array) is MetaArray:
        return META
    return device("cuda", int(array.device.id))


def cuda_context(dev: device):
    """A context manager making `dev` current for CuPy (a no-op context for CPU)."""
    if dev.type != "cuda":
        import contextlib
        return contextlib.nullcontext()
    return cupy().cuda.Device(dev.index or 0)


def move(array, dev: device):
    """Copy `array` to `dev` (no copy when it already lives there)."""
    src = device_of(array)
    # cpu and meta have one memory whatever the index ('cpu:0' is where 'cpu' is)
    if src == dev or (src.type == dev.type and dev.type != "cuda"):
        return array
    if dev.type == "meta":
        return MetaArray(array.shape, array.dtype)
    if src.type == "meta":
        raise NotImplementedError(NO_DATA)
    if dev.type == "cpu":
        return array.get()
    cp = xp_for(dev)
    with cp.cuda.Device(dev.index or 0):
        return cp.asarray(array)


from ._meta import NO_DATA, MetaArray  # noqa: E402  (after device: _meta needs nothing from here)
