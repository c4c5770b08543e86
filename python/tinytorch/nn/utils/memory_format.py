"""Convolution weights laid out in a memory format (PyTorch's nn.utils.convert_conv2d/3d_weight_memory_format):
a channels-last model keeps its weights channels-last, as cuDNN and oneDNN prefer."""
from __future__ import annotations


def _convert(module, memory_format, kinds: tuple):
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone().contiguous(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Give every Conv2d/ConvTranspose2d weight in module (recursively) memory_format; returns module."""
    from ..modules.conv import Conv2d, ConvTranspose2d
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """Give every Conv3d/ConvTranspose3d weight in module (recursively) memory_format; returns module."""
    from ..modules.conv import Conv3d, ConvTranspose3d
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
