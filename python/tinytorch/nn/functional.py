"""tinytorch.nn.functional (import as F): PyTorch's functional API over tinytorch's ops."""
from __future__ import annotations

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
from .._ops.upsampling import (interpolate, pixel_shuffle, pixel_unshuffle, upsample, upsample_bilinear,  # noqa: E402
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

from .. import _dispatch  # noqa: E402

_dispatch.route(globals(), "tinytorch.nn.functional", ("tinytorch._ops", "tinytorch.nn.functional"))
