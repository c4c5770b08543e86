"""tinytorch.distributed (the communication layer's package; owned by the comm branch)."""
