"""tinytorch.optim: SGD, Adam, AdamW and learning-rate schedulers (PyTorch's torch.optim)."""
from . import lr_scheduler  # noqa: F401
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
