"""tinytorch.distributed.pipelining: pipeline parallelism with PyTorch's API (manual stage splitting).

Split a model by hand, wrap each rank's piece in a PipelineStage, and drive the stages with a schedule:

    stage = PipelineStage(piece, stage_index=rank, num_stages=world_size, device="cpu")
    schedule = Schedule1F1B(stage, n_microbatches=4, loss_fn=loss_fn)
    schedule.step(x) on the first stage's rank; schedule.step(target=y, losses=losses) on the last.
"""
from . import microbatch, schedules, stage  # noqa: F401 - PyTorch's submodules, reachable as attributes
from ._IR import Pipe, SplitPoint, build_stage, pipe_split, pipeline
from .schedules import (
    Schedule1F1B,
    ScheduleDualPipeV,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
    ScheduleLoopedBFS,
    ScheduleZBVZeroBubble,
)
from .stage import PipelineStage

__all__ = [
    "Pipe",
    "pipe_split",
    "SplitPoint",
    "pipeline",
    "PipelineStage",
    "build_stage",
    "Schedule1F1B",
    "ScheduleGPipe",
    "ScheduleInterleaved1F1B",
    "ScheduleLoopedBFS",
    "ScheduleInterleavedZeroBubble",
    "ScheduleZBVZeroBubble",
    "ScheduleDualPipeV",
]
