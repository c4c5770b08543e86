"""torch.func.functional_call and stack_module_state."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from .._tensor import Tensor

__all__ = ["functional_call", "stack_module_state"]


def functional_call(module, parameter_and_buffer_dicts: Union[dict, Sequence[dict]], args: Any = None,
                    kwargs: Optional[dict] = None, *, tie_weights: bool = True, strict: bool = False) -> Any:
    """Call `module` with the given tensors (one dict, or several with disjoint keys) in place of its parameters and
    buffers, by dotted name; the module's own tensors are back afterwards, even if the call raised."""
    from ..nn.utils.stateless import _functional_call
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (list, tuple)):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts: dict[str, int] = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    return _functional_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)


def _stacked_leaf(tensors: list, name: str) -> Tensor:
    """The models' tensors stacked on a new dim 0, as a fresh leaf that requires grad if theirs all do."""
    import tinytorch
    flags = {t.requires_grad for t in tensors}
    if len(flags) > 1:
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    with tinytorch.no_grad():
        result = tinytorch.stack(tensors)
    return result.requires_grad_(True) if flags == {True} else result


def stack_module_state(models: Sequence) -> tuple[dict[str, Any], dict[str, Any]]:
    """(params, buffers): each model's parameters and buffers stacked along a new leading dim, for ensembling with
    vmap over functional_call. The stacked parameters are new leaves, independent of the models."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_params], k) for k in all_params[0]}
    buffers = {k: _stacked_leaf([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers
