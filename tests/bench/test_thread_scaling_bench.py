"""benchmarks/thread_scaling.py on one block of W2 (nothing about speed is asserted): the ops that take the most
time are listed with their time at 1 and 2 threads, and the whole step of each library importable."""
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_thread_scaling_lists_ops_and_the_step(tmp_path):
    out = tmp_path / "scaling.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "thread_scaling.py"), "--workload", "W2",
                          "--rounds", "1", "--block", "1", "--top", "4", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(out.read_text())
    assert len(result["ops"]) == 4 and result["ops"][0]["ms_1"] >= result["ops"][-1]["ms_1"] > 0
    assert any(r["op"] == "AddmmBackward0" for r in result["ops"])  # W2's linear layers dominate its step
    libs = {"tinytorch"} | ({"torch"} if importlib.util.find_spec("torch") is not None else set())
    assert set(result["step"]) == libs and all(s["ms_1"] > 0 and s["ms_2"] > 0 for s in result["step"].values())
    assert "step, tinytorch" in res.stdout
