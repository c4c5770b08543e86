"""Charts go through matplotlib when it is installed and are skipped with one line, never a crash,
when it is not; the profiler's timeline_png draws a real trace."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tinytorch as torch
from tinytorch import profiler
from tinytorch.utils.plot import line_chart, timeline

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _png_size(path: str) -> tuple:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC, "not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_line_chart_and_timeline_write_pngs(tmp_path):
    pytest.importorskip("matplotlib")  # the optional 'plot' extra
    loss = str(tmp_path / "loss.png")
    assert line_chart(loss, {"train": ([0, 10, 20], [5.5, 3.0, 2.2]), "validation": ([10, 20], [3.2, 2.5])},
                      title="loss", xlabel="step", ylabel="cross-entropy", hlines={"uniform": 5.55})
    assert _png_size(loss) == (900, 540)
    sweep = str(tmp_path / "sweep.png")
    assert line_chart(sweep, {"W1": ([1, 5, 25, 50], [9.0, 8.0, 8.5, 10.0])}, log_x=True)
    tl = str(tmp_path / "timeline.png")
    assert timeline(tl, {"rank 0 backward": [(0.0, 1.0, "backward node"), (1.2, 2.0, "backward node")],
                         "rank 0 all-reduce": [(0.5, 1.5, "bucket all-reduce")]}, title="step")
    w, h = _png_size(tl)
    assert w == 1200 and h > 100
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]  # written atomically


def test_timeline_png_from_a_profiler_trace(tmp_path):
    pytest.importorskip("matplotlib")
    x = torch.randn(8, 8, requires_grad=True)
    with profiler.profile() as prof:
        (x @ x).relu().sum().backward()
    trace = str(tmp_path / "trace.json")
    prof.export_chrome_trace(trace)
    png = str(tmp_path / "timeline.png")
    assert profiler.timeline_png(trace, png, title="one step")
    assert _png_size(png)[0] == 1200
    with pytest.raises(ValueError, match="no spans"):
        profiler.timeline_png({"traceEvents": []}, png)


def test_missing_matplotlib_skips_with_one_line(tmp_path):
    # A child interpreter where importing matplotlib fails, as on an install without the 'plot' extra.
    code = textwrap.dedent(f"""
        import sys
        sys.modules["matplotlib"] = None  # makes "import matplotlib" raise ImportError
        from tinytorch.utils.plot import line_chart, timeline, have_matplotlib
        assert not have_matplotlib()
        assert line_chart({str(tmp_path / 'a.png')!r}, {{"s": ([0, 1], [1, 0])}}) is False
        assert timeline({str(tmp_path / 'b.png')!r}, {{"t": [(0.0, 1.0, "x")]}}) is False
        print("carried on")
    """)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "carried on"
    lines = p.stderr.strip().splitlines()
    assert lines == [f"matplotlib is not installed: skipping {tmp_path / 'a.png'} (pip install 'tinytorch[plot]')",
                     f"matplotlib is not installed: skipping {tmp_path / 'b.png'} (pip install 'tinytorch[plot]')"]
    assert not os.listdir(tmp_path)
