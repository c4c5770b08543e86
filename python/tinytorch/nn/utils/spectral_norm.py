"""The older spectral normalisation (torch.nn.utils.spectral_norm): parameter name_orig, buffers name_u and
name_v, and a forward pre-hook that sets module.<name> = name_orig / sigma_max before each call."""
from __future__ import annotations

from ..._tensor import Tensor
from ..modules.module import Module
from ..parameter import Parameter
from .parametrizations import _reshape_weight_to_matrix

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that divides the weight by its power-iteration estimate of sigma_max."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        from ..._ops.nn import normalize
        from ...autograd.grad_mode import no_grad
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = _reshape_weight_to_matrix(weight, self.dim)
        if do_power_iteration:
            # This API steps v before u (the parametrization steps u first).
            with no_grad():
                w_mat = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(w_mat.mH.mv(u), dim=0, eps=self.eps))
                    u.copy_(normalize(w_mat.mv(v), dim=0, eps=self.eps))
            # Clones: backward must see this call's u, v, not the next call's in-place update.
            u, v = u.clone(), v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> "SpectralNorm":
        from ..._ops.nn import normalize
        from ...autograd.grad_mode import no_grad
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            h, w = _reshape_weight_to_matrix(weight, dim).shape
            u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
            v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.data)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        from ...autograd.grad_mode import no_grad
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        del module._parameters[self.name + "_orig"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divide module.<name> by its largest singular value (power iteration) before each forward."""
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Fold name_orig / sigma back into one parameter name and drop the hook and buffers."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
