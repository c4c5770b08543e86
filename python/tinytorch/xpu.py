"""torch.xpu as a build without Intel GPUs has it: nothing is available, seeding and memory queries answer as on
a machine without XPUs, and what needs a device raises PyTorch's AssertionError. Device-picking code
(`"xpu" if torch.xpu.is_available() else "cpu"`) runs unchanged."""
from __future__ import annotations

_NOT_COMPILED = "Torch not compiled with XPU enabled"


def is_available() -> bool:
    """Whether an XPU can be used: never in tinytorch."""
    return False


def device_count() -> int:
    """The number of XPUs: 0."""
    return 0


def is_initialized() -> bool:
    """Whether the XPU runtime was initialised: never."""
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 on an XPU: no device, so False."""
    return False


def manual_seed(seed: int) -> None:
    """Seed the current XPU's generator: nothing to seed (PyTorch queues it lazily and drops it without XPUs)."""


def manual_seed_all(seed: int) -> None:
    """Seed every XPU's generator: nothing to seed."""


def seed() -> None:
    """Seed the current XPU's generator randomly: nothing to seed."""


def seed_all() -> None:
    """Seed every XPU's generator randomly: nothing to seed."""


def empty_cache() -> None:
    """Release cached XPU memory: none is held."""


def memory_allocated(device=None) -> int:
    """Bytes of XPU memory held by tensors: 0."""
    return 0


def max_memory_allocated(device=None) -> int:
    """Peak bytes of XPU memory held by tensors: 0."""
    return 0


def memory_reserved(device=None) -> int:
    """Bytes of XPU memory held by the caching allocator: 0."""
    return 0


def max_memory_reserved(device=None) -> int:
    """Peak bytes held by the caching allocator: 0."""
    return 0


def reset_peak_memory_stats(device=None) -> None:
    """Reset the peak counters: there are none."""


def _no_xpu(*args, **kwargs):
    raise AssertionError(_NOT_COMPILED)


# What needs a device raises, as in PyTorch's builds without XPU support.
synchronize = current_device = set_device = get_device_name = get_device_properties = get_device_capability = \
    current_stream = get_rng_state = set_rng_state = init = _no_xpu
