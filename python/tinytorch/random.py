"""torch.random: the default generator's seed and state, and fork_rng (random draws inside the block leave the
generators as they were)."""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterable, Iterator, Optional

from ._creation import default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["default_generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices: Optional[Iterable] = None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str = "cuda") -> Iterator[None]:
    """Run the block with the CPU generator's state saved and restored after (and the CUDA generators', which
    tinytorch cannot save: with a GPU and devices to fork this raises rather than fork the CPU alone)."""
    if not enabled:
        yield
        return
    if device_type not in ("cuda", "cpu", "meta"):
        raise RuntimeError(f"torch has no module of {device_type}, you should register a module by "
                           f"`torch._register_device_module`.")
    from . import cuda
    if device_type == "cuda" and cuda.is_available():
        wanted = list(range(cuda.device_count())) if devices is None else list(devices)
        if wanted:
            raise NotImplementedError(f"{_caller}: the CUDA generators' state cannot be saved (CuPy's generator "
                                      f"has no state API); pass {_devices_kw}=[] to fork the CPU generator only")
    elif devices:
        warnings.warn(f"{_caller}: CUDA is not available; only the CPU generator is forked")
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
