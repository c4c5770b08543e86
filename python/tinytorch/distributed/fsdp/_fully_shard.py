"""fully_shard (PyTorch's FSDP2): shard a module's parameters over a mesh; gather them around its forward and
backward, and reduce-scatter its gradients while backward goes on.

Per module that fully_shard was applied to (an FSDPModule), hooks drive one FSDPParamGroup:
  forward pre-hook   all-gather (or wait for a prefetched one), then start the next group's all-gather
  forward hook       reshard (ZeRO-3; not with reshard_after_forward=False, ZeRO-2, nor on the root), and put an
                     identity autograd node on the outputs whose backward is the group's pre-backward
  pre-backward       all-gather again if resharded, and start the all-gather of the group whose backward is next
  post-backward      when the last gradient of the group has been accumulated (post-accumulate-grad hooks):
                     reduce-scatter it asynchronously and reshard
  final callback     (queued on the engine by the root) waits for every reduce-scatter and writes the sharded
                     gradients as DTensors into the sharded parameters' .grad
The root is the outermost FSDPModule whose forward runs first; it owns the per-step state of all groups below it.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ... import _C
from ..._tensor import Tensor
from ...nn.modules.module import Module
from .. import distributed_c10d as c10d
from ..device_mesh import DeviceMesh, init_device_mesh
from ..tensor._api import DTensor
from ._api import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy
from ._fsdp_param import FSDPParam
from ._fsdp_param_group import FSDPParamGroup

__all__ = ["fully_shard", "FSDPModule", "UnshardHandle", "register_fsdp_forward_method"]


def _map_tensors(fn: Callable[[Tensor], Tensor], obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map_tensors(fn, o) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_map_tensors(fn, o) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _map_tensors(fn, v)) for k, v in obj.items())
    return obj


def _tensors_of(obj: Any) -> List[Tensor]:
    out: List[Tensor] = []
    _map_tensors(lambda t: out.append(t) or t, obj)
    return out


class FSDPState:
    """What fully_shard attaches to a module: its group, its policies, and (on the root) the step's state."""

    def __init__(self, module: Module, mesh: DeviceMesh, reshard_after_forward: Union[bool, int],
                 mp_policy: MixedPrecisionPolicy, offload_policy: OffloadPolicy) -> None:
        self.module = module
        self.mesh = mesh
        self.reshard_after_forward = bool(reshard_after_forward)
        self.mp_policy = mp_policy
        self.offload_policy = offload_policy
        self.group: Optional[FSDPParamGroup] = None
        self.root: Optional[FSDPState] = None
        self.is_root = False
        self.states: List[FSDPState] = []  # root only: every state below it (itself first), in module order
        self.forward_prefetch: Optional[List[FSDPState]] = None
        self.backward_prefetch: Optional[List[FSDPState]] = None
        self.fwd_order: List[FSDPState] = []       # root: pre-forward order of this step
        self.last_fwd_order: List[FSDPState] = []  # root: of the previous step (implicit forward prefetch)
        self.post_fwd_order: List[FSDPState] = []  # root: post-forward order of this step (backward prefetch)
        self.callback_queued = False
        self.name = type(module).__name__

    # ------------------------------------------------------------------ lazy init (first forward)
    def lazy_init(self) -> None:
        """Make this state the root of every FSDP state below it (called at the first forward)."""
        self.is_root = True
        self.root = self
        self.states = []
        _name_params(self.module)
        for name, m in self.module.named_modules():
            st = getattr(m, "_fsdp_state", None)
            if st is None:
                continue
            if st is not self:
                if st.is_root:
                    raise RuntimeError(f"FSDP: {type(m).__name__} ran forward as a root before its parent "
                                       f"{self.name}; run the outermost FSDP module's forward first")
                st.root = self
            st.name = name or type(m).__name__
            if st.group is not None:
                st.group.label = st.name
            self.states.append(st)
        for st in self.states:
            if st.group is not None:
                st.group.lazy_init()
                st.group.before_reduce = self._finish_previous_reduce
        self.pending_reduce: Optional[FSDPParamGroup] = None
        self.last_fwd_order = [s for s in self.states if s.group is not None]

    # ------------------------------------------------------------------ forward
    def pre_forward(self, module: Module, args: tuple, kwargs: dict) -> Tuple[tuple, dict]:
        if self.root is None:
            self.lazy_init()
        root = self.root
        if self.is_root:
            self._root_pre_forward()
        root.fwd_order.append(self)
        if self.group is not None:
            self.group.wait_for_unshard()
        for nxt in self._forward_prefetch_targets():
            if nxt.group is not None:
                nxt.group.unshard(async_op=True)
        pd = self.mp_policy.param_dtype
        if pd is not None and self.mp_policy.cast_forward_inputs:
            cast = lambda t: t.to(pd) if t.is_floating_point() and t.dtype != pd else t  # noqa: E731
            args, kwargs = _map_tensors(cast, args), _map_tensors(cast, kwargs)
        return args, kwargs

    def _root_pre_forward(self) -> None:
        if self.fwd_order:
            self.last_fwd_order = [s for s in self.fwd_order if s.group is not None]
        self.fwd_order = []
        self.post_fwd_order = []
        for st in self.states:
            if st.group is not None:
                st.group.stats.clear()

    def _forward_prefetch_targets(self) -> List["FSDPState"]:
        if self.forward_prefetch is not None:
            return self.forward_prefetch
        order = self.root.last_fwd_order
        try:
            i = order.index(self)
        except ValueError:
            return []
        return order[i + 1:i + 2]

    def post_forward(self, module: Module, args: tuple, output: Any) -> Any:
        root = self.root
        root.post_fwd_order.append(self)
        # Without grad there is no backward to keep parameters for: every group reshards (evaluation, generate).
        if self.group is not None and (not _C._grad_enabled() or self.reshard_after_forward and not self.is_root):
            self.group.reshard()
        if _C._grad_enabled():
            tensors = [t for t in _tensors_of(output) if t.requires_grad]
            if tensors:
                output = self._register_pre_backward(output, tensors)
        od = self.mp_policy.output_dtype
        if od is not None:
            output = _map_tensors(lambda t: t.to(od) if t.is_floating_point() and t.dtype != od else t, output)
        return output

    def _register_pre_backward(self, output: Any, tensors: List[Tensor]) -> Any:
        from ...autograd.function import Function
        state = self

        class FSDPPreBackward(Function):
            @staticmethod
            def forward(ctx, *ts):
                ctx.set_materialize_grads(False)
                return ts

            @staticmethod
            def backward(ctx, *grads):
                state.pre_backward()
                return grads

        # A DTensor output (tensor parallelism's use_local_output=False) passes through as its local piece.
        outs = FSDPPreBackward.apply(*(t.to_local() if isinstance(t, DTensor) else t for t in tensors))
        outs = [DTensor.from_local(o, t.device_mesh, t.placements, shape=t.shape, stride=t.stride())
                if isinstance(t, DTensor) else o for t, o in zip(tensors, outs)]
        swap = {id(t): o for t, o in zip(tensors, outs)}
        return _map_tensors(lambda t: swap.get(id(t), t), output)

    # ------------------------------------------------------------------ backward
    def pre_backward(self) -> None:
        root = self.root
        if not root.callback_queued:
            root.callback_queued = True
            _C._queue_callback(root._final_callback)
        if self.group is not None:
            self.group.pre_backward()
        for prev in self._backward_prefetch_targets():
            if prev.group is not None and not prev.group.in_backward:
                prev.group.unshard(async_op=True)

    def _backward_prefetch_targets(self) -> List["FSDPState"]:
        if self.backward_prefetch is not None:
            return self.backward_prefetch
        order = [s for s in self.root.post_fwd_order if s.group is not None]
        # The group whose backward comes next is the one whose forward ended just before this one's.
        idx = [i for i, s in enumerate(order) if s is self]
        if not idx or idx[0] == 0:
            return []
        return [order[idx[0] - 1]]

    def _finish_previous_reduce(self, group: FSDPParamGroup) -> None:
        if self.pending_reduce is not None and self.pending_reduce is not group:
            self.pending_reduce.wait_reduce()
        self.pending_reduce = group

    def _final_callback(self) -> None:
        self.callback_queued = False
        self.pending_reduce = None
        for st in reversed(self.states):
            if st.group is not None:
                st.group.finish_backward()


class UnshardHandle:
    """What unshard(async_op=True) returns: wait() blocks until the all-gather is done and the parameters are in."""

    def __init__(self, group: Optional[FSDPParamGroup]) -> None:
        self._group = group

    def wait(self) -> None:
        if self._group is not None:
            self._group.wait_for_unshard()
            self._group = None


class FSDPModule:
    """Mixed into the class of every module fully_shard was applied to (FSDPLinear, FSDPBlock, ...)."""

    _fsdp_state: FSDPState

    def _states(self, recurse: bool) -> List[FSDPState]:
        if not recurse:
            return [self._fsdp_state]
        return [m._fsdp_state for m in self.modules() if isinstance(m, FSDPModule)]

    def unshard(self, async_op: bool = False) -> Optional[UnshardHandle]:
        """All-gather this module's parameters now (async_op: return a handle to wait on)."""
        st = self._fsdp_state
        if st.group is None:
            return UnshardHandle(None) if async_op else None
        st.group.lazy_init()
        st.group.unshard(async_op=True)
        handle = UnshardHandle(st.group)
        if async_op:
            return handle
        handle.wait()
        return None

    def reshard(self) -> None:
        """Free the unsharded parameters; the module shows its sharded DTensor parameters again."""
        st = self._fsdp_state
        if st.group is not None:
            st.group.reshard()

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        """Module._apply (to_empty, .to(), .float(), ...) on the sharded parameters; the group then adopts the
        parameters it replaced."""
        st = self._fsdp_state
        if st.group is not None:
            st.group.reshard()
        out = super()._apply(fn, recurse)
        if st.group is not None:
            for p in st.group.fsdp_params:
                p.reset_sharded_param()
        return out

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *, recurse: bool = True) -> None:
        """False: backward accumulates unsharded gradients without reduce-scatter (gradient accumulation)."""
        for st in self._states(recurse):
            if st.group is not None:
                st.group.requires_gradient_sync = bool(requires_gradient_sync)

    def set_requires_all_reduce(self, requires_all_reduce: bool, *, recurse: bool = True) -> None:
        """HSDP: False keeps the reduce-scatter but skips the all-reduce across replicas (its rows are added to
        the next one's); gradient accumulation with less communication."""
        for st in self._states(recurse):
            if st.group is not None:
                st.group.requires_all_reduce = bool(requires_all_reduce)

    def set_reshard_after_backward(self, reshard_after_backward: bool, *, recurse: bool = True) -> None:
        """Whether parameters are resharded after backward (False keeps them gathered for the next forward)."""
        for st in self._states(recurse):
            if st.group is not None:
                st.group.reshard_after_backward = bool(reshard_after_backward)

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse: bool = True) -> None:
        """Whether parameters are resharded after forward (True: ZeRO-3; False: ZeRO-2)."""
        for st in self._states(recurse):
            st.reshard_after_forward = bool(reshard_after_forward)

    def set_is_last_backward(self, is_last_backward: bool) -> None:
        """Accepted for PyTorch compatibility: every backward waits for its reductions here."""
        self._fsdp_state.is_last_backward = bool(is_last_backward)

    def set_modules_to_forward_prefetch(self, modules: List["FSDPModule"]) -> None:
        """Start these modules' all-gathers at this module's forward (instead of the implicit next one)."""
        _check_fsdp_modules(modules, "set_modules_to_forward_prefetch")
        self._fsdp_state.forward_prefetch = [m._fsdp_state for m in modules]

    def set_modules_to_backward_prefetch(self, modules: List["FSDPModule"]) -> None:
        """Start these modules' all-gathers at this module's backward (instead of the implicit previous one)."""
        _check_fsdp_modules(modules, "set_modules_to_backward_prefetch")
        self._fsdp_state.backward_prefetch = [m._fsdp_state for m in modules]

    def set_reduce_scatter_divide_factor(self, factor: float) -> None:
        """Divide reduced gradients by `factor` instead of averaging over the ranks."""
        for st in self._states(True):
            if st.group is not None:
                st.group.divide_factor = float(factor)

    def set_post_optim_event(self, event: Any) -> None:
        """Accepted for PyTorch compatibility (the next all-gather is ordered after the optimizer by the host)."""


def _check_fsdp_modules(modules: Iterable[Any], what: str) -> None:
    for m in modules:
        if not isinstance(m, FSDPModule):
            raise ValueError(f"{what}: expects FSDP modules (fully_shard applied), got {type(m).__name__}")


_fsdp_classes: Dict[type, type] = {}


def _fsdp_class(cls: type) -> type:
    if cls not in _fsdp_classes:
        _fsdp_classes[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"__module__": cls.__module__})
    return _fsdp_classes[cls]


def _managed_params(module: Module) -> List[Tuple[Any, List[Tuple[Module, str]], str]]:
    """(parameter, [(owner module, name), ...], dotted path from module) for the parameters of module not
    managed by a sharded child."""
    found: Dict[int, Tuple[Any, List[Tuple[Module, str]], str]] = {}

    def visit(m: Module, prefix: str) -> None:
        for name, p in m._parameters.items():
            if p is None:
                continue
            entry = found.setdefault(id(p), (p, [], prefix + name))
            entry[1].append((m, name))
        for cname, child in m._modules.items():
            if child is not None and not isinstance(child, FSDPModule):
                visit(child, f"{prefix}{cname}.")

    visit(module, "")
    return list(found.values())


def _name_params(module: Module) -> None:
    """Name every sharded parameter below module by its dotted path from module, for errors (the outermost
    fully_shard call, and the root's lazy init, give the names a state dict uses)."""
    for path, m in module.named_modules():
        st = getattr(m, "_fsdp_state", None)
        if st is not None and st.group is not None:
            for p in st.group.fsdp_params:
                p.fqn = f"{path}.{p.path}" if path else p.path


def _verify_shapes(params: List[Tuple[Any, List[Tuple[Module, str]], str]], pg: Any, label: str) -> None:
    """Every rank must shard the same parameters: compare names, shapes and dtypes across the group."""
    mine = [(path, tuple(p.shape), str(p.dtype)) for p, _, path in params]
    seen: list = [None] * pg.size()
    c10d.all_gather_object(seen, mine, group=pg)
    me = pg.rank()
    for r, theirs in enumerate(seen):
        if theirs != mine:
            for a, b in zip(mine, theirs):
                if a != b:
                    raise ValueError(f"rank {me}: fully_shard({label}): parameter {a[0]} has shape {list(a[1])} "
                                     f"({a[2]}) on this rank but {b[0]} has shape {list(b[1])} ({b[2]}) on rank "
                                     f"{c10d.get_global_rank(pg, r)}; every rank must build the same model")
            raise ValueError(f"rank {me}: fully_shard({label}): this rank has {len(mine)} parameters, rank "
                             f"{c10d.get_global_rank(pg, r)} has {len(theirs)}; every rank must build the same model")


def _register_state_dict_hooks(group: FSDPParamGroup) -> None:
    """On every module holding a parameter of the group, as PyTorch: state_dict() and load_state_dict() see the
    sharded parameters (pre-hooks reshard), a loaded value must be laid out as the shard (checked before
    anything is written; copying, as PyTorch's DTensor.copy_, redistributes another placement on the same mesh),
    and parameters replaced by load_state_dict(assign=True) are adopted (post-hook)."""
    owned: Dict[int, Tuple[Module, List[FSDPParam]]] = {}
    for fp in group.fsdp_params:
        for module, _ in fp.owners:
            owned.setdefault(id(module), (module, []))[1].append(fp)
    for module, fps in owned.values():
        def pre_load(mod: Module, state_dict: dict, prefix: str, local_metadata: dict, *_: Any,
                     fps: List[FSDPParam] = fps) -> None:
            group.reshard()
            for fp in fps:
                for owner, attr in fp.owners:
                    key = prefix + attr
                    value = state_dict.get(key) if owner is mod else None
                    if not isinstance(value, Tensor) or tuple(value.shape) != fp.global_shape:
                        continue  # absent, not a tensor, or a size mismatch: load_state_dict reports it by name
                    if isinstance(value, DTensor) and value.device_mesh == fp.spmd_mesh and \
                            not local_metadata.get("assign_to_params_buffers", False):
                        value = state_dict[key] = value.redistribute(fp.spmd_mesh, fp.spmd_placements)
                    fp.check_loaded(value, key)

        def post_load(mod: Module, incompatible_keys: Any, fps: List[FSDPParam] = fps) -> None:
            for fp in fps:
                fp.reset_sharded_param()

        module.register_state_dict_pre_hook(lambda *_: group.reshard())
        module.register_load_state_dict_pre_hook(pre_load)
        module.register_load_state_dict_post_hook(post_load)


def fully_shard(module: Union[Module, List[Module]], *, mesh: Optional[DeviceMesh] = None,
                reshard_after_forward: Union[bool, int] = True, shard_placement_fn: Any = None,
                mp_policy: Optional[MixedPrecisionPolicy] = MixedPrecisionPolicy(),
                offload_policy: Optional[OffloadPolicy] = OffloadPolicy(),
                ignored_params: Optional[set] = None) -> Module:
    """Shard module's parameters (those not already sharded by a fully_shard'ed submodule) along dim 0 over
    mesh, as DTensors; they are all-gathered around its forward and backward (ZeRO-3, or ZeRO-2 with
    reshard_after_forward=False) and its gradients reduce-scattered. A 2-d mesh is HSDP: dims (replicate,
    shard), gradients reduce-scattered over the shard dim then all-reduced across replicas. Parameters that are
    already DTensors on a TP mesh sliced from the same root mesh are sharded through their TP-local pieces
    (FSDP x TP). Returns the module, whose class becomes FSDP<Name>."""
    if isinstance(module, (list, tuple)):
        if len(module) != 1:
            raise NotImplementedError("fully_shard: one group over several modules is not supported; call "
                                      "fully_shard on each module (or on their common parent)")
        return fully_shard(module[0], mesh=mesh, reshard_after_forward=reshard_after_forward,
                           shard_placement_fn=shard_placement_fn, mp_policy=mp_policy, offload_policy=offload_policy,
                           ignored_params=ignored_params)
    if not isinstance(module, Module):
        raise TypeError(f"fully_shard expects an nn.Module, got {type(module).__name__}")
    if isinstance(module, FSDPModule):
        raise ValueError(f"fully_shard was already applied to this {type(module).__name__}; each module can be "
                         "sharded only once")
    if shard_placement_fn is not None:
        raise NotImplementedError("fully_shard: shard_placement_fn is not supported (parameters shard on dim 0)")
    mp_policy = MixedPrecisionPolicy() if mp_policy is None else mp_policy
    offload_policy = OffloadPolicy() if offload_policy is None else offload_policy
    if not isinstance(mp_policy, MixedPrecisionPolicy):
        raise TypeError(f"mp_policy must be a MixedPrecisionPolicy, got {type(mp_policy).__name__}")
    if not isinstance(offload_policy, OffloadPolicy):
        raise TypeError(f"offload_policy must be an OffloadPolicy, got {type(offload_policy).__name__}")
    if mesh is None:
        dev = "cuda" if any(p.is_cuda for p in module.parameters()) else "cpu"
        mesh = init_device_mesh(dev, (c10d.get_world_size() if c10d.is_initialized() else 1,))
    if mesh.ndim not in (1, 2):
        raise ValueError(f"fully_shard expects a 1D or 2D DeviceMesh but got {mesh}")
    if mesh.ndim == 2 and mesh.mesh_dim_names is None:
        raise AssertionError("Please init the 2D mesh for HSDP with mesh_dim_names specified")
    params = [(p, owners, path) for p, owners, path in _managed_params(module)
              if not getattr(p, "_fsdp_managed", False) and (ignored_params is None or p not in ignored_params)]
    label = type(module).__name__
    pg = mesh.get_group(mesh.ndim - 1)  # the shard group (HSDP: mesh dims are (replicate, shard))
    _verify_shapes(params, pg, label)
    state = FSDPState(module, mesh, reshard_after_forward, mp_policy, offload_policy)
    if params:
        fsdp_params = [FSDPParam(p, owners, path, mesh, pg.rank(), pg.size()) for p, owners, path in params]
        if isinstance(offload_policy, CPUOffloadPolicy):
            for fp in fsdp_params:
                if fp.sharded_param.is_cuda:
                    fp.sharded_param._data = fp.sharded_param._data.get()
        for fp in fsdp_params:
            fp.register(fp.sharded_param)
        state.group = FSDPParamGroup(fsdp_params, mesh, mp_policy, offload_policy, label)
        _register_state_dict_hooks(state.group)
    object.__setattr__(module, "_fsdp_state", state)
    _name_params(module)
    module.register_forward_pre_hook(lambda m, a, k: state.pre_forward(m, a, k), prepend=True, with_kwargs=True)
    module.register_forward_hook(lambda m, a, o: state.post_forward(m, a, o))
    module.__class__ = _fsdp_class(type(module))
    return module


def register_fsdp_forward_method(module: Module, method_name: str) -> None:
    """Run module.method_name (e.g. generate) with the same unshard/reshard hooks as forward."""
    if not isinstance(module, FSDPModule):
        return
    state = module._fsdp_state
    orig = getattr(module, method_name)

    @functools.wraps(orig)
    def wrapped(*args, **kwargs):
        args, kwargs = state.pre_forward(module, args, kwargs)
        out = orig(*args, **kwargs)
        return state.post_forward(module, args, out)

    object.__setattr__(module, method_name, wrapped)
