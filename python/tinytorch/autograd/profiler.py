"""torch.autograd.profiler: the older spelling of the profiler (profile(enabled=...), record_function), on
tinytorch.profiler's recorder."""
from __future__ import annotations

from typing import Any

from .. import profiler as _profiler
from ..profiler import record_function

__all__ = ["profile", "record_function"]


class profile(_profiler.profile):
    """PyTorch's autograd.profiler.profile: records while active when `enabled`; key_averages(),
    export_chrome_trace(path) and events() after. CUDA timing options are accepted and ignored (no CUDA events
    are recorded)."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device: Any = None,
                 record_shapes: bool = False, with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False, use_kineto: bool = False,
                 use_cpu: bool = True, experimental_config: Any = None, acc_events: bool = False,
                 custom_trace_id_callback: Any = None) -> None:
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack)
        self.enabled = enabled

    def __enter__(self) -> "profile":
        if self.enabled:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.stop()

    def table(self, sort_by: str | None = None, row_limit: int = 100, **kwargs: Any) -> str:
        """The aggregated table (what printing a profile shows)."""
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit)

    def __str__(self) -> str:
        return self.table()
