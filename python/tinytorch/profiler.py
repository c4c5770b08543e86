"""tinytorch.profiler: forward ops, backward nodes, DDP bucket launches and collectives (DDP's all-reduces,
FSDP's all-gathers and reduce-scatters) on one clock.

    with tinytorch.profiler.profile() as prof:
        loss = model(x).sum(); loss.backward()
    prof.export_chrome_trace("trace.json")      # open in https://ui.perfetto.dev or chrome://tracing

Every event is a span on CLOCK_MONOTONIC (the engine's clock and time.monotonic_ns()), so traces of
ranks on one host line up. Forward ops are eager: an op's span runs from the previous event recorded on
its thread to the moment its autograd node is recorded, which covers the op's compute and the Python
between ops. Only ops recorded into the autograd graph (grad enabled, an input requiring grad) appear.
"""
from __future__ import annotations

import bisect
import json
import os
import re
import threading
import time
from typing import Any, Dict, List, Optional

from . import _C
from ._ops import _common

TRACK_FORWARD = "forward ops"
TRACK_BACKWARD = "autograd engine"
TRACK_DDP = "DDP buckets"
TRACK_COMM = "collectives"  # DDP all-reduces, FSDP all-gathers and reduce-scatters
TRACK_USER = "record_function"
TRACK_PIPELINE = "pipeline stages"  # each stage's microbatch forwards and backwards (distributed.pipelining)

_active: Optional["profile"] = None


class ProfilerActivity:
    """Accepted for PyTorch compatibility: tinytorch records host-side spans whichever is asked for."""

    CPU = "cpu"
    CUDA = "cuda"


class Event:
    """One span: name, category, start and end in monotonic ns, track, thread, rank and extra args."""

    __slots__ = ("name", "cat", "start_ns", "end_ns", "track", "thread", "rank", "args")

    def __init__(self, name: str, cat: str, start_ns: int, end_ns: int, track: str, thread: int, rank: int,
                 args: Optional[Dict[str, Any]] = None) -> None:
        self.name, self.cat, self.start_ns, self.end_ns = name, cat, int(start_ns), int(end_ns)
        self.track, self.thread, self.rank, self.args = track, thread, rank, args or {}

    @property
    def duration_ms(self) -> float:
        """Span length in milliseconds."""
        return (self.end_ns - self.start_ns) / 1e6

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {self.cat}, {self.duration_ms:.3f} ms, track={self.track!r})"


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _forward_name(node_name: str) -> str:
    """'NativeLayerNormBackward0' -> 'aten::native_layer_norm' (PyTorch's profiler names forward ops so)."""
    base = re.sub(r"Backward\d*$", "", node_name)
    return "aten::" + _CAMEL.sub("_", base).lower() if base else node_name


def _rank() -> int:
    try:
        from . import distributed as dist

        if dist.is_initialized():
            return dist.get_rank()
    except Exception:  # noqa: BLE001 - profiling works without the comm layer
        pass
    return int(os.environ.get("RANK", "0"))


class profile:
    """Context manager that records events while active; `events()` and `export_chrome_trace(path)` after."""

    def __init__(self, activities: Any = None, record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, on_trace_ready: Any = None, record_forward: bool = True,
                 record_backward: bool = True) -> None:
        self.record_forward, self.record_backward = record_forward, record_backward
        self.on_trace_ready = on_trace_ready
        self._events: List[Event] = []
        self._fwd: List[tuple] = []
        self._engine: List[tuple] = []
        self._lock = threading.Lock()
        self._rank = 0
        self.start_ns = self.end_ns = 0
        self._enabled = False

    # ------------------------------------------------------------------ recording
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Begin recording (engine node spans, forward ops, DDP events)."""
        global _active
        if _active is not None:
            raise RuntimeError("another tinytorch.profiler.profile is already active")
        self._rank = _rank()
        self.start_ns = time.monotonic_ns()
        _active = self
        self._enabled = True
        if self.record_backward:
            _C._profiler_take()  # drop spans left from an earlier session
            _C._profiler_enable(True)
        if self.record_forward:
            _common._profile_op = self._on_op

    def stop(self) -> None:
        """Stop recording and collect the engine's spans."""
        global _active
        if not self._enabled:
            return
        self._enabled = False
        if self.record_forward:
            _common._profile_op = None
        if self.record_backward:
            _C._profiler_enable(False)
            self._engine.extend(_C._profiler_take())
        self.end_ns = time.monotonic_ns()
        _active = None
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _on_op(self, name: str) -> None:
        now = time.monotonic_ns()
        tid = threading.get_ident()
        self._fwd.append((name, now, tid))

    def _add_event(self, name: str, cat: str, start_ns: int, end_ns: int, track: str,
                   args: Optional[Dict[str, Any]] = None, thread: Optional[int] = None) -> None:
        """Record a span (used by DDP for bucket launches and all-reduces, and by record_function)."""
        ev = Event(name, cat, start_ns, end_ns, track, threading.get_ident() if thread is None else thread,
                   self._rank, args)
        with self._lock:
            self._events.append(ev)

    def step(self) -> None:
        """Mark a step boundary (no forward op span reaches back across it)."""
        self._add_event("step", "mark", time.monotonic_ns(), time.monotonic_ns(), TRACK_USER)

    # ------------------------------------------------------------------ results
    def events(self) -> List[Event]:
        """All recorded events, sorted by start time."""
        out = list(self._events)
        for name, start, end, tid in self._engine:
            out.append(Event(name, "backward", start, end, TRACK_BACKWARD, tid, self._rank))
        # A forward op starts where the last event on its thread ended (eager ops have no recorded start).
        bounds: Dict[int, List[int]] = {}
        for e in out:
            if e.track != TRACK_COMM:
                bounds.setdefault(e.thread, []).append(e.end_ns)
                bounds[e.thread].append(e.start_ns)
        for v in bounds.values():
            v.sort()
        prev: Dict[int, int] = {}
        for name, t, tid in self._fwd:
            start = max(prev.get(tid, self.start_ns), self.start_ns)
            b = bounds.get(tid)
            if b:
                k = bisect.bisect_left(b, t)
                if k > 0:
                    start = max(start, b[k - 1])
            out.append(Event(_forward_name(name), "forward", start, t, TRACK_FORWARD, tid, self._rank,
                             {"node": name}))
            prev[tid] = t
        out.sort(key=lambda e: (e.start_ns, -e.end_ns))
        return out

    def key_averages(self) -> "_KeyAverages":
        """Per-name totals: count, total and mean milliseconds."""
        return _KeyAverages(self.events())

    def export_chrome_trace(self, path: str) -> None:
        """Write Chrome trace JSON (ph 'X' spans; pid = rank, tid = track) that Perfetto opens."""
        trace = chrome_trace(self.events())
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(trace, f)
        os.replace(tmp, path)


_TRACK_ORDER = [TRACK_USER, TRACK_PIPELINE, TRACK_FORWARD, TRACK_BACKWARD, TRACK_DDP, TRACK_COMM]


def chrome_trace(events: List[Event]) -> Dict[str, Any]:
    """Chrome trace dict for events (of one or several ranks): one process per rank, one thread per track."""
    tids: Dict[tuple, int] = {}
    names: Dict[tuple, str] = {}
    threads = {}
    for e in events:
        threads.setdefault((e.rank, e.track), set()).add(e.thread)
    for (rank, track), ths in sorted(threads.items(), key=lambda kv: (kv[0][0], _TRACK_ORDER.index(kv[0][1])
                                                                    if kv[0][1] in _TRACK_ORDER else 99)):
        for k, th in enumerate(sorted(ths)):
            key = (rank, track, th if len(ths) > 1 else None)
            tids[key] = len([1 for kk in tids if kk[0] == rank]) + 1
            names[key] = track if len(ths) == 1 else f"{track} (thread {k})"
    out: List[Dict[str, Any]] = []
    ranks = sorted({e.rank for e in events})
    for r in ranks:
        out.append({"name": "process_name", "ph": "M", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}})
    for key, tid in tids.items():
        out.append({"name": "thread_name", "ph": "M", "pid": key[0], "tid": tid, "args": {"name": names[key]}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": key[0], "tid": tid, "args": {"sort_index": tid}})
    for e in events:
        key = (e.rank, e.track, e.thread if (e.rank, e.track, e.thread) in tids else None)
        out.append({"name": e.name, "cat": e.cat, "ph": "X", "ts": e.start_ns / 1e3,
                    "dur": max(e.end_ns - e.start_ns, 0) / 1e3, "pid": e.rank, "tid": tids[key], "args": e.args})
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def merge_chrome_traces(paths: List[str], out_path: str) -> None:
    """Combine per-rank trace files (same host, same clock) into one file."""
    events: List[Any] = []
    for p in paths:
        with open(p) as f:
            events.extend(json.load(f)["traceEvents"])
    tmp = f"{out_path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    os.replace(tmp, out_path)


class _KeyAverages(list):
    def __init__(self, events: List[Event]) -> None:
        agg: Dict[tuple, List[float]] = {}
        for e in events:
            agg.setdefault((e.name, e.cat), []).append(e.duration_ms)
        super().__init__(sorted(((n, c, len(v), sum(v)) for (n, c), v in agg.items()), key=lambda r: -r[3]))

    def table(self, sort_by: Optional[str] = None, row_limit: int = 30) -> str:
        """A text table: name, category, calls, total ms, mean ms."""
        lines = [f"{'name':40} {'kind':9} {'calls':>6} {'total ms':>10} {'mean ms':>9}"]
        for name, cat, n, total in self[:row_limit]:
            lines.append(f"{name[:40]:40} {cat:9} {n:6d} {total:10.3f} {total / n:9.3f}")
        return "\n".join(lines)


class record_function:
    """Context manager (or decorator) adding a named span to the active profile."""

    def __init__(self, name: str, args: Optional[str] = None) -> None:
        self.name = name
        self._start = 0

    def __enter__(self) -> "record_function":
        self._start = time.monotonic_ns()
        return self

    def __exit__(self, *exc: Any) -> None:
        prof = _active
        if prof is not None:
            prof._add_event(self.name, "user", self._start, time.monotonic_ns(), TRACK_USER)

    def __call__(self, fn: Any) -> Any:
        import functools

        @functools.wraps(fn)
        def wrapped(*a: Any, **k: Any) -> Any:
            with record_function(self.name):
                return fn(*a, **k)

        return wrapped


__all__ = ["profile", "record_function", "ProfilerActivity", "Event", "chrome_trace", "merge_chrome_traces"]


def timeline_png(trace, path: str, title: str = "") -> bool:
    """Draw a Chrome trace (a dict, or the path of a file written by export_chrome_trace /
    merge_chrome_traces) as a PNG with matplotlib: one row per rank and track, every span on one time
    axis in ms. Returns False (after one line on stderr) when matplotlib is not installed."""
    from .utils.plot import timeline
    if isinstance(trace, str):
        with open(trace) as f:
            trace = json.load(f)
    events = trace["traceEvents"]
    track_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                   if e.get("ph") == "M" and e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    if not spans:
        raise ValueError("timeline_png: the trace has no spans")
    t0 = min(e["ts"] for e in spans)
    rows: Dict[tuple, list] = {}
    for e in spans:
        key = (e["pid"], e["tid"])
        label = track_names.get(key, str(e["tid"]))
        rows.setdefault(key, []).append(((e["ts"] - t0) / 1e3, (e["ts"] + e["dur"] - t0) / 1e3, label))
    order = sorted(rows, key=lambda k: (k[0], _TRACK_ORDER.index(track_names.get(k)) if track_names.get(k)
                                        in _TRACK_ORDER else 99, k[1]))
    tracks = {f"rank {pid} {track_names.get((pid, tid), tid)}": rows[(pid, tid)] for pid, tid in order}
    return timeline(path, tracks, title=title, unit="ms")
