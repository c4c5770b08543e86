"""FullyShardedDataParallel (PyTorch's FSDP1 wrapper) as a thin layer over fully_shard.

FSDP1 is how most existing PyTorch programs shard (the examples, tutorials and trainers written before FSDP2),
so `FSDP(model, ...)` must run them; its sharding strategies are the layouts fully_shard already implements:
FULL_SHARD is fully_shard with reshard_after_forward=True (ZeRO-3), SHARD_GRAD_OP with False (ZeRO-2),
HYBRID_SHARD and NO_SHARD are fully_shard on a 2-d (replicate, shard) mesh, the latter with a shard dim of 1.
auto_wrap_policy picks the submodules that get a group of their own (fully_shard on each, bottom-up), the
root gets the rest.

Where it differs from PyTorch's FSDP1: the parameters are fully_shard's DTensors (the original Parameter objects,
sharded on dim 0) whether use_orig_params is True or False, not FlatParameters or flat views; state_dict() gives
those DTensors (what PyTorch calls SHARDED_STATE_DICT), keyed by the unwrapped model's names; submodules chosen by
auto_wrap_policy are sharded in place rather than wrapped in FullyShardedDataParallel instances.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional, Set, Tuple

from ...nn import Module
from ..algorithms._checkpoint.checkpoint_wrapper import _replace_prefix
from .. import distributed_c10d as c10d
from ..device_mesh import DeviceMesh, init_device_mesh
from ._api import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy
from ._fully_shard import FSDPModule, fully_shard
from .api import BackwardPrefetch, CPUOffload, MixedPrecision, ShardingStrategy
from .wrap import _as_policy, _recursive_wrap

__all__ = ["FullyShardedDataParallel"]

FSDP_WRAPPED_MODULE = "_fsdp_wrapped_module"
FSDP_PREFIX = FSDP_WRAPPED_MODULE + "."
_HYBRID = (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)


class FullyShardedDataParallel(Module):
    """Shard module's parameters over the data-parallel ranks (PyTorch's FSDP1 signature); see the module docstring
    for how each argument maps onto fully_shard."""

    def __init__(self, module: Module, process_group: Any = None,
                 sharding_strategy: Optional[ShardingStrategy] = None, cpu_offload: Optional[CPUOffload] = None,
                 auto_wrap_policy: Optional[Callable] = None,
                 backward_prefetch: Optional[BackwardPrefetch] = BackwardPrefetch.BACKWARD_PRE,
                 mixed_precision: Optional[MixedPrecision] = None, ignored_modules: Optional[Iterable[Module]] = None,
                 param_init_fn: Optional[Callable[[Module], None]] = None, device_id: Any = None,
                 sync_module_states: bool = False, forward_prefetch: bool = False, limit_all_gathers: bool = True,
                 use_orig_params: bool = False, ignored_states: Any = None,
                 device_mesh: Optional[DeviceMesh] = None) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"FullyShardedDataParallel expects an nn.Module, got {type(module).__name__}")
        if isinstance(module, (FullyShardedDataParallel, FSDPModule)):
            raise ValueError(f"FullyShardedDataParallel: this {type(module).__name__} is already sharded")
        if param_init_fn is not None:
            raise NotImplementedError("FullyShardedDataParallel: param_init_fn is not supported; build the model on "
                                      "the meta device, call fully_shard, then to_empty() and reset_parameters()")
        if ignored_modules is not None and ignored_states is not None:
            raise ValueError("Cannot pass both ignored_modules and ignored_states at the same time. Please just pass "
                             "ignored_states.")
        strategy = ShardingStrategy.FULL_SHARD if sharding_strategy is None else sharding_strategy
        if not isinstance(strategy, ShardingStrategy):
            raise TypeError(f"sharding_strategy must be a ShardingStrategy, got {strategy!r}")
        if device_id is not None:  # an int is a CUDA device index, as in FSDP1
            from ..._device import device as _device
            module.to(_device("cuda", device_id) if isinstance(device_id, int) else device_id)
        mesh = _mesh_for(strategy, process_group, device_mesh, module)
        ignored = _ignored_params(ignored_modules if ignored_modules is not None else ignored_states)
        if mixed_precision is not None and mixed_precision.buffer_dtype is not None:
            for sub in module.modules():
                for name, b in sub._buffers.items():
                    if b is not None and b.is_floating_point():
                        sub._buffers[name] = b.to(mixed_precision.buffer_dtype)
        if sync_module_states:
            _broadcast_module_states(module, mesh, ignored)
        mp = MixedPrecisionPolicy() if mixed_precision is None else MixedPrecisionPolicy(
            param_dtype=mixed_precision.param_dtype, reduce_dtype=mixed_precision.reduce_dtype,
            cast_forward_inputs=mixed_precision.cast_forward_inputs or mixed_precision.cast_root_forward_inputs)
        offload = CPUOffloadPolicy() if cpu_offload is not None and cpu_offload.offload_params else OffloadPolicy()
        reshard = strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.HYBRID_SHARD)
        params_ignored = {p for p in module.parameters() if id(p) in ignored} or None

        def shard(m: Module) -> None:
            fully_shard(m, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp, offload_policy=offload,
                        ignored_params=params_ignored)

        policy = _as_policy(auto_wrap_policy)
        if policy is not None:
            _recursive_wrap(module, policy, shard, ignored)
        shard(module)
        self._fsdp_wrapped_module = module
        # state dicts use the unwrapped model's names (sharded parameters stay DTensors), as FSDP1's hooks do
        self.register_state_dict_post_hook(
            lambda m, state_dict, prefix, *_: _replace_prefix(state_dict, prefix + FSDP_PREFIX, prefix))
        self.register_load_state_dict_pre_hook(
            lambda m, state_dict, prefix, *_: _replace_prefix(state_dict, prefix, prefix + FSDP_PREFIX))
        self.sharding_strategy = strategy
        self.use_orig_params = use_orig_params
        self.backward_prefetch = backward_prefetch
        self.forward_prefetch = forward_prefetch
        self.limit_all_gathers = limit_all_gathers
        self.device_mesh = mesh

    @property
    def module(self) -> Module:
        """The wrapped module."""
        return self._fsdp_wrapped_module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._fsdp_wrapped_module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._fsdp_wrapped_module, name)

    def __getitem__(self, key: int) -> Any:
        return self._fsdp_wrapped_module.__getitem__(key)

    def named_parameters(self, *args: Any, **kwargs: Any) -> Iterator[Tuple[str, Any]]:
        """The parameters under the unwrapped model's names (FSDP1 strips its wrapper's prefix)."""
        for name, p in super().named_parameters(*args, **kwargs):
            yield name.replace(FSDP_PREFIX, ""), p

    def named_buffers(self, *args: Any, **kwargs: Any) -> Iterator[Tuple[str, Any]]:
        for name, b in super().named_buffers(*args, **kwargs):
            yield name.replace(FSDP_PREFIX, ""), b

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> Any:
        """Clip the gradients of every parameter by their total norm across ranks; returns the norm."""
        from ...nn.utils import clip_grad_norm_
        return clip_grad_norm_(self.parameters(), max_norm, norm_type)


def _mesh_for(strategy: ShardingStrategy, process_group: Any, device_mesh: Optional[DeviceMesh],
              module: Module) -> DeviceMesh:
    """The device mesh fully_shard gets: 1-d for FULL_SHARD/SHARD_GRAD_OP, (replicate, shard) for the hybrid
    strategies and NO_SHARD."""
    if process_group is not None and device_mesh is not None:
        raise ValueError("Cannot pass both process_group and device_mesh at the same time. Please just pass only "
                         "one of them.")
    if process_group is not None and c10d._resolve(process_group) is not c10d._resolve(None):
        raise NotImplementedError("FullyShardedDataParallel: pass the ranks as device_mesh (a process_group other "
                                  "than the default one is not supported)")
    dev = "cuda" if any(p.is_cuda for p in module.parameters()) else "cpu"
    world = c10d.get_world_size()
    if strategy in _HYBRID:
        if device_mesh is None:
            import os
            local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
            return init_device_mesh(dev, (world // local, local), mesh_dim_names=("replicate", "shard"))
        if device_mesh.ndim != 2:
            raise ValueError(f"{strategy.name} needs a 2-d device_mesh (replicate, shard), got a "
                             f"{device_mesh.ndim}-d one")
        if device_mesh.mesh_dim_names is None:  # FSDP1 reads the dims by position; fully_shard wants them named
            return DeviceMesh(device_mesh.device_type, device_mesh.mesh.tolist(), mesh_dim_names=("replicate", "shard"))
        return device_mesh
    if strategy is ShardingStrategy.NO_SHARD:
        if device_mesh is not None:
            raise NotImplementedError("FullyShardedDataParallel: NO_SHARD with a device_mesh is not supported")
        return init_device_mesh(dev, (world, 1), mesh_dim_names=("replicate", "shard"))
    if device_mesh is None:
        return init_device_mesh(dev, (world,))
    if device_mesh.ndim != 1:
        raise ValueError(f"{strategy.name} needs a 1-d device_mesh, got a {device_mesh.ndim}-d one (a 2-d mesh is "
                         "for HYBRID_SHARD)")
    return device_mesh


def _ignored_params(ignored: Any) -> Set[int]:
    """ids of the parameters FSDP must leave alone: those of ignored modules, or the ignored parameters."""
    if ignored is None:
        return set()
    out: Set[int] = set()
    for x in ignored:
        if isinstance(x, Module):
            out.update(id(p) for p in x.parameters())
        else:
            out.add(id(x))
    return out


def _broadcast_module_states(module: Module, mesh: DeviceMesh, ignored: Set[int]) -> None:
    """sync_module_states: every rank of the mesh takes the first mesh rank's parameters and buffers (one
    broadcast per mesh dim; a tensor-parallel DTensor sends its local piece, which ranks of a dp group share)."""
    from ..._C import _grad_enabled, _set_grad_enabled
    tensors = [p for p in module.parameters() if id(p) not in ignored] + list(module.buffers())
    prev = _grad_enabled()
    _set_grad_enabled(False)
    try:
        for d in range(mesh.ndim):
            group = mesh.get_group(d)
            src = c10d.get_global_rank(group, 0)
            for t in tensors:
                local = t.to_local() if hasattr(t, "to_local") else t
                c10d.broadcast(local.data, src=src, group=group)
    finally:
        _set_grad_enabled(prev)
