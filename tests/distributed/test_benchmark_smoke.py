"""The W4 benchmark runs end to end (tiny sizes, no timing asserted) and writes its JSON."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_collectives_benchmark_smoke(tmp_path):
    out = tmp_path / "w4.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "collectives.py"), "--nproc", "2", "--min-bytes", "65536",
           "--max-bytes", "131072", "--scale", "0.01", "--no-torch", "--json", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "busbw" in res.stdout and "transport: shm" in res.stdout
    report = json.loads(out.read_text())
    rows = report["tinytorch_ring"]["results"]["all_reduce"]
    assert [r["bytes"] for r in rows] == [65536, 131072]
    assert all(r["busbw_GBps"] > 0 for r in rows)
