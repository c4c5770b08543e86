"""Printing tensors exactly as PyTorch does: one shared element format, summarised past `threshold` elements,
suffixes (dtype, device, grad_fn) wrapped at `linewidth`; the options are set by torch.set_printoptions."""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, Iterator

import numpy as np


@dataclasses.dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrinterOptions()

_PROFILES = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print: digits after the point, the element count past which output is summarised, the items
    kept at each edge when summarised, characters per line, and scientific notation (None: chosen per tensor).
    A profile ('default', 'short', 'full') sets the first four; as in PyTorch, sci_mode is always reassigned."""
    if profile in _PROFILES:  # PyTorch ignores an unknown profile name
        PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = _PROFILES[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict[str, Any]:
    """The current print options, as keyword arguments for set_printoptions."""
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs) -> Iterator[None]:
    """Change the print options (set_printoptions' arguments) inside a with block only."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    """One format for every element of a real tensor, chosen from the values shown, so that columns line up."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = values.dtype.kind in "fV"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not self.floating:
            self.max_width = max([1] + [len(str(v)) for v in flat.tolist()])
            return
        finite = flat[np.isfinite(flat) & (flat != 0)]
        if not finite.size:
            return
        nonzero = np.abs(finite).astype(np.float64)
        lo, hi = nonzero.min(), nonzero.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)
        else:
            self.sci_mode = PRINT_OPTS.sci_mode
        vals = finite.tolist()
        p = PRINT_OPTS.precision
        if self.sci_mode:
            self.max_width = max(len(f"{v:.{p}e}") for v in vals)
        elif self.int_mode:  # the appended "." says the tensor is floating point
            self.max_width = max(len(f"{v:.0f}") + 1 for v in vals)
        else:
            self.max_width = max(len(f"{v:.{p}f}") for v in vals)

    def format(self, value) -> str:
        if not self.floating:
            return str(value).rjust(self.max_width)
        p = PRINT_OPTS.precision
        if self.sci_mode:
            return f"{value:{self.max_width}.{p}e}"
        if self.int_mode:
            s = f"{value:.0f}"
            return (s if math.isinf(value) or math.isnan(value) else s + ".").rjust(self.max_width)
        return f"{value:.{p}f}".rjust(self.max_width)


def _element(value, real: _Formatter, imag: _Formatter | None) -> str:
    if imag is None:
        return real.format(value)
    im = (imag.format(value.imag) + "j").lstrip()
    # the imaginary part's own sign (also of -0.0) joins the two, else a "+"
    return real.format(value.real) + (im if im[0] in "+-" else "+" + im)


def _shown_values(a: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows, flattened: the format is chosen from these only."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a.reshape(1)
    if a.ndim == 1:
        # a[-0:] is all of a: with edgeitems=0 PyTorch's formatter sees the whole vector, so it does here
        return np.concatenate((a[:e], a[-e:])) if len(a) > 2 * e else a
    if not e:
        return a.reshape(-1)[:0]
    rows = list(range(e)) + list(range(len(a) - e, len(a))) if len(a) > 2 * e else range(len(a))
    return np.concatenate([_shown_values(a[i]) for i in rows])


def _vector_str(a: np.ndarray, indent: int, summarize: bool, real: _Formatter, imag: _Formatter | None) -> str:
    # each element takes its width plus ", "; a complex one also its imaginary width and the "j"
    element_length = real.max_width + 2 + (0 if imag is None else imag.max_width + 1)
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / element_length))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and len(a) > 2 * e:
        data = ([_element(v, real, imag) for v in a[:e].tolist()] + [" ..."]
                + [_element(v, real, imag) for v in a[-e:].tolist()])
    else:
        data = [_element(v, real, imag) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _array_str(a: np.ndarray, indent: int, summarize: bool, real: _Formatter, imag: _Formatter | None) -> str:
    if a.ndim == 0:
        return _element(a.item(), real, imag)
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, real, imag)
    e = PRINT_OPTS.edgeitems
    if summarize and len(a) > 2 * e:
        rows = list(range(e)) + [None] + list(range(len(a) - e, len(a)))
    else:
        rows = range(len(a))
    parts = ["..." if i is None else _array_str(a[i], indent + 1, summarize, real, imag) for i in rows]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _values_str(data: np.ndarray, indent: int) -> str:
    """The bracketed values of a non-empty array, as PyTorch's _tensor_str."""
    summarize = data.size > PRINT_OPTS.threshold
    if data.dtype.kind == "c":
        real = _Formatter(_shown_values(data.real) if summarize else data.real)
        imag = _Formatter(_shown_values(data.imag) if summarize else data.imag)
        return _array_str(data, indent, summarize, real, imag)
    return _array_str(data, indent, summarize, _Formatter(_shown_values(data) if summarize else data), None)


def _add_suffixes(text: str, suffixes: list, indent: int) -> str:
    """Append ", suffix" for each suffix, moving one to a new line when it would pass linewidth."""
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    return "".join(parts) + ")"


def _dtype_suffix(dt) -> str:
    return f"dtype={dt!r}"


def _prefix(t) -> str:
    """'tensor(' for tensors and parameters (and buffers, which are plain tensors in PyTorch); a subclass's name."""
    from ._tensor import Tensor
    from .nn.parameter import Buffer, Parameter
    return "tensor(" if type(t) in (Tensor, Parameter, Buffer) else f"{type(t).__name__}("


def tensor_repr(t) -> str:
    """PyTorch's repr: tensor([...], device=..., dtype=..., requires_grad=True / grad_fn=<...>)."""
    from ._dtype import bool_, complex64, complex128, float64, get_default_dtype, int64
    prefix = _prefix(t)
    indent = len(prefix)
    default = get_default_dtype()
    dt = t.dtype
    suffixes = []
    if t.is_meta:  # no values to show: PyTorch prints the size instead
        suffixes += ["device='meta'", f"size={tuple(t._data.shape)}"]
        if dt is not default:
            suffixes.append(_dtype_suffix(dt))
        body = "..."
    else:
        if t.is_cuda:
            suffixes.append(f"device='{t.device}'")
        data = t._data if type(t._data) is np.ndarray else t._data.get()
        if data.dtype.kind == "V" or data.dtype == np.float16:  # bfloat16 and half print through float32
            data = data.astype(np.float32)
        if data.size == 0:
            if data.ndim != 1:
                suffixes.append(f"size={tuple(data.shape)}")
            if dt is not default:  # no elements to tell an int64 tensor by: every non-default dtype is named
                suffixes.append(_dtype_suffix(dt))
            body = "[]"
        else:
            if not PRINT_OPTS.edgeitems:
                suffixes.append(f"size={tuple(data.shape)}")
            default_complex = complex128 if default is float64 else complex64
            if dt not in (default, default_complex, int64, bool_):
                suffixes.append(_dtype_suffix(dt))
            body = _values_str(data, indent)
    if t._grad_fn is not None:
        suffixes.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
