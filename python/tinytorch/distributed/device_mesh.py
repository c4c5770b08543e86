"""DeviceMesh: the ranks of a job laid out as an n-d array, with one process group per mesh dimension.

A mesh made by init_device_mesh is a root mesh; mesh["tp"] or mesh["dp", "tp"] slices it (the sub-mesh through
this rank, sharing the root's process groups) and mesh["dp", "cp"]._flatten("dp_cp") makes a 1-d mesh over the
product of those dims (new process groups), reachable afterwards as root["dp_cp"]. Every dim of any mesh
remembers which root dims it spans, so slices and flattenings compose.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from . import distributed_c10d as c10d

__all__ = ["DeviceMesh", "init_device_mesh"]


def _backend_for(device_type: str) -> str:
    return "nccl" if str(device_type).startswith("cuda") else "ring"


class _MeshEnv:
    """The meshes entered with `with mesh:` (the default mesh of DTensor factories and parallelize_module)."""

    def __init__(self) -> None:
        self.mesh_stack: list = []

    def get_current_mesh(self) -> Optional["DeviceMesh"]:
        return self.mesh_stack[-1] if self.mesh_stack else None

    def get_root_mesh(self, device_mesh: "DeviceMesh") -> "DeviceMesh":
        return device_mesh._get_root_mesh()


_mesh_resources = _MeshEnv()


class DeviceMesh:
    """An n-d layout of global ranks; DTensor placements and FSDP refer to its dimensions.

    Every rank must build the same mesh (building it creates a process group for every slice along each
    dimension, a collective over the default group)."""

    def __init__(self, device_type: str, mesh: Any, *, mesh_dim_names: Optional[Sequence[str]] = None,
                 _init_backend: bool = True, _groups: Optional[list] = None, _root: Optional["DeviceMesh"] = None,
                 _spans: Optional[list] = None) -> None:
        if not c10d.is_initialized():
            c10d.init_process_group(_backend_for(device_type))
        arr = np.array(mesh.tolist() if hasattr(mesh, "tolist") else mesh, dtype=np.int64)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        world = c10d.get_world_size()
        if arr.size != len(set(arr.reshape(-1).tolist())):
            raise ValueError(f"DeviceMesh: the mesh {arr.tolist()} repeats a rank")
        if arr.min() < 0 or arr.max() >= world:
            raise ValueError(f"DeviceMesh: the mesh {arr.tolist()} names ranks outside the world of size {world}")
        if mesh_dim_names is not None:
            mesh_dim_names = tuple(mesh_dim_names)
            if len(mesh_dim_names) != arr.ndim:
                raise ValueError(f"mesh_dim_names {mesh_dim_names} must have one name per mesh dimension "
                                 f"({arr.ndim})")
            if len(set(mesh_dim_names)) != len(mesh_dim_names):
                raise RuntimeError(f"Each mesh_dim_name must be unique. Found repeated mesh_dim_name in "
                                   f"mesh_dim_names {mesh_dim_names}")
        self.device_type = str(device_type)
        self._ranks = arr
        self.mesh_dim_names = mesh_dim_names
        me = c10d.get_rank()
        where = np.argwhere(arr == me)
        self._coordinate = tuple(int(c) for c in where[0]) if len(where) else None
        self._root = _root
        self._spans = _spans if _spans is not None else [(d,) for d in range(arr.ndim)]
        self._flatten_mapping: dict = {}
        self._groups = _groups if _groups is not None else (self._make_groups() if _init_backend else [])

    def _make_groups(self) -> list:
        """One process group per mesh dimension: the slice through this rank's coordinate."""
        arr = self._ranks
        world = c10d.get_world_size()
        groups = []
        for d in range(arr.ndim):
            mine = None
            moved = np.moveaxis(arr, d, -1).reshape(-1, arr.shape[d])
            for row in moved:
                ranks = [int(r) for r in row]
                if ranks != sorted(ranks):
                    raise ValueError(f"DeviceMesh: the slice {ranks} of mesh dim {d} lists its ranks out of order; "
                                     "tinytorch's process groups order ranks increasingly, so lay the mesh out with "
                                     "increasing ranks along every dimension")
                if arr.ndim == 1 and ranks == list(range(world)):
                    g = c10d._resolve(None)  # the whole world in order: the default group
                else:
                    g = c10d.new_group(ranks)
                if self._coordinate is not None and c10d.get_rank() in ranks:
                    mine = g
            groups.append(mine)
        return groups

    def _get_root_mesh(self) -> "DeviceMesh":
        return self._root if self._root is not None else self

    # ------------------------------------------------------------------ queries
    @property
    def mesh(self):
        """The global ranks as a tensor of the mesh's shape."""
        from .._creation import tensor
        return tensor(self._ranks.copy())

    @property
    def shape(self) -> tuple:
        return tuple(int(s) for s in self._ranks.shape)

    @property
    def ndim(self) -> int:
        return self._ranks.ndim

    def size(self, mesh_dim: Optional[Any] = None) -> int:
        """Number of ranks in the mesh, or along one dimension."""
        return int(self._ranks.size) if mesh_dim is None else self.shape[self._dim(mesh_dim)]

    def _dim(self, mesh_dim: Any) -> int:
        if isinstance(mesh_dim, str):
            if not self.mesh_dim_names or mesh_dim not in self.mesh_dim_names:
                raise KeyError(f"Mesh dimension '{mesh_dim}' does not exist. Available mesh dimensions are: "
                               f"mesh_dim_names={self.mesh_dim_names}")
            return self.mesh_dim_names.index(mesh_dim)
        d = int(mesh_dim)
        if not -self.ndim <= d < self.ndim:
            raise IndexError(f"mesh dimension {d} is out of range for a {self.ndim}-d mesh")
        return d % self.ndim

    def get_group(self, mesh_dim: Any = None):
        """The process group of this rank's slice along mesh_dim (mesh_dim may be omitted on a 1-d mesh)."""
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` "
                                   "needs to be specified when device_mesh.ndim > 1.")
            mesh_dim = 0
        if not self._groups:
            raise RuntimeError("DeviceMesh process groups not initialized!")
        g = self._groups[self._dim(mesh_dim)]
        if g is None:
            raise RuntimeError(f"rank {c10d.get_rank()} is not part of this DeviceMesh {self}")
        return g

    def get_all_groups(self) -> list:
        return [self.get_group(d) for d in range(self.ndim)]

    def get_rank(self) -> int:
        return c10d.get_rank()

    def get_local_rank(self, mesh_dim: Any = None) -> int:
        """This rank's index along mesh_dim."""
        if mesh_dim is None:
            if self.ndim != 1:
                raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions. Optional kwarg `mesh_dim` "
                                   "needs to be specified when device_mesh.ndim > 1.")
            mesh_dim = 0
        if self._coordinate is None:
            raise RuntimeError(f"rank {c10d.get_rank()} is not part of this DeviceMesh {self}")
        return self._coordinate[self._dim(mesh_dim)]

    def get_coordinate(self) -> Optional[tuple]:
        """This rank's coordinate in the mesh (None if not in it)."""
        return self._coordinate

    # ------------------------------------------------------------------ slicing and flattening
    def __getitem__(self, names: Any) -> "DeviceMesh":
        """The sub-mesh along the named dimension(s) through this rank (mesh["tp"], mesh["dp", "tp"]); names of meshes
        flattened from the root are valid too."""
        if not self.mesh_dim_names:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (names,) if isinstance(names, str) else tuple(names)
        if names == self.mesh_dim_names:
            return self
        root = self._get_root_mesh()
        flattened = root._flatten_mapping if self is root else {}
        valid = list(self.mesh_dim_names) + list(flattened)
        if any(n not in valid for n in names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Valid mesh_dim_names are {valid}.")
        if len(names) == 1 and names[0] in flattened:
            return flattened[names[0]]
        if any(n in flattened for n in names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified: a flattened dim is sliced alone")
        dims = [self.mesh_dim_names.index(n) for n in names]
        if dims != sorted(dims):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Mesh dim indices should be in ascending "
                           "order.")
        coord = self._coordinate
        if coord is None:
            raise RuntimeError(f"rank {c10d.get_rank()} is not part of this DeviceMesh {self}")
        index = tuple(slice(None) if d in dims else coord[d] for d in range(self.ndim))
        return DeviceMesh(self.device_type, self._ranks[index], mesh_dim_names=names,
                          _groups=[self._groups[d] for d in dims], _root=root, _spans=[self._spans[d] for d in dims])

    def _flatten(self, mesh_dim_name: Optional[str] = None) -> "DeviceMesh":
        """A 1-d mesh over all of this mesh's dims (every rank of the root mesh must call it: it makes process
        groups); the root mesh then knows it by mesh_dim_name (default: the dim names joined by '_')."""
        if not self.mesh_dim_names:
            raise RuntimeError("Cannot flatten a DeviceMesh without mesh_dim_names!")
        name = mesh_dim_name or "_".join(self.mesh_dim_names)
        if self.ndim == 1 and name in self.mesh_dim_names:
            return self
        root = self._get_root_mesh()
        if name in (root.mesh_dim_names or ()):
            raise ValueError(f"{name} already exists for submesh of the {root}. The mesh_dim_names of submesh and "
                             f"flattened mesh are {root.mesh_dim_names}. Please specify another valid mesh_dim_name.")
        span = tuple(d for s in self._spans for d in s)
        if name in root._flatten_mapping:
            if root._flatten_mapping[name]._spans == [span]:
                return root._flatten_mapping[name]
            raise ValueError(f"Flatten mesh with mesh_dim_name {name} has been created before, Please specify "
                             "another valid mesh_dim_name.")
        if list(span) != sorted(span):
            raise ValueError(f"DeviceMesh._flatten: the dims to flatten (root dims {span}) must be in increasing order")
        slices = np.moveaxis(root._ranks, list(span), list(range(root.ndim - len(span), root.ndim)))
        slices = slices.reshape(-1, math.prod(root.shape[d] for d in span))
        mine, my_ranks = None, None
        for row in slices:
            ranks = [int(r) for r in row]
            g = c10d.new_group(ranks)
            if c10d.get_rank() in ranks:
                mine, my_ranks = g, ranks
        flat = DeviceMesh(root.device_type, np.array(my_ranks), mesh_dim_names=(name,), _groups=[mine], _root=root,
                          _spans=[span])
        root._flatten_mapping[name] = flat
        return flat

    # ------------------------------------------------------------------ the current mesh
    def __enter__(self) -> "DeviceMesh":
        _mesh_resources.mesh_stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _mesh_resources.mesh_stack.pop()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceMesh) and other.device_type == self.device_type and \
            other._ranks.shape == self._ranks.shape and bool((other._ranks == self._ranks).all()) and \
            other.mesh_dim_names == self.mesh_dim_names

    def __hash__(self) -> int:
        return hash((self.device_type, self._ranks.tobytes(), self._ranks.shape, self.mesh_dim_names))

    def __repr__(self) -> str:
        names = f", mesh_dim_names={self.mesh_dim_names}" if self.mesh_dim_names else ""
        return f"DeviceMesh('{self.device_type}', {self._ranks.tolist()}{names})"


def init_device_mesh(device_type: str, mesh_shape: Sequence[int], *,
                     mesh_dim_names: Optional[Sequence[str]] = None) -> DeviceMesh:
    """A mesh of the whole world in rank order with the given shape (initializes the default group if needed)."""
    mesh_shape = tuple(int(s) for s in mesh_shape)
    if mesh_dim_names is not None and len(tuple(mesh_dim_names)) != len(mesh_shape):
        raise RuntimeError(f"mesh_shape and mesh_dim_names should have same length! Found len(mesh_dim_names): "
                           f"{len(tuple(mesh_dim_names))} and len(mesh_shape):{len(mesh_shape)}.")
    if not c10d.is_initialized():
        c10d.init_process_group(_backend_for(device_type))
    world = c10d.get_world_size()
    if math.prod(mesh_shape) != world:
        raise RuntimeError(f"init_device_mesh: mesh_shape {mesh_shape} has {math.prod(mesh_shape)} ranks but the "
                           f"world has {world}")
    if device_type.startswith("cuda"):
        from .. import cuda
        if cuda.is_available():
            cuda.set_device(c10d.get_rank() % cuda.device_count())
    return DeviceMesh(device_type, np.arange(world).reshape(mesh_shape), mesh_dim_names=mesh_dim_names)
