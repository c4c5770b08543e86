"""ZeroRedundancyOptimizer beside DistributedDataParallel on real processes (loopback ring backend), against one
process with the whole batch; partitions, per-rank state memory, state_dict consolidation and errors.

Each spawn runs several scenarios in one process group to keep the file fast on two cores.
"""
import os
import sys
from itertools import chain

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402

B = 3          # per-rank batch
STEPS = 6
MAX_NORM = 0.1  # small enough that clip_grad_norm_ rescales on every step (checked)
LR = 1e-2
RTOL = 1e-5


def _mlp(torch):
    nn = torch.nn
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


def _groups(model, split: bool = True):
    """Weights with weight decay, biases without (the usual two groups)."""
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    groups = [{"params": weights}, {"params": biases, "weight_decay": 0.0}]
    return groups if split else groups[:1]


def _data(step: int, n: int):
    rng = np.random.default_rng(500 + step)
    return rng.standard_normal((n, 8)).astype(np.float32), rng.integers(0, 4, n)


def _state(model) -> dict:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _state_bytes(state: dict) -> int:
    return int(sum(t._data.nbytes for s in state.values() for t in s.values() if hasattr(t, "_data")))


def _train(torch, model, opt, sched, rank: int, world: int, steps: int) -> list:
    """AdamW steps with clipping and a StepLR schedule; the last step goes through a closure."""
    F = torch.nn.functional
    norms = []
    for step in range(steps):
        x, y = _data(step, world * B)
        xs, ys = torch.from_numpy(x[rank * B:(rank + 1) * B]), torch.from_numpy(y[rank * B:(rank + 1) * B])

        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(model(xs), ys)
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)))
            return loss

        if step == steps - 1:
            loss = opt.step(closure)
            assert loss is not None and loss.dim() == 0, "step(closure) must return the closure's loss"
        else:
            closure()
            opt.step()
        sched.step()
    return norms


def _reference(world: int) -> dict:
    """One process, batch world*B, plain AdamW over the same groups."""
    import tinytorch as torch

    torch.manual_seed(7)
    model = _mlp(torch)
    opt = torch.optim.AdamW(_groups(model), lr=LR, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    # Same data and steps as the ranks (_train), with the whole world*B batch in one process.
    F = torch.nn.functional
    for step in range(STEPS):
        x, y = _data(step, world * B)
        xs, ys = torch.from_numpy(x), torch.from_numpy(y)
        opt.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        opt.step()
        sched.step()
    return {"state": _state(model), "opt_state_bytes": _state_bytes(opt.state),
            "lrs": [g["lr"] for g in opt.param_groups],
            "opt_sd": {k: {n: v.numpy().copy() for n, v in s.items()} for k, s in opt.state_dict()["state"].items()},
            "opt_groups": [{k: v for k, v in g.items() if k != "params"} for g in opt.state_dict()["param_groups"]]}


def _numel_lists(zero) -> list:
    """Per rank, per group: the numels of the parameters the partition gave it."""
    return [[[p.numel() for p in g["params"]] for g in groups] for groups in zero._partition_parameters()]


def _zero_run(rank: int, world: int, port: int, scenarios, tmpdir):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.optim import ZeroRedundancyOptimizer
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=60)
    out = {}
    keep = {}
    for name in scenarios:
        torch.manual_seed(7 if rank == 0 else 100 + rank)  # DDP must broadcast rank 0's weights
        model = _mlp(torch)
        ddp = DDP(model)
        zero = ZeroRedundancyOptimizer(_groups(model, split=name != "added_group"), torch.optim.AdamW,
                                       parameters_as_bucket_view=name == "bucket_view", lr=LR, weight_decay=0.1)
        if name == "added_group":
            before = _numel_lists(zero)
            zero.param_groups[0]["lr"] = 2 * LR  # a global-view change not yet pushed to the local optimizer
            zero.add_param_group(_groups(model)[1])
            assert zero.param_groups[0]["lr"] == 2 * LR, "add_param_group overwrote the global view"
            zero.param_groups[0]["lr"] = LR
            after = _numel_lists(zero)
            assert [b[0] for b in before] == [a[0] for a in after], "add_param_group moved existing parameters"
            assert len(zero.optim.param_groups) == 2 and zero.param_groups[1]["weight_decay"] == 0.0
        sched = torch.optim.lr_scheduler.StepLR(zero, step_size=2, gamma=0.5)
        norms = _train(torch, ddp, zero, sched, rank, world, STEPS)
        owned = {id(p) for g in zero.optim.param_groups for p in g["params"]}
        res = {
            "state": _state(model),
            "norms": norms,
            "partition": _numel_lists(zero),
            "state_bytes": _state_bytes(zero.optim.state),
            "state_only_owned": all(id(p) in owned for p in zero.optim.state),
            "wrapper_state_empty": len(zero.state) == 0,
            "lrs": [g["lr"] for g in zero.param_groups],
            "local_lrs": [g["lr"] for g in zero.optim.param_groups],
            "params_are_views": all(np.shares_memory(p._data, zero._buckets["cpu"].buffer) for p in model.parameters()),
        }
        out[name] = res
        keep[name] = (model, ddp, zero)
    out["memory"] = _memory_run(torch, ZeroRedundancyOptimizer)
    if "default" in keep and world == 2:
        out["state_dict"] = _state_dict_checks(torch, dist, rank, world, keep["default"], tmpdir)
    dist.destroy_process_group()
    return out


WIDTHS = [12, 16, 20, 16, 12, 16, 20, 16, 12]


def _memory_run(torch, ZeroRedundancyOptimizer) -> dict:
    """One AdamW step over a deeper MLP (16 parameters of mixed sizes): each rank's state bytes."""
    torch.manual_seed(3)
    layers = [torch.nn.Linear(a, b) for a, b in zip(WIDTHS[:-1], WIDTHS[1:])]
    params = [p for m in layers for p in m.parameters()]
    zero = ZeroRedundancyOptimizer(params, torch.optim.AdamW, lr=LR)
    for p in params:
        p.grad = torch.ones_like(p)
    zero.step()
    return {"state_bytes": _state_bytes(zero.optim.state), "numels": [p.numel() for p in params]}


def _check_memory(results, world: int) -> None:
    """Optimizer state memory per rank is about 1/world of the whole: Adam's moments exist only on the owner."""
    numels = results[0]["memory"]["numels"]
    total = sum(8 * n + 4 for n in numels)  # exp_avg + exp_avg_sq (float32) and a float32 step per parameter
    per_rank = [r["memory"]["state_bytes"] for r in results]
    assert sum(per_rank) == total
    # Greedy: no rank is further from total/world than one parameter's state.
    assert max(abs(b - total / world) for b in per_rank) <= 8 * max(numels) + 4
    assert max(per_rank) <= 1.15 * total / world, (per_rank, total)
    print(f"state bytes per rank at world {world}: {per_rank} (one process: {total}, total/world {total / world:.0f})")


def _state_dict_checks(torch, dist, rank, world, kept, tmpdir) -> dict:
    """consolidate_state_dict / state_dict / load_state_dict round trip, and the errors around them."""
    from tinytorch.distributed.optim import ZeroRedundancyOptimizer
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    model, ddp, zero = kept
    res = {}
    try:
        zero.state_dict()
        res["before_consolidate"] = None
    except RuntimeError as e:
        res["before_consolidate"] = str(e)
    zero.consolidate_state_dict(to=0)
    if rank == 0:
        sd = zero.state_dict()
        res["sd_state"] = {k: {n: v.numpy().copy() for n, v in s.items()} for k, s in sd["state"].items()}
        res["sd_groups"] = [{k: v for k, v in g.items() if k != "params"} for g in sd["param_groups"]]
        res["sd_group_params"] = [g["params"] for g in sd["param_groups"]]
        torch.save(sd, os.path.join(tmpdir, "zero_opt.pt"))
    else:
        try:
            zero.state_dict()
            res["other_rank_after_consolidate"] = None
        except RuntimeError as e:
            res["other_rank_after_consolidate"] = str(e)
    # Consolidating on another rank gives that rank the same dict.
    zero.consolidate_state_dict(to=1)
    if rank == 1:
        res["sd_state_on_1"] = {k: {n: v.numpy().copy() for n, v in s.items()}
                                for k, s in zero.state_dict()["state"].items()}
    dist.barrier()
    # A fresh optimizer on a copy of the model, loaded from the file, steps exactly like the original.
    sd = torch.load(os.path.join(tmpdir, "zero_opt.pt"))
    model2 = _mlp(torch)
    model2.load_state_dict(model.state_dict())
    ddp2 = DDP(model2)
    zero2 = ZeroRedundancyOptimizer(_groups(model2), torch.optim.AdamW, lr=123.0, weight_decay=0.5)
    zero2.load_state_dict(sd)
    res["loaded_lrs"] = [g["lr"] for g in zero2.optim.param_groups]
    res["loaded_wd"] = [g["weight_decay"] for g in zero2.optim.param_groups]
    res["loaded_state_bytes"] = _state_bytes(zero2.optim.state)
    res["orig_state_bytes"] = _state_bytes(zero.optim.state)
    F = torch.nn.functional
    x, y = _data(99, world * B)
    xs, ys = torch.from_numpy(x[rank * B:(rank + 1) * B]), torch.from_numpy(y[rank * B:(rank + 1) * B])
    for m, opt in ((ddp, zero), (ddp2, zero2)):
        opt.zero_grad()
        F.cross_entropy(m(xs), ys).backward()
        opt.step()
    res["resumed_equal"] = all(np.array_equal(a.detach().numpy(), b.detach().numpy())
                               for a, b in zip(model.parameters(), model2.parameters()))
    # A callable that does not build an Optimizer is refused.
    try:
        ZeroRedundancyOptimizer(list(model2.parameters()), lambda params, **kw: object(), lr=LR)
        res["non_optimizer"] = None
    except TypeError as e:
        res["non_optimizer"] = str(e)
    return res


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-12))


def _check_equivalence(results, world: int, names) -> dict:
    ref = _reference(world)
    worst = {}
    for name in names:
        worst[name] = 0.0
        for rank, res in enumerate(results):
            got = res[name]["state"]
            assert set(got) == set(ref["state"])
            for k in ref["state"]:
                d = _rel_diff(got[k], ref["state"][k])
                worst[name] = max(worst[name], d)
                assert d <= RTOL, f"{name}, world {world}, rank {rank}: {k} differs by {d:.2e} relative (tol {RTOL})"
                # Every rank ends bit-identical: the gathered parameters are the owners' values.
                np.testing.assert_array_equal(got[k], results[0][name]["state"][k])
            # The scheduler's lr is on the global view; the local optimizer picks it up at the next step (the
            # parameters matching the reference show each step used the scheduled lr).
            assert res[name]["lrs"] == pytest.approx(ref["lrs"])
            assert res[name]["local_lrs"] == pytest.approx([2 * lr for lr in ref["lrs"]])
            assert res[name]["state_only_owned"] and res[name]["wrapper_state_empty"]
            assert min(res[name]["norms"]) > MAX_NORM, "clipping must be active on every step"
        # The optimizer state is split: the ranks' shares add up to the single process's state.
        assert sum(r[name]["state_bytes"] for r in results) == ref["opt_state_bytes"]
    print(f"\nZeroRedundancyOptimizer vs one process, world {world}: max relative parameter difference "
          + ", ".join(f"{n} {d:.2e}" for n, d in worst.items()))
    return ref


def test_zero_matches_single_process_world2(tmp_path):
    names = ["default", "bucket_view", "added_group"]
    results = run_ranks(_zero_run, 2, names, str(tmp_path), timeout=150)
    ref = _check_equivalence(results, 2, names)
    # Greedy by size (largest first, to the emptiest rank), sizes counted across groups:
    # weights 256 -> r0, 128 -> r1, 64 -> r1; biases 16, 16, 4 -> r1 (192 < 256, 208 < 256, 224 < 256).
    assert results[0]["default"]["partition"] == [[[256], []], [[128, 64], [16, 16, 4]]]
    assert all(r[n]["partition"] == results[0]["default"]["partition"] for r in results for n in names)
    # State memory per rank: Adam's two moments for the owned elements (+ a 4-byte step per parameter).
    assert [r["default"]["state_bytes"] for r in results] == [256 * 8 + 4, (128 + 64 + 36) * 8 + 5 * 4]
    total = ref["opt_state_bytes"]
    for r in results:
        assert abs(r["default"]["state_bytes"] - total / 2) <= 0.1 * total
    _check_memory(results, 2)
    assert all(r["bucket_view"]["params_are_views"] for r in results)
    assert not any(r["default"]["params_are_views"] for r in results)

    sd0, sd1 = results[0]["state_dict"], results[1]["state_dict"]
    for s in (sd0, sd1):
        assert s["before_consolidate"] is not None and "has not been consolidated" in s["before_consolidate"]
        assert s["loaded_lrs"] == pytest.approx(ref["lrs"]) and s["loaded_wd"] == [0.1, 0.0]
        assert s["loaded_state_bytes"] == s["orig_state_bytes"]
        assert s["resumed_equal"]
        assert s["non_optimizer"] is not None and "Optimizer" in s["non_optimizer"]
    assert "consolidate_state_dict(to=1)" in sd1["other_rank_after_consolidate"]
    # The consolidated dict is PyTorch's format with global indices, equal to the one-process AdamW's.
    assert sd0["sd_group_params"] == [[0, 1, 2], [3, 4, 5]]
    assert set(sd0["sd_state"]) == set(ref["opt_sd"]) == set(range(6))
    for k, s in ref["opt_sd"].items():
        for n, v in s.items():
            if v.ndim:
                assert _rel_diff(sd0["sd_state"][k][n], v) <= RTOL, (k, n)
            else:
                assert sd0["sd_state"][k][n] == v, (k, n)  # the step count
            np.testing.assert_array_equal(sd1["sd_state_on_1"][k][n], sd0["sd_state"][k][n])
    # The consolidated file resumes a plain one-process AdamW too (same format as its own state_dict).
    import tinytorch as torch
    plain_model = _mlp(torch)
    plain = torch.optim.AdamW(_groups(plain_model), lr=1.0)
    plain.load_state_dict(torch.load(str(tmp_path / "zero_opt.pt")))
    assert [g["lr"] for g in plain.param_groups] == pytest.approx(ref["lrs"])
    for i, p in enumerate(chain.from_iterable(g["params"] for g in plain.param_groups)):
        np.testing.assert_array_equal(plain.state[p]["exp_avg"].numpy(), sd0["sd_state"][i]["exp_avg"])
    for got, want in zip(sd0["sd_groups"], ref["opt_groups"]):
        assert set(got) == set(want)
        assert {k: v for k, v in got.items() if k != "lr"} == {k: v for k, v in want.items() if k != "lr"}
        assert got["lr"] == pytest.approx(want["lr"])


def test_zero_matches_single_process_world4(tmp_path):
    results = run_ranks(_zero_run, 4, ["default"], str(tmp_path), timeout=150)
    ref = _check_equivalence(results, 4, ["default"])
    # weights 256 -> r0, 128 -> r1, 64 -> r2; biases 16 -> r3, 16 -> r3 (16 is the least), 4 -> r3.
    assert results[0]["default"]["partition"] == [[[256], []], [[128], []], [[64], []], [[], [16, 16, 4]]]
    assert [r["default"]["state_bytes"] for r in results] == [256 * 8 + 4, 128 * 8 + 4, 64 * 8 + 4, 36 * 8 + 12]
    _check_memory(results, 4)


def test_zero_errors_before_any_process_group():
    import tinytorch as torch
    from tinytorch.distributed.optim import ZeroRedundancyOptimizer

    params = list(torch.nn.Linear(2, 2).parameters())
    with pytest.raises(TypeError, match="optimizer_class must be a torch.optim.Optimizer subclass"):
        ZeroRedundancyOptimizer(params, "adamw", lr=0.1)
    with pytest.raises(TypeError, match="optimizer_class must be a torch.optim.Optimizer subclass"):
        ZeroRedundancyOptimizer(params, torch.nn.Linear, lr=0.1)
    with pytest.raises(ValueError, match="did not receive any parameters"):
        ZeroRedundancyOptimizer([], torch.optim.AdamW)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        ZeroRedundancyOptimizer(params[0], torch.optim.AdamW)
    with pytest.raises(TypeError, match="Tensors or dicts"):
        ZeroRedundancyOptimizer([params[0], {"params": [params[1]]}], torch.optim.AdamW)
    with pytest.raises(ValueError, match="same dense type"):
        ZeroRedundancyOptimizer([params[0], params[1].double()], torch.optim.AdamW)
    with pytest.raises(ValueError, match="overlap_with_ddp=True"):
        ZeroRedundancyOptimizer(params, torch.optim.AdamW, overlap_with_ddp=True)
    with pytest.raises(RuntimeError, match="init_process_group"):
        ZeroRedundancyOptimizer(params, torch.optim.AdamW, lr=0.1)


def _torch_run(rank: int, world: int, port: int, init: dict):
    """PyTorch's own DDP + ZeroRedundancyOptimizer(AdamW) on gloo, same weights, data, clipping and schedule."""
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model = _mlp(torch)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in init.items()})
    ddp = DDP(model)
    zero = ZeroRedundancyOptimizer(_groups(model), torch.optim.AdamW, lr=LR, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.StepLR(zero, step_size=2, gamma=0.5)
    norms = _train(torch, ddp, zero, sched, rank, world, STEPS)
    zero.consolidate_state_dict(to=0)
    out = {"state": _state(model), "norms": norms, "partition": _numel_lists(zero)}
    if rank == 0:
        sd = zero.state_dict()
        out["sd_group_params"] = [g["params"] for g in sd["param_groups"]]
        out["sd_state"] = {k: {n: v.numpy().copy() for n, v in s.items()} for k, s in sd["state"].items()}
    dist.destroy_process_group()
    return out


def test_zero_matches_pytorch_zero_world2():
    pytest.importorskip("torch")
    import tinytorch as torch

    torch.manual_seed(7)
    init = _state(_mlp(torch))  # the reference's (and the ranks' rank-0) initial weights
    results = run_ranks(_torch_run, 2, init, timeout=150)
    ref = _reference(2)
    worst = 0.0
    for res in results:
        for k, v in ref["state"].items():
            d = _rel_diff(res["state"][k], v)
            worst = max(worst, d)
            assert d <= RTOL, f"PyTorch's ZeRO and tinytorch's reference differ in {k} by {d:.2e}"
        # The same greedy partition as tinytorch's (see test_zero_matches_single_process_world2).
        assert res["partition"] == [[[256], []], [[128, 64], [16, 16, 4]]]
    r0 = results[0]
    assert r0["sd_group_params"] == [[0, 1, 2], [3, 4, 5]]
    assert set(r0["sd_state"]) == set(ref["opt_sd"])
    assert all(set(r0["sd_state"][k]) == set(ref["opt_sd"][k]) for k in ref["opt_sd"])
    print(f"\nPyTorch ZeroRedundancyOptimizer (gloo, 2 ranks) vs tinytorch one process: max relative difference "
          f"{worst:.2e}")
