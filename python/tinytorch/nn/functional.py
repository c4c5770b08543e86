"""tinytorch.nn.functional (import as F): PyTorch's functional API over tinytorch's ops."""
from __future__ import annotations

import math

from .._ops.indexing import embedding as _embedding
from .._ops.indexing import one_hot
from .._ops.nn import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, dropout, elu, gelu,
                       hardtanh, huber_loss, l1_loss, layer_norm, leaky_relu, linear, log_softmax, logsigmoid,
                       mse_loss, nll_loss, normalize, pad, relu, relu6, scaled_dot_product_attention, sigmoid, silu,
                       smooth_l1_loss, softmax, softmin, softplus, tanh)
from .._tensor import Tensor


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Look up rows of weight at the integer positions in input (row padding_idx gets no gradient)."""
    return _embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


def relu_(input: Tensor) -> Tensor:
    """In-place relu."""
    return input.relu_()


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place leaky_relu."""
    return leaky_relu(input, negative_slope, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place elu."""
    return elu(input, alpha, inplace=True)


__all__ = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "dropout", "elu", "elu_",
           "embedding", "gelu", "hardtanh", "huber_loss", "l1_loss", "layer_norm", "leaky_relu", "leaky_relu_",
           "linear", "log_softmax", "logsigmoid", "mse_loss", "nll_loss", "normalize", "one_hot", "pad", "relu",
           "relu_", "relu6", "scaled_dot_product_attention", "sigmoid", "silu", "smooth_l1_loss", "softmax",
           "softmin", "softplus", "tanh"]

from .._ops.loss import (bilinear, cosine_embedding_loss, cosine_similarity, gaussian_nll_loss,  # noqa: E402
                         hinge_embedding_loss, kl_div, margin_ranking_loss, multilabel_margin_loss,
                         multilabel_soft_margin_loss, pairwise_distance, poisson_nll_loss, soft_margin_loss,
                         triplet_margin_loss)

__all__ += ["bilinear", "cosine_embedding_loss", "cosine_similarity", "gaussian_nll_loss", "hinge_embedding_loss",
            "kl_div", "margin_ranking_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
            "pairwise_distance", "poisson_nll_loss", "soft_margin_loss", "triplet_margin_loss"]

from .._ops.attention import multi_head_attention_forward  # noqa: E402

__all__ += ["multi_head_attention_forward"]

from .._ops.embedding_bag import embedding_bag  # noqa: E402

__all__ += ["embedding_bag"]

from .._ops.ctc import ctc_loss  # noqa: E402

__all__ += ["ctc_loss"]

from .._ops.loss import multi_margin_loss, triplet_margin_with_distance_loss  # noqa: E402

__all__ += ["multi_margin_loss", "triplet_margin_with_distance_loss"]

# Convolution, pooling, normalisation, channel dropout, resampling and fold ops (issue 12, item 3).
from .._ops.conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d  # noqa: E402
from .._ops.dropout import alpha_dropout, dropout1d, dropout2d, dropout3d  # noqa: E402
from .._ops.fold import fold, unfold  # noqa: E402
from .._ops.normalization import (batch_norm, group_norm, instance_norm, local_response_norm,  # noqa: E402
                                  rms_norm)
from .._ops.pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,  # noqa: E402
                            adaptive_max_pool1d_with_indices, adaptive_max_pool2d, adaptive_max_pool2d_with_indices,
                            avg_pool1d, avg_pool2d, max_pool1d, max_pool1d_with_indices, max_pool2d,
                            max_pool2d_with_indices)
from .._ops.upsampling import (pixel_shuffle, pixel_unshuffle, upsample, upsample_bilinear,  # noqa: E402
                               upsample_nearest)

__all__ += ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "alpha_dropout", "dropout1d", "dropout2d",
            "dropout3d", "fold", "unfold", "batch_norm", "group_norm", "instance_norm", "local_response_norm",
            "rms_norm", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
            "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices",
            "avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool1d_with_indices", "max_pool2d",
            "max_pool2d_with_indices", "interpolate", "pixel_shuffle", "pixel_unshuffle", "upsample",
            "upsample_bilinear", "upsample_nearest"]

from .._ops.distance import pdist  # noqa: E402

__all__ += ["pdist"]

# Every other functional op: each op module's __all__ names its functions.
from .._ops import activation as _activation, conv as _conv, grid_sample as _grid_sample  # noqa: E402
from .._ops import pooling as _pooling  # noqa: E402

for _m in (_activation, _conv, _grid_sample, _pooling):
    for _name in _m.__all__:
        if _name not in __all__:
            globals()[_name] = getattr(_m, _name)
            __all__.append(_name)

from .._ops.nn import conv_tbc, interpolate_antialias as _interpolate_antialias, linear_cross_entropy  # noqa: E402
from .._ops.upsampling import interpolate as _interpolate  # noqa: E402

GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims to `size` or by `scale_factor`; antialias=True (and mode='lanczos') low-pass
    filters while downsampling, as Pillow does."""
    if not antialias and mode != "lanczos":
        return _interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(input.shape[2:])} and output size of {size}. "
                                 "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            if not all(isinstance(v, int) for v in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                f"Tuple[int, int, int], but got size with types {[type(v) for v in size]}")
            out_size = list(size)
        else:
            out_size = [size] * dim
        scales = [None] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
                                 f"shape {scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                                 "format and scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(v) for v in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out_size = [int(math.floor(n * sc)) for n, sc in zip(input.shape[2:], scales)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor:
        scales = [None] * dim
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and dim == 2):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                         "4-D tensor as input")
    if dim != 2:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {dim + 2}D) for "
                                  "the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
                                  f"nearest-exact (got {mode})")
    if mode == "lanczos":
        if align_corners:
            raise ValueError("Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("Lanczos mode requires antialias=True")
    return _interpolate_antialias(input, out_size, scales, mode, align_corners)


def assert_int_or_pair(arg: list[int], arg_name: str, message: str) -> None:
    """Raise AssertionError(message.format(arg_name)) unless arg is an int or has two elements."""
    if not (isinstance(arg, int) or len(arg) == 2):
        raise AssertionError(message.format(arg_name))


def boolean_dispatch(arg_name: str, arg_index: int, default: bool, if_true, if_false, module_name, func_name):
    """A function calling if_true or if_false by the boolean argument arg_name (keyword, or position arg_index,
    else default): how F.max_pool2d picks its return_indices variant. The one docstring is shared by all three."""
    def fn(*args, **kwargs):
        flag = kwargs[arg_name] if arg_name in kwargs else args[arg_index] if arg_index < len(args) else default
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)

    if if_true.__doc__ is None and if_false.__doc__ is not None:
        if_true.__doc__ = if_false.__doc__
    elif if_false.__doc__ is None and if_true.__doc__ is not None:
        if_false.__doc__ = if_true.__doc__
    elif if_false.__doc__ is not None and if_true.__doc__ is not None:
        raise RuntimeError("only one function can have a docstring")
    fn.__doc__ = if_true.__doc__
    if module_name is not None:
        fn.__module__ = module_name
    if func_name is not None:
        fn.__name__ = func_name
    return fn


__all__ += ["conv_tbc", "linear_cross_entropy", "assert_int_or_pair", "boolean_dispatch",
            "GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES"]

# PyTorch's functional module has these names too (not in its __all__): nn.grad, and the __torch_function__ helpers
from . import grad  # noqa: E402,F401
from ..overrides import (handle_torch_function, has_torch_function, has_torch_function_unary,  # noqa: E402,F401
                         has_torch_function_variadic)
from .. import _dispatch  # noqa: E402

_dispatch.route(globals(), "tinytorch.nn.functional", ("tinytorch._ops", "tinytorch.nn.functional"))
