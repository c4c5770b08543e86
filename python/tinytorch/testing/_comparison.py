"""torch.testing.assert_close: compare tensors, numbers, and (nested) sequences and mappings of them, with
PyTorch's default tolerances per dtype and its mismatch messages."""
from __future__ import annotations

import cmath
import collections.abc
import contextlib
from typing import Any, Callable

import numpy as np

import tinytorch
from .._dtype import promote_types
from .._tensor import Tensor

__all__ = ["assert_close"]


class ErrorMeta(Exception):
    """A comparison failure: the exception type to raise, its message, and where in a nested input it happened."""

    def __init__(self, type: type, msg: str, *, id: tuple = ()) -> None:  # noqa: A002
        super().__init__(msg)
        self.type = type
        self.msg = msg
        self.id = id

    def to_error(self, msg: str | Callable[[str], str] | None = None) -> Exception:
        if not isinstance(msg, str):
            generated_msg = self.msg
            if self.id:
                generated_msg += f"\n\nThe failure occurred for item {''.join(str([item]) for item in self.id)}"
            msg = msg(generated_msg) if callable(msg) else generated_msg
        return self.type(msg)


# {dtype: (rtol, atol)}; other dtypes (integers, bool) compare exactly
_DTYPE_PRECISIONS = {
    tinytorch.float16: (0.001, 1e-5),
    tinytorch.bfloat16: (0.016, 1e-5),
    tinytorch.float32: (1.3e-6, 1e-5),
    tinytorch.float64: (1e-7, 1e-7),
    tinytorch.complex64: (1.3e-6, 1e-5),
    tinytorch.complex128: (1e-7, 1e-7),
}


def default_tolerances(*inputs) -> tuple:
    """The loosest (rtol, atol) of the inputs' dtypes (tensors or dtypes)."""
    dtypes = []
    for x in inputs:
        if isinstance(x, Tensor):
            dtypes.append(x.dtype)
        elif isinstance(x, tinytorch.dtype):
            dtypes.append(x)
        else:
            raise TypeError(f"Expected a torch.Tensor or a torch.dtype, but got {type(x)} instead.")
    rtols, atols = zip(*[_DTYPE_PRECISIONS.get(d, (0.0, 0.0)) for d in dtypes])
    return max(rtols), max(atols)


def get_tolerances(*inputs, rtol: float | None, atol: float | None, id: tuple = ()) -> tuple:  # noqa: A002
    """The given tolerances, or the dtype defaults when both are omitted (one alone is an error)."""
    if (rtol is None) ^ (atol is None):
        raise ErrorMeta(ValueError, "Both 'rtol' and 'atol' must be either specified or omitted, "
                                    f"but got no {'rtol' if rtol is None else 'atol'}.", id=id)
    if rtol is not None:
        return rtol, atol
    return default_tolerances(*inputs)


def _make_mismatch_msg(*, default_identifier: str, identifier=None, extra: str | None = None, abs_diff: float,
                       abs_diff_idx=None, atol: float, rel_diff: float, rel_diff_idx=None, rtol: float) -> str:
    equality = rtol == 0 and atol == 0

    def make_diff_msg(*, type: str, diff: float, idx, tol: float) -> str:  # noqa: A002
        msg = f"{type.title()} difference: {diff}" if idx is None else \
            f"Greatest {type} difference: {diff} at index {idx}"
        if not equality:
            msg += f" (up to {tol} allowed)"
        return msg + "\n"

    if identifier is None:
        identifier = default_identifier
    elif callable(identifier):
        identifier = identifier(default_identifier)
    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n"
    if extra:
        msg += f"{extra.strip()}\n"
    msg += make_diff_msg(type="absolute", diff=abs_diff, idx=abs_diff_idx, tol=atol)
    msg += make_diff_msg(type="relative", diff=rel_diff, idx=rel_diff_idx, tol=rtol)
    return msg.strip()


def make_scalar_mismatch_msg(actual, expected, *, rtol: float, atol: float, identifier=None) -> str:
    """The message for two numbers (or 0-d tensors) that are not close."""
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _make_mismatch_msg(default_identifier="Scalars", identifier=identifier,
                              extra=f"Expected {expected} but got {actual}.", abs_diff=abs_diff, atol=atol,
                              rel_diff=rel_diff, rtol=rtol)


def make_tensor_mismatch_msg(actual: np.ndarray, expected: np.ndarray, matches: np.ndarray, *, rtol: float,
                             atol: float, identifier=None) -> str:
    """The message for two tensors (as arrays of one dtype) that are not close: the mismatch count and the
    greatest absolute and relative differences among the mismatches, with their indices."""
    total = matches.size
    mismatches = total - int(matches.sum())
    extra = f"Mismatched elements: {mismatches} / {total} ({mismatches / total:.1%})"
    a, e = actual.reshape(-1), expected.reshape(-1)
    if a.dtype.kind in "biu":  # differences of integers in int64, their ratios in the default float dtype
        a, e = a.astype(np.int64), e.astype(np.int64)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(a - e)
        abs_diff[matches.reshape(-1)] = 0
        rel_diff = abs_diff / np.abs(e)
        if rel_diff.dtype.kind == "f" and a.dtype.kind in "biu":
            rel_diff = rel_diff.astype(tinytorch.get_default_dtype().np)
    rel_diff[matches.reshape(-1)] = 0
    i_abs, i_rel = int(np.argmax(abs_diff)), int(np.argmax(rel_diff))
    return _make_mismatch_msg(default_identifier="Tensor-likes", identifier=identifier, extra=extra,
                              abs_diff=abs_diff[i_abs].item(), abs_diff_idx=_unravel(i_abs, matches.shape),
                              atol=atol, rel_diff=rel_diff[i_rel].item(),
                              rel_diff_idx=_unravel(i_rel, matches.shape), rtol=rtol)


def _unravel(flat_index: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat_index, shape)) if shape else ()


class UnsupportedInputs(Exception):
    """Raised by a Pair that cannot handle its inputs: the next pair type is tried."""


class Pair:
    """A pair of inputs to compare; compare() raises ErrorMeta on a mismatch."""

    def __init__(self, actual: Any, expected: Any, *, id: tuple = (), **unknown_parameters: Any) -> None:  # noqa: A002
        self.actual = actual
        self.expected = expected
        self.id = id
        self._unknown_parameters = unknown_parameters

    @staticmethod
    def _inputs_not_supported():
        raise UnsupportedInputs

    @staticmethod
    def _check_inputs_isinstance(*inputs, cls) -> None:
        if not all(isinstance(x, cls) for x in inputs):
            Pair._inputs_not_supported()

    def _fail(self, type: type, msg: str, *, id: tuple = ()):  # noqa: A002
        raise ErrorMeta(type, msg, id=self.id if not id and hasattr(self, "id") else id)

    def compare(self) -> None:
        raise NotImplementedError


class NonePair(Pair):
    def __init__(self, actual, expected, **other_parameters) -> None:
        if not (actual is None or expected is None):
            self._inputs_not_supported()
        super().__init__(actual, expected, **other_parameters)

    def compare(self) -> None:
        if not (self.actual is None and self.expected is None):
            self._fail(AssertionError, f"None mismatch: {self.actual} is not {self.expected}")


class BooleanPair(Pair):
    def __init__(self, actual, expected, *, id: tuple, **other_parameters) -> None:  # noqa: A002
        self._check_inputs_isinstance(actual, expected, cls=(bool, np.bool_))
        super().__init__(bool(actual), bool(expected), id=id, **other_parameters)

    def compare(self) -> None:
        if self.actual is not self.expected:
            self._fail(AssertionError, f"Booleans mismatch: {self.actual} is not {self.expected}")


class NumberPair(Pair):
    """Python (and NumPy) numbers: int compares like int64, float like float64, complex like complex128."""

    _TYPE_TO_DTYPE = {int: tinytorch.int64, float: tinytorch.float64, complex: tinytorch.complex128}

    def __init__(self, actual, expected, *, id: tuple = (), rtol: float | None = None,  # noqa: A002
                 atol: float | None = None, equal_nan: bool = False, check_dtype: bool = False,
                 **other_parameters) -> None:
        self._check_inputs_isinstance(actual, expected, cls=(int, float, complex, np.number))
        actual, expected = (x.item() if isinstance(x, np.number) else x for x in (actual, expected))
        super().__init__(actual, expected, id=id, **other_parameters)
        self.rtol, self.atol = get_tolerances(*[self._TYPE_TO_DTYPE[type(x)] for x in (actual, expected)],
                                              rtol=rtol, atol=atol, id=id)
        self.equal_nan = equal_nan
        self.check_dtype = check_dtype

    def compare(self) -> None:
        if self.check_dtype and type(self.actual) is not type(self.expected):
            self._fail(AssertionError, f"The (d)types do not match: {type(self.actual)} != {type(self.expected)}.")
        if self.actual == self.expected:
            return
        if self.equal_nan and cmath.isnan(self.actual) and cmath.isnan(self.expected):
            return
        abs_diff = abs(self.actual - self.expected)
        if cmath.isfinite(abs_diff) and abs_diff <= self.atol + self.rtol * abs(self.expected):
            return
        self._fail(AssertionError, make_scalar_mismatch_msg(self.actual, self.expected, rtol=self.rtol,
                                                            atol=self.atol))


class TensorLikePair(Pair):
    """Tensors, or two objects of related types that tinytorch.as_tensor accepts (NumPy arrays)."""

    def __init__(self, actual, expected, *, id: tuple = (), allow_subclasses: bool = True,  # noqa: A002
                 rtol: float | None = None, atol: float | None = None, equal_nan: bool = False,
                 check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False, **other_parameters) -> None:
        if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
            self._inputs_not_supported()
        if not allow_subclasses and type(actual) is not type(expected):
            self._inputs_not_supported()
        actual, expected = self._to_tensor(actual), self._to_tensor(expected)
        super().__init__(actual, expected, id=id, **other_parameters)
        self.rtol, self.atol = get_tolerances(actual, expected, rtol=rtol, atol=atol, id=self.id)
        self.equal_nan = equal_nan
        self.check_device = check_device
        self.check_dtype = check_dtype
        self.check_layout = check_layout  # every tinytorch tensor is strided
        self.check_stride = check_stride

    def _to_tensor(self, tensor_like) -> Tensor:
        if isinstance(tensor_like, Tensor):
            return tensor_like
        try:
            return tinytorch.as_tensor(tensor_like)
        except Exception:
            self._inputs_not_supported()

    def compare(self) -> None:
        actual, expected = self.actual, self.expected
        self._compare_attributes(actual, expected)
        if actual.device.type == "meta" or expected.device.type == "meta":
            return
        self._compare_values(*self._equalize_attributes(actual, expected))

    def _compare_attributes(self, actual: Tensor, expected: Tensor) -> None:
        def mismatch(name, a, e):
            self._fail(AssertionError, f"The values for attribute '{name}' do not match: {a} != {e}.")
        if actual.shape != expected.shape:
            mismatch("shape", actual.shape, expected.shape)
        if self.check_stride and actual.stride() != expected.stride():
            mismatch("stride()", actual.stride(), expected.stride())
        if self.check_device and actual.device != expected.device:
            mismatch("device", actual.device, expected.device)
        if self.check_dtype and actual.dtype != expected.dtype:
            mismatch("dtype", actual.dtype, expected.dtype)

    @staticmethod
    def _equalize_attributes(actual: Tensor, expected: Tensor) -> tuple:
        """Host arrays of one dtype (the promoted one when the dtypes differ)."""
        dtype = promote_types(actual.dtype, expected.dtype)
        return tuple(np.asarray(t.detach().cpu()._data).astype(dtype.np, copy=False) for t in (actual, expected))

    def _compare_values(self, actual: np.ndarray, expected: np.ndarray) -> None:
        matches = _isclose(actual, expected, self.rtol, self.atol, self.equal_nan)
        if matches.all():
            return
        if actual.shape == ():
            msg = make_scalar_mismatch_msg(actual.item(), expected.item(), rtol=self.rtol, atol=self.atol)
        else:
            msg = make_tensor_mismatch_msg(actual, expected, matches, rtol=self.rtol, atol=self.atol)
        self._fail(AssertionError, msg)


def _isclose(a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool) -> np.ndarray:
    """torch.isclose: |a - b| <= atol + rtol * |b|; infinities close only to themselves, NaNs only when
    equal_nan."""
    if a.dtype.kind in "biu":
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        return (a64 == b64) | (np.abs(a64 - b64) <= atol + rtol * np.abs(b64))
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    a, b = a.astype(wide), b.astype(wide)
    with np.errstate(all="ignore"):
        close = (a == b) | (np.isfinite(a) & np.isfinite(b) & (np.abs(a - b) <= atol + rtol * np.abs(b)))
    if equal_nan:
        close |= np.isnan(a) & np.isnan(b)
    return close


def originate_pairs(actual, expected, *, pair_types, sequence_types=(collections.abc.Sequence,),
                    mapping_types=(collections.abc.Mapping,), id: tuple = (), **options) -> list:  # noqa: A002
    """Walk nested sequences and mappings in step, making a pair of the first type that takes each leaf."""
    if isinstance(actual, sequence_types) and not isinstance(actual, str) and \
            isinstance(expected, sequence_types) and not isinstance(expected, str):
        if len(actual) != len(expected):
            raise ErrorMeta(AssertionError,
                            f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", id=id)
        pairs = []
        for idx in range(len(actual)):
            pairs.extend(originate_pairs(actual[idx], expected[idx], pair_types=pair_types,
                                         sequence_types=sequence_types, mapping_types=mapping_types,
                                         id=(*id, idx), **options))
        return pairs
    if isinstance(actual, mapping_types) and isinstance(expected, mapping_types):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise ErrorMeta(AssertionError,
                            f"The keys of the mappings do not match:\n"
                            f"Missing keys in the actual mapping: {sorted(expected_keys - actual_keys)}\n"
                            f"Additional keys in the actual mapping: {sorted(actual_keys - expected_keys)}", id=id)
        keys = actual_keys
        with contextlib.suppress(Exception):  # a deterministic order where the keys sort
            keys = sorted(keys)
        pairs = []
        for key in keys:
            pairs.extend(originate_pairs(actual[key], expected[key], pair_types=pair_types,
                                         sequence_types=sequence_types, mapping_types=mapping_types,
                                         id=(*id, key), **options))
        return pairs
    for pair_type in pair_types:
        try:
            return [pair_type(actual, expected, id=id, **options)]
        except UnsupportedInputs:
            continue
    raise ErrorMeta(TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} "
                               f"and {type(expected)}.", id=id)


def not_close_error_metas(actual, expected, *, pair_types=(NonePair, BooleanPair, NumberPair, TensorLikePair),
                          **options) -> list:
    """The ErrorMetas of every leaf pair that is not close (a malformed input raises at once)."""
    __tracebackhide__ = True
    try:
        pairs = originate_pairs(actual, expected, pair_types=pair_types, **options)
    except ErrorMeta as error_meta:
        raise error_meta.to_error() from None
    error_metas = []
    for pair in pairs:
        try:
            pair.compare()
        except ErrorMeta as error_meta:
            error_metas.append(error_meta)
    return error_metas


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True, rtol: float | None = None,
                 atol: float | None = None, equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True, check_stride: bool = False,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Raise AssertionError unless actual and expected (tensors, numbers, or nested sequences/mappings of them)
    have the same shapes, dtypes and devices and |actual - expected| <= atol + rtol * |expected| elementwise,
    with per-dtype default tolerances (float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7, 1e-7; integers: exact)."""
    __tracebackhide__ = True
    error_metas = not_close_error_metas(actual, expected, allow_subclasses=allow_subclasses, rtol=rtol, atol=atol,
                                        equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                                        check_layout=check_layout, check_stride=check_stride, msg=msg)
    if error_metas:
        raise error_metas[0].to_error(msg)


def assert_allclose(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None,
                    equal_nan: bool = True, msg: str = "") -> None:
    """PyTorch's deprecated assert_allclose: assert_close with expected made a tensor like actual, NaNs equal by
    default, dtypes and strides not compared (a FutureWarning says to use assert_close)."""
    import warnings
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future release. "
                  "Please use `torch.testing.assert_close()` instead. You can find detailed upgrade instructions in "
                  "https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    if not isinstance(actual, tinytorch.Tensor):
        actual = tinytorch.tensor(actual)
    if not isinstance(expected, tinytorch.Tensor):
        expected = tinytorch.tensor(expected, dtype=actual.dtype)
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False,
                 check_stride=False, msg=msg or None)
