"""Compare: print many Measurements as tables (one per label; a row per sub_label or statement, grouped by thread
count; a column per description), in PyTorch's layout."""
from __future__ import annotations

import enum
import math
from typing import Dict, List, Optional, Sequence, Tuple

from . import common

__all__ = ["Colorize", "Compare"]

BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"


def _leading_digits(value: float) -> int:
    return int(math.ceil(math.log10(value)))


class _ColumnFormat:
    """How one column's numbers print: enough integer digits for its largest entry and, when trimming, the fewest
    decimals any of its entries' significant figures allow (else one)."""

    def __init__(self, results: Sequence[Optional[common.Measurement]], time_scale: float, trim: bool,
                 highlight_warnings: bool) -> None:
        present = [r for r in results if r is not None]
        self.trim = trim
        self.highlight = highlight_warnings and any(r.has_warnings for r in present)
        digits = [_leading_digits(r.median / time_scale) for r in present]
        decimals = min(max(r.significant_figures - d, 0) for r, d in zip(present, digits)) if trim else 1
        width = max(digits) + decimals + (1 if decimals else 0)
        self.template = f"{{:>{width}.{decimals}f}}{{:>{7 if self.highlight else 0}}}"

    def format(self, value: Optional[float], sigfigs: int, spread: Optional[float]) -> str:
        if value is None:
            return " " * len(self.format(1, sigfigs, None))
        if self.trim:
            value = common.trim_sigfig(value, sigfigs)
        note = f" (! {spread * 100:.0f}%)" if self.highlight and spread is not None else ""
        return self.template.format(value, note)


def _color(segment: str, value: float, best: float) -> str:
    if value <= best * 1.01 or value <= best + 100e-9:
        return BEST + BOLD + segment + TERMINATE * 2
    if value <= best * 1.1:
        return GOOD + BOLD + segment + TERMINATE * 2
    if value >= best * 5:
        return VERY_BAD + BOLD + segment + TERMINATE * 2
    if value >= best * 2:
        return BAD + segment + TERMINATE * 2
    return segment


def _render_table(results: List[common.Measurement], colorize: Colorize, trim: bool, highlight: bool) -> str:
    """One label's table."""
    label = results[0].label
    unit, scale = common.select_unit(min(r.median for r in results))

    def row_key(m: common.Measurement) -> Tuple[int, Optional[str], str]:
        return m.num_threads, m.env, m.as_row_name

    row_keys = common.ordered_unique(row_key(r) for r in results)
    row_keys.sort(key=lambda k: (k[0], k[1] or ""))  # stable: statements keep their order within a thread count
    col_keys = common.ordered_unique(r.description for r in results)
    row_index = {k: i for i, k in enumerate(row_keys)}
    col_index = {k: j for j, k in enumerate(col_keys)}
    grid: List[List[Optional[common.Measurement]]] = [[None] * len(col_keys) for _ in row_keys]
    for r in results:
        grid[row_index[row_key(r)]][col_index[r.description]] = r

    envs = {r.env for r in results}
    render_env = len(envs) > 1
    env_width = max(len(str(e)) for e in envs) if render_env else 0
    formats = [_ColumnFormat([row[j] for row in grid], scale, trim, highlight) for j in range(len(col_keys))]

    # thread groups: a separator line opens each, and column-wise colouring compares within it
    group_of: List[int] = []
    prior_threads, prior_env = None, None
    shown_env: List[bool] = []
    for threads, env, _ in row_keys:
        if threads != prior_threads:
            group_of.append(len(set(group_of)))
            prior_threads, prior_env = threads, None
        else:
            group_of.append(group_of[-1])
        shown_env.append(render_env and env != prior_env)
        prior_env = env

    cells: List[List[str]] = [[""] + [str(c) for c in col_keys]]
    for i, row in enumerate(grid):
        first = next(r for r in row if r is not None)
        env = f"({first.env})" if shown_env[i] else ""
        line = ["  " + env.ljust(env_width + 4) + first.as_row_name]
        for r, fmt in zip(row, formats):
            line.append(fmt.format(None, 1, None) if r is None else
                        fmt.format(r.median / scale, r.significant_figures,
                                   r.iqr / r.median if r.has_warnings else None))
        cells.append(line)
    n_cols = max(len(c) for c in cells)
    for c in cells:
        c.extend([""] * (n_cols - len(c)))
    widths = [max(len(c[j]) for c in cells) for j in range(n_cols)]

    header = "  |  ".join(c.center(w) for c, w in zip(cells[0], widths))
    lines = [header]
    for i, (row, line) in enumerate(zip(grid, cells[1:])):
        if i == 0 or group_of[i] != group_of[i - 1]:
            lines.append(f"{row_keys[i][0]} threads: ".ljust(len(header), "-"))
        if colorize == Colorize.ROWWISE:
            bests: List[Optional[float]] = [min(r.median for r in row if r is not None)] * len(row)
        elif colorize == Colorize.COLUMNWISE:
            same_group = [grid[k] for k in range(len(grid)) if group_of[k] == group_of[i]]
            bests = [min((g[j].median for g in same_group if g[j] is not None), default=None)
                     for j in range(len(row))]
        else:
            bests = [None] * len(row)
        out = [line[0].ljust(widths[0])]
        for text, width, r, best in zip(line[1:], widths[1:], row, bests):
            text = text.center(width)
            if colorize != Colorize.NONE and r is not None and best is not None:
                text = _color(text, r.median, best)
            out.append(text)
        lines.append("  |  ".join(out))

    warned = highlight and any(r.has_warnings for r in results)
    note = "(! XX%) Measurement has high variance, where XX is the IQR / median * 100.\n" if warned else ""
    title = (" " + (label or "") + " ").center(len(header) - 2, "-")
    return (f"[{title}]\n" + "\n".join(lines) + f"\n\nTimes are in {common.unit_to_english(unit)}s ({unit}).\n"
            + note)


class Compare:
    """Tables of Measurements: str(compare) or compare.print(). Replicates (same TaskSpec) are merged first."""

    def __init__(self, results: List[common.Measurement]) -> None:
        self._results: List[common.Measurement] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self) -> str:
        return "\n".join(self._render())

    def extend_results(self, results: List[common.Measurement]) -> None:
        """Add more Measurements."""
        for r in results:
            if not isinstance(r, common.Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} instead.")
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        """Print each number with only the digits its measurement supports."""
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        """Colour entries relative to the best of their column (or of their row) with terminal escapes."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self) -> None:
        """Mark entries whose runs varied a lot with (! XX%)."""
        self._highlight_warnings = True

    def print(self) -> None:
        """Print the tables."""
        print(str(self))

    def _render(self) -> List[str]:
        by_label: Dict[Optional[str], List[common.Measurement]] = {}
        for r in common.Measurement.merge(self._results):
            by_label.setdefault(r.label, []).append(r)
        return [_render_table(group, self._colorize, self._trim_significant_figures, self._highlight_warnings)
                for group in by_label.values()]
