"""tinytorch.profiler: forward ops, backward nodes, DDP bucket events, Chrome trace export."""
import json
import os
import sys

import pytest

import tinytorch
import tinytorch.nn as nn
from tinytorch import _C
from tinytorch import profiler
from tinytorch._ops import _common

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed"))
from dist_helpers import run_ranks  # noqa: E402


def _model():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def test_profile_records_forward_and_backward(tmp_path):
    m = _model()
    x = tinytorch.randn(5, 8)
    with profiler.profile() as prof:
        with profiler.record_function("my_forward"):
            loss = m(x).square().mean()
        loss.backward()
    evs = prof.events()
    fwd = [e for e in evs if e.cat == "forward"]
    bwd = [e for e in evs if e.cat == "backward"]
    names = {e.name for e in fwd}
    assert {"aten::addmm", "aten::relu"} <= names, names
    assert any(e.name == "AddmmBackward0" for e in bwd) and any("AccumulateGrad" in e.name for e in bwd)
    assert all(e.end_ns >= e.start_ns for e in evs)
    # Forward ops end before backward starts, and lie inside the record_function span.
    assert max(e.end_ns for e in fwd) <= min(e.start_ns for e in bwd)
    rf = [e for e in evs if e.name == "my_forward"]
    assert len(rf) == 1
    inside = [e for e in fwd if e.name in ("aten::addmm", "aten::relu")]
    assert all(rf[0].start_ns <= e.start_ns and e.end_ns <= rf[0].end_ns for e in inside)
    # Off after the context: no hook on the op path and no engine spans.
    assert _common._profile_op is None and profiler._active is None
    m(x).sum().backward()
    assert _C._profiler_take() == []
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(evs)
    assert all(e["pid"] == 0 and e["dur"] >= 0 and isinstance(e["tid"], int) for e in spans)
    track_names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"forward ops", "autograd engine", "record_function"} <= track_names
    table = prof.key_averages().table()
    assert "AddmmBackward0" in table


def test_nested_profiles_are_refused():
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already active"):
            profiler.profile().start()


def _ddp_profile(rank, world, port, path):
    import numpy as np

    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn as nn
    from tinytorch.nn.parallel import DistributedDataParallel as DDP
    from tinytorch.profiler import profile

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8))
    ddp = DDP(m, bucket_cap_mb=0.1)
    x = torch.from_numpy(np.random.default_rng(rank).standard_normal((16, 64)).astype(np.float32))
    ddp(x).sum().backward()
    with profile() as prof:
        ddp(x).sum().backward()
    prof.export_chrome_trace(f"{path}.{rank}.json")
    evs = prof.events()
    stats = ddp.last_step_stats
    dist.destroy_process_group()
    return {"events": [(e.name, e.cat, e.start_ns, e.end_ns, e.track, e.rank) for e in evs], "stats": stats}


def test_ddp_events_on_their_own_tracks(tmp_path):
    results = run_ranks(_ddp_profile, 2, str(tmp_path / "trace"), timeout=60)
    for rank, res in enumerate(results):
        evs, st = res["events"], res["stats"]
        comm = [e for e in evs if e[1] == "comm"]
        launches = [e for e in evs if e[1] == "ddp"]
        bwd = [e for e in evs if e[1] == "backward"]
        assert len(comm) == len(launches) == st["num_buckets"] > 1
        assert all(e[4] == profiler.TRACK_COMM and e[5] == rank for e in comm)
        # Buckets are all-reduced one after another, each ending after its launch; launches happen in backward.
        for (_, _, s, e, _, _), (_, _, ls, _, _, _) in zip(comm, launches):
            assert s >= ls and e >= s
        assert all(comm[k][3] <= comm[k + 1][2] for k in range(len(comm) - 1))
        assert min(b[2] for b in bwd) <= launches[0][2] <= max(b[3] for b in bwd)
        total = sum(e[3] - e[2] for e in comm) / 1e6
        assert abs(total - st["comm_ms"]) <= 0.05 * st["comm_ms"] + 0.01
        trace = json.loads((tmp_path / f"trace.{rank}.json").read_text())
        assert {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"} == {rank}
