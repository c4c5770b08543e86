"""FSDPParam: one parameter of a fully_shard group — its dim-0 shard (a DTensor) and its unsharded form.

Rows are cut as torch.chunk cuts them: each of the N ranks owns ceil(dim0 / N) rows, padded with zeros at
the end, so every rank's piece of a collective buffer has the same size. The sharded parameter holds only the
real rows (the padding exists only inside the collective buffers).
"""
from __future__ import annotations

import math
from typing import Any, List, Tuple

import numpy as np

from ..._tensor import Tensor, _wrap
from ...nn.parameter import Parameter
from ..tensor._api import DTensor, chunk_bounds
from ..tensor.placement_types import Shard


class FSDPParam:
    """A parameter of a group: where it is registered, its shard, and its slot in the group's buffers."""

    def __init__(self, param: Parameter, owners: List[Tuple[Any, str]], mesh: Any, shard_rank: int,
                 shard_size: int) -> None:
        self.owners = owners  # every (module, attribute name) the parameter is registered under
        self.orig_shape = tuple(param._data.shape)
        self.orig_dtype = param._data.dtype
        self.requires_grad = param.requires_grad
        self.mesh = mesh
        rows = self.orig_shape[0] if self.orig_shape else 1
        self.rows = rows
        self.row_numel = math.prod(self.orig_shape[1:]) if self.orig_shape else 1
        self.shard_rows = -(-rows // shard_size) if rows else 0
        self.padded_shard_numel = self.shard_rows * self.row_numel
        self.numel = rows * self.row_numel
        self.local_rows = chunk_bounds(rows, shard_size, shard_rank)
        self.offset = 0  # set by the group: where this parameter's piece starts in a rank's block
        self.storage_offset = 0  # where its unsharded values start in the group's unsharded storage
        a, b = self.local_rows
        full = param._data if self.orig_shape else param._data.reshape(1)
        local = full[a:b]
        local = local.copy() if getattr(local, "base", None) is not None else local
        if not self.orig_shape:
            local = local.reshape(()) if b > a else local
        self.sharded_param = Parameter(DTensor._make(local, mesh, (Shard(0),), self.orig_shape), self.requires_grad)
        self.unsharded_param: Parameter | None = None

    # ------------------------------------------------------------------ the sharded side
    def local_rows_array(self) -> Any:
        """This rank's real rows of the sharded parameter as a 2-d (rows, row_numel) array."""
        d = self.sharded_param._data
        return d.reshape(self.local_rows[1] - self.local_rows[0], self.row_numel)

    def adopt_sharded(self, current: Any) -> None:
        """Take over a sharded parameter that replaced ours (e.g. module.to_empty() made a new one)."""
        if current is self.sharded_param:
            return
        if not isinstance(current, DTensor):
            raise RuntimeError(f"fully_shard: parameter {self.owners[0][1]} of {type(self.owners[0][0]).__name__} "
                               "was replaced by a non-sharded tensor; assign a DTensor with the same placement")
        self.sharded_param = current

    def set_sharded_grad(self, local_grad: Any) -> None:
        """Store (or add to) the sharded parameter's .grad from this rank's reduced rows."""
        p = self.sharded_param
        data = local_grad.reshape(p._data.shape)
        if data.dtype != p._data.dtype:
            data = data.astype(p._data.dtype)
        if p._grad is None:
            p._grad = DTensor._make(data, self.mesh, (Shard(0),), self.orig_shape)
        else:
            p._grad._data += data
            p._grad._bump_version()

    def register(self, param: Tensor) -> None:
        """Make `param` the one every owner module sees."""
        for module, name in self.owners:
            module._parameters[name] = param

    def make_unsharded(self, storage: Any) -> Parameter:
        """The unsharded parameter (created once, then reused so its autograd hooks persist), viewing `storage`."""
        view = storage[self.storage_offset:self.storage_offset + self.numel].reshape(self.orig_shape)
        if self.unsharded_param is None:
            self.unsharded_param = Parameter(_wrap(view), self.requires_grad)
        else:
            self.unsharded_param._data = view
        return self.unsharded_param


def host_storage(numel: int, dtype: Any) -> Tuple[Any, Any]:
    """A page-aligned anonymous mapping viewed as a 1-d array, and the mapping (see FSDPParamGroup.reshard)."""
    import mmap
    dtype = np.dtype(dtype)
    nbytes = max(numel * dtype.itemsize, 1)
    mm = mmap.mmap(-1, nbytes)
    return np.frombuffer(mm, dtype=dtype, count=numel), mm
