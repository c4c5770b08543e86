"""Convolution layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d."""
from __future__ import annotations

import math

from ..._creation import empty
from ..._ops.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


def _ntuple(v, n: int) -> tuple:
    if isinstance(v, (tuple, list)):
        return tuple(v) if len(v) != 1 else tuple(v) * n
    return (v,) * n


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """(a, b) -> (b, b, a, a): F.pad's order for symmetric padding of the last dims."""
    return tuple(x for x in reversed(t) for _ in range(n))


class _ConvNd(Module):
    """What Conv and ConvTranspose layers share: arguments, parameters, their initialisation and repr."""

    __constants__ = ["stride", "padding", "dilation", "groups", "padding_mode", "output_padding", "in_channels",
                     "out_channels", "kernel_size"]

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation, transposed: bool,
                 output_padding, groups: int, bias: bool, padding_mode: str, device=None, dtype=None) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(f"padding_mode must be one of {valid_padding_modes}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):
            self._reversed_padding_repeated_twice = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    left = total // 2
                    self._reversed_padding_repeated_twice[2 * i] = left
                    self._reversed_padding_repeated_twice[2 * i + 1] = total - left
        else:
            self._reversed_padding_repeated_twice = _reverse_repeat_tuple(self.padding, 2)
        if transposed:
            shape = (in_channels, out_channels // groups) + tuple(kernel_size)
        else:
            shape = (out_channels, in_channels // groups) + tuple(kernel_size)
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: kaiming_uniform_(a=sqrt(5)) weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) bias."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


class _Conv(_ConvNd):
    _nd = 2
    _fn = staticmethod(conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        n = self._nd
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n),
                         padding if isinstance(padding, str) else _ntuple(padding, n), _ntuple(dilation, n), False,
                         _ntuple(0, n), groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        if self.padding_mode != "zeros":
            x = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._fn(x, weight, bias, self.stride, 0, self.dilation, self.groups)
        return self._fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1d convolution over (N, C_in, L) input: weight (C_out, C_in/groups, k)."""
    _nd = 1
    _fn = staticmethod(conv1d)


class Conv2d(_Conv):
    """2d convolution over (N, C_in, H, W) input: weight (C_out, C_in/groups, kh, kw)."""
    _nd = 2
    _fn = staticmethod(conv2d)


class Conv3d(_Conv):
    """3d convolution over (N, C_in, D, H, W) input: weight (C_out, C_in/groups, kd, kh, kw)."""
    _nd = 3
    _fn = staticmethod(conv3d)


class _ConvTransposeNd(_ConvNd):
    _nd = 2
    _fn = staticmethod(conv_transpose2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        n = self._nd
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n), _ntuple(padding, n),
                         _ntuple(dilation, n), True, _ntuple(output_padding, n), groups, bias, padding_mode, device,
                         dtype)

    def _output_padding(self, input: Tensor, output_size, stride, padding, kernel_size, num_spatial_dims: int,
                        dilation=None) -> tuple:
        """The output_padding that makes the output output_size (PyTorch's rule and errors)."""
        if output_size is None:
            return self.output_padding
        has_batch = input.dim() == num_spatial_dims + 2
        output_size = list(output_size)
        if len(output_size) == num_spatial_dims + 2 or (len(output_size) == num_spatial_dims + 1 and not has_batch):
            output_size = output_size[-num_spatial_dims:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, output_size must have "
                             f"{num_spatial_dims} or {num_spatial_dims + 2} elements (got {len(output_size)})")
        dilation = dilation or self.dilation
        res = []
        for d in range(num_spatial_dims):
            dim_size = input.size(d + input.dim() - num_spatial_dims)
            min_size = (dim_size - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel_size[d] - 1) + 1
            max_size = min_size + stride[d] - 1
            if not (min_size <= output_size[d] <= max_size):
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from "
                                 f"{[(input.size(i + input.dim() - num_spatial_dims) - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel_size[i] - 1) + 1 for i in range(num_spatial_dims)]} to "  # noqa: E501
                                 f"{[(input.size(i + input.dim() - num_spatial_dims) - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel_size[i] - 1) + stride[i] for i in range(num_spatial_dims)]} "  # noqa: E501
                                 f"(for an input of {list(input.shape[-num_spatial_dims:])})")
            res.append(output_size[d] - min_size)
        return tuple(res)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        op = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size, self._nd,
                                  self.dilation)
        return self._fn(input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1d convolution (conv1d's adjoint): weight (C_in, C_out/groups, k)."""
    _nd = 1
    _fn = staticmethod(conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2d convolution (conv2d's adjoint): weight (C_in, C_out/groups, kh, kw)."""
    _nd = 2
    _fn = staticmethod(conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3d convolution (conv3d's adjoint): weight (C_in, C_out/groups, kd, kh, kw)."""
    _nd = 3
    _fn = staticmethod(conv_transpose3d)
