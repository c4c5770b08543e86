"""tinytorch.backends.mps: Apple's Metal backend, which tinytorch does not have."""


def is_available() -> bool:
    """False: no MPS device in tinytorch."""
    return False


def is_built() -> bool:
    """False: tinytorch is not built with MPS."""
    return False
