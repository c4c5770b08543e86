"""DistributedDataParallel on real processes (loopback ring backend), against one process with the whole batch.

Each spawn runs many scenarios in one process group to keep the file fast on two cores.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from dist_helpers import run_ranks  # noqa: E402

B = 4          # per-rank batch
STEPS = 20
TINY_CAP_MB = 200 / (1024 * 1024)   # 200 bytes: the tiny MLP spreads over several buckets

SCENARIOS = {
    # name: (DDP kwargs, optimizer, micro-steps per step, comm hook, tolerance)
    "default": (dict(bucket_cap_mb=TINY_CAP_MB), "adamw", 1, None, 1e-5),
    "no_view": (dict(bucket_cap_mb=TINY_CAP_MB, gradient_as_bucket_view=False), "sgd", 1, None, 1e-5),
    "one_bucket": (dict(), "adamw", 1, None, 1e-5),
    "no_sync": (dict(bucket_cap_mb=TINY_CAP_MB), "sgd", 4, None, 1e-5),
    "unused": (dict(bucket_cap_mb=TINY_CAP_MB, find_unused_parameters=True), "adamw", 1, None, 1e-5),
    # A branch only rank 0 uses: the other ranks contribute zeros to its average.
    "partial": (dict(bucket_cap_mb=TINY_CAP_MB, find_unused_parameters=True), "adamw", 1, None, 1e-5),
    "static": (dict(bucket_cap_mb=TINY_CAP_MB, static_graph=True), "adamw", 1, None, 1e-5),
    "allreduce_hook": (dict(bucket_cap_mb=TINY_CAP_MB), "sgd", 1, "allreduce_hook", 1e-5),
    "fp16_hook": (dict(bucket_cap_mb=TINY_CAP_MB), "sgd", 1, "fp16_compress_hook", 2e-3),
    "bf16_hook": (dict(bucket_cap_mb=TINY_CAP_MB), "sgd", 1, "bf16_compress_hook", 2e-2),
}


def _mlp(torch, with_spare: bool, with_branch: bool = False):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4)
            if with_spare:
                self.spare = nn.Linear(4, 4)  # never used in forward
            if with_branch:
                self.branch = nn.Linear(4, 4)

        def forward(self, x, use_branch: bool = False):
            out = self.fc2(self.fc1(x).relu())
            return out + self.branch(out) if use_branch else out

    return MLP()


def _data(step: int, micro: int, n: int):
    rng = np.random.default_rng(1000 * step + micro)
    return rng.standard_normal((n, 8)).astype(np.float32), rng.integers(0, 4, n)


def _optimizer(torch, kind: str, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)


def _state(model) -> dict:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _reference(name: str, world: int) -> dict:
    """One process, batch world*B per micro-step (the micro-steps' mean losses averaged)."""
    import tinytorch as torch
    import tinytorch.nn  # noqa: F401

    kwargs, opt_kind, micro, _, _ = SCENARIOS[name]
    torch.manual_seed(100)
    model = _mlp(torch, name == "unused", name == "partial")
    opt = _optimizer(torch, opt_kind, model.parameters())
    F = torch.nn.functional
    for step in range(STEPS):
        opt.zero_grad()
        for m in range(micro):
            x, y = _data(step, m, world * B)
            if name == "partial":
                loss = sum(F.cross_entropy(model(torch.from_numpy(x[r * B:(r + 1) * B]), use_branch=(r == 0)),
                                           torch.from_numpy(y[r * B:(r + 1) * B])) for r in range(world)) / world
            else:
                loss = F.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y)) / micro
            loss.backward()
        opt.step()
    return _state(model)


def _train_scenarios(rank: int, world: int, port: int, names):
    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn  # noqa: F401
    from tinytorch.nn.parallel import DistributedDataParallel as DDP
    from tinytorch.nn.parallel.comm_hooks import default_hooks

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    F = torch.nn.functional
    out = {}
    for name in names:
        kwargs, opt_kind, micro, hook, _ = SCENARIOS[name]
        torch.manual_seed(100 + rank)  # different on every rank: DDP must broadcast rank 0's weights
        model = _mlp(torch, name == "unused", name == "partial")
        ddp = DDP(model, **kwargs)
        if hook is not None:
            ddp.register_comm_hook(None, getattr(default_hooks, hook))
        initial_buckets = ddp.reducer.bucket_indices()
        opt = _optimizer(torch, opt_kind, ddp.parameters())
        stats = []
        for step in range(STEPS):
            opt.zero_grad()
            for m in range(micro):
                x, y = _data(step, m, world * B)
                xs, ys = torch.from_numpy(x[rank * B:(rank + 1) * B]), torch.from_numpy(y[rank * B:(rank + 1) * B])
                if m < micro - 1:
                    with ddp.no_sync():
                        (F.cross_entropy(ddp(xs), ys) / micro).backward()
                elif name == "partial":
                    F.cross_entropy(ddp(xs, use_branch=(rank == 0)), ys).backward()
                else:
                    (F.cross_entropy(ddp(xs), ys) / micro).backward()
            stats.append(ddp.last_step_stats)
            opt.step()
        grads_are_views = all(
            p.grad is not None and np.shares_memory(p.grad._data, ddp.reducer.buckets[ddp.reducer.param_bucket[i][0]]
                                                    .buffer._data)
            for i, p in enumerate(ddp.reducer.params) if "spare" not in ddp.reducer.names[i])
        out[name] = {
            "state": _state(model),
            "initial_buckets": initial_buckets,
            "final_buckets": ddp.reducer.bucket_indices(),
            "rebuilt": ddp.reducer.has_rebuilt,
            "spare_grad_none": [model.spare.weight.grad is None, model.spare.bias.grad is None]
            if name == "unused" else None,
            "stats": stats[-1],
            "grads_are_views": grads_are_views,
            "state_dict_keys": list(ddp.state_dict().keys()),
        }
    dist.destroy_process_group()
    return out


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


def _check(results, world: int, names) -> None:
    for name in names:
        tol = SCENARIOS[name][4]
        ref = _reference(name, world)
        for rank, res in enumerate(results):
            got = res[name]["state"]
            assert set(got) == set(ref)
            for k in ref:
                d = _rel_diff(got[k], ref[k])
                assert d <= tol, f"{name}, world {world}, rank {rank}: {k} differs by {d:.2e} relative (tol {tol})"
            # Every rank ends bit-identical: they apply the same reduced gradients.
            for k in ref:
                np.testing.assert_array_equal(got[k], results[0][name]["state"][k])


ALL = list(SCENARIOS)


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_matches_single_process(world):
    names = ALL if world == 2 else ["default", "no_view", "no_sync", "unused", "partial", "fp16_hook"]
    results = run_ranks(_train_scenarios, world, names, timeout=150)
    _check(results, world, names)
    r0 = results[0]
    # Buckets were rebuilt from the gradient-arrival order (weight before bias within a layer), on every rank alike.
    assert r0["default"]["rebuilt"] and r0["default"]["final_buckets"] != r0["default"]["initial_buckets"]
    assert all(r["default"]["final_buckets"] == r0["default"]["final_buckets"] for r in results)
    assert len(r0["default"]["final_buckets"]) > 2
    assert not r0["unused"]["rebuilt"]  # dynamic find_unused_parameters never rebuilds (as PyTorch)
    # The unused parameter is unused on every rank: its .grad stays None and AdamW leaves it alone.
    assert all(r["unused"]["spare_grad_none"] == [True, True] for r in results)
    assert r0["default"]["grads_are_views"] and r0["unused"]["grads_are_views"]
    # The branch only rank 0 uses is globally used: every rank ends with its averaged gradient in the bucket.
    assert all(r["partial"]["grads_are_views"] for r in results)
    assert not r0["no_view"]["grads_are_views"]
    assert r0["default"]["state_dict_keys"][0].startswith("module.")
    st = r0["default"]["stats"]
    assert st["num_buckets"] == len(r0["default"]["final_buckets"])
    assert st["comm_ms"] > 0 and 0 <= st["overlapped_ms"] <= st["comm_ms"] + 1e-9
    assert 0.0 <= st["overlap_fraction"] <= 1.0


def _shaped_models(rank: int, world: int, port: int):
    import models
    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn  # noqa: F401
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    out = {}
    for kind in ("W2", "W3"):
        torch.manual_seed(7)
        model = _small(torch, models, kind)
        ddp = DDP(model, bucket_cap_mb=0.05)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        for step in range(5):
            x, y = _small_batch(kind, step, world * 2)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(ddp(torch.from_numpy(x[rank * 2:(rank + 1) * 2])),
                                              torch.from_numpy(y[rank * 2:(rank + 1) * 2].reshape(-1))).backward()
            opt.step()
        out[kind] = _state(model)
    dist.destroy_process_group()
    return out


def _small(torch, models, kind):
    nn = torch.nn
    if kind == "W2":
        return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return models.gpt(torch, V=256, T=16, d=32, h=2, L=2)


def _small_batch(kind, step, n):
    rng = np.random.default_rng(step)
    if kind == "W2":
        return rng.standard_normal((n, 784), dtype=np.float32), rng.integers(0, 10, n)
    return rng.integers(0, 256, (n, 16)), rng.integers(0, 256, (n, 16))


def test_ddp_w2_w3_shaped_models():
    import models
    import tinytorch as torch
    import tinytorch.nn  # noqa: F401

    results = run_ranks(_shaped_models, 2, timeout=120)
    for kind in ("W2", "W3"):
        torch.manual_seed(7)
        model = _small(torch, models, kind)
        # SGD: AdamW would turn float-rounding noise in exactly-zero gradients (the key bias) into lr-sized steps.
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for step in range(5):
            x, y = _small_batch(kind, step, 4)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y.reshape(-1))).backward()
            opt.step()
        ref = _state(model)
        for rank, res in enumerate(results):
            for k in ref:
                d = _rel_diff(res[kind][k], ref[k])
                assert d <= 1e-5, f"{kind} rank {rank}: {k} differs by {d:.2e} relative"


def _error_cases(rank: int, world: int, port: int):
    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn  # noqa: F401
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    F = torch.nn.functional
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
    msgs = {}

    # 1. Different models on different ranks: every rank gets an error naming rank 1 and the parameter.
    nn = torch.nn
    bad = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4 if rank == 0 else 5))
    try:
        DDP(bad, process_group=dist.new_group())
        msgs["mismatch"] = None
    except RuntimeError as e:
        msgs["mismatch"] = str(e)

    # 2. A parameter that gets no gradient, without find_unused_parameters: the next iteration raises.
    model = _mlp(torch, with_spare=True)
    ddp = DDP(model, process_group=dist.new_group())
    F.cross_entropy(ddp(x), y).backward()
    try:
        ddp(x)
        msgs["unfinished"] = None
    except RuntimeError as e:
        msgs["unfinished"] = str(e)

    # 3. A parameter used outside forward under find_unused_parameters=True: marked unused, then its hook fires.
    model = _mlp(torch, with_spare=True)
    ddp = DDP(model, process_group=dist.new_group(), find_unused_parameters=True)
    loss = F.cross_entropy(ddp(x), y) + model.spare.weight.square().sum()
    try:
        loss.backward()
        msgs["twice"] = None
    except RuntimeError as e:
        msgs["twice"] = str(e)
    return msgs


def test_ddp_errors():
    results = run_ranks(_error_cases, 2, timeout=60)
    for rank, msgs in enumerate(results):
        m = msgs["mismatch"]
        assert m is not None and "DDP expects same model across all ranks" in m and "Rank 1" in m, m
        assert "'1.weight'" in m and "[5, 16]" in m and "[4, 16]" in m, m
        m = msgs["unfinished"]
        assert m is not None and m.startswith("Expected to have finished reduction in the prior iteration before "
                                              "starting a new one"), m
        assert "find_unused_parameters=True" in m
        assert f"did not receive grad for rank {rank}: spare.weight, spare.bias" in m
        m = msgs["twice"]
        assert m is not None and "Expected to mark a variable ready only once" in m, m
        assert "spare.weight" in m, m


def test_bucket_assignment_by_size():
    import tinytorch as torch
    from tinytorch.nn.parallel.reducer import compute_bucket_assignment_by_size

    params = [torch.zeros(256) for _ in range(6)] + [torch.zeros(64, dtype=torch.float64)]
    # 1 KiB each; limits 1 KiB first then 2 KiB: float32 buckets [5], [4, 3], [2, 1], [0]; float64 alone.
    got = compute_bucket_assignment_by_size(params, [1024, 2048], list(reversed(range(7))))
    assert got == [[6], [5], [4, 3], [2, 1], [0]]


def test_train_gpt_example_two_ranks(tmp_path):
    """The main job: examples/train_gpt.py wraps its model in DDP when WORLD_SIZE > 1 (ranks started by hand)."""
    import subprocess

    from dist_helpers import free_port

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        cmd = [sys.executable, os.path.join(root, "examples", "train_gpt.py"), "--minutes", "0.2", "--eval-every", "5",
               "--steps", "6", "--width", "64", "--layers", "2", "--context", "32", "--batch-size", "4",
               "--max-bytes", "200000", "--eval-batches", "1", "--sample-bytes", "20", "--out", str(tmp_path / "run")]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(out)
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}:\n{out}"
    assert "2 rank(s)" in outs[0] and "done:" in outs[0], outs[0]


def _buffers_and_hooks(rank: int, world: int, port: int):
    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn as nn
    from tinytorch.nn.parallel import DistributedDataParallel as DDP
    from tinytorch.nn.parallel.comm_hooks import default_hooks

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    out = {}

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)
            self.register_buffer("scale", torch.full((4,), float(rank + 1)))
            self.register_buffer("count", torch.tensor([rank], dtype=torch.int64))

        def forward(self, x):
            return self.fc(x) * self.scale

    net = Net()
    ddp = DDP(net, bucket_cap_mb=100 / 2 ** 20)
    out["after_init"] = (net.scale.tolist(), net.count.tolist())
    # Rank-local buffer changes are overwritten by rank 0's at the start of every forward.
    net.scale.fill_(10.0 + rank)
    ddp(torch.randn(2, 8))
    out["after_forward"] = net.scale.tolist()

    seen = []

    def recording_hook(state, bucket):
        params = bucket.parameters()
        seen.append((bucket.index(), bucket.is_last(), bucket.buffer().numel(), sum(p.numel() for p in params),
                     [tuple(g.shape) for g in bucket.gradients()] == [tuple(p.shape) for p in params]))
        return default_hooks.allreduce_hook(state, bucket)

    ddp2 = DDP(nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 4)), bucket_cap_mb=100 / 2 ** 20)
    ddp2.register_comm_hook(None, recording_hook)
    try:
        ddp2.register_comm_hook(None, recording_hook)
        out["second_hook"] = None
    except RuntimeError as e:
        out["second_hook"] = str(e)
    ddp2(torch.randn(2, 8)).sum().backward()
    out["hook_calls"] = seen
    out["num_buckets"] = ddp2.last_step_stats["num_buckets"]
    dist.destroy_process_group()
    return out


def test_ddp_buffers_and_comm_hook_bucket_api():
    results = run_ranks(_buffers_and_hooks, 2, timeout=60)
    for res in results:
        assert res["after_init"] == ([1.0] * 4, [0])
        assert res["after_forward"] == [10.0] * 4
        assert res["second_hook"] == "register_comm_hook or register_builtin_comm_hook can only be called once."
        calls = res["hook_calls"]
        assert [c[0] for c in calls] == list(range(res["num_buckets"])) and res["num_buckets"] > 1
        assert [c[1] for c in calls] == [False] * (len(calls) - 1) + [True]
        assert all(c[2] == c[3] and c[4] for c in calls)


def _timeout_case(rank: int, world: int, port: int):
    import time

    import tinytorch as torch
    import tinytorch.distributed as dist
    import tinytorch.nn as nn
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=3)
    ddp = DDP(nn.Linear(8, 4))
    if rank == 1:
        time.sleep(6)  # never runs backward: rank 0's bucket all-reduce cannot finish
        return None
    t0 = time.monotonic()
    try:
        ddp(torch.randn(2, 8)).sum().backward()
        return None
    except RuntimeError as e:
        return type(e).__name__, str(e), time.monotonic() - t0


def test_ddp_wait_times_out_naming_rank_and_bucket():
    res = run_ranks(_timeout_case, 2, timeout=60)[0]
    assert res is not None, "backward returned although rank 1 never reduced"
    name, msg, waited = res
    assert name == "DistTimeoutError", (name, msg)
    assert "rank 0" in msg and "all-reduce of gradient bucket 0" in msg, msg
    assert waited < 15
