"""Line charts and span timelines as PNG files, drawn with matplotlib (the optional ``plot`` extra).

matplotlib is imported only when a chart is drawn, with the non-interactive Agg backend (no display
needed). Without it a chart is skipped with one line on stderr and the caller carries on: plots are
a convenience, never a reason for a training run or a benchmark to fail. The Chrome trace
(``tinytorch.profiler``) stays the primary timeline; these PNGs are a quick look.
"""
from __future__ import annotations

import os
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["line_chart", "timeline", "pipeline_schedule", "have_matplotlib"]

INSTALL_HINT = "pip install 'tinytorch[plot]'"


def _pyplot(path: str) -> Optional[Any]:
    """Return matplotlib.pyplot on the Agg backend, or None after saying why ``path`` is skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: never open a window, work without a display
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: skipping {path} ({INSTALL_HINT})", file=sys.stderr, flush=True)
        return None
    return plt


def have_matplotlib() -> bool:
    """True when matplotlib can be imported (charts will be drawn)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _save(fig: Any, path: str) -> None:
    """Write the figure atomically (temporary file, then rename), so a reader never sees half a PNG."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".png.tmp")
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=100)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def line_chart(path: str, series: Dict[str, Tuple[Sequence[float], Sequence[float]]], title: str = "",
               xlabel: str = "", ylabel: str = "", width: int = 900, height: int = 540,
               hlines: Optional[Dict[str, float]] = None, log_x: bool = False) -> bool:
    """Plot named (xs, ys) series with labelled horizontal reference lines; return False if skipped."""
    plt = _pyplot(path)
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(width / 100, height / 100))
    try:
        for name, (xs, ys) in series.items():
            ax.plot(list(xs), list(ys), label=name, linewidth=1.6, marker="o" if len(xs) < 20 else None,
                    markersize=4)
        for name, value in (hlines or {}).items():
            ax.axhline(value, color="0.5", linestyle="--", linewidth=1, label=name)
        if log_x:
            # Label the sampled x values themselves (bucket caps 1, 5, 25, ...), not powers of ten.
            ax.set_xscale("log")
            ticks = sorted({float(x) for xs, _ in series.values() for x in xs})
            ax.set_xticks(ticks, labels=[f"{t:g}" for t in ticks])
            ax.minorticks_off()
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, color="0.9")
        if series or hlines:
            ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)
    return True


def timeline(path: str, tracks: Dict[str, List[Tuple[float, float, str]]], title: str = "",
             unit: str = "ms", width: int = 1200, row_height: int = 36) -> bool:
    """Draw spans (start, end, label) on named horizontal tracks sharing one time axis; False if skipped."""
    plt = _pyplot(path)
    if plt is None:
        return False
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    names = list(tracks)
    height = max(2.0, (row_height * len(names) + 120) / 100)
    fig, ax = plt.subplots(figsize=(width / 100, height))
    try:
        colors: Dict[str, Any] = {}
        cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for row, name in enumerate(names):
            by_label: Dict[str, List[Tuple[float, float]]] = {}
            for start, end, label in tracks[name]:
                by_label.setdefault(label, []).append((start, max(end - start, 0.0)))
            for label, spans in by_label.items():
                color = colors.setdefault(label, cycle[len(colors) % len(cycle)])
                # A thin darker edge keeps back-to-back spans (one op after another) apart and still
                # shows a span narrower than a pixel (a white edge would erase it).
                edge = tuple(0.6 * c for c in to_rgb(color))
                ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=color, edgecolor=edge, linewidth=0.5)
        ax.set_yticks(range(len(names)), labels=names)
        ax.set_ylim(len(names) - 0.5, -0.5)  # first track on top, as in a trace viewer
        ax.set_xlabel(unit)
        ax.set_title(title)
        ax.grid(True, axis="x", color="0.9")
        ax.set_axisbelow(True)
        if colors:
            ax.legend(handles=[Patch(color=c, label=l) for l, c in colors.items()], loc="upper center",
                      bbox_to_anchor=(0.5, -0.18 if len(names) > 4 else -0.35), ncol=len(colors),
                      fontsize="small", frameon=False)
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)
    return True


def pipeline_schedule(path: str, trace: Any, title: str = "") -> bool:
    """Draw the pipeline stages of a Chrome trace (a dict, or a file from export_chrome_trace /
    merge_chrome_traces): one row per rank, each microbatch's forward and backward as a box labelled with the
    microbatch, blue for forwards and orange for backwards (darker for a rank's later stages); the gaps are the
    bubble. Returns False if skipped, raises if the trace has no pipeline spans."""
    import json

    if isinstance(trace, str):
        with open(trace) as f:
            trace = json.load(f)
    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "pipeline"]
    if not spans:
        raise ValueError("pipeline_schedule: the trace has no pipeline stage spans (profile a schedule.step())")
    plt = _pyplot(path)
    if plt is None:
        return False
    from matplotlib.patches import Patch

    t0 = min(e["ts"] for e in spans)
    ranks = sorted({e["pid"] for e in spans})
    stages = sorted({e["args"]["stage"] for e in spans})
    per_rank = max(sum(1 for s in stages if any(e["pid"] == r and e["args"]["stage"] == s for e in spans))
                   for r in ranks)
    blues, oranges = plt.get_cmap("Blues"), plt.get_cmap("Oranges")

    def shade(cmap: Any, stage: int) -> Any:
        # A rank's k-th stage (stage // ranks) gets the k-th of `per_rank` shades, light to dark.
        k = stage // len(ranks)
        return cmap(0.45 + 0.4 * k / max(1, per_rank - 1))

    end = max(e["ts"] + e["dur"] for e in spans)
    fig, ax = plt.subplots(figsize=(12, max(1.6, 0.5 * len(ranks) + 1.2)))
    try:
        for e in spans:
            row = ranks.index(e["pid"])
            start, dur = (e["ts"] - t0) / 1e3, e["dur"] / 1e3
            a = e["args"]
            color = shade(blues if a["kind"] == "fwd" else oranges, a["stage"])
            ax.broken_barh([(start, dur)], (row - 0.4, 0.8), facecolors=color, edgecolor="white", linewidth=0.6)
            if dur > (end - t0) / 1e3 / 150:
                ax.text(start + dur / 2, row, str(a["microbatch"]), ha="center", va="center", fontsize=7)
        ax.set_yticks(range(len(ranks)), labels=[f"rank {r}" for r in ranks])
        ax.set_ylim(len(ranks) - 0.5, -0.5)
        ax.set_xlabel("ms")
        ax.set_title(title)
        ax.grid(True, axis="x", color="0.9")
        ax.set_axisbelow(True)
        ax.legend(handles=[Patch(color=shade(blues, 0), label="forward"), Patch(color=shade(oranges, 0),
                                                                                 label="backward")],
                  loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small", frameon=False)
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)
    return True
