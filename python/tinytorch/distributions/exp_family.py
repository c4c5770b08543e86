"""torch.distributions.exp_family (the class lives in distribution.py beside its base)."""
from __future__ import annotations

from .distribution import ExponentialFamily

__all__ = ["ExponentialFamily"]
