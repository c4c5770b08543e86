"""TaskSpec (what was timed), Measurement (the times and their statistics) and the unit helpers, as in PyTorch's
torch.utils.benchmark.utils.common, so results print and compare the same way."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import textwrap
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

__all__ = ["TaskSpec", "Measurement", "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique",
           "set_torch_threads"]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # 25 ns: timer resolution, the floor of a confidence interval
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


@dataclasses.dataclass(init=True, repr=False, eq=True, frozen=True)
class TaskSpec:
    """What a Timer measures (everything but its globals); hashable, so replicates can be merged."""

    stmt: str
    setup: str
    global_setup: str = ""
    label: Optional[str] = None
    sub_label: Optional[str] = None
    description: Optional[str] = None
    env: Optional[str] = None
    num_threads: int = 1

    @property
    def title(self) -> str:
        """The label (or statement) with the sub_label: the heading of a printed Measurement."""
        suffix = f": {self.sub_label}" if self.sub_label else ""
        if self.label is not None:
            return self.label + suffix
        if "\n" not in self.stmt:
            return self.stmt + suffix
        return f"stmt:{f' ({self.sub_label})' if self.sub_label else ''}\n{textwrap.indent(self.stmt, '  ')}"

    def setup_str(self) -> str:
        """The setup line(s) of a printed Measurement ('' for no setup)."""
        if self.setup == "pass" or not self.setup:
            return ""
        if "\n" in self.setup:
            return f"setup:\n{textwrap.indent(self.setup, '  ')}"
        return f"setup: {self.setup}"

    def summarize(self) -> str:
        """Title, description and setup, one section each (multi-line sections followed by a blank line)."""
        sections = [s for s in (self.title, self.description or "", self.setup_str()) if s]
        return "\n".join(f"{s}\n" if "\n" in s else s for s in sections)


_TASKSPEC_FIELDS = tuple(f.name for f in dataclasses.fields(TaskSpec))


def _quantile(sorted_values: Tuple[float, ...], q: float) -> float:
    # linear interpolation between order statistics: torch.quantile's default
    return float(np.quantile(np.asarray(sorted_values, dtype=np.float64), q))


@dataclasses.dataclass(init=True, repr=False)
class Measurement:
    """The result of a Timer: `raw_times` are the seconds of each run of `number_per_run` statement executions.
    times / median / mean / iqr are per execution; the TaskSpec fields (label, num_threads, ...) read through."""

    number_per_run: int
    raw_times: List[float]
    task_spec: TaskSpec
    metadata: Optional[Dict[Any, Any]] = None  # for the user's own payload

    def __post_init__(self) -> None:
        self._sorted_times: Tuple[float, ...] = ()
        self._warnings: Tuple[str, ...] = ()
        self._median = self._mean = self._p25 = self._p75 = -1.0

    def __getattr__(self, name: str) -> Any:
        if name in _TASKSPEC_FIELDS:
            return getattr(self.task_spec, name)
        return super().__getattribute__(name)

    @property
    def times(self) -> List[float]:
        """Seconds per statement execution, one entry per run."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        self._lazy_init()
        return self._median

    @property
    def mean(self) -> float:
        self._lazy_init()
        return self._mean

    @property
    def iqr(self) -> float:
        """Interquartile range (75th minus 25th percentile) of `times`."""
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self) -> int:
        """Digits of the median that the spread of the middle half of the runs supports (1 to 4; used by
        Compare.trim_significant_figures)."""
        self._lazy_init()
        n = len(self._sorted_times)
        middle = self._sorted_times[n // 4:int(math.ceil(3 * n / 4))]
        std = float(np.std(np.asarray(middle, dtype=np.float64)))
        confidence_interval = max(1.645 * std / math.sqrt(len(middle)), _MIN_CONFIDENCE_INTERVAL)
        figures = int(math.floor(math.log10(self._median / confidence_interval)))
        return min(max(figures, 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        """True when the runs vary by more than 10% of the median (see repr)."""
        self._lazy_init()
        return bool(self._warnings)

    def _lazy_init(self) -> None:
        if not self.raw_times or self._sorted_times:
            return
        self._sorted_times = tuple(sorted(self.times))
        self._median = _quantile(self._sorted_times, 0.5)
        self._mean = float(np.mean(np.asarray(self._sorted_times, dtype=np.float64)))
        self._p25 = _quantile(self._sorted_times, 0.25)
        self._p75 = _quantile(self._sorted_times, 0.75)
        if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
            self._add_warning("This suggests significant environmental influence.")
        elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
            self._add_warning("This could indicate system fluctuation.")

    def _add_warning(self, msg: str) -> None:
        rel_iqr = self.iqr / self.median * 100
        self._warnings += (f"  WARNING: Interquartile range is {rel_iqr:.1f}% of the median measurement.\n"
                           f"           {msg}",)

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """Whether iqr / median is below threshold."""
        return self.iqr / self.median < threshold

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> Optional[str]:
        return self.task_spec.env

    @property
    def as_row_name(self) -> str:
        """The row name in a Compare table: sub_label, else the statement."""
        return self.sub_label or self.stmt or "[Unknown]"

    def __repr__(self) -> str:
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        lines = [object.__repr__(self), self.task_spec.summarize(),
                 f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}"]
        if n >= 4:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} ({self._p25 / scale:.2f} to "
                         f"{self._p75 / scale:.2f})")
        threads = self.num_threads
        lines.append(f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement,' if n > 1 else ','} {threads} thread{'s' if threads > 1 else ''}")
        lines.extend(self._warnings)
        return "\n".join(lines).strip()

    @staticmethod
    def merge(measurements: Iterable["Measurement"]) -> List["Measurement"]:
        """One Measurement per distinct TaskSpec, holding the per-execution times of all its replicates
        (number_per_run 1; metadata is dropped, since replicates may differ in it)."""
        grouped: Dict[TaskSpec, List[float]] = collections.OrderedDict()
        for m in measurements:
            grouped.setdefault(m.task_spec, []).extend(m.times)
        return [Measurement(number_per_run=1, raw_times=times, task_spec=spec) for spec, times in grouped.items()]


def select_unit(t: float) -> Tuple[str, float]:
    """The unit ('ns', 'us', 'ms', 's') that shows t seconds with 1 to 3 integer digits, and its scale."""
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(math.log10(t) // 3), "s")
    return unit, {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[unit]


def unit_to_english(u: str) -> str:
    """'us' -> 'microsecond'."""
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x: float, n: int) -> float:
    """x rounded to n significant figures (3.14159, 2 -> 3.1)."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = int(math.ceil(math.log10(abs(x))))
    scale = 10 ** (magnitude - n)
    return float(round(x / scale) * scale)


def ordered_unique(elements: Iterable[Any]) -> List[Any]:
    """The distinct elements in first-seen order."""
    return list(dict.fromkeys(elements))


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    """torch.set_num_threads(n) inside the block; the previous count is restored after."""
    import tinytorch
    prior = tinytorch.get_num_threads()
    try:
        tinytorch.set_num_threads(n)
        yield
    finally:
        tinytorch.set_num_threads(prior)
