"""Model and optimizer state dicts of sharded (FSDP) or plain models, in PyTorch's
torch.distributed.checkpoint.state_dict form: sharded DTensors by default, full tensors on request, and
optimizer state keyed by parameter name (so it survives a change of world size or of optimizer layout).

Setting a full state dict cuts every tensor into this rank's shard as it arrives (with broadcast_from_rank0,
one tensor at a time from rank 0, so no rank holds more than one full tensor beyond its shards) and loads with
assign=True while the model is on the meta device, as PyTorch does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Hashable, List, Optional, Tuple

from ..._creation import empty, zeros_like
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...nn.modules.module import Module, _IncompatibleKeys
from .. import _arrays
from .. import distributed_c10d as c10d
from ..tensor._api import DTensor, distribute_tensor

__all__ = ["StateDictOptions", "get_model_state_dict", "get_optimizer_state_dict", "get_state_dict",
           "set_model_state_dict", "set_optimizer_state_dict", "set_state_dict"]


@dataclass
class StateDictOptions:
    """full_state_dict: whole tensors instead of DTensor shards (an all-gather per tensor); cpu_offload: values
    on the host (with full_state_dict, getting keeps them on rank 0 only and the other ranks get {});
    broadcast_from_rank0: when setting a full state dict, only rank 0 needs to hold it (the others pass {});
    strict: keys must match, as nn.Module.load_state_dict."""

    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _verify(options: Optional[StateDictOptions]) -> StateDictOptions:
    options = options or StateDictOptions()
    if options.broadcast_from_rank0 and not options.full_state_dict:
        raise ValueError("full_state_dict must be True when broadcast_from_rank0 is True.")
    return options


def _rank() -> int:
    return c10d.get_rank() if c10d.is_initialized() else 0


def _to_full(value: Any, options: StateDictOptions) -> Any:
    """A full tensor for a DTensor (every rank takes part in its all-gather); with cpu_offload on the host, and
    dropped (None) on ranks other than 0 right away, so that they never hold more than one full tensor."""
    if isinstance(value, DTensor):
        value = value.full_tensor()
    if options.cpu_offload:
        if _rank() != 0:
            return None
        if isinstance(value, Tensor):
            value = value.cpu()
    return value


def _param_fqns(model: Module) -> Dict[int, str]:
    """id(parameter) -> its name in the model (the first name, for shared parameters)."""
    out: Dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        out.setdefault(id(p), name)
    return out


_WRAPPER_PARTS = {"_checkpoint_wrapped_module", "_orig_mod", "_fsdp_wrapped_module"}


def _clean(name: str) -> str:
    """The FQN without the names that wrappers add (DDP's leading 'module', compile's '_orig_mod', ...)."""
    parts = name.split(".")
    if len(parts) > 1 and parts[0] == "module":
        parts = parts[1:]
    return ".".join(p for p in parts if p not in _WRAPPER_PARTS)


def _reshard(model: Module) -> None:
    """Show every FSDP module's sharded parameters (a module left gathered by a forward or unshard())."""
    for m in model.modules():
        state = getattr(m, "_fsdp_state", None)
        if state is not None and state.group is not None:
            state.group.reshard()


def get_model_state_dict(model: Module, *, submodules: Optional[set] = None,
                         options: Optional[StateDictOptions] = None) -> Dict[str, Any]:
    """model.state_dict() with FQN keys: DTensor shards (no communication), or full tensors (with cpu_offload
    only on rank 0: the other ranks get {})."""
    options = _verify(options)
    sd = model.state_dict()  # fully_shard's state_dict pre-hooks reshard first
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad} if options.ignore_frozen_params else set()
    prefixes = [f"{_clean(n)}." for n, m in model.named_modules() if m in submodules] if submodules else None
    out: Dict[str, Any] = {}
    for k, v in sd.items():
        fqn = _clean(k)
        if k in frozen:
            continue
        if prefixes is not None:
            prefix = next((p for p in prefixes if fqn.startswith(p)), None)
            if prefix is None:
                continue
            fqn = fqn if options.keep_submodule_prefixes else fqn[len(prefix):]
        if options.full_state_dict:
            v = _to_full(v, options)
        elif options.cpu_offload and isinstance(v, Tensor):
            v = v.cpu()
        if v is not None:
            out[fqn] = v
    return out


def _init_optim_state(optim: Any) -> None:
    """Create the optimizer's state (a step with zero gradients and lr 0) so that it can be read or loaded into."""
    if optim.state or any(p._grad is not None for g in optim.param_groups for p in g["params"]):
        return
    for group in optim.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p._grad = zeros_like(p)
    lrs = []
    for group in optim.param_groups:
        lrs.append(group["lr"])
        group["lr"] = 0.0
    with no_grad():
        optim.step()
    for group, lr in zip(optim.param_groups, lrs):
        group["lr"] = lr
    optim.zero_grad(set_to_none=True)


def _optims(optimizers: Any) -> List[Any]:
    return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]


def get_optimizer_state_dict(model: Module, optimizers: Any, *, submodules: Optional[set] = None,
                             options: Optional[StateDictOptions] = None) -> Dict[str, Any]:
    """The optimizers' state keyed by parameter FQN; state tensors of sharded parameters are DTensors laid out
    like their parameter (or full tensors with full_state_dict; with cpu_offload too, only rank 0 keeps them)."""
    options = _verify(options)
    _reshard(model)
    fqns = _param_fqns(model)
    state: Dict[str, Any] = {}
    groups: List[dict] = []
    for optim in _optims(optimizers):
        _init_optim_state(optim)
        for group in optim.param_groups:
            g = {k: v for k, v in group.items() if k != "params"}
            g["params"] = [_clean(fqns[id(p)]) for p in group["params"]]
            groups.append(g)
            for p in group["params"]:
                entry = {}
                for k, v in optim.state.get(p, {}).items():
                    if isinstance(v, Tensor) and isinstance(p, DTensor) and not isinstance(v, DTensor) \
                            and v._data.shape == p._data.shape:
                        v = p._like(v._data)
                    v = _to_full(v, options) if options.full_state_dict else v
                    if v is not None:
                        entry[k] = v
                if entry:
                    state[_clean(fqns[id(p)])] = entry
    if options.full_state_dict and options.cpu_offload and _rank() != 0:
        return {}
    if options.flatten_optimizer_state_dict:
        return _flatten_optim(state, groups)
    return {"state": state, "param_groups": groups}


def _flatten_optim(state: Dict[str, Dict[str, Any]], groups: List[dict]) -> Dict[str, Any]:
    """PyTorch's flat form, "state.<fqn>.<name>" and "param_groups.<fqn>.<hyperparameter>": every key names its
    parameter, so ranks holding different parameters (pipeline stages) never write the same key differently."""
    flat = {f"state.{fqn}.{k}": v for fqn, st in state.items() for k, v in st.items()}
    for g in groups:
        for fqn in g["params"]:
            flat.update({f"param_groups.{fqn}.{k}": v for k, v in g.items() if k != "params"})
    return flat


def _unflatten_optim(flat: Dict[str, Any], model: Module) -> Dict[str, Any]:
    """The nested form of _flatten_optim's output, one param group per parameter."""
    state: Dict[str, Dict[str, Any]] = {}
    groups: Dict[str, dict] = {}
    fqns = sorted((_clean(n) for n, _ in model.named_parameters()), key=len, reverse=True)
    for key, v in flat.items():
        kind, rest = key.split(".", 1)
        fqn = next((f for f in fqns if rest.startswith(f + ".")), None)
        if kind not in ("state", "param_groups") or fqn is None:
            raise KeyError(f"set_optimizer_state_dict: flattened key {key!r} names no parameter of the model")
        target = state.setdefault(fqn, {}) if kind == "state" else groups.setdefault(fqn, {"params": [fqn]})
        target[rest[len(fqn) + 1:]] = v
    return {"state": state, "param_groups": list(groups.values())}


def get_state_dict(model: Module, optimizers: Any, *, submodules: Optional[set] = None,
                   options: Optional[StateDictOptions] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(get_model_state_dict, get_optimizer_state_dict)."""
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


# ---------------------------------------------------------------------------------------------- setting
@dataclass(frozen=True)
class _TensorInfo:
    """What rank 0 announces of a tensor it is about to broadcast."""

    shape: Tuple[int, ...]
    dtype: Any


def _travels_as_data(v: Any) -> bool:
    """Tensors go through a broadcast collective; 0-d tensors, dtypes the backends do not carry (bool, int8)
    and other values travel pickled with the header, as PyTorch sends non-tensors and scalars."""
    if not isinstance(v, Tensor) or v.dim() == 0:
        return False
    try:
        _arrays.dtype_code(v._data, "broadcast")
    except TypeError:
        return False
    return True


def _broadcast_from_rank0(flat: Optional[Dict[Hashable, Any]], receive: Callable[[Hashable, Tensor], Any],
                          device: str) -> Dict[Hashable, Any]:
    """Rank 0's `flat` on every rank, one tensor at a time: each full tensor is handed to receive(key, full) as
    it arrives and what that returns (this rank's shard) is kept; receive returning None drops the key."""
    header: List[Any] = [None]
    if _rank() == 0:
        header = [{k: _TensorInfo(tuple(v.shape), v.dtype) if _travels_as_data(v) else v for k, v in flat.items()}]
    c10d.broadcast_object_list(header, src=0)
    out: Dict[Hashable, Any] = {}
    for k, info in header[0].items():
        if isinstance(info, _TensorInfo):
            if _rank() == 0:
                full = flat[k].detach().to(device).contiguous()
                if not _arrays.is_cuda(full._data) and not full._data.flags["WRITEABLE"]:
                    full = full.clone()  # the collective takes a writable buffer, also on the sending rank
            else:
                full = empty(info.shape, dtype=info.dtype, device=device)
            c10d.broadcast(full, src=0)
            kept = receive(k, full)
            del full
        else:
            kept = receive(k, info) if isinstance(info, Tensor) else info
        if kept is not None:
            out[k] = kept
    return out


def _shard_like(target: Any, full: Tensor, cpu_offload: bool) -> Tensor:
    """`full` cut as `target` is laid out: this rank's piece (a DTensor) for a DTensor target, else `full`. A
    full tensor of another shape passes through whole: load_state_dict reports the size mismatch by name."""
    if isinstance(target, DTensor) and tuple(full.shape) == tuple(target.shape):
        full = distribute_tensor(full.detach(), target.device_mesh, target.placements, src_data_rank=None)
    return full.cpu() if cpu_offload else full


def _collective_device(targets: Dict[str, Any]) -> str:
    """Where full tensors travel: the device of the model's (non-meta) tensors, else the default group's."""
    devices = {v.device.type for v in targets.values() if isinstance(v, Tensor) and v.dim() > 0} - {"meta"}
    if len(devices) > 1:
        raise ValueError(f"set_model_state_dict: the model's tensors are on several devices {sorted(devices)}; "
                         "move it to one device first")
    if devices:
        return devices.pop()
    return "cuda" if c10d.is_initialized() and c10d.get_backend() == "nccl" else "cpu"


def set_model_state_dict(model: Module, model_state_dict: Dict[str, Any], *,
                         options: Optional[StateDictOptions] = None) -> _IncompatibleKeys:
    """Load a sharded or full state dict into a (possibly sharded) model. Full tensors are cut into this rank's
    shards; with broadcast_from_rank0 only rank 0 holds them (the others pass {}). A model still on the meta
    device is loaded with assign=True (the loaded shards become its parameters), a materialized one in place.
    Returns load_state_dict's missing and unexpected keys; with full_state_dict, keys the dict lacks keep the
    model's values and are not reported unless strict (PyTorch's behaviour)."""
    options = _verify(options)
    if not model_state_dict and options.strict and not options.broadcast_from_rank0 and \
            not (options.cpu_offload and options.full_state_dict):
        raise RuntimeError("The option indicates that model state_dict is required to save or load, but model "
                           f"state_dict is empty.rank = {_rank()}.")
    if not model_state_dict and not options.broadcast_from_rank0:
        return _IncompatibleKeys([], [])
    targets = model.state_dict(keep_vars=True)  # fully_shard's pre-hooks reshard: these are the shards
    keys = {_clean(k): k for k in targets}      # FQN -> the key load_state_dict expects (wrappers' prefixes)
    assign = False
    if not options.full_state_dict:
        sd = {keys.get(k, k): v for k, v in model_state_dict.items()}
    else:
        assign = any(isinstance(v, Tensor) and v.dim() > 0 and v.device.type == "meta" for v in targets.values())

        def receive(fqn: Hashable, full: Tensor) -> Tensor:
            target = targets.get(keys.get(fqn, fqn))
            if target is None:  # an unexpected key: only its shape is kept, for load_state_dict to report it
                return empty(tuple(full.shape), dtype=full.dtype, device="meta")
            return _shard_like(target, full, options.cpu_offload)

        if options.broadcast_from_rank0:
            got = _broadcast_from_rank0(model_state_dict if _rank() == 0 else None, receive,
                                        _collective_device(targets))
        else:
            got = {k: receive(k, v) if isinstance(v, Tensor) else v for k, v in model_state_dict.items()}
        sd = {keys.get(k, k): v for k, v in got.items()}
        if not options.strict:  # as PyTorch: what the dict lacks keeps the model's current value
            for k, v in targets.items():
                sd.setdefault(k, v)
    return model.load_state_dict(sd, strict=options.strict, assign=assign)


def _optim_value(p: Tensor, value: Any) -> Any:
    """A loaded optimizer-state value as the optimizer holds it for p: a sharded parameter's state tensors are
    DTensors laid out like it (cut from a full tensor, or taken as they are); anything else as it is."""
    if not isinstance(p, DTensor) or not isinstance(value, Tensor) or tuple(value.shape) != tuple(p.shape) \
            or value.dim() == 0:
        return value
    if isinstance(value, DTensor):
        if value.device_mesh == p.device_mesh and value.placements == p.placements:
            return value
        value = value.full_tensor()
    return distribute_tensor(value.detach(), p.device_mesh, p.placements, src_data_rank=None)


def set_optimizer_state_dict(model: Module, optimizers: Any, optim_state_dict: Dict[str, Any], *,
                             options: Optional[StateDictOptions] = None) -> None:
    """Load FQN-keyed optimizer state (sharded or full; with broadcast_from_rank0 only rank 0 holds it) into the
    optimizers of a (possibly sharded) model, through optimizer.load_state_dict. The optimizer is the one built
    over model.parameters() after the model was loaded (the parameters assign=True put in)."""
    options = _verify(options)
    if not optim_state_dict and not options.broadcast_from_rank0 and \
            not (options.cpu_offload and options.full_state_dict):
        raise RuntimeError("The option indicates that model state_dict is required to save, or load but optim "
                           f"state_dict is empty. {optim_state_dict}")
    _reshard(model)
    fqns = _param_fqns(model)
    by_fqn = {_clean(name): p for name, p in model.named_parameters()}
    if optim_state_dict and "state" not in optim_state_dict and "param_groups" not in optim_state_dict:
        optim_state_dict = _unflatten_optim(optim_state_dict, model)
    if options.broadcast_from_rank0:
        flat = None
        if _rank() == 0:
            flat = {("state", fqn, k): v for fqn, st in optim_state_dict["state"].items() for k, v in st.items()}
            flat["param_groups"] = optim_state_dict["param_groups"]

        def receive(key: Hashable, full: Tensor) -> Any:
            p = by_fqn.get(key[1])
            return None if p is None else _optim_value(p, full)

        got = _broadcast_from_rank0(flat, receive, _collective_device(dict(model.state_dict(keep_vars=True))))
        state: Dict[str, Dict[str, Any]] = {}
        for key, v in got.items():
            if key != "param_groups":
                state.setdefault(key[1], {})[key[2]] = v
        optim_state_dict = {"state": state, "param_groups": got["param_groups"]}
    saved_groups = optim_state_dict["param_groups"]
    for optim in _optims(optimizers):
        groups, state = [], {}
        index = 0
        for group in optim.param_groups:
            names = [_clean(fqns[id(p)]) for p in group["params"]]
            saved = next((g for g in saved_groups if list(g["params"]) == names), None) or \
                next((g for g in saved_groups if names and names[0] in g["params"]), None)
            g = {k: v for k, v in (saved or group).items() if k not in ("params", "param_names")}
            g["params"] = list(range(index, index + len(names)))
            groups.append(g)
            for i, (p, fqn) in enumerate(zip(group["params"], names), index):
                st = optim_state_dict["state"].get(fqn)
                if st is not None:
                    state[i] = {k: _optim_value(p, v) for k, v in st.items()}
            index += len(names)
        optim.load_state_dict({"state": state, "param_groups": groups})


def set_state_dict(model: Module, optimizers: Any, *, model_state_dict: Dict[str, Any],
                   optim_state_dict: Dict[str, Any], options: Optional[StateDictOptions] = None) -> _IncompatibleKeys:
    """set_model_state_dict and set_optimizer_state_dict together."""
    result = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return result
