"""FSDPParam: one parameter of a fully_shard group — its dim-0 shard (a DTensor) and its unsharded form.

Rows are cut as torch.chunk cuts them: each of the N ranks of the shard group owns ceil(dim0 / N) rows, padded
with zeros at the end, so every rank's piece of a collective buffer has the same size. The sharded parameter
holds only the real rows (the padding exists only inside the collective buffers).

On a 2-d mesh (HSDP, dims (replicate, shard)) the sharded parameter is placed (Replicate(), Shard(0)). A
parameter that tensor parallelism already made a DTensor (FSDP x TP) is handled through its local piece: FSDP
cuts, gathers and reduces the TP-local tensor, the unsharded parameter is that piece as a DTensor on the TP mesh
again (so the TP collectives run unchanged), and the sharded parameter is a DTensor on the root mesh's
(dp..., tp...) sub-mesh placed (Shard(0) over dp, then the TP placements) — _StridedShard(0, split_factor=k)
over dp when TP already cut dim 0 k ways, so that full_tensor() and checkpoints see the rows where they are.
"""
from __future__ import annotations

import math
from typing import Any, List, Tuple

import numpy as np

from ..._tensor import Tensor, _wrap
from ...nn.parameter import Parameter
from ..tensor._api import DTensor, chunk_bounds
from ..tensor.placement_types import Placement, Replicate, Shard, _StridedShard


class FSDPParam:
    """A parameter of a group: where it is registered, its shard, and its slot in the group's buffers."""

    def __init__(self, param: Parameter, owners: List[Tuple[Any, str]], path: str, mesh: Any, shard_rank: int,
                 shard_size: int) -> None:
        self.owners = owners  # every (module, attribute name) the parameter is registered under
        self.path = path      # its dotted name from the module fully_shard was applied to
        self.fqn = path       # its name from the outermost sharded module, for errors
        self.mesh = mesh      # FSDP's mesh: 1-d, or 2-d (replicate, shard) for HSDP
        self.tp_mesh: Any = None
        self.tp_placements: Tuple[Placement, ...] = ()
        if isinstance(param, DTensor):
            self.tp_mesh, self.tp_placements = param.device_mesh, tuple(param.placements)
            self.spmd_mesh, self.spmd_placements = _spmd_layout(path, param, mesh, shard_size)
        else:
            self.spmd_mesh = mesh
            self.spmd_placements = (Replicate(),) * (mesh.ndim - 1) + (Shard(0),)
        self.global_shape = tuple(param.shape)  # what the sharded DTensor describes
        self.orig_shape = tuple(param._data.shape)  # what FSDP gathers: the whole tensor, or its TP-local piece
        self.orig_dtype = param._data.dtype
        self.requires_grad = param.requires_grad
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
        self.sharded_param = Parameter(self._sharded_dtensor(local), self.requires_grad)
        self.sharded_param._fsdp_managed = True  # a parent's fully_shard leaves it to this group
        self.unsharded_param: Parameter | None = None

    def _sharded_dtensor(self, local: Any) -> DTensor:
        """A DTensor laid out as this parameter's shard around this rank's rows."""
        return DTensor._make(local, self.spmd_mesh, self.spmd_placements, self.global_shape)

    # ------------------------------------------------------------------ the sharded side
    def local_rows_array(self) -> Any:
        """This rank's real rows of the sharded parameter as a 2-d (rows, row_numel) array."""
        d = self.sharded_param._data
        return d.reshape(self.local_rows[1] - self.local_rows[0], self.row_numel)

    def check_loaded(self, value: Any, key: str) -> None:
        """Raise (naming the parameter `key`) unless `value` is laid out as this parameter's shard: a DTensor of
        the same global shape, on the sharded parameter's mesh and placements, holding this rank's rows."""
        want = f"a DTensor of shape {list(self.global_shape)} placed {self.spmd_placements} on {self.spmd_mesh}"
        how = ("make it with distribute_tensor(full_tensor, param.device_mesh, param.placements), or load a full "
               "state dict with set_model_state_dict(model, sd, options=StateDictOptions(full_state_dict=True))")
        if not isinstance(value, DTensor):
            raise RuntimeError(f"Error loading {key}: fully_shard keeps this parameter sharded as {want}, got a "
                               f"{type(value).__name__} of shape {list(value.shape)}; {how}")
        if tuple(value.shape) != self.global_shape:
            raise RuntimeError(f"size mismatch for {key}: copying a param with shape {value.shape} from "
                               f"checkpoint, the shape in current model is {self.sharded_param.shape}.")
        if value.device_mesh != self.spmd_mesh or tuple(value.placements) != self.spmd_placements:
            raise RuntimeError(f"Error loading {key}: got a DTensor placed {tuple(value.placements)} on "
                               f"{value.device_mesh}, but fully_shard shards this parameter as {want}; {how}")
        a, b = self.local_rows
        local = (b - a,) + self.orig_shape[1:] if self.orig_shape else (() if b > a else (0,))
        if tuple(value._data.shape) != local:
            raise RuntimeError(f"Error loading {key}: its local piece has shape {list(value._data.shape)}, but this "
                               f"rank holds rows [{a}, {b}) of it (shape {list(local)}); {how}")

    def reset_sharded_param(self) -> None:
        """Adopt the parameter registered on the owner module if it replaced our sharded one (PyTorch's
        reset_sharded_param): load_state_dict(assign=True), Module._apply (to_empty, .to()), or assignment.
        The adopted object is the one model.parameters() returns and the optimizer will step."""
        mine = (self.sharded_param, self.unsharded_param)
        replaced = [p for m, n in self.owners if (p := m._parameters.get(n)) is not None and
                    all(p is not q for q in mine)]
        if replaced:
            current = replaced[-1]  # a shared parameter loaded under several names: the last load wins
            self.check_loaded(current, self.fqn)
            self.sharded_param = current
            current._fsdp_managed = True
            self.register(current)  # every owner shows the same object again
        self.orig_dtype = self.sharded_param._data.dtype  # Module.to(dtype) changes it in place

    def set_sharded_grad(self, local_grad: Any) -> None:
        """Store (or add to) the sharded parameter's .grad from this rank's reduced rows."""
        p = self.sharded_param
        data = local_grad.reshape(p._data.shape)
        if data.dtype != p._data.dtype:
            data = data.astype(p._data.dtype)
        if p._grad is None:
            p._grad = self._sharded_dtensor(data)
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
            t = _wrap(view) if self.tp_mesh is None else \
                DTensor._make(view, self.tp_mesh, self.tp_placements, self.global_shape)
            self.unsharded_param = Parameter(t, self.requires_grad)
        else:
            self.unsharded_param._data = view
        return self.unsharded_param


def _spmd_layout(name: str, param: DTensor, dp_mesh: Any, shard_size: int) -> Tuple[Any, Tuple[Placement, ...]]:
    """The mesh and placements of the sharded form of a TP DTensor parameter: the root mesh's (dp..., tp...)
    sub-mesh, placed (Replicate() for HSDP, Shard(0) or _StridedShard(0, split_factor=k), *TP placements)."""
    tp_mesh = param.device_mesh
    dp_root, tp_root = dp_mesh._get_root_mesh(), tp_mesh._get_root_mesh()
    if dp_root != tp_root or dp_mesh is dp_root or tp_mesh is tp_root:
        raise AssertionError(f"fully_shard: parameter {name} is a DTensor on {tp_mesh}, but FSDP requires the DP and "
                             "model parallel TP/EP mesh to have the same parent mesh but got: \n"
                             f"DP's global mesh: {dp_root}\nTP/EP's global mesh: {tp_root}\n(slice both from one "
                             'mesh: mesh = init_device_mesh(..., mesh_dim_names=("dp", "tp")); mesh["dp"], mesh["tp"])')
    if dp_mesh.mesh_dim_names is None or tp_mesh.mesh_dim_names is None:
        raise AssertionError("FSDP requires named DeviceMesh dims for ND parallelism")
    names = tuple(dp_mesh.mesh_dim_names) + tuple(tp_mesh.mesh_dim_names)
    try:
        spmd_mesh = dp_root[names]
    except KeyError as e:
        raise ValueError(f"fully_shard: parameter {name}: the mesh dims {names} (FSDP's, then TP's) must be dims "
                         f"of the root mesh {dp_root} in that order ({e})") from None
    if any(p.is_partial() for p in param.placements):
        raise ValueError(f"fully_shard: parameter {name} is placed {tuple(param.placements)}; a parameter cannot be "
                         "Partial")
    split = math.prod(tp_mesh.size(d) for d, p in enumerate(param.placements) if p.is_shard(0))
    dp_placement: Placement = Shard(0)
    if split > 1:
        dp_placement = _StridedShard(0, split_factor=split)
        if param.shape[0] % (split * shard_size):
            raise ValueError(f"fully_shard: parameter {name} of shape {list(param.shape)} is sharded on dim 0 by "
                             f"tensor parallelism ({split} ways) and by FSDP ({shard_size} ways): dim 0 must be "
                             f"divisible by {split * shard_size}")
    return spmd_mesh, (Replicate(),) * (dp_mesh.ndim - 1) + (dp_placement,) + tuple(param.placements)


def host_storage(numel: int, dtype: Any) -> Tuple[Any, Any]:
    """A page-aligned anonymous mapping viewed as a 1-d array, and the mapping (see FSDPParamGroup.reshard)."""
    import mmap
    dtype = np.dtype(dtype)
    nbytes = max(numel * dtype.itemsize, 1)
    mm = mmap.mmap(-1, nbytes)
    return np.frombuffer(mm, dtype=dtype, count=numel), mm
