"""The layer classes of tinytorch.nn."""
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Softplus, Tanh
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .linear import Flatten, Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .module import Module
from .normalization import LayerNorm
from .sparse import Embedding

__all__ = ["Module", "Identity", "Linear", "Flatten", "Embedding", "LayerNorm", "Dropout", "ReLU", "LeakyReLU", "ELU",
           "GELU", "Tanh", "Sigmoid", "SiLU", "Softplus", "Softmax", "LogSoftmax", "Sequential", "ModuleList",
           "ModuleDict", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss"]
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase

__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
from .distance import CosineSimilarity, PairwiseDistance
from .linear import Bilinear
from .loss import (CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, KLDivLoss, MarginRankingLoss,
                   MultiLabelMarginLoss, MultiLabelSoftMarginLoss, PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss)

__all__ += ["CosineSimilarity", "PairwiseDistance", "Bilinear", "KLDivLoss", "MarginRankingLoss", "TripletMarginLoss",
            "CosineEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "SoftMarginLoss",
            "HingeEmbeddingLoss", "MultiLabelMarginLoss"]
from .activation import MultiheadAttention
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)

__all__ += ["MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
            "TransformerDecoderLayer"]
from .sparse import EmbeddingBag

__all__ += ["EmbeddingBag"]
from .loss import CTCLoss

__all__ += ["CTCLoss"]
from .loss import MultiMarginLoss, NLLLoss2d, TripletMarginWithDistanceLoss

__all__ += ["TripletMarginWithDistanceLoss", "MultiMarginLoss", "NLLLoss2d"]

# Convolution, pooling, normalisation, channel dropout, resampling and fold layers (issue 12, item 3).
from .batchnorm import BatchNorm1d, BatchNorm2d, SyncBatchNorm  # noqa: E402
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: E402
from .dropout import AlphaDropout, Dropout1d, Dropout2d, Dropout3d  # noqa: E402
from .fold import Fold, Unfold  # noqa: E402
from .normalization import GroupNorm, InstanceNorm1d, InstanceNorm2d, LocalResponseNorm, RMSNorm  # noqa: E402
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: E402
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,  # noqa: E402
                      AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: E402

__all__ += ["BatchNorm1d", "BatchNorm2d", "SyncBatchNorm", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
            "AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "Fold", "Unfold", "GroupNorm", "InstanceNorm1d",
            "InstanceNorm2d", "LocalResponseNorm", "RMSNorm", "PixelShuffle", "PixelUnshuffle", "AdaptiveAvgPool1d",
            "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d",
            "MaxPool2d", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]

from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: E402

__all__ += ["AdaptiveLogSoftmaxWithLoss"]

# Every other export of the layer modules: each module's __all__ names its layers.
from . import (activation as _activation, batchnorm as _batchnorm, container as _container, conv as _conv,  # noqa: E402
               lazy as _lazy, linear as _linear, normalization as _normalization, padding as _padding,
               pooling as _pooling)

for _m in (_activation, _batchnorm, _container, _conv, _lazy, _linear, _normalization, _padding, _pooling):
    for _name in _m.__all__:
        if _name not in __all__:
            globals()[_name] = getattr(_m, _name)
            __all__.append(_name)
