"""OptimizedModule: what torch.compile(module) returns. tinytorch compiles nothing, but keeps PyTorch's wrapper
so that a compiled model's state_dict keys carry PyTorch's `_orig_mod.` prefix (checkpoints of compiled models
load both ways) and attributes reach the original module."""
from __future__ import annotations

from typing import Any

from ..nn.modules.module import Module

__all__ = ["OptimizedModule"]


class OptimizedModule(Module):
    """`_orig_mod` as its one submodule; calls run it eagerly; other attributes are the original's."""

    def __init__(self, mod: Module, dynamo_ctx: Any = None) -> None:
        super().__init__()
        self._orig_mod = mod
        self.dynamo_ctx = dynamo_ctx

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "_orig_mod":
                raise
            return getattr(self._orig_mod, name)
