"""benchmarks/ops.py on a quarter-million elements (nothing about speed is asserted): every op of the table runs,
at two threads each one splits its work over the pool, and PyTorch's figure stands beside it when importable."""
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ops_table_runs_every_op_on_the_pool(tmp_path):
    out = tmp_path / "ops.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "ops.py"), "--threads", "2", "--reps", "1",
                          "--numel", str(1 << 18), "--json", str(out)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads(out.read_text())["threads"]["2"]
    assert len(rows) == 24 and "group_norm fwd+bwd" in rows and "gather(-1) fwd+bwd" in rows and "to(bfloat16)" in rows
    assert {op for op, r in rows.items() if r["regions"] < 1} == set()
    assert all(r["tinytorch_ms"] > 0 for r in rows.values())
    if importlib.util.find_spec("torch") is not None:
        assert all(r["torch_ms"] > 0 for r in rows.values())
    assert "group_norm fwd+bwd" in res.stdout
