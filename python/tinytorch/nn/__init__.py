"""tinytorch.nn: modules, parameters, functional ops, initialisation and utilities (PyTorch's torch.nn)."""
from . import attention, functional, grad, init, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .modules.module import Module
from .parameter import Buffer, Parameter

try:  # DistributedDataParallel lives in its own subpackage (another component); expose it when present.
    from . import parallel  # noqa: F401
    from .parallel import DataParallel  # noqa: F401
except ModuleNotFoundError as _e:
    if _e.name != __name__ + ".parallel":
        raise

__all__ = ["Parameter", "Buffer", "functional", "init", "utils"] + list(_modules_all)
