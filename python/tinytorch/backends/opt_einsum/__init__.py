"""torch.backends.opt_einsum: whether einsum orders its contractions with the opt_einsum package. tinytorch's einsum
contracts through NumPy's einsum (optimize="greedy" picks the order itself), so these are recorded only."""
from __future__ import annotations

import importlib.util

enabled = True
strategy = "auto"


def is_available() -> bool:
    """Whether the opt_einsum package is installed (PyTorch uses it when it is)."""
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum module when installed, else None."""
    return importlib.import_module("opt_einsum") if is_available() else None
