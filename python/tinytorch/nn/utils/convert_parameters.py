"""parameters_to_vector / vector_to_parameters."""
from __future__ import annotations

from typing import Iterable

from ..._tensor import Tensor


def _check_param_device(param: Tensor, old_param_device):
    if old_param_device is None:
        return param.get_device() if param.is_cuda else -1
    warn = False
    if param.is_cuda:
        warn = param.get_device() != old_param_device
    else:
        warn = old_param_device != -1
    if warn:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return old_param_device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """One flat tensor holding every parameter's values, in order (differentiable)."""
    from ... import cat
    param_device = None
    vec = []
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        vec.append(param.reshape(-1))
    return cat(vec)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each parameter's data a slice of vec (the inverse of parameters_to_vector)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    param_device = None
    pointer = 0
    for param in parameters:
        param_device = _check_param_device(param, param_device)
        num_param = param.numel()
        param.data = vec[pointer:pointer + num_param].view_as(param).data
        pointer += num_param
