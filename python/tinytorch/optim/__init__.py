"""tinytorch.optim: optimizers and learning-rate schedulers (PyTorch's torch.optim)."""
from . import lr_scheduler, swa_utils  # noqa: F401
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam",
           "RMSprop", "Rprop", "lr_scheduler", "swa_utils"]
