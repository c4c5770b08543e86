"""tinytorch.backends.mkldnn: oneDNN, which tinytorch does not use."""
enabled = True


def is_available() -> bool:
    """False: tinytorch does not use oneDNN."""
    return False
