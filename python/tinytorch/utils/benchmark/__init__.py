"""torch.utils.benchmark for tinytorch: Timer (timeit, blocked_autorange, adaptive_autorange), Measurement and
Compare, with PyTorch's fields and printed layout. Python statements only: no C++ timing, Callgrind or Fuzzer."""
from .utils.common import (Measurement, TaskSpec, ordered_unique, select_unit, set_torch_threads,  # noqa: F401
                           trim_sigfig, unit_to_english)
from .utils.compare import Colorize, Compare  # noqa: F401
from .utils.timer import Language, Timer, timer  # noqa: F401

__all__ = ["Colorize", "Compare", "Language", "Measurement", "TaskSpec", "Timer", "ordered_unique", "select_unit",
           "set_torch_threads", "timer", "trim_sigfig", "unit_to_english"]
