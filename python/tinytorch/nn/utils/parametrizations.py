"""Ready-made parametrizations (PyTorch's torch.nn.utils.parametrizations): weight_norm."""
from __future__ import annotations

from ..._tensor import Tensor
from ..modules.module import Module
from . import parametrize

__all__ = ["weight_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of v over every dim but dim, shaped to broadcast against v (dim == -1: over all of v)."""
    if dim == -1:
        return (v * v).sum().sqrt()
    dims = tuple(d for d in range(v.dim()) if d != dim)
    return (v * v).sum(dims, keepdim=True).sqrt() if dims else v.abs()


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """w = g * v / ||v|| (PyTorch's torch._weight_norm)."""
    return v * (g / _norm_except_dim(v, dim))


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        weight_g = _norm_except_dim(weight, self.dim)
        weight_v = weight
        return weight_g, weight_v


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize module.<name> as g * v / ||v|| (magnitude original0, direction original1)."""
    _weight_norm_mod = _WeightNorm(dim)
    parametrize.register_parametrization(module, name, _weight_norm_mod, unsafe=True)

    def _load_legacy(mod, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # Accept state_dicts saved with the older nn.utils.weight_norm (keys name_g, name_v).
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    module.register_load_state_dict_pre_hook(_load_legacy)
    return module
