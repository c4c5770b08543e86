"""The layer classes of tinytorch.nn."""
from .activation import GELU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .linear import Identity, Linear
from .loss import CrossEntropyLoss, MSELoss
from .module import Module
from .normalization import LayerNorm
from .sparse import Embedding

__all__ = ["Module", "Identity", "Linear", "Embedding", "LayerNorm", "Dropout", "ReLU", "GELU", "Tanh", "Sigmoid",
           "SiLU", "Softmax", "LogSoftmax", "Sequential", "ModuleList", "ModuleDict", "CrossEntropyLoss", "MSELoss"]
