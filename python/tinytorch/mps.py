"""torch.mps as PyTorch has it off Apple hardware: no MPS device, seeding is accepted, and what needs the backend
raises PyTorch's RuntimeError ("Cannot execute ...() without MPS backend.")."""
from __future__ import annotations


def is_available() -> bool:
    """Whether the MPS backend can be used: never in tinytorch (torch.backends.mps.is_available() agrees)."""
    return False


def device_count() -> int:
    """The number of MPS devices: 0."""
    return 0


def manual_seed(seed: int) -> None:
    """Seed the MPS generator: accepted and dropped without the backend, as in PyTorch."""


def _without_backend(what: str):
    def call(*args, **kwargs):
        raise RuntimeError(f"Cannot execute {what}() without MPS backend.")
    call.__name__ = call.__qualname__ = what
    return call


synchronize = _without_backend("deviceSynchronize")
empty_cache = _without_backend("emptyCache")
current_allocated_memory = _without_backend("getCurrentAllocatedMemory")
driver_allocated_memory = _without_backend("getDriverAllocatedMemory")
recommended_max_memory = _without_backend("getRecommendedMaxMemory")
set_per_process_memory_fraction = _without_backend("setMemoryFraction")
seed = get_rng_state = set_rng_state = _without_backend("getDefaultGenerator")
