"""The tracing front end of torch.distributed.pipelining (`pipeline`, `SplitPoint`, `pipe_split`, `Pipe`).

PyTorch splits a model by tracing it with torch.export into an FX graph; tinytorch has no FX, so these names exist
(scripts that import them still load) and calling them raises, pointing at manual splitting with PipelineStage.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, NoReturn

__all__ = ["Pipe", "pipe_split", "pipeline", "SplitPoint", "build_stage"]

_MANUAL = ("tinytorch has no torch.fx/torch.export, so the tracing front end of torch.distributed.pipelining is not "
           "available; manual stage splitting is supported: give each rank its part of the model and build "
           "PipelineStage(submodule, stage_index, num_stages, device) for it (see the pipelining tutorial's "
           "manual_model_split)")


def _unsupported(what: str) -> NoReturn:
    raise NotImplementedError(f"{what}: {_MANUAL}")


class SplitPoint(Enum):
    """Where a split_spec entry cuts the traced model: before or after the named submodule."""

    BEGINNING = 1
    END = 2


def pipeline(module: Any, mb_args: Any, mb_kwargs: Any = None, split_spec: Any = None,
             split_policy: Any = None) -> NoReturn:
    """Trace-based splitting (not available: raises)."""
    _unsupported("pipeline()")


def pipe_split() -> NoReturn:
    """A split marker inside a traced forward (not available: raises)."""
    _unsupported("pipe_split()")


class Pipe:
    """The traced, split model pipeline() returns (not available: raises)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _unsupported("Pipe")


def build_stage(stage_module: Any, stage_index: int, pipe_info: Any, device: Any, group: Any = None) -> NoReturn:
    """A stage from a traced Pipe (not available: raises)."""
    _unsupported("build_stage()")
