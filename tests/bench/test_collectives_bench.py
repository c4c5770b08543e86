"""tinytorch-bench collectives on 2 real local ranks: nccl-tests' table, exact results, JSON, and busbw that
agrees with timing tinytorch.distributed.all_reduce directly."""
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "distributed"))
from dist_helpers import run_ranks  # noqa: E402


def _bench(*argv, timeout=240):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, "-m", "tinytorch.bench", "collectives", *argv], capture_output=True,
                         text=True, timeout=timeout, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def _direct(rank, world, port, nbytes, iters):
    """busbw of all_reduce timed by hand: mean of `iters` calls after a barrier, the slower rank's."""
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=60)
    buf = np.ones(nbytes // 4, np.float32)
    for _ in range(3):
        dist.all_reduce(buf)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    t = np.array([(time.perf_counter() - t0) / iters])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.destroy_process_group()
    return nbytes / t[0] / 1e9 * 2 * (world - 1) / world


def test_all_reduce_sweep_matches_a_direct_measurement(tmp_path):
    out = tmp_path / "sweep.json"
    text = _bench("--nproc", "2", "--op", "all_reduce", "--min-bytes", "1M", "--max-bytes", "4M", "--iters", "10",
                  "--warmup", "3", "--json", str(out))
    for col in ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"):
        assert col in text
    assert "Avg bus bandwidth" in text
    rows = json.loads(out.read_text())["rows"]
    assert [r["bytes"] for r in rows] == [1 << 20, 2 << 20, 4 << 20]
    for r in rows:
        assert set(r) >= {"op", "bytes", "count", "dtype", "time_us", "algbw_gbps", "busbw_gbps", "wrong"}
        assert r["wrong"] == 0 and r["dtype"] == "float" and r["count"] == r["bytes"] // 4
        assert r["busbw_gbps"] == r["algbw_gbps"]  # 2 (n-1) / n = 1 at n = 2
    direct = run_ranks(_direct, 2, 4 << 20, 10, timeout=120)[0]
    bench = rows[-1]["busbw_gbps"]
    # Other processes share the machine's cores: agree within a loose factor, not a tight tolerance.
    assert direct / 4 < bench < direct * 4, (bench, direct)


def test_every_op_is_exact_in_bfloat16(tmp_path):
    png = tmp_path / "sweep.png"
    text = _bench("--nproc", "2", "--op", "all", "--min-bytes", "4K", "--max-bytes", "16K", "--step-factor", "4",
                  "--iters", "2", "--warmup", "1", "--dtype", "bfloat16", "--plot", str(png))
    try:
        import matplotlib  # noqa: F401
        assert png.read_bytes()[:4] == b"\x89PNG"
    except ImportError:
        assert "matplotlib is not installed" in text
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"):
        assert f"# {op}" in text
    assert "Out of bounds values : 0 OK" in text


def test_three_ranks_bus_factors(tmp_path):
    out = tmp_path / "s.json"
    _bench("--nproc", "3", "--op", "all_reduce,all_gather,broadcast", "--min-bytes", "96K", "--max-bytes", "96K",
           "--iters", "2", "--warmup", "1", "--json", str(out))
    rows = {r["op"]: r for r in json.loads(out.read_text())["rows"]}
    assert abs(rows["all_reduce"]["busbw_gbps"] / rows["all_reduce"]["algbw_gbps"] - 4 / 3) < 1e-9
    assert abs(rows["all_gather"]["busbw_gbps"] / rows["all_gather"]["algbw_gbps"] - 2 / 3) < 1e-9
    assert rows["broadcast"]["busbw_gbps"] == rows["broadcast"]["algbw_gbps"]
    assert all(r["wrong"] == 0 and r["world"] == 3 for r in rows.values())


def test_bad_flags_name_the_problem():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, "-m", "tinytorch.bench", "collectives", "--op", "alltoall"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 2 and "argument --op: expected a comma-separated list of all_reduce" in res.stderr
    assert "got 'alltoall'" in res.stderr


def test_under_tinytorch_run_uses_the_launched_ranks(tmp_path):
    out = tmp_path / "s.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, "-m", "tinytorch.distributed.run", "--nproc-per-node", "2", "-m",
                          "tinytorch.bench", "collectives", "--op", "reduce_scatter", "--min-bytes", "64K",
                          "--max-bytes", "64K", "--iters", "2", "--json", str(out)],
                         capture_output=True, text=True, timeout=180, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("# reduce_scatter") == 1  # rank 0 prints, once
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["world"] == 2 and rows[0]["wrong"] == 0


def test_nproc_under_a_launcher_is_refused():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), RANK="0", WORLD_SIZE="1")
    res = subprocess.run([sys.executable, "-m", "tinytorch.bench", "collectives", "--nproc", "2"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode != 0 and "leave --nproc out" in res.stderr
