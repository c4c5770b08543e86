"""Gradients of convolutions (PyTorch's torch.nn.grad): convNd_input and convNd_weight give the gradient of
F.convNd with respect to its input or weight for a given grad_output, without building a forward graph by hand.

A convolution is linear in each argument, so the gradient is the backward of F.convNd taken at any point
(zeros here); the result stays differentiable in weight/input and grad_output when they require grad."""
from __future__ import annotations

from typing import Callable, Sequence

from .._C import _grad_enabled
from .._creation import zeros
from .._tensor import Tensor
from ..autograd import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad
from . import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]


def _check_args(n: int, name: str, value) -> None:
    # PyTorch hands these straight to convolution_backward, which takes only ints or lists of ints.
    if isinstance(value, str) or not (isinstance(value, int) or (isinstance(value, (tuple, list))
                                                                 and all(isinstance(v, int) for v in value))):
        raise RuntimeError(f"conv{n}d gradient: {name} must be an int or a sequence of {n} ints, got {value!r}")


def _check_shapes(n: int, input_shape: tuple, weight_shape: tuple, grad_output: Tensor) -> None:
    if len(weight_shape) != n + 2:
        raise RuntimeError(f"Expected {n + 2}-dimensional weight for conv{n}d, but got {len(weight_shape)}-dimensional "
                           f"weight of size {list(weight_shape)} instead")
    if len(input_shape) != n + 2:
        raise RuntimeError(f"Expected {n + 2}-dimensional input for {n + 2}-dimensional weight {list(weight_shape)}, "
                           f"but got {len(input_shape)}-dimensional input of size {list(input_shape)} instead")
    if grad_output.dim() != n + 2:
        raise RuntimeError(f"Expected {n + 2}-dimensional grad_output for conv{n}d, but got {grad_output.dim()}-"
                           f"dimensional grad_output of size {list(grad_output.shape)} instead")


def _conv_grad(n: int, conv: Callable[..., Tensor], wrt_input: bool, input: Tensor | None, input_size,
               weight: Tensor | None, weight_size, grad_output: Tensor, stride, padding, dilation,
               groups: int) -> Tensor:
    for name, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        _check_args(n, name, value)
    if wrt_input:
        input_shape, weight_shape = tuple(int(s) for s in input_size), tuple(weight.shape)
        input = zeros(input_shape, dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
        leaf = input
    else:
        input_shape, weight_shape = tuple(input.shape), tuple(int(s) for s in weight_size)
        weight = zeros(weight_shape, dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
        leaf = weight
    _check_shapes(n, input_shape, weight_shape, grad_output)
    other = weight if wrt_input else input
    create_graph = _grad_enabled() and (other.requires_grad or grad_output.requires_grad)
    # The forward graph is needed even under no_grad, as PyTorch's convolution_backward does not care.
    with enable_grad():
        out = conv(input, weight, None, stride, padding, dilation, groups)
    if tuple(out.shape) != tuple(grad_output.shape):
        raise RuntimeError(f"conv{n}d gradient: grad_output has size {list(grad_output.shape)}, but convolving an "
                           f"input of size {list(input_shape)} with a weight of size {list(weight_shape)} gives an "
                           f"output of size {list(out.shape)}")
    with enable_grad():
        (g,) = _autograd_grad(out, leaf, grad_output, create_graph=create_graph)
    return g if create_graph else g.detach()


def conv1d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride=1, padding=0, dilation=1,
                 groups: int = 1) -> Tensor:
    """The gradient of conv1d with respect to an input of shape input_size (N, C_in, L)."""
    return _conv_grad(1, F.conv1d, True, None, input_size, weight, None, grad_output, stride, padding, dilation,
                      groups)


def conv1d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride=1, padding=0, dilation=1,
                  groups: int = 1) -> Tensor:
    """The gradient of conv1d with respect to a weight of shape weight_size (C_out, C_in/groups, k)."""
    return _conv_grad(1, F.conv1d, False, input, None, None, weight_size, grad_output, stride, padding, dilation,
                      groups)


def conv2d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride=1, padding=0, dilation=1,
                 groups: int = 1) -> Tensor:
    """The gradient of conv2d with respect to an input of shape input_size (N, C_in, H, W)."""
    return _conv_grad(2, F.conv2d, True, None, input_size, weight, None, grad_output, stride, padding, dilation,
                      groups)


def conv2d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride=1, padding=0, dilation=1,
                  groups: int = 1) -> Tensor:
    """The gradient of conv2d with respect to a weight of shape weight_size (C_out, C_in/groups, kH, kW)."""
    return _conv_grad(2, F.conv2d, False, input, None, None, weight_size, grad_output, stride, padding, dilation,
                      groups)


def conv3d_input(input_size: Sequence[int], weight: Tensor, grad_output: Tensor, stride=1, padding=0, dilation=1,
                 groups: int = 1) -> Tensor:
    """The gradient of conv3d with respect to an input of shape input_size (N, C_in, D, H, W)."""
    return _conv_grad(3, F.conv3d, True, None, input_size, weight, None, grad_output, stride, padding, dilation,
                      groups)


def conv3d_weight(input: Tensor, weight_size: Sequence[int], grad_output: Tensor, stride=1, padding=0, dilation=1,
                  groups: int = 1) -> Tensor:
    """The gradient of conv3d with respect to a weight of shape weight_size (C_out, C_in/groups, kD, kH, kW)."""
    return _conv_grad(3, F.conv3d, False, input, None, None, weight_size, grad_output, stride, padding, dilation,
                      groups)
