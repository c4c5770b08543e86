"""DTensor: a tensor whose global value is spread over a DeviceMesh; each rank holds its local piece.

The local piece is the tensor's `_data` (so optimizers, which update `_data` in place, step local shards
unchanged), while shape, size(), numel() and stride() describe the global tensor, as in PyTorch. Elementwise
ops between DTensors of the same layout (and with scalars) run on the local pieces; full reductions
(sum, mean, norm) all-reduce; other ops raise and say to call full_tensor() or to_local().
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from ..._tensor import Size, Tensor, _new, _wrap
from ...autograd.grad_mode import no_grad
from .. import distributed_c10d as c10d
from ..device_mesh import DeviceMesh, init_device_mesh
from .placement_types import Partial, Placement, Replicate, Shard

__all__ = ["DTensor", "distribute_tensor", "distribute_module"]


def chunk_bounds(size: int, n: int, i: int) -> tuple[int, int]:
    """[start, stop) of piece i when `size` rows are cut as torch.chunk cuts them into n (later pieces may be empty)."""
    step = -(-size // n) if size else 0
    start = min(i * step, size)
    return start, min(start + step, size)


def _local_shape(gshape: Sequence[int], mesh: DeviceMesh, placements: Sequence[Placement]) -> tuple:
    shape = list(gshape)
    coord = mesh.get_coordinate()
    for d, p in enumerate(placements):
        if isinstance(p, Shard):
            a, b = chunk_bounds(shape[p.dim], mesh.size(d), coord[d])
            shape[p.dim] = b - a
    return tuple(shape)


def _norm_placements(placements: Optional[Sequence[Placement]], mesh: DeviceMesh, ndim: int) -> tuple:
    if placements is None:
        return tuple(Replicate() for _ in range(mesh.ndim))
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"`placements` must have the same length as `device_mesh.ndim`! Found placements length: "
                         f"{len(placements)}, and device_mesh.ndim: {mesh.ndim}.")
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"placements must be Shard, Replicate or Partial, got {p!r}")
        if isinstance(p, Shard) and p.dim < 0:
            p = Shard(p.dim + ndim)
        if isinstance(p, Shard) and not 0 <= p.dim < max(ndim, 1):
            raise IndexError(f"Shard(dim={p.dim}) is out of range for a {ndim}-d tensor")
        out.append(p)
    return tuple(out)


def _default_mesh(mesh: Optional[DeviceMesh], device_type: str) -> DeviceMesh:
    if mesh is not None:
        return mesh
    return init_device_mesh(device_type, (c10d.get_world_size() if c10d.is_initialized() else 1,))


def _mixed_error(op: str) -> RuntimeError:
    return RuntimeError(f"{op}: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor "
                        "before calling distributed operators!")


class DTensor(Tensor):
    """A distributed tensor: `_data` is this rank's local piece; `placements` say how pieces make the whole."""

    _mesh: DeviceMesh
    _placements: tuple
    _gshape: tuple

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("DTensor is not built with its constructor: use DTensor.from_local(), "
                           "distribute_tensor() or a DTensor factory")

    @classmethod
    def _make(cls, data: Any, mesh: DeviceMesh, placements: tuple, gshape: tuple,
              requires_grad: bool = False, vc: Optional[list] = None) -> "DTensor":
        t = _new(cls)
        t._data = data
        t._mesh = mesh
        t._placements = placements
        t._gshape = tuple(int(s) for s in gshape)
        if vc is not None:
            t._vc = vc
        if requires_grad:
            t._requires_grad = True
        return t

    def _like(self, data: Any) -> "DTensor":
        """A DTensor with this one's layout around another local array of the same local shape."""
        return DTensor._make(data, self._mesh, self._placements, self._gshape)

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_local(local_tensor: Tensor, device_mesh: Optional[DeviceMesh] = None,
                   placements: Optional[Sequence[Placement]] = None, *, run_check: bool = False,
                   shape: Optional[Sequence[int]] = None, stride: Optional[Sequence[int]] = None) -> "DTensor":
        """Wrap each rank's local tensor as one DTensor (no communication unless run_check)."""
        if not isinstance(local_tensor, Tensor):
            raise TypeError(f"from_local expects a Tensor, got {type(local_tensor).__name__}")
        mesh = _default_mesh(device_mesh, local_tensor.device.type)
        placements = _norm_placements(placements, mesh, local_tensor.ndim)
        if shape is not None:
            gshape = tuple(int(s) for s in shape)
        else:
            gshape = list(local_tensor._data.shape)
            for d, p in enumerate(placements):
                if isinstance(p, Shard):
                    gshape[p.dim] *= mesh.size(d)  # as PyTorch: assumes even shards when no shape is given
            gshape = tuple(gshape)
        if run_check:
            _check_same_across(mesh, ("from_local", gshape, str(local_tensor.dtype), tuple(map(str, placements))))
        return DTensor._make(local_tensor._data, mesh, placements, gshape, local_tensor._requires_grad,
                             local_tensor._shared_vc())

    # ------------------------------------------------------------------ metadata (global)
    @property
    def device_mesh(self) -> DeviceMesh:
        return self._mesh

    @property
    def placements(self) -> tuple:
        return self._placements

    @property
    def shape(self) -> Size:
        return Size(self._gshape)

    def size(self, dim: Optional[int] = None):
        if dim is None:
            return Size(self._gshape)
        n = len(self._gshape)
        if not -max(n, 1) <= dim < max(n, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
        return self._gshape[dim]

    def numel(self) -> int:
        return math.prod(self._gshape)

    nelement = numel

    @property
    def ndim(self) -> int:
        return len(self._gshape)

    def dim(self) -> int:
        return len(self._gshape)

    ndimension = dim

    def stride(self, dim: Optional[int] = None):
        st, acc = [], 1
        for s in reversed(self._gshape):
            st.append(acc)
            acc *= max(s, 1)
        st = tuple(reversed(st))
        return st if dim is None else st[dim]

    @property
    def data(self) -> "DTensor":
        return self._like(self._data)

    @data.setter
    def data(self, value: Tensor) -> None:
        if isinstance(value, DTensor):
            self._data, self._mesh, self._placements, self._gshape = \
                value._data, value._mesh, value._placements, value._gshape
        else:
            raise _mixed_error("aten.set_.source_Tensor")

    # ------------------------------------------------------------------ conversions
    def to_local(self, *, grad_placements: Optional[Sequence[Placement]] = None) -> Tensor:
        """This rank's piece as a plain tensor sharing memory (and version counter) with the DTensor."""
        t = _wrap(self._data)
        t._vc = self._shared_vc()
        return t

    @property
    def _local_tensor(self) -> Tensor:
        return self.to_local()

    def full_tensor(self, *, grad_placements: Optional[Sequence[Placement]] = None) -> Tensor:
        """The whole tensor on every rank (all-gathers shards, all-reduces partials)."""
        return _wrap(self._gather_array(self._data, self._placements))

    def _gather_array(self, data: Any, placements: tuple, target: Optional[tuple] = None) -> Any:
        """data laid out as `placements`, turned into `target` (all Replicate by default) with collectives."""
        target = target or tuple(Replicate() for _ in placements)
        for d in reversed(range(self._mesh.ndim)):
            src, dst = placements[d], target[d]
            if src == dst:
                continue
            g = self._mesh.get_group(d)
            n = self._mesh.size(d)
            if isinstance(src, Partial):
                data = np.ascontiguousarray(data) if type(data) is np.ndarray else data.copy()
                op = {"sum": c10d.ReduceOp.SUM, "avg": c10d.ReduceOp.AVG, "max": c10d.ReduceOp.MAX,
                      "min": c10d.ReduceOp.MIN}[src.reduce_op]
                c10d.all_reduce(data, op=op, group=g)
                src = Replicate()
            if isinstance(src, Shard):
                data = _all_gather_dim(data, src.dim, self._gshape_at(d, placements), n, g)
                src = Replicate()
            if isinstance(dst, Shard):
                a, b = chunk_bounds(data.shape[dst.dim], n, self._mesh.get_local_rank(d))
                index = [slice(None)] * data.ndim
                index[dst.dim] = slice(a, b)
                data = data[tuple(index)].copy()
            elif isinstance(dst, Partial):
                if self._mesh.get_local_rank(d) != 0 and dst.reduce_op in ("sum", "avg"):
                    data = data * 0  # one rank keeps the value, the rest contribute nothing
            placements = placements[:d] + (dst,) + placements[d + 1:]
        return data

    def _gshape_at(self, mesh_dim: int, placements: tuple) -> int:
        """The full size, along the sharded tensor dim of mesh_dim, of the pieces gathered over mesh_dim."""
        p = placements[mesh_dim]
        size = self._gshape[p.dim]
        coord = self._mesh.get_coordinate()
        for d in range(mesh_dim):  # outer mesh dims that shard the same tensor dim cut it first
            q = placements[d]
            if isinstance(q, Shard) and q.dim == p.dim:
                a, b = chunk_bounds(size, self._mesh.size(d), coord[d])
                size = b - a
        return size

    def redistribute(self, device_mesh: Optional[DeviceMesh] = None,
                     placements: Optional[Sequence[Placement]] = None, *, async_op: bool = False) -> "DTensor":
        """The same global tensor laid out with other placements (collectives as needed)."""
        mesh = device_mesh or self._mesh
        if mesh != self._mesh:
            raise NotImplementedError("redistribute: moving a DTensor to another DeviceMesh is not supported")
        target = _norm_placements(placements, mesh, self.ndim)
        if target == self._placements:
            return self
        data = self._gather_array(self._data, self._placements, target)
        return DTensor._make(data, mesh, target, self._gshape)

    # ------------------------------------------------------------------ printing, pickling
    def __repr__(self) -> str:
        return (f"DTensor(local_tensor={self.to_local()!r}, device_mesh={self._mesh!r}, "
                f"placements={self._placements!r})")

    def __reduce_ex__(self, protocol):
        from ..._tensor import _host
        return (_rebuild_dtensor, (_host(self._data), str(self.device), self._mesh, self._placements, self._gshape,
                                   self._requires_grad, bool(getattr(self, "_is_param", False))))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        t = DTensor._make(self._data.copy(), self._mesh, self._placements, self._gshape, self._requires_grad)
        if getattr(self, "_is_param", False):
            t._is_param = True
        if self._grad is not None:
            t._grad = self._grad.__deepcopy__(memo) if isinstance(self._grad, DTensor) else \
                _wrap(self._grad._data.copy())
        memo[id(self)] = t
        return t

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("a DTensor has no single array on this rank: call .full_tensor() (the whole tensor) or "
                           ".to_local() (this rank's piece) first")

    def numpy(self, force: bool = False):
        self.__array__()

    def tolist(self):
        self.__array__()

    def item(self):
        if not all(isinstance(p, Replicate) for p in self._placements):
            raise RuntimeError("item() on a sharded or partial DTensor: call .full_tensor().item()")
        return self.to_local().item()

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    # ------------------------------------------------------------------ reductions over the whole tensor
    def _reduced(self, local_value: Any, op: str) -> "DTensor":
        """A replicated 0-d DTensor from each rank's partial reduction."""
        data = np.asarray(local_value) if type(self._data) is np.ndarray else local_value
        data = data.reshape(1).copy()
        code = {"sum": c10d.ReduceOp.SUM, "max": c10d.ReduceOp.MAX, "min": c10d.ReduceOp.MIN}[op]
        for d, p in enumerate(self._placements):
            if isinstance(p, (Shard, Partial)):
                c10d.all_reduce(data, op=code, group=self._mesh.get_group(d))
        return DTensor._make(data.reshape(()), self._mesh, tuple(Replicate() for _ in self._placements), ())

    def sum(self, dim=None, keepdim: bool = False, *, dtype=None) -> "DTensor":
        if dim is not None:
            raise NotImplementedError("DTensor.sum(dim=...) is not supported: use full_tensor() or to_local()")
        local = self._data.sum(dtype=None if dtype is None else dtype.np)
        return self._reduced(local, "sum")

    def mean(self, dim=None, keepdim: bool = False, *, dtype=None) -> "DTensor":
        s = self.sum(dim, keepdim, dtype=dtype)
        s._data = s._data / s._data.dtype.type(max(self.numel(), 1)) if s._data.dtype.kind == "f" else \
            (s._data / max(self.numel(), 1)).astype(np.float32)
        s._data = (np if type(self._data) is np.ndarray else self._data.__array_namespace__()).asarray(s._data)
        return s

    def norm(self, p: Any = "fro", dim=None, keepdim: bool = False, dtype=None) -> "DTensor":
        if dim is not None:
            raise NotImplementedError("DTensor.norm(dim=...) is not supported: use full_tensor() or to_local()")
        order = 2.0 if p in ("fro", None) else float(p)
        flat = self._data.reshape(-1).astype(np.float64 if self._data.dtype == np.float64 else np.float32)
        xp = np if type(flat) is np.ndarray else flat.__array_namespace__()
        if order == math.inf:
            r = self._reduced(xp.abs(flat).max() if flat.size else xp.zeros((), flat.dtype), "max")
        else:
            r = self._reduced((xp.abs(flat) ** order).sum(), "sum")
            r._data = r._data ** (1.0 / order)
        r._data = xp.asarray(r._data, dtype=self._data.dtype).reshape(())
        return r


def _check_same_across(mesh: DeviceMesh, what: Any) -> None:
    seen: list = [None] * c10d.get_world_size()
    c10d.all_gather_object(seen, what)
    ranks = [int(r) for r in mesh._ranks.reshape(-1)]
    for r in ranks:
        if seen[r] != what:
            raise ValueError(f"rank {c10d.get_rank()}: {what[0]}: rank {r} has {seen[r]!r} but this rank has "
                             f"{what!r}")


def _all_gather_dim(data: Any, dim: int, full: int, n: int, group: Any) -> Any:
    """Gather torch.chunk pieces of `full` rows along `dim` from the n ranks of group (pads uneven pieces)."""
    xp = np if type(data) is np.ndarray else data.__array_namespace__()
    step = -(-full // n) if full else 0
    moved = xp.moveaxis(data, dim, 0)
    rest = moved.shape[1:]
    padded = xp.zeros((step,) + rest, dtype=data.dtype)
    padded[:moved.shape[0]] = moved
    out = xp.empty((n * step,) + rest, dtype=data.dtype)
    c10d.all_gather_into_tensor(out, padded, group=group)
    return xp.ascontiguousarray(xp.moveaxis(out[:full], 0, dim))


def _rebuild_dtensor(array, dev, mesh, placements, gshape, requires_grad, is_param):
    from ..._device import move, to_device
    data = move(array, to_device(dev)) if dev not in (None, "cpu") else array
    t = DTensor._make(data, mesh, placements, gshape, requires_grad)
    if is_param:
        t._is_param = True
    return t


def _local_arg(op: str, x: Any, like: DTensor) -> Any:
    if isinstance(x, DTensor):
        if x._placements != like._placements or x._gshape != like._gshape:
            if x._gshape == () or all(isinstance(p, Replicate) for p in x._placements) and x.numel() == 1:
                return x.to_local()
            raise RuntimeError(f"{op}: DTensors with different layouts ({like._placements} {tuple(like._gshape)} and "
                               f"{x._placements} {tuple(x._gshape)}); redistribute one first")
        return x.to_local()
    if isinstance(x, Tensor):
        if x._data.ndim == 0:
            return x
        raise _mixed_error(op)
    return x


def _pointwise(name: str, inplace: bool):
    base = getattr(Tensor, name)

    def op(self: DTensor, *args, **kwargs):
        args = tuple(_local_arg(name, a, self) for a in args)
        kwargs = {k: _local_arg(name, v, self) for k, v in kwargs.items()}
        local = self.to_local()
        with no_grad():
            out = base(local, *args, **kwargs)
        if inplace:
            self._data = local._data
            return self
        if not isinstance(out, Tensor):
            return out
        return DTensor._make(out._data, self._mesh, self._placements, self._gshape)

    op.__name__ = name
    op.__doc__ = f"{name} on each rank's local piece (same layout in and out)."
    return op


_UNARY = ("neg abs sqrt rsqrt exp log sign sigmoid tanh relu reciprocal square sin cos clone detach float double "
          "half bfloat16 to cpu cuda type_as __neg__ __abs__ __pos__ isnan isinf isfinite logical_not contiguous")
_BINARY = ("add sub mul div true_divide pow maximum minimum lerp addcmul addcdiv clamp clamp_min clamp_max where "
           "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __pow__ __rpow__ "
           "eq ne lt le gt ge __eq__ __ne__ __lt__ __le__ __gt__ __ge__")
_INPLACE = ("add_ sub_ mul_ div_ pow_ lerp_ addcmul_ addcdiv_ clamp_ clamp_min_ clamp_max_ zero_ fill_ copy_ "
            "uniform_ normal_ sqrt_ neg_ abs_ exp_ sign_ masked_fill_ __iadd__ __isub__ __imul__ __itruediv__")
for _name in (_UNARY + " " + _BINARY).split():
    if hasattr(Tensor, _name):
        setattr(DTensor, _name, _pointwise(_name, False))
for _name in _INPLACE.split():
    if hasattr(Tensor, _name):
        setattr(DTensor, _name, _pointwise(_name, True))
DTensor.__hash__ = Tensor.__hash__


def _unsupported(name: str):
    def op(self, *args, **kwargs):
        raise NotImplementedError(f"DTensor.{name}: tinytorch's DTensor runs elementwise ops and whole-tensor "
                                  "sum/mean/norm; call .full_tensor() (the whole tensor) or .to_local() (this rank's "
                                  "piece) first")
    op.__name__ = name
    return op


for _name in ("view reshape flatten transpose t permute unsqueeze squeeze expand __getitem__ __setitem__ matmul "
              "__matmul__ __rmatmul__ mm bmm max min std var prod argmax argmin chunk split narrow index_select "
              "gather softmax log_softmax __iter__ __len__").split():
    if hasattr(Tensor, _name):
        setattr(DTensor, _name, _unsupported(_name))


def distribute_tensor(tensor: Tensor, device_mesh: Optional[DeviceMesh] = None,
                      placements: Optional[Sequence[Placement]] = None, *,
                      src_data_rank: Optional[int] = 0) -> DTensor:
    """Split (Shard) or copy (Replicate) a full tensor over the mesh: rank src_data_rank's values are used
    (broadcast first); with src_data_rank=None every rank's own tensor is used and nothing is sent."""
    if isinstance(tensor, DTensor):
        raise ValueError("distribute_tensor: the input is already a DTensor; use redistribute()")
    mesh = _default_mesh(device_mesh, tensor.device.type)
    placements = _norm_placements(placements, mesh, tensor.ndim)
    if any(isinstance(p, Partial) for p in placements):
        raise ValueError("distribute_tensor: Partial placements are not allowed (the input is a full tensor)")
    data = tensor._data
    if src_data_rank is not None and tensor.device.type != "meta" and c10d.get_world_size() > 1:
        data = np.ascontiguousarray(data) if type(data) is np.ndarray else data.copy()
        if data is tensor._data:
            data = data.copy()
        for d in range(mesh.ndim):
            g = mesh.get_group(d)
            coord = list(mesh.get_coordinate())
            coord[d] = 0
            src = int(mesh._ranks[tuple(coord)]) if src_data_rank == 0 else int(src_data_rank)
            if src in c10d.get_process_group_ranks(g):
                c10d.broadcast(data, src=src, group=g)
    gshape = tuple(data.shape)
    coord = mesh.get_coordinate()
    for d, p in enumerate(placements):
        if isinstance(p, Shard):
            a, b = chunk_bounds(data.shape[p.dim], mesh.size(d), coord[d])
            index = [slice(None)] * data.ndim
            index[p.dim] = slice(a, b)
            data = data[tuple(index)]
    data = data.copy() if data is tensor._data or getattr(data, "base", None) is not None else data
    return DTensor._make(data, mesh, placements, gshape, tensor._requires_grad)


def distribute_module(module: Any, device_mesh: Optional[DeviceMesh] = None, partition_fn: Any = None,
                      input_fn: Any = None, output_fn: Any = None) -> Any:
    """Replicate every parameter and buffer of module over the mesh, or let partition_fn(name, module, mesh) place
    them; input_fn/output_fn become forward pre-/post-hooks."""
    from ...nn.parameter import Parameter
    mesh = _default_mesh(device_mesh, "cpu")
    for name, sub in module.named_modules():
        if partition_fn is not None:
            partition_fn(name, sub, mesh)
        for key, p in list(sub._parameters.items()):
            if p is not None and not isinstance(p, DTensor):
                sub._parameters[key] = Parameter(distribute_tensor(p.detach(), mesh, [Replicate()] * mesh.ndim),
                                                 p.requires_grad)
        for key, b in list(sub._buffers.items()):
            if b is not None and not isinstance(b, DTensor):
                sub._buffers[key] = distribute_tensor(b, mesh, [Replicate()] * mesh.ndim)
    if input_fn is not None:
        module.register_forward_pre_hook(lambda m, args: input_fn(m, args, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda m, args, out: output_fn(m, out, mesh))
    return module
