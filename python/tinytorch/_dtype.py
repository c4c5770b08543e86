"""dtypes with PyTorch's names and type-promotion rules, backed by NumPy dtypes (bfloat16 by ml_dtypes)."""
from __future__ import annotations

import numpy as np


def _bfloat16_numpy_dtype():
    """NumPy's bfloat16 from ml_dtypes, imported on first use: the import costs ~0.5-2 s, which every
    process (launcher workers, test subprocesses) would otherwise pay whether it uses bfloat16 or not."""
    try:
        import ml_dtypes
    except ImportError as e:  # pragma: no cover - ml_dtypes is a declared dependency
        raise RuntimeError("bfloat16 on the CPU needs the ml_dtypes package: pip install ml_dtypes") from e
    d = np.dtype(ml_dtypes.bfloat16)
    _BY_NP[d] = bfloat16
    return d


class dtype:
    """A tensor element type: PyTorch's name, its NumPy dtype and its promotion category."""

    __slots__ = ("name", "_np", "itemsize", "is_floating_point", "is_signed", "_category")

    def __init__(self, name: str, np_dtype, category: int, itemsize: int = 0) -> None:
        self.name = name
        self._np = np.dtype(np_dtype) if np_dtype is not None else None
        self.itemsize = self._np.itemsize if self._np is not None else itemsize
        self.is_floating_point = category == 2
        self.is_signed = name not in ("uint8", "uint16", "uint32", "uint64", "bool")
        self._category = category  # 0 bool, 1 integer, 2 floating, 3 complex

    @property
    def np(self) -> np.dtype:
        """The NumPy dtype that holds this type's elements."""
        if self._np is None:
            self._np = _bfloat16_numpy_dtype()
        return self._np

    @property
    def is_complex(self) -> bool:
        return self._category == 3

    def to_real(self) -> "dtype":
        """The real dtype of a complex one's parts (complex64 -> float32); other dtypes are their own."""
        return _REAL_OF.get(self, self)

    def to_complex(self) -> "dtype":
        """The complex dtype with this floating dtype's parts (float64 -> complex128; float32 and the half
        types -> complex64, tinytorch having no complex32); complex dtypes are their own."""
        if self._category == 3:
            return self
        if not self.is_floating_point:
            raise RuntimeError(f"to_complex is only supported for floating point dtypes, got {self.name}")
        return complex128 if self is float64 else complex64

    def __repr__(self) -> str:
        # PyTorch's spelling: scripts test str(dtype) == "torch.float16" or strip its "torch." prefix
        return f"torch.{self.name}"

    def __reduce__(self):
        return (_dtype_by_name, (self.name,))


bool_ = dtype("bool", np.bool_, 0)
uint8 = dtype("uint8", np.uint8, 1)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 1)
int32 = dtype("int32", np.int32, 1)
int64 = dtype("int64", np.int64, 1)
# PyTorch's "shell" unsigned types: tensors of them exist (from_numpy keeps them, casts work), and promoting them
# with any other integer, bool or complex type is an error, as in PyTorch
uint16 = dtype("uint16", np.uint16, 1)
uint32 = dtype("uint32", np.uint32, 1)
uint64 = dtype("uint64", np.uint64, 1)
_SHELL = (uint16, uint32, uint64)
float16 = dtype("float16", np.float16, 2)
bfloat16 = dtype("bfloat16", None, 2, itemsize=2)  # NumPy dtype resolved on first use
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
complex64 = dtype("complex64", np.complex64, 3)
complex128 = dtype("complex128", np.complex128, 3)
_REAL_OF = {complex64: float32, complex128: float64}

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128, uint16,
       uint32, uint64)
_BY_NAME = {d.name: d for d in ALL}
_BY_NP = {d._np: d for d in ALL if d._np is not None}
_INT_ORDER = {uint8: 0, int8: 0, int16: 1, int32: 2, int64: 3}


def _dtype_by_name(name: str) -> dtype:
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype) -> dtype:
    """The tinytorch dtype of a NumPy (or CuPy) dtype; a clear error for types tinytorch lacks."""
    try:
        return _BY_NP[np_dtype]
    except (KeyError, TypeError):
        pass
    d = np.dtype(np_dtype)
    if d in _BY_NP:
        return _BY_NP[d]
    if d.name == "bfloat16" and d == bfloat16.np:  # an ml_dtypes array seen before our first bf16 use
        return bfloat16
    if d.kind == "U" or d.kind == "S" or d.kind == "O":
        raise TypeError(f"can't convert np.ndarray of type numpy.{d.type.__name__}. The only supported types are: "
                        "float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint64, uint32, "
                        "uint16, uint8, and bool.")
    if d.kind == "c":  # complex256 (long double parts): PyTorch has no such type
        raise TypeError(f"can't convert np.ndarray of type {d}: the complex types are complex64 and complex128")
    raise TypeError(f"unsupported NumPy dtype {d}")


def to_dtype(x) -> dtype:
    """Accept a tinytorch dtype, a NumPy dtype, a Python type (float, int, bool) or a name."""
    if isinstance(x, dtype):
        return x
    if x is float:
        return get_default_dtype()
    if x is int:
        return int64
    if x is bool:
        return bool_
    if x is complex:
        return get_default_dtype().to_complex()
    if isinstance(x, str):
        name = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
                "cfloat": "complex64", "cdouble": "complex128"}.get(x, x)
        if name in _BY_NAME:
            return _BY_NAME[name]
    return from_numpy_dtype(x)


_default = [float32]


def get_default_dtype() -> dtype:
    """The dtype of Python floats turned into tensors (float32 unless changed)."""
    return _default[0]


def set_default_dtype(d: dtype) -> None:
    """Change the default floating dtype (float32 or float64, as PyTorch allows)."""
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default[0] = d


def promote_types(a: dtype, b: dtype) -> dtype:
    """PyTorch's promote_types: the smallest dtype both fit in, by category then size."""
    if a is b:
        return a
    if (a in _SHELL or b in _SHELL) and (a._category != 2 and b._category != 2):
        from ._ops._common import _short
        raise RuntimeError(f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
                           f"{_short(a.np)} and {_short(b.np)}")
    if a._category == 3 or b._category == 3:  # complex: the complex type of the promoted real parts
        if a._category < 2 or b._category < 2:
            return a if a._category == 3 else b
        return promote_types(a.to_real(), b.to_real()).to_complex()
    if a._category != b._category:
        return a if a._category > b._category else b
    if a._category == 2:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    if a._category == 1:
        if {a, b} == {uint8, int8}:
            return int16
        return a if _INT_ORDER[a] >= _INT_ORDER[b] else b
    return a


def scalar_dtype(x) -> dtype:
    """The dtype a Python scalar takes in promotion: bool, int64, the default float or its complex type."""
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return int64
    if isinstance(x, complex):
        return get_default_dtype().to_complex()
    return get_default_dtype()


def result_type(*args) -> dtype:
    """PyTorch's result_type: dimensioned tensors outrank zero-dim tensors, which outrank Python
    scalars, unless a lower-ranked participant is of a higher category (bool < int < float)."""
    from ._tensor import Tensor

    dim = zero = scal = None
    for x in args:
        if isinstance(x, Tensor):
            d = x.dtype
            if x._data.ndim:
                dim = d if dim is None else promote_types(dim, d)
            else:
                zero = d if zero is None else promote_types(zero, d)
        elif x is not None:
            d = scalar_dtype(x)
            scal = d if scal is None else promote_types(scal, d)
    return _combine(dim, _combine(zero, scal)) or get_default_dtype()


def _combine(higher, lower):
    # PyTorch's combine_categories: a higher-priority float or complex wins outright unless the lower-priority
    # operand brings a higher category (float32 tensor * 1j -> complex64); int or bool only matters to bool.
    if higher is None:
        return lower
    if lower is None or higher._category >= lower._category and higher._category >= 2:
        return higher
    if lower._category == 3 and higher._category == 2:
        return higher.to_complex()
    if higher is bool_ or lower._category >= 2:
        return promote_types(higher, lower)
    return higher
