"""Model and optimizer state dicts of sharded (FSDP) or plain models, in PyTorch's
torch.distributed.checkpoint.state_dict form: sharded DTensors by default, full tensors on request, and
optimizer state keyed by parameter name (so it survives a change of world size or of optimizer layout)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..._tensor import Tensor, _wrap
from ...autograd.grad_mode import no_grad
from ...nn.modules.module import Module
from .. import distributed_c10d as c10d
from ..tensor._api import DTensor, chunk_bounds, distribute_tensor

__all__ = ["StateDictOptions", "get_model_state_dict", "get_optimizer_state_dict", "get_state_dict",
           "set_model_state_dict", "set_optimizer_state_dict", "set_state_dict"]


@dataclass
class StateDictOptions:
    """full_state_dict: whole tensors instead of DTensor shards (an all-gather per tensor); cpu_offload: with
    full_state_dict, only rank 0 keeps the values (on the host); broadcast_from_rank0: when setting, only rank 0
    needs to hold a full state dict and the others receive it."""

    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _opts(options: Optional[StateDictOptions]) -> StateDictOptions:
    return options or StateDictOptions()


def _rank() -> int:
    return c10d.get_rank() if c10d.is_initialized() else 0


def _to_full(value: Any, options: StateDictOptions) -> Any:
    """A full tensor for a DTensor (all ranks take part), dropped on ranks other than 0 with cpu_offload."""
    if isinstance(value, DTensor):
        value = value.full_tensor()
    if options.cpu_offload and isinstance(value, Tensor):
        value = value.cpu() if _rank() == 0 else None
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


def get_model_state_dict(model: Module, *, submodules: Optional[set] = None,
                         options: Optional[StateDictOptions] = None) -> Dict[str, Any]:
    """model.state_dict() with FQN keys: DTensor shards (no communication), or full tensors."""
    options = _opts(options)
    sd = model.state_dict()
    out: Dict[str, Any] = {}
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad} if options.ignore_frozen_params else set()
    for k, v in sd.items():
        if k in frozen:
            continue
        if options.full_state_dict:
            v = _to_full(v, options)
            if v is None:
                continue
        out[_clean(k)] = v
    return out


def _init_optim_state(optim: Any) -> None:
    """Create the optimizer's state (a step with zero gradients and lr 0) so that it can be loaded into."""
    if optim.state:
        return
    from ...autograd.grad_mode import no_grad as _ng
    for group in optim.param_groups:
        for p in group["params"]:
            if p.requires_grad and p._grad is None:
                p._grad = p._like(p._data * 0) if isinstance(p, DTensor) else _wrap(p._data * 0)
    lrs = []
    for group in optim.param_groups:
        lrs.append(group["lr"])
        group["lr"] = 0.0
    with _ng():
        optim.step()
    for group, lr in zip(optim.param_groups, lrs):
        group["lr"] = lr
    # The zero-gradient step counted as a step: state starts at step 0 as an untouched optimizer would.
    for st in optim.state.values():
        if "step" in st and isinstance(st["step"], Tensor):
            st["step"]._data[...] = 0
    optim.zero_grad(set_to_none=True)


def _optims(optimizers: Any) -> List[Any]:
    return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]


def get_optimizer_state_dict(model: Module, optimizers: Any, *, submodules: Optional[set] = None,
                             options: Optional[StateDictOptions] = None) -> Dict[str, Any]:
    """The optimizers' state keyed by parameter FQN; state tensors of sharded parameters are DTensors laid out
    like their parameter (or full tensors with full_state_dict)."""
    options = _opts(options)
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
                st = optim.state.get(p)
                if not st:
                    continue
                entry = {}
                for k, v in st.items():
                    if isinstance(v, Tensor) and isinstance(p, DTensor) and v._data.shape == p._data.shape \
                            and not isinstance(v, DTensor):
                        v = p._like(v._data)
                    if options.full_state_dict:
                        v = _to_full(v, options)
                        if v is None:
                            continue
                    entry[k] = v
                state[_clean(fqns[id(p)])] = entry
    if options.full_state_dict and options.cpu_offload and _rank() != 0:
        return {}
    return {"state": state, "param_groups": groups}


def get_state_dict(model: Module, optimizers: Any, *, submodules: Optional[set] = None,
                   options: Optional[StateDictOptions] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(get_model_state_dict, get_optimizer_state_dict)."""
    return (get_model_state_dict(model, options=options),
            get_optimizer_state_dict(model, optimizers, options=options))


def _local_value(target: Tensor, value: Any, name: str) -> Any:
    """value (DTensor, full tensor or array) as the local array that `target` holds."""
    if isinstance(value, DTensor):
        if isinstance(target, DTensor) and value._placements == target._placements and \
                value._data.shape == target._data.shape:
            return value._data
        value = value.full_tensor()
    if isinstance(target, DTensor):
        if tuple(value.shape) != tuple(target.shape):
            raise RuntimeError(f"size mismatch for {name}: copying a param with shape {tuple(value.shape)}, the "
                               f"shape in current model is {tuple(target.shape)}.")
        return distribute_tensor(value, target._mesh, target._placements, src_data_rank=None)._data
    return value._data if isinstance(value, Tensor) else np.asarray(value)


def _broadcast_full(sd: Optional[Dict[str, Any]], like: Dict[str, Any]) -> Dict[str, Any]:
    """Rank 0's full state dict on every rank (tensor by tensor, shaped like `like`)."""
    keys = [sorted(sd.keys()) if sd is not None and _rank() == 0 else None]
    c10d.broadcast_object_list(keys, src=0)
    out = {}
    for k in keys[0]:
        if _rank() == 0:
            t = sd[k]
            meta = [(tuple(t.shape), str(t._data.dtype))] if isinstance(t, Tensor) else [("obj", t)]
        else:
            meta = [None]
        c10d.broadcast_object_list(meta, src=0)
        if meta[0][0] == "obj":
            out[k] = meta[0][1]
            continue
        shape, dt = meta[0]
        import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
        arr = np.ascontiguousarray(sd[k]._data) if _rank() == 0 else np.empty(shape, dtype=np.dtype(dt))
        c10d.broadcast(arr, src=0)
        out[k] = _wrap(arr)
    return out


def set_model_state_dict(model: Module, model_state_dict: Dict[str, Any], *,
                         options: Optional[StateDictOptions] = None) -> Any:
    """Load a sharded or full state dict into a (possibly sharded) model; full tensors are cut into this rank's
    shards locally, and with broadcast_from_rank0 only rank 0 needs to hold them."""
    options = _opts(options)
    if options.broadcast_from_rank0:
        model_state_dict = _broadcast_full(model_state_dict, {})
    targets = {_clean(k): v for k, v in model.state_dict(keep_vars=True).items()}
    missing = [k for k in targets if k not in model_state_dict]
    unexpected = [k for k in model_state_dict if k not in targets]
    if options.strict and (missing or unexpected):
        raise RuntimeError(f"Error(s) in loading state_dict for {type(model).__name__}: missing keys {missing}, "
                           f"unexpected keys {unexpected}")
    with no_grad():
        for k, target in targets.items():
            if k not in model_state_dict:
                continue
            data = _local_value(target, model_state_dict[k], k)
            target._data[...] = data
            target._bump_version()
    from ...nn.modules.module import _IncompatibleKeys
    return _IncompatibleKeys(missing, unexpected)


def set_optimizer_state_dict(model: Module, optimizers: Any, optim_state_dict: Dict[str, Any], *,
                             options: Optional[StateDictOptions] = None) -> None:
    """Load FQN-keyed optimizer state (sharded or full) into the optimizers of a (possibly sharded) model."""
    options = _opts(options)
    fqns = _param_fqns(model)
    if options.broadcast_from_rank0:
        holder = [optim_state_dict if _rank() == 0 else None]
        flat = {}
        if _rank() == 0:
            for fqn, st in optim_state_dict["state"].items():
                for k, v in st.items():
                    flat[f"{fqn}\x00{k}"] = v
            holder = [{"param_groups": optim_state_dict["param_groups"],
                       "keys": {fqn: list(st.keys()) for fqn, st in optim_state_dict["state"].items()}}]
        c10d.broadcast_object_list(holder, src=0)
        got = _broadcast_full(flat if _rank() == 0 else None, {})
        optim_state_dict = {"param_groups": holder[0]["param_groups"],
                            "state": {fqn: {k: got[f"{fqn}\x00{k}"] for k in ks}
                                      for fqn, ks in holder[0]["keys"].items()}}
    saved_groups = {tuple(g["params"]): g for g in optim_state_dict["param_groups"]}
    for optim in _optims(optimizers):
        _init_optim_state(optim)
        for group in optim.param_groups:
            names = [_clean(fqns[id(p)]) for p in group["params"]]
            saved = saved_groups.get(tuple(names))
            if saved is None:
                by_param = [g for g in optim_state_dict["param_groups"] if set(names) <= set(g["params"])]
                saved = by_param[0] if by_param else None
            if saved is not None:
                for k, v in saved.items():
                    if k not in ("params", "param_names"):
                        group[k] = v
            for p, fqn in zip(group["params"], names):
                st = optim_state_dict["state"].get(fqn)
                if st is None:
                    continue
                mine = optim.state[p]
                for k, v in st.items():
                    if isinstance(v, Tensor):
                        if k in mine and isinstance(mine[k], Tensor) and mine[k]._data.shape == p._data.shape:
                            data = _local_value(p, v, f"{fqn}.{k}")
                            mine[k]._data[...] = data
                            mine[k]._bump_version()
                        else:
                            mine[k] = _wrap(np.array(v._data, copy=True)) if not isinstance(v, DTensor) else \
                                _wrap(v.full_tensor()._data)
                    else:
                        mine[k] = v


def set_state_dict(model: Module, optimizers: Any, *, model_state_dict: Dict[str, Any],
                   optim_state_dict: Dict[str, Any], options: Optional[StateDictOptions] = None) -> Any:
    """set_model_state_dict and set_optimizer_state_dict together."""
    result = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return result
