"""use_deterministic_algorithms and its queries. tinytorch's kernels are deterministic already (NumPy/CuPy
reductions in a fixed order; index_add/scatter_add accumulate in order), so the switch is recorded and reported."""
from __future__ import annotations

_mode = [False, False]  # enabled, warn_only


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record whether scripts asked for deterministic algorithms (every tinytorch op is one)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    _mode[0], _mode[1] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """What use_deterministic_algorithms last set."""
    return _mode[0]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """What use_deterministic_algorithms' warn_only last set."""
    return _mode[1]


_debug_mode = [0]


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/'default', 1/'warn', 2/'error': stored as use_deterministic_algorithms would set it."""
    names = {"default": 0, "warn": 1, "error": 2}
    if isinstance(debug_mode, str):
        if debug_mode not in names:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                               f"but got {debug_mode}")
        debug_mode = names[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    _debug_mode[0] = debug_mode
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """0, 1 or 2, as set."""
    return 2 if _mode[0] and not _mode[1] else 1 if _mode[0] else 0
