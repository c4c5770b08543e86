"""Moving and casting tensors: to(device/dtype), cpu(), cuda(), float(), half(), long(), ..."""
from __future__ import annotations

import warnings

from .._device import device as _device, move, to_device
from .._dtype import dtype as _dtype, to_dtype
from .._tensor import Tensor, _wrap
from . import _cpu
from ._common import attach, needs_grad, record
from ._common import user_stacklevel as _user_stacklevel


def _parse_to(args, kwargs):
    dev = kwargs.pop("device", None)
    dt = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("copy", None)
    kwargs.pop("memory_format", None)
    for a in args:
        if isinstance(a, Tensor):
            dev, dt = a.device, a.dtype
        elif isinstance(a, _dtype) or a in (float, int, bool):
            dt = a
        elif isinstance(a, (str, _device, int)) and not isinstance(a, bool):
            dev = a
        elif a is not None and not isinstance(a, bool):
            dt = a
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {list(kwargs)}")
    return (to_device(dev) if dev is not None else None), (to_dtype(dt) if dt is not None else None)


def to(a: Tensor, *args, **kwargs) -> Tensor:
    """Cast and/or move: to(dtype), to(device), to(device, dtype), to(other), and to(memory_format=...). Returns a
    itself when nothing changes."""
    fmt = kwargs.get("memory_format")
    if fmt is not None and getattr(fmt, "_name", None) != "preserve_format":
        rest = dict(kwargs)
        del rest["memory_format"]
        return to(a, *args, **rest).contiguous(memory_format=fmt)
    copy = kwargs.get("copy", False)
    dev, dt = _parse_to(args, kwargs)
    x = a._data
    src_dev = a.device
    same_dev = dev is None or dev == src_dev or (dev.type == "cuda" and dev.index is None and src_dev.type == "cuda")
    same_dt = dt is None or x.dtype == dt.np
    if same_dev and same_dt and not copy:
        return a
    y = x
    if not same_dt and x.dtype.kind == "c" and not dt.is_complex:
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=_user_stacklevel())
        y = y.real
    if not same_dt:
        r = _cpu.cast(y, dt.np) if y.size >= _cpu.MIN_SIZE else None
        y = y.astype(dt.np) if r is None else r
    if not same_dev:
        target = dev if not (dev.type == "cuda" and dev.index is None) else _device("cuda", 0)
        y = move(y, target)
    if y is x:
        y = x.copy()
    out = _wrap(y)
    if needs_grad(a) and out.dtype._category >= 2:
        src_dt = a.dtype
        if out.dtype.is_complex and not src_dt.is_complex:  # real -> complex: the real part is the gradient
            record("ToCopyBackward0", lambda g: g.real.to(src_dev, src_dt), out, (a,))
        else:
            record("ToCopyBackward0", lambda g: g.to(src_dev, src_dt), out, (a,))
    return out


def _cast(name):
    def cast(a: Tensor, memory_format=None) -> Tensor:
        return to(a, to_dtype(name))
    cast.__name__ = name
    return cast


attach(to=to, cpu=lambda a, memory_format=None: to(a, "cpu"),
       cuda=lambda a, device=None, non_blocking=False, memory_format=None: to(a, to_device(
           device if device is not None else "cuda") if not isinstance(device, int) else _device("cuda", device)),
       float=_cast("float32"), double=_cast("float64"), half=_cast("float16"), bfloat16=_cast("bfloat16"),
       long=_cast("int64"), int=_cast("int32"), short=_cast("int16"), char=_cast("int8"), byte=_cast("uint8"),
       bool=_cast("bool"), cfloat=_cast("complex64"), cdouble=_cast("complex128"),
       type_as=lambda a, other: to(a, other.dtype))


def _to_backend(kind: str):
    def move(a: Tensor, device=None, non_blocking: bool = False, memory_format=None) -> Tensor:
        return to(a, _device(kind, device) if isinstance(device, int) else to_device(device or kind))
    move.__name__ = kind
    move.__doc__ = f"The tensor on the {kind} device (refused: tinytorch has no {kind} backend)."
    return move


def record_stream(a: Tensor, stream) -> None:
    """Mark a CUDA tensor's memory as in use by `stream` until the work queued there so far is done. CuPy's pool
    reuses a freed block only on the stream that freed it, so no extra bookkeeping is needed; CPU tensors are
    refused as by PyTorch."""
    if a.device.type != "cuda":
        raise RuntimeError(f"record_stream expects a CUDA tensor, but got a tensor on {a.device}")


attach(xpu=_to_backend("xpu"), ipu=_to_backend("ipu"), mtia=_to_backend("mtia"), record_stream=record_stream)
