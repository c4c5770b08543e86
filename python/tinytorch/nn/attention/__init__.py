"""tinytorch.nn.attention: choosing scaled_dot_product_attention backends (PyTorch's torch.nn.attention).

tinytorch runs one attention implementation whatever is chosen, so sdpa_kernel records the selection (in the same
switches tinytorch.backends.cuda exposes: flash_sdp_enabled() etc.) and restores it on exit, as PyTorch does."""
from __future__ import annotations

import contextlib
import enum
from typing import Iterable, Iterator

from ...backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

# PyTorch warns why fused kernels were skipped when this is True; tinytorch has no fused/unfused split to report.
WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.Enum):
    """The scaled-dot-product-attention backends, with PyTorch's names and integer values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value


# The backends.cuda switch names behind each backend; OVERRIDEABLE has no switch there, so it lives here.
_backend_names = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                  "mem_efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH,
                  "overrideable": SDPBackend.OVERRIDEABLE}
_overrideable = {"enabled": True}
# PyTorch's default order in which enabled backends are tried (as SDPBackend values).
_priority_order = [1, 2, 0, 3, 4]


def _get_enabled(name: str) -> bool:
    if name == "overrideable":
        return _overrideable["enabled"]
    return bool(getattr(_cuda, f"{name}_sdp_enabled")())


def _set_enabled(name: str, enabled: bool) -> None:
    if name == "overrideable":
        _overrideable["enabled"] = enabled
    else:
        getattr(_cuda, f"enable_{name}_sdp")(enabled)


def _cur_sdpa_kernel_backends(with_priority: bool = False) -> list[SDPBackend]:
    """The backends currently enabled, in PyTorch's listing order or, with with_priority, in priority order."""
    backends = [backend for name, backend in _backend_names.items() if _get_enabled(name)]
    if with_priority:
        backends.sort(key=lambda backend: _priority_order.index(int(backend)))
    return backends


def _sdpa_kernel(backends: Iterable[SDPBackend], set_priority: bool = False) -> None:
    backends = list(backends)
    for name, backend in _backend_names.items():
        _set_enabled(name, backend in backends)
    if set_priority:
        user_priority = [int(backend) for backend in backends]
        user_priority += [b for b in _priority_order if b not in user_priority]
        _priority_order[:] = user_priority


@contextlib.contextmanager
def sdpa_kernel(backends: list[SDPBackend] | SDPBackend, set_priority: bool = False) -> Iterator[dict]:
    """Allow only `backends` for scaled_dot_product_attention inside the block (with set_priority, also try
    them in the order given); the previous selection is restored on exit. Usable as a decorator."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(dict.fromkeys(backends))
    previous = _cur_sdpa_kernel_backends(with_priority=set_priority)
    try:
        _sdpa_kernel(backends, set_priority)
        yield {}
    finally:
        _sdpa_kernel(previous, set_priority)
