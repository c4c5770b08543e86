"""Timer: time a Python statement the way torch.utils.benchmark.Timer does (timeit underneath, a warm-up, the
intra-op thread count set to `num_threads` while measuring and restored after, GPU work synchronized before each
clock read when CUDA is in use)."""
from __future__ import annotations

import enum
import functools
import textwrap
import timeit
from typing import Any, Callable, Dict, List, NoReturn, Optional, Union

import numpy as np

from . import common

__all__ = ["Timer", "timer", "Language"]


class Language(enum.Enum):
    PYTHON = 0
    CPP = 1


@functools.lru_cache(maxsize=None)
def _cuda_in_use() -> bool:
    import tinytorch
    return tinytorch.cuda.is_available()


def timer() -> float:
    """The clock Timer reads by default: timeit's perf_counter, after waiting for queued GPU work when CUDA is
    available (so asynchronous kernels are counted)."""
    if _cuda_in_use():
        import tinytorch
        tinytorch.cuda.synchronize()
    return timeit.default_timer()


class Timer:
    """Times `stmt` (after running `setup` once) with `globals` as its namespace; `torch` is predefined there.
    label / sub_label / description / env name the result for printing and Compare."""

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Callable[[], float] = timer, globals: Optional[Dict[str, Any]] = None,
                 label: Optional[str] = None, sub_label: Optional[str] = None, description: Optional[str] = None,
                 env: Optional[str] = None, num_threads: int = 1,
                 language: Union[Language, str] = Language.PYTHON) -> None:
        if not isinstance(stmt, str):
            raise ValueError("Currently only a `str` stmt is supported.")
        if language in (Language.CPP, "cpp", "c++"):
            raise ValueError("tinytorch's Timer times Python statements only: language=Language.CPP needs "
                             "PyTorch's C++ toolchain")
        if language not in (Language.PYTHON, "py", "python"):
            raise ValueError(f"Invalid language `{language}`.")
        if global_setup:
            raise ValueError(f"global_setup is C++ only, got `{global_setup}`. Most likely this code can simply be "
                             "moved to `setup`.")
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
        import tinytorch
        self._globals = dict(globals or {})
        self._globals.setdefault("torch", tinytorch)
        stmt, setup = self._clean(stmt), self._clean(setup)
        self._timer = timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._task_spec = common.TaskSpec(stmt=stmt, setup=setup, global_setup=global_setup, label=label,
                                          sub_label=sub_label, description=description, env=env,
                                          num_threads=num_threads)

    @staticmethod
    def _clean(code: str) -> str:
        code = textwrap.dedent(code)
        return (code[1:] if code and code[0] == "\n" else code).rstrip()

    def _timeit(self, number: int) -> float:
        # a zero reading would make the statistics divide by zero
        return max(self._timer.timeit(number), 1e-9)

    def timeit(self, number: int = 1000000) -> common.Measurement:
        """Run the statement `number` times (after a warm-up of number // 100, at least 2): one measurement."""
        with common.set_torch_threads(self._task_spec.num_threads):
            self._timeit(max(number // 100, 2))
            return common.Measurement(number_per_run=number, raw_times=[self._timeit(number)],
                                      task_spec=self._task_spec)

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def autorange(self, callback: Optional[Callable[[int, float], NoReturn]] = None) -> None:
        raise NotImplementedError("See `Timer.blocked_autorange.`")

    def _estimate_block_size(self, min_run_time: float) -> int:
        """Runs per measurement: grown tenfold until the timer's own overhead is under 0.01% of a block (and a
        block takes at least min_run_time / 1000), or a block alone exceeds min_run_time."""
        with common.set_torch_threads(self._task_spec.num_threads):
            overhead = float(np.median([self._timeit(0) for _ in range(5)]))
            number = 1
            while True:
                time_taken = self._timeit(number)
                if overhead / time_taken <= 1e-4 and time_taken >= min_run_time / 1000:
                    break
                if time_taken > min_run_time or number * 10 > 2147483647:
                    break
                number *= 10
        return number

    def _measurement_loop(self, number: int, stop: Callable[[List[float]], bool], min_run_time: float,
                          max_run_time: Optional[float],
                          callback: Optional[Callable[[int, float], Any]]) -> List[float]:
        total, times = 0.0, []
        with common.set_torch_threads(self._task_spec.num_threads):
            while True:
                t = self._timeit(number)
                times.append(t)
                total += t
                if callback:
                    callback(number, t)
                can_stop = stop(times)
                if max_run_time and total > max_run_time:
                    break
                if total >= min_run_time and can_stop:
                    break
        return times

    def blocked_autorange(self, callback: Optional[Callable[[int, float], NoReturn]] = None,
                          min_run_time: float = 0.2) -> common.Measurement:
        """Measure blocks of runs (block size chosen so the timer's overhead is negligible) until min_run_time
        seconds have been measured."""
        number = self._estimate_block_size(min_run_time)
        times = self._measurement_loop(number, lambda _: True, min_run_time, None, callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01, max_run_time: float = 10.0,
                           callback: Optional[Callable[[int, float], NoReturn]] = None) -> common.Measurement:
        """Like blocked_autorange, but keep measuring (up to max_run_time seconds) until there are more than 3
        blocks and their iqr / median is under threshold."""
        number = self._estimate_block_size(min_run_time=0.05)

        def stop(times: List[float]) -> bool:
            return len(times) > 3 and common.Measurement(
                number_per_run=number, raw_times=times, task_spec=self._task_spec).meets_confidence(threshold)

        times = self._measurement_loop(number, stop, min_run_time, max_run_time, callback)
        return common.Measurement(number_per_run=number, raw_times=times, task_spec=self._task_spec)

    def collect_callgrind(self, number: int = 100, *, repeats: Optional[int] = None, collect_baseline: bool = True,
                          retain_out_file: bool = False) -> Any:
        raise NotImplementedError("tinytorch's Timer has no Callgrind support (instruction counts need PyTorch's "
                                  "valgrind bindings); use blocked_autorange for wall times")
