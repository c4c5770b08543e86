"""TypedStorage / UntypedStorage: the flat memory that tensors view, as torch.load hands it to map_location.

A checkpoint stores each storage once (a record of the zip archive) and every tensor as (storage, offset,
size, stride), so views saved together load as views of one storage. `map_location` callables receive a
storage and its saved location (`lambda storage, loc: storage.cuda(0)`), as in PyTorch.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._device import device as _device_cls, device_of, move, to_device
from ._dtype import dtype as _dtype_cls, from_numpy_dtype, uint8

__all__ = ["TypedStorage", "UntypedStorage"]


class TypedStorage:
    """A 1-D array of one dtype (NumPy on CPU, CuPy on CUDA) that tensors are views of."""

    is_sparse = False

    def __init__(self, array: Any, dtype: _dtype_cls | None = None) -> None:
        if getattr(array, "ndim", None) != 1:
            raise ValueError(f"a storage wraps a 1-D array, got {type(array).__name__} with shape "
                             f"{getattr(array, 'shape', None)}")
        self._array = array
        self.dtype = from_numpy_dtype(array.dtype) if dtype is None else dtype

    @property
    def device(self) -> _device_cls:
        return device_of(self._array)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def size(self) -> int:
        """Number of elements."""
        return int(self._array.size)

    def __len__(self) -> int:
        return int(self._array.size)

    def nbytes(self) -> int:
        return int(self._array.nbytes)

    def element_size(self) -> int:
        return int(self._array.dtype.itemsize)

    def data_ptr(self) -> int:
        if type(self._array) is np.ndarray or isinstance(self._array, np.ndarray):
            return int(self._array.__array_interface__["data"][0])
        return int(self._array.data.ptr)

    def _moved(self, dev: _device_cls) -> "TypedStorage":
        array = move(self._array, dev)
        return self if array is self._array else type(self)(array, self.dtype)

    def cpu(self) -> "TypedStorage":
        """This storage on the CPU (itself when it is there already)."""
        return self._moved(to_device("cpu"))

    def cuda(self, device: Any = None, non_blocking: bool = False) -> "TypedStorage":
        """This storage on a CUDA device (the current one when device is None)."""
        if device is None:
            dev = _device_cls("cuda", 0)
        elif isinstance(device, int):
            dev = _device_cls("cuda", device)
        else:
            dev = to_device(device)
        if dev.type != "cuda":
            raise RuntimeError(f"Invalid device, must be cuda device, got {dev}")
        return self._moved(dev)

    def to(self, *, device: Any, non_blocking: bool = False) -> "TypedStorage":
        """This storage on `device`."""
        return self._moved(to_device(device))

    def tolist(self) -> list:
        return self._array.tolist()

    def __repr__(self) -> str:
        body = " " + "\n ".join(str(v) for v in self.tolist()) if len(self) else ""
        return (f"{body}\n[tinytorch.storage.{type(self).__name__}(dtype={self.dtype}, device={self.device}) "
                f"of size {len(self)}]")


class UntypedStorage(TypedStorage):
    """A storage of raw bytes (uint8): what files written for dtypes without a legacy storage type hold."""

    def __init__(self, array: Any, dtype: _dtype_cls | None = None) -> None:
        if array.dtype != np.uint8:
            array = array.view(np.uint8)
        super().__init__(array, uint8)
