"""Printing tensors the way PyTorch does: 4 decimals, shared width, summarised past 1000 elements."""
from __future__ import annotations

import numpy as np

PRECISION = 4
THRESHOLD = 1000
EDGEITEMS = 3
LINEWIDTH = 80


class _Formatter:
    """Chooses one format for every element so that columns line up."""

    def __init__(self, values: np.ndarray) -> None:
        self.kind = values.dtype.kind
        self.sci = False
        self.int_mode = True
        self.width = 1
        if self.kind == "b":
            self.width = 5 if values.size and not values.all() else 4
            return
        if self.kind in "iu":
            self.width = max((len(str(v)) for v in values.reshape(-1)), default=1)
            return
        v = values.astype(np.float64).reshape(-1)
        # As PyTorch: the mode and the column width come from the nonzero finite values only.
        finite = v[np.isfinite(v) & (v != 0)]
        if not finite.size:
            return
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        nonzero = np.abs(finite)
        hi, lo = nonzero.max(), nonzero.min()
        self.sci = hi / lo > 1000.0 or hi > 1e8 or (not self.int_mode and lo < 1e-4)
        self.width = max(len(self._fmt(x)) for x in finite)

    def _fmt(self, x) -> str:
        if self.kind == "b":
            return str(bool(x))
        if self.kind in "iu":
            return str(int(x))
        x = float(x)
        if not np.isfinite(x):
            return "nan" if np.isnan(x) else ("inf" if x > 0 else "-inf")
        if self.sci:
            return f"{x:.{PRECISION}e}"
        if self.int_mode:
            return f"{x:.0f}."
        return f"{x:.{PRECISION}f}"

    def __call__(self, x) -> str:
        return self._fmt(x).rjust(self.width)


class _ComplexFormatter:
    """PyTorch's complex format: the real parts share one format, the imaginary parts another ("1.0000+0.5000j")."""

    def __init__(self, values: np.ndarray) -> None:
        self.kind = "c"
        self.re, self.im = _Formatter(values.real), _Formatter(values.imag)
        self.width = self.re.width + self.im.width + 2

    def __call__(self, x) -> str:
        im = self.im(x.imag).lstrip()
        return self.re(x.real) + (im if im[0] in "+-" else "+" + im) + "j"


def _summarize(a: np.ndarray) -> np.ndarray:
    """The elements that will be shown when the tensor is summarised (for the shared format)."""
    if a.ndim == 0:
        return a.reshape(1)
    if a.shape[0] > 2 * EDGEITEMS:
        parts = [_summarize(a[i]) for i in list(range(EDGEITEMS)) + list(range(len(a) - EDGEITEMS, len(a)))]
    else:
        parts = [_summarize(a[i]) for i in range(len(a))]
    return np.concatenate(parts) if parts else a.reshape(-1)


def _body(a: np.ndarray, fmt: _Formatter, indent: int, summarize: bool) -> str:
    if a.ndim == 0:
        return fmt(a.item()).strip()
    if a.ndim == 1:
        items = [fmt(x) for x in a]
        if summarize and len(a) > 2 * EDGEITEMS:
            items = items[:EDGEITEMS] + [" ..."] + items[-EDGEITEMS:]
        per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = range(len(a))
    if summarize and len(a) > 2 * EDGEITEMS:
        rows = list(range(EDGEITEMS)) + [None] + list(range(len(a) - EDGEITEMS, len(a)))
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    parts = ["..." if i is None else _body(a[i], fmt, indent + 1, summarize) for i in rows]
    return "[" + sep.join(parts) + "]"


def tensor_repr(t) -> str:
    """PyTorch's repr: tensor([...], dtype=..., device=..., requires_grad=True / grad_fn=<...>)."""
    from ._dtype import bool_, get_default_dtype, int64
    if t.is_meta:  # no values to show: PyTorch prints the size instead
        suffixes = ["device='meta'", f"size={tuple(t._data.shape)}"]
        if t.dtype is not get_default_dtype():
            suffixes.append(f"dtype={t.dtype!r}")
        return "tensor(" + ", ".join(["..."] + suffixes + _grad_suffix(t)) + ")"
    data = t._data if type(t._data) is np.ndarray else t._data.get()
    if data.dtype.kind == "V" or data.dtype.name == "bfloat16":
        data = data.astype(np.float32)
    prefix = "tensor("
    suffixes = []
    if t.is_cuda:
        suffixes.append(f"device='{t.device}'")
    dt = t.dtype
    if data.size == 0:
        body = "[]"
        if data.ndim != 1:
            suffixes.append(f"size={tuple(data.shape)}")
        if dt is not get_default_dtype():  # PyTorch names every non-default dtype of an empty tensor
            suffixes.append(f"dtype={dt!r}")
    else:
        summarize = data.size > THRESHOLD
        shown = _summarize(data) if summarize else data
        fmt = _ComplexFormatter(shown) if data.dtype.kind == "c" else _Formatter(shown)
        body = _body(data, fmt, len(prefix), summarize)
    if data.size and dt not in (get_default_dtype(), get_default_dtype().to_complex(), int64, bool_):
        suffixes.append(f"dtype={dt!r}")
    suffixes += _grad_suffix(t)
    return prefix + ", ".join([body] + suffixes) + ")"


def _grad_suffix(t) -> list:
    if t._grad_fn is not None:
        return [f"grad_fn=<{t._grad_fn.name()}>"]
    return ["requires_grad=True"] if t._requires_grad else []
