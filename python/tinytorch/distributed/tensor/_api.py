"""DTensor: a tensor whose global value is spread over a DeviceMesh; each rank holds its local piece.

The local piece is the tensor's `_data` (so optimizers, which update `_data` in place, step local shards
unchanged, and FSDP/DCP read it directly), while shape, size(), numel() and stride() describe the global tensor,
as in PyTorch. Every Tensor method and every torch.*/F.* op function called with a DTensor goes to the op
dispatcher (_dispatch.py), which looks up the op's sharding rule (_ops/), redistributes the inputs the rule asks
for, runs the ordinary op on the local pieces and wraps the result; an op without a rule raises.

Autograd runs through DTensors: from_local/to_local are recorded nodes (the local op's own nodes sit between
them), redistribute records a node whose backward redistributes the gradient back, and gradients reaching a
DTensor parameter are laid out as the parameter before they land in `.grad` (so an optimizer sees matching
local pieces).
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Optional, Sequence

import numpy as np

from ..._C import _grad_enabled
from ..._ops._common import record
from ..._torch_function import _disabled_torch_function_impl
from ..._tensor import Size, Tensor, _new, _wrap
from .. import distributed_c10d as c10d
from ..device_mesh import DeviceMesh, _mesh_resources, init_device_mesh
from ._redistribute import chunk_bounds, normalize_for_grad, redistribute_local
from .placement_types import Placement, Replicate, Shard, _StridedShard

__all__ = ["DTensor", "distribute_tensor", "distribute_module"]
__all__ += ["chunk_bounds"]  # FSDP and DCP cut dim 0 with it


def _norm_placements(placements: Optional[Sequence[Placement]], mesh: DeviceMesh, ndim: int) -> tuple:
    """Placements checked against the mesh, negative Shard dims made positive (all Replicate when None)."""
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
        if p.is_shard():
            d = p.dim + ndim if p.dim < 0 else p.dim
            if not 0 <= d < max(ndim, 1):
                raise IndexError(f"{p!r} is out of range for a {ndim}-d tensor")
            if d != p.dim:
                p = _StridedShard(d, split_factor=p.split_factor) if isinstance(p, _StridedShard) else Shard(d)
        out.append(p)
    partial_ops = {p.reduce_op for p in out if p.is_partial()}
    if len(partial_ops) > 1:
        raise ValueError(f"placements {tuple(out)} mix Partial reduce types {sorted(partial_ops)}; a DTensor holds "
                         "one kind of pending reduction")
    return tuple(out)


def _default_mesh(mesh: Optional[DeviceMesh], device_type: str) -> DeviceMesh:
    if mesh is not None:
        return mesh
    current = _mesh_resources.get_current_mesh()
    if current is not None:
        return current
    return init_device_mesh(device_type, (c10d.get_world_size() if c10d.is_initialized() else 1,))


class DTensor(Tensor):
    """A distributed tensor: `_data` is this rank's local piece; `placements` say how pieces make the whole."""

    __torch_function__ = staticmethod(_disabled_torch_function_impl)  # DTensor dispatches its own ops

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
                   shape: Optional[Sequence[int]] = None, stride: Optional[Sequence[int]] = None,
                   grad_placements: Optional[Sequence[Placement]] = None) -> "DTensor":
        """Wrap each rank's local tensor as one DTensor (differentiable; no communication unless run_check).

        Without `shape` the global shape assumes even pieces (local size times mesh size on sharded dims); uneven
        pieces need `shape` and `stride`. run_check compares the metadata across ranks and broadcasts Replicate
        pieces from the first rank of their mesh dim. The gradient flows back laid out as `grad_placements`
        (default: `placements` with Partial read as Replicate)."""
        if isinstance(local_tensor, DTensor):
            raise RuntimeError("the input tensor of DTensor.from_local is already a DTensor")
        if not isinstance(local_tensor, Tensor):
            raise TypeError(f"from_local expects a Tensor, got {type(local_tensor).__name__}")
        mesh = _default_mesh(device_mesh, local_tensor.device.type)
        placements = _norm_placements(placements, mesh, local_tensor.ndim)
        if (shape is None) != (stride is None):
            raise RuntimeError(f"Found shape:{shape}, stride:{stride}. Please pass both shape and stride at the same "
                               "time.")
        if shape is not None:
            gshape = tuple(int(s) for s in shape)
        else:
            gshape = list(local_tensor._data.shape)
            for d, p in enumerate(placements):
                if p.is_shard():
                    gshape[p.dim] *= mesh.size(d)
            gshape = tuple(gshape)
        data = None
        if run_check:
            _check_same_across(mesh, ("from_local", gshape if shape is not None else None,
                                      str(local_tensor.dtype), tuple(map(str, placements))))
            for d, p in enumerate(placements):
                if p.is_replicate() and mesh.size(d) > 1:
                    if data is None:
                        data = np.array(local_tensor._data, order="C", copy=True) if local_tensor.is_cpu else \
                            local_tensor._data.copy()
                    src = int(mesh._ranks[tuple(0 if e == d else c for e, c in
                                                enumerate(mesh.get_coordinate()))])
                    c10d.broadcast(data, src=src, group=mesh.get_group(d))
        grads = None if grad_placements is None else _norm_placements(grad_placements, mesh, len(gshape))
        return _from_local(local_tensor, mesh, placements, gshape, grads, data)

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

    def __len__(self) -> int:
        if not self._gshape:
            raise TypeError("len() of a 0-d tensor")
        return self._gshape[0]

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

    @property
    def T(self) -> "DTensor":
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> "DTensor":
        return self.transpose(-2, -1)

    # ------------------------------------------------------------------ ops that only read another tensor's metadata
    def type_as(self, other: Tensor) -> "DTensor":
        return self.to(other.dtype)

    def view_as(self, other: Tensor) -> "DTensor":
        return self.view(tuple(other.shape))

    def reshape_as(self, other: Tensor) -> "DTensor":
        return self.reshape(tuple(other.shape))

    def expand_as(self, other: Tensor) -> "DTensor":
        return self.expand(tuple(other.shape))

    # ------------------------------------------------------------------ conversions
    def to_local(self, *, grad_placements: Optional[Sequence[Placement]] = None) -> Tensor:
        """This rank's piece as a plain tensor sharing memory (and version counter); differentiable, the gradient
        coming back is read as laid out by `grad_placements` (default: this DTensor's placements, Partial read
        as Replicate)."""
        grads = None if grad_placements is None else _norm_placements(grad_placements, self._mesh, self.ndim)
        return _to_local(self, grads)

    @property
    def _local_tensor(self) -> Tensor:
        return self.to_local()

    def full_tensor(self, *, grad_placements: Optional[Sequence[Placement]] = None) -> Tensor:
        """The whole tensor on every rank: redistribute to all Replicate, then to_local (differentiable)."""
        full = _redistribute(self, tuple(Replicate() for _ in range(self._mesh.ndim)))
        return full.to_local(grad_placements=grad_placements)

    def redistribute(self, device_mesh: Optional[DeviceMesh] = None,
                     placements: Optional[Sequence[Placement]] = None, *, async_op: bool = False,
                     forward_dtype: Any = None, backward_dtype: Any = None) -> "DTensor":
        """The same global tensor laid out with other placements: all-gather, all-reduce, reduce-scatter,
        all-to-all or a local cut per mesh dim (differentiable: backward runs the dual step). The collectives
        run before it returns, also with async_op=True."""
        mesh = device_mesh or self._mesh
        if mesh != self._mesh:
            raise NotImplementedError(f"Cross device mesh comm not supported yet! (redistribute from {self._mesh} "
                                      f"to {mesh})")
        if placements is None:
            raise RuntimeError("placements is needed for redistribute!")
        target = _norm_placements(placements, mesh, self.ndim)
        for cur, new in zip(self._placements, target):
            if new.is_partial() and cur != new:
                raise RuntimeError(f"Can not redistribute from {cur} to {new}, redistributing to Partial is for "
                                   "internal use only!")
        x = self if forward_dtype is None else self.to(forward_dtype)
        return _redistribute(x, target, backward_dtype)

    # ------------------------------------------------------------------ printing, pickling
    def __repr__(self) -> str:
        return (f"DTensor(local_tensor={_wrap(self._data)!r}, device_mesh={self._mesh!r}, "
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
        """The value of a one-element DTensor (pending reductions and shards are resolved first)."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        if all(p.is_replicate() for p in self._placements):
            return _wrap(self._data).item()
        return self.full_tensor().item()

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        return int(self.item())

    def __iter__(self):
        if not self._gshape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))


DTensor.__hash__ = Tensor.__hash__


def _mixed_error(op: str) -> RuntimeError:
    return RuntimeError(f"{op}: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor "
                        "before calling distributed operators!")


def _check_same_across(mesh: DeviceMesh, what: Any) -> None:
    seen: list = [None] * c10d.get_world_size()
    c10d.all_gather_object(seen, what)
    for r in (int(r) for r in mesh._ranks.reshape(-1)):
        if seen[r] != what:
            raise ValueError(f"rank {c10d.get_rank()}: {what[0]}: rank {r} has {seen[r]!r} but this rank has "
                             f"{what!r}")


def _rebuild_dtensor(array, dev, mesh, placements, gshape, requires_grad, is_param):
    from ..._device import move, to_device
    data = move(array, to_device(dev)) if dev not in (None, "cpu") else array
    t = DTensor._make(data, mesh, placements, gshape, requires_grad)
    if is_param:
        t._is_param = True
    return t


# ------------------------------------------------------------------ the differentiable conversions


def _as_grad(g: Any, mesh: DeviceMesh, placements: tuple, gshape: tuple) -> "DTensor":
    """A gradient arriving at a DTensor node as a DTensor (a plain tensor is read as laid out like `placements`)."""
    if g is None or isinstance(g, DTensor):
        return g
    return DTensor._make(g._data, mesh, placements, gshape)


def _to_local(x: DTensor, grad_placements: Optional[tuple]) -> Tensor:
    """x's local piece as a plain tensor; its gradient is wrapped back as a DTensor laid out as grad_placements."""
    t = _wrap(x._data)
    t._vc = x._shared_vc()
    if x._requires_grad and _grad_enabled():
        mesh, gshape = x._mesh, x._gshape
        gp = grad_placements if grad_placements is not None else normalize_for_grad(x._placements)

        def to_local_backward(g):
            return _from_local(g, mesh, gp, gshape, None)
        record("ToTorchTensor", to_local_backward, t, (x,))
    return t


def _from_local(local: Tensor, mesh: DeviceMesh, placements: tuple, gshape: tuple,
                grad_placements: Optional[tuple], data: Any = None) -> DTensor:
    """local as this rank's piece of a DTensor (sharing its memory, or holding `data` in its place); the DTensor's
    gradient is redistributed to grad_placements (default: placements with Partial read as Replicate) and handed
    back as a local tensor."""
    if data is None:
        out = DTensor._make(local._data, mesh, placements, gshape, vc=local._shared_vc())
    else:
        out = DTensor._make(data, mesh, placements, gshape)
    if local._requires_grad and _grad_enabled():
        gp = grad_placements if grad_placements is not None else normalize_for_grad(placements)

        def from_local_backward(g):
            g = _as_grad(g, mesh, gp, gshape)
            if g._placements != gp:
                g = _redistribute(g, gp)
            return _to_local(g, None)
        record("FromTorchTensor", from_local_backward, out, (local,))
    return out


def _redistribute(x: DTensor, placements: tuple, backward_dtype: Any = None) -> DTensor:
    """x laid out as `placements`; backward sends the gradient back to x's placements (Partial read as Replicate)."""
    if placements == x._placements:
        return x
    data = redistribute_local(x._data, x._mesh, x._placements, placements, x._gshape)
    out = DTensor._make(data, x._mesh, placements, x._gshape)
    if x._requires_grad and _grad_enabled():
        mesh, gshape, dtype = x._mesh, x._gshape, x.dtype
        src = normalize_for_grad(x._placements)

        def redistribute_backward(g):
            g = _as_grad(g, mesh, normalize_for_grad(placements), gshape)
            if backward_dtype is not None and g.dtype != backward_dtype:
                g = g.to(backward_dtype)
            g = _redistribute(g, src)
            return g if g.dtype == dtype else g.to(dtype)
        record("Redistribute", redistribute_backward, out, (x,))
    return out


def _grad_layout(var: DTensor, grad: Tensor) -> DTensor:
    """A gradient about to land in a DTensor leaf's .grad, laid out as the leaf (a pending sum is reduced)."""
    grad = _as_grad(grad, var._mesh, normalize_for_grad(var._placements), var._gshape)
    if grad._placements != var._placements:
        grad = _redistribute(grad, var._placements)
    return grad


# ------------------------------------------------------------------ making DTensors from whole tensors


def distribute_tensor(tensor: Tensor, device_mesh: Optional[DeviceMesh] = None,
                      placements: Optional[Sequence[Placement]] = None, *,
                      src_data_rank: Optional[int] = 0) -> DTensor:
    """Split (Shard) or copy (Replicate) a full tensor over the mesh: rank src_data_rank's values are used
    (broadcast first); with src_data_rank=None every rank's own tensor is used and nothing is sent.
    The result is a leaf that requires grad when the input does."""
    if isinstance(tensor, DTensor):
        raise ValueError("distribute_tensor: the input is already a DTensor; use redistribute()")
    mesh = _default_mesh(device_mesh, tensor.device.type)
    placements = _norm_placements(placements, mesh, tensor.ndim)
    if any(p.is_partial() for p in placements):
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
    data = redistribute_local(data, mesh, tuple(Replicate() for _ in placements), placements, gshape)
    data = data.copy() if data is tensor._data or getattr(data, "base", None) is not None else data
    return DTensor._make(data, mesh, placements, gshape, tensor._requires_grad)


def distribute_module(module: Any, device_mesh: Optional[DeviceMesh] = None, partition_fn: Any = None,
                      input_fn: Any = None, output_fn: Any = None) -> Any:
    """Let partition_fn(name, submodule, mesh) turn parameters into DTensors, replicate every parameter and buffer it
    left alone, and register input_fn(module, inputs, mesh) / output_fn(module, outputs, mesh) as forward
    pre-/post-hooks. A module is distributed once."""
    from ...nn.parameter import Parameter
    if getattr(module, "_distribute_module_applied", False):
        raise RuntimeError("distribute_module should only be called once on a module, but it has already been "
                           "called on this module!")
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
        nparams = len(inspect.signature(input_fn).parameters)
        if nparams == 2:  # PyTorch's deprecated input_fn(inputs, mesh)
            module.register_forward_pre_hook(lambda m, args: input_fn(args, mesh))
        else:
            module.register_forward_pre_hook(lambda m, args: input_fn(m, args, mesh))
    if output_fn is not None:
        nparams = len(inspect.signature(output_fn).parameters)
        if nparams == 2:
            module.register_forward_hook(lambda m, args, out: output_fn(out, mesh))
        else:
            module.register_forward_hook(lambda m, args, out: output_fn(m, out, mesh))
    module._distribute_module_applied = True
    return module


def _route_methods() -> None:
    """Every Tensor method DTensor does not define itself goes to the op dispatcher under its own name."""
    from ._dispatch import dispatch
    keep = {"__init__", "__new__", "__class__", "__init_subclass__", "__subclasshook__", "__getattribute__",
            "__setattr__", "__delattr__", "__dir__", "__sizeof__", "__format__", "__reduce__", "__getstate__",
            "__hash__", "__str__", "__complex__", "_bump_version", "_shared_vc", "backward", "register_hook",
            "register_post_accumulate_grad_hook", "retain_grad", "requires_grad_", "detach_", "element_size",
            "is_contiguous", "is_floating_point", "is_complex", "is_inference", "data_ptr", "get_device", "type"}
    for name in dir(Tensor):
        if name in keep or name in DTensor.__dict__:
            continue
        attr = inspect.getattr_static(Tensor, name)
        if isinstance(attr, property) or not callable(attr):
            continue
        setattr(DTensor, name, _method(name, getattr(Tensor, name), dispatch))
    from ..._ops import complex as complex_ops
    for name in ("real", "imag"):  # properties on Tensor, ops (with a sharding rule) on a DTensor
        setattr(DTensor, name, property(_method(name, getattr(complex_ops, name), dispatch)))


def _method(name: str, base: Any, dispatch: Any):
    def method(self, *args, **kwargs):
        return dispatch(name, base, (self,) + args, kwargs)
    method.__name__ = name
    method.__qualname__ = f"DTensor.{name}"
    method.__doc__ = f"Tensor.{name} on a DTensor (through its sharding rule)."
    return method
