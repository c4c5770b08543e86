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
