"""torch.distributed.pipelining on tinytorch: schedules against one process on the same global batch, eval,
errors that fail every rank instead of hanging, point-to-point batches, the trace, and PyTorch's tutorial flow.

Multi-process tests run real processes over the ring backend; each spawn runs several scenarios to stay quick."""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402

D, CLASSES, BATCH, BLOCKS, STEPS = 6, 3, 8, 8, 3


# ---------------------------------------------------------------------- the model and its single-process reference


def _model(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(D)
            self.fc = nn.Linear(D, D)

        def forward(self, x):
            return x + torch.tanh(self.fc(self.ln(x)))

    m = nn.Sequential(*[Block() for _ in range(BLOCKS)], nn.Linear(D, CLASSES)).double()
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))
    return m


def _batch(step, n=BATCH):
    rng = np.random.default_rng(100 + step)
    return rng.standard_normal((n, D)), rng.integers(0, CLASSES, n)


def _split(n_children, n_stages):
    """Children of the full Sequential that each stage owns (contiguous, as even as possible)."""
    return [list(b) for b in np.array_split(np.arange(n_children), n_stages)]


def _reference(steps=STEPS):
    import tinytorch as torch
    m = _model(torch)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for s in range(steps):
        x, y = _batch(s)
        loss = torch.nn.functional.cross_entropy(m(torch.tensor(x)), torch.tensor(y))
        losses.append(float(loss))
        loss.backward()
        opt.step()
        opt.zero_grad()
    return m, {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}, losses


def _assert_params_match(results, ref, rtol=1e-5):
    merged = {}
    for r in results:
        merged.update(r)
    assert set(merged) == set(ref), sorted(set(ref) ^ set(merged))
    for k in ref:
        np.testing.assert_allclose(merged[k], ref[k], rtol=rtol, atol=1e-12, err_msg=k)


# ---------------------------------------------------------------------- workers


def _init(rank, world, port, timeout=60):
    import tinytorch.distributed as dist
    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timeout)


def _stages(torch, model, rank, world, per_rank, group=None):
    from tinytorch.distributed.pipelining import PipelineStage
    n_stages = world * per_rank
    children = list(model.children())
    parts = _split(len(children), n_stages)
    mine = list(range(rank, n_stages, world))
    stages = [PipelineStage(torch.nn.Sequential(*[children[i] for i in parts[s]]), s, n_stages, "cpu", group=group)
              for s in mine]
    return stages, mine, parts


def _owned_state(model, mine, parts):
    out = {}
    for k, v in model.state_dict().items():
        child = int(k.split(".")[0])
        if any(child in parts[s] for s in mine):
            out[k] = v.detach().numpy().copy()
    return out


def _train(torch, schedule_name, rank, world, per_rank, m=4, steps=STEPS):
    """AdamW steps of the pipelined model; returns (model, schedule, stages, stage indices, split, this rank's
    parameters, the last stage's mean loss per step)."""
    from tinytorch.distributed import pipelining as pp
    model = _model(torch)
    stages, mine, parts = _stages(torch, model, rank, world, per_rank)
    n_stages = world * per_rank
    cls = pp.schedules.get_schedule_class(schedule_name)
    sched = cls(stages[0] if per_rank == 1 else stages, n_microbatches=m,
                loss_fn=torch.nn.functional.cross_entropy)
    params = [p for s in stages for p in s.submod.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-2)
    step_losses = []
    for step in range(steps):
        x, y = _batch(step)
        args = (torch.tensor(x),) if 0 in mine else ()
        if n_stages - 1 in mine:
            losses = []
            out = sched.step(*args, target=torch.tensor(y), losses=losses)
            assert len(losses) == m and tuple(out.shape) == (BATCH, CLASSES)
            step_losses.append(float(sum(float(l_) for l_ in losses) / m))
        else:
            assert sched.step(*args) is None
        opt.step()
        opt.zero_grad()
    return model, sched, stages, mine, parts, _owned_state(model, mine, parts), step_losses


def _schedules_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch import profiler
    from tinytorch.distributed import pipelining as pp
    _init(rank, world, port)
    out = {}
    for name, per_rank in (("GPipe", 1), ("1F1B", 1), ("Interleaved1F1B", 2), ("LoopedBFS", 2)):
        model, sched, stages, mine, parts, state, losses = _train(torch, name, rank, world, per_rank)
        out[name] = (state, losses)

    # Eval after 1F1B training: forwards only, merged outputs and per-microbatch losses; no gradients anywhere.
    model, sched, stages, mine, parts, state, _ = _train(torch, "1F1B", rank, world, 1)
    x, y = _batch(99)
    args = (torch.tensor(x),) if rank == 0 else ()
    kw = {"target": torch.tensor(y), "losses": []} if rank == world - 1 else {}
    result = sched.eval(*args, **kw)
    out["eval_output"] = None if result is None else result.numpy()
    out["eval_losses"] = [float(l_) for l_ in kw.get("losses", [])]
    out["eval_grads"] = [p.grad is None for p in model.parameters()]
    # A schedule without loss_fn runs forwards only as well, on another batch size (shapes follow each step).
    fwd_only = pp.ScheduleGPipe(stages[0], n_microbatches=2)
    x2, _ = _batch(98, n=6)
    result = fwd_only.step(torch.tensor(x2)) if rank == 0 else fwd_only.step()
    out["fwd_only_output"] = None if result is None else result.numpy()
    out["fwd_only_grads"] = [p.grad is None for p in model.parameters()]
    # The first schedule keeps the shapes of its own first step, whatever other schedules did meanwhile.
    result = sched.eval(*args)
    out["eval_again"] = None if result is None else result.numpy()

    # The trace: one span per stage, microbatch and direction, in the schedule's order.
    model, sched, stages, mine, parts, state, _ = _train(torch, "1F1B", rank, world, 1, steps=1)
    x, y = _batch(0)
    with profiler.profile() as prof:
        if rank == 0:
            sched.step(torch.tensor(x))
        else:
            sched.step(target=torch.tensor(y))
    out["trace"] = [e.name for e in prof.events() if e.track == profiler.TRACK_PIPELINE]
    out["chrome_trace"] = profiler.chrome_trace(prof.events())

    # A stage whose output is a tuple: both tensors travel, both gradients come back.
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(D, D).double(), torch.nn.Linear(D, D).double()

        def forward(self, x):
            return self.a(x), self.b(x)

    class Join(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Linear(D, CLASSES).double()

        def forward(self, u, v):
            return self.c(u * v)

    torch.manual_seed(0)
    two, join = Two(), Join()
    stage = pp.PipelineStage(two if rank == 0 else join, rank, world, "cpu")
    sched = pp.Schedule1F1B(stage, n_microbatches=2, loss_fn=torch.nn.functional.cross_entropy)
    x, y = _batch(5)
    if rank == 0:
        sched.step(torch.tensor(x))
        out["tuple_grads"] = {k: p.grad.numpy() for k, p in two.named_parameters()}
    else:
        sched.step(target=torch.tensor(y))
        out["tuple_grads"] = {k: p.grad.numpy() for k, p in join.named_parameters()}

    # batch_isend_irecv: both ranks list [send, recv] in the same order, 4 MiB each way (more than a socket
    # buffer), and the exchange completes.
    peer = 1 - rank
    send = torch.full((1 << 20,), float(rank + 1))
    recv = torch.zeros(1 << 20)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)])
    for w in works:
        w.wait()
    out["exchange"] = float(recv.min()), float(recv.max())
    dist.destroy_process_group()
    return out


def test_schedules_match_one_process_eval_trace_and_p2p(tmp_path):
    import tinytorch as torch
    ref_model, ref, ref_losses = _reference()
    res = run_ranks(_schedules_worker, 2, timeout=180)
    for name in ("GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS"):
        _assert_params_match([r[name][0] for r in res], ref)
        np.testing.assert_allclose(res[1][name][1], ref_losses, rtol=1e-10, err_msg=name)

    # Eval: the trained 1F1B model's outputs and losses, and no gradient was made.
    x, y = _batch(99)
    with torch.no_grad():
        logits = ref_model(torch.tensor(x))
    np.testing.assert_allclose(res[1]["eval_output"], logits.numpy(), rtol=1e-10)
    np.testing.assert_array_equal(res[1]["eval_again"], res[1]["eval_output"])
    per_mb = [float(torch.nn.functional.cross_entropy(logits[i:i + 2], torch.tensor(y[i:i + 2])))
              for i in range(0, BATCH, 2)]
    np.testing.assert_allclose(res[1]["eval_losses"], per_mb, rtol=1e-10)
    assert res[0]["eval_output"] is None and res[0]["eval_losses"] == []
    assert all(res[0]["eval_grads"]) and all(res[1]["eval_grads"])
    x2, _ = _batch(98, n=6)
    with torch.no_grad():
        np.testing.assert_allclose(res[1]["fwd_only_output"], ref_model(torch.tensor(x2)).numpy(), rtol=1e-10)
    assert all(res[0]["fwd_only_grads"]) and all(res[1]["fwd_only_grads"])

    # 1F1B on 2 stages: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3, stage 1 alternates from the first microbatch.
    assert res[0]["trace"] == ["stage 0 fwd mb 0", "stage 0 fwd mb 1", "stage 0 bwd mb 0", "stage 0 fwd mb 2",
                               "stage 0 bwd mb 1", "stage 0 fwd mb 3", "stage 0 bwd mb 2", "stage 0 bwd mb 3"]
    assert res[1]["trace"] == [f"stage 1 {k} mb {i}" for i in range(4) for k in ("fwd", "bwd")]
    # The schedule picture is drawn from the two ranks' traces (skipped without matplotlib).
    from tinytorch.utils.plot import have_matplotlib, pipeline_schedule
    trace = {"traceEvents": res[0]["chrome_trace"]["traceEvents"] + res[1]["chrome_trace"]["traceEvents"]}
    png = tmp_path / "schedule.png"
    assert pipeline_schedule(str(png), trace, title="1F1B") == have_matplotlib()
    assert not have_matplotlib() or png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no pipeline stage spans"):
        pipeline_schedule(str(png), {"traceEvents": []})

    # Tuple outputs: the same gradients as the whole two-piece model on one process, averaged over 2 microbatches.
    torch.manual_seed(0)
    a, b = torch.nn.Linear(D, D).double(), torch.nn.Linear(D, D).double()
    c = torch.nn.Linear(D, CLASSES).double()
    x, y = _batch(5)
    torch.nn.functional.cross_entropy(c(a(torch.tensor(x)) * b(torch.tensor(x))), torch.tensor(y)).backward()
    expect0 = {"a.weight": a.weight, "a.bias": a.bias, "b.weight": b.weight, "b.bias": b.bias}
    for k, p in expect0.items():
        np.testing.assert_allclose(res[0]["tuple_grads"][k], p.grad.numpy(), rtol=1e-10, err_msg=k)
    np.testing.assert_allclose(res[1]["tuple_grads"]["c.weight"], c.weight.grad.numpy(), rtol=1e-10)

    assert res[0]["exchange"] == (2.0, 2.0) and res[1]["exchange"] == (1.0, 1.0)


def _four_rank_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.pipelining import PipelineStage, Schedule1F1B
    _init(rank, world, port)
    out = {}
    for name, per_rank, m in (("1F1B", 1, 8), ("Interleaved1F1B", 2, 8)):
        out[name] = _train(torch, name, rank, world, per_rank, m=m)[5]

    # PP x DP: pipelines over ranks {0, 1} and {2, 3}, each stage's piece wrapped in DDP across the two
    # pipelines ({0, 2} and {1, 3}); each pipeline takes half of the global batch.
    pp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    pp_rank, replica = rank % 2, rank // 2
    model = _model(torch)
    children = list(model.children())
    parts = _split(len(children), 2)
    piece = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*[children[i] for i in parts[pp_rank]]),
                                                      process_group=dp_groups[pp_rank])
    stage = PipelineStage(piece, pp_rank, 2, "cpu", group=pp_groups[replica])
    sched = Schedule1F1B(stage, n_microbatches=2, loss_fn=torch.nn.functional.cross_entropy)
    opt = torch.optim.AdamW(piece.parameters(), lr=1e-2)
    half = BATCH // 2
    for step in range(STEPS):
        x, y = (torch.tensor(a[replica * half:(replica + 1) * half]) for a in _batch(step))
        sched.step(x) if pp_rank == 0 else sched.step(target=y)
        opt.step()
        opt.zero_grad()
    out["pp_x_dp"] = _owned_state(model, [pp_rank], parts)
    out["ddp_syncs"] = piece.reducer.num_syncs  # one all-reduce of the summed microbatch gradients per step

    # The last stage's loss_fn raises on microbatch 1: all four ranks fail, naming stage 3.
    calls = []

    def bad_loss(out_, target):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("bad loss")
        return torch.nn.functional.cross_entropy(out_, target)

    g = dist.new_group(timeout=30)
    stage = _stages(torch, _model(torch), rank, world, 1, g)[0][0]
    sched = Schedule1F1B(stage, n_microbatches=4, loss_fn=bad_loss)
    x, y = (torch.tensor(a) for a in _batch(0))
    out["loss_raises"] = _expect(lambda: sched.step(x) if rank == 0 else sched.step(target=y) if rank == 3
                                 else sched.step())
    return out


def test_four_ranks_match_one_process():
    """1F1B over 4 stages, interleaved 1F1B over 4 ranks x 2 stages, and 2 pipelines x DDP (pp2 x dp2)."""
    _, ref, _ = _reference()
    res = run_ranks(_four_rank_worker, 4, timeout=240)
    for name in ("1F1B", "Interleaved1F1B"):
        _assert_params_match([r[name] for r in res], ref)
    _assert_params_match([r["pp_x_dp"] for r in res[:2]], ref)
    _assert_params_match([r["pp_x_dp"] for r in res[2:]], ref)
    assert [r["ddp_syncs"] for r in res] == [STEPS] * 4
    msg, took = res[3]["loss_raises"]
    assert msg.startswith("RuntimeError: [Stage 3] failed to compute the loss of microbatch 1: ValueError: bad loss")
    for r in res[:3]:
        msg, took = r["loss_raises"]
        assert msg is not None and "rank 3 (stage 3) failed" in msg and "bad loss" in msg and took < 10, msg


def _one_rank_worker(rank, world, port):
    import tinytorch as torch
    _init(rank, world, port)
    return {name: _train(torch, name, 0, 1, per_rank)[5] for name, per_rank in
            (("Interleaved1F1B", 3), ("LoopedBFS", 2), ("GPipe", 1))}


def test_stages_on_one_rank_hand_tensors_over_directly():
    """A group of one rank holding every stage: activations and gradients pass between stages without transfers."""
    _, ref, _ = _reference()
    res = run_ranks(_one_rank_worker, 1, timeout=120)
    for name in ("Interleaved1F1B", "LoopedBFS", "GPipe"):
        _assert_params_match([res[0][name]], ref)


# ---------------------------------------------------------------------- errors, not hangs


def _expect(fn):
    """The error fn raises (type name and message), and how long it took."""
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - reported to the parent for checking
        return f"{type(e).__name__}: {e}", time.monotonic() - t0
    return None, time.monotonic() - t0


def _errors_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed import pipelining as pp
    _init(rank, world, port, timeout=30)
    out = {}
    loss_fn = torch.nn.functional.cross_entropy
    x, y = (torch.tensor(a) for a in _batch(0))

    def piece(group):
        model = _model(torch)
        return _stages(torch, model, rank, world, 1, group)[0][0]

    def run(sched, xx=x, yy=y):
        return sched.step(xx) if rank == 0 else sched.step(target=yy)

    # Each scenario gets a fresh group: a failed step leaves the old group's pending transfers behind.
    # A stage that raises in its forward of microbatch 2: every rank fails quickly, naming the stage.
    class Boom(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner, self.calls = inner, 0

        def forward(self, h):
            self.calls += 1
            if self.calls == 3:
                raise ValueError("boom in the last stage")
            return self.inner(h)

    g = dist.new_group(timeout=30)
    stage = piece(g)
    if rank == 1:
        stage.submod = Boom(stage.submod)
    out["raises"] = _expect(lambda: run(pp.Schedule1F1B(stage, 4, loss_fn=loss_fn)))

    # A stage whose backward raises (the last stage, first microbatch): both ranks fail, naming it.
    class Fragile(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            return h.clone()

        @staticmethod
        def backward(ctx, grad):
            raise ArithmeticError("no gradient today")

    class FragileStage(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, h):
            return self.inner(Fragile.apply(h))

    g = dist.new_group(timeout=30)
    stage = piece(g)
    if rank == 1:
        stage.submod = FragileStage(stage.submod)
    out["backward_raises"] = _expect(lambda: run(pp.ScheduleGPipe(stage, 4, loss_fn=loss_fn)))

    # Different microbatch counts on the two ranks.
    g = dist.new_group(timeout=30)
    out["microbatches"] = _expect(lambda: run(pp.ScheduleGPipe(piece(g), 4 if rank == 0 else 2, loss_fn=loss_fn)))

    # A batch of 10 rows cannot make 4 equal microbatches (rank 0 finds out; rank 1 hears of it).
    g = dist.new_group(timeout=30)
    x10 = torch.tensor(_batch(1, n=10)[0])
    out["indivisible"] = _expect(lambda: run(pp.ScheduleGPipe(piece(g), 4, loss_fn=loss_fn), xx=x10))

    # One rank trains while the other evaluates.
    g = dist.new_group(timeout=30)
    sched = pp.Schedule1F1B(piece(g), 4, loss_fn=loss_fn)
    out["mode"] = _expect(lambda: sched.step(x) if rank == 0 else sched.eval())

    # The last stage forgets its target.
    g = dist.new_group(timeout=30)
    sched = pp.ScheduleGPipe(piece(g), 4, loss_fn=loss_fn)
    out["no_target"] = _expect(lambda: sched.step(x) if rank == 0 else sched.step())

    # step() with a loss under no_grad.
    sched = pp.ScheduleGPipe(piece(None), 4, loss_fn=loss_fn)

    def no_grad_step():
        with torch.no_grad():
            run(sched)
    out["no_grad"] = _expect(no_grad_step)

    # Wrong stage numbers and placements (local checks, before any communication).
    lin = torch.nn.Linear(D, D)
    out["index"] = _expect(lambda: pp.PipelineStage(lin, 2, 2, "cpu"))
    out["negative"] = _expect(lambda: pp.PipelineStage(lin, -1, 2, "cpu"))
    out["too_few_stages"] = _expect(lambda: pp.PipelineStage(lin, 0, 1, "cpu"))
    out["single_needs_one_per_rank"] = _expect(lambda: pp.ScheduleGPipe(pp.PipelineStage(lin, rank, 4, "cpu"), 4))
    out["wrong_rank"] = _expect(lambda: pp.Schedule1F1B(pp.PipelineStage(lin, 1 - rank, 2, "cpu"), 4))
    out["looped_placement"] = _expect(lambda: pp.ScheduleLoopedBFS(
        [pp.PipelineStage(lin, rank, 4, "cpu"), pp.PipelineStage(lin, rank + 1, 4, "cpu")], 4))
    out["too_few_microbatches"] = _expect(lambda: pp.Schedule1F1B(pp.PipelineStage(lin, rank, 2, "cpu"), 1))
    out["interleaved_rounds"] = _expect(lambda: pp.ScheduleInterleaved1F1B(
        [pp.PipelineStage(lin, rank, 4, "cpu"), pp.PipelineStage(lin, rank + 2, 4, "cpu")], 5))
    return out


def test_errors_fail_every_rank_quickly():
    res = run_ranks(_errors_worker, 2, timeout=240)
    r0, r1 = res
    msg, took = r1["raises"]
    assert msg.startswith("RuntimeError: [Stage 1] failed to run forward of microbatch 2") and "boom" in msg, msg
    msg0, took0 = r0["raises"]
    assert msg0 is not None and "rank 1 (stage 1) failed" in msg0 and "boom in the last stage" in msg0, msg0
    assert "[Stage 0]" in msg0, msg0  # what rank 0 was doing when it heard
    assert took < 10 and took0 < 10, (took, took0)  # well under the group's 30 s timeout

    msg, took = r1["backward_raises"]
    assert msg.startswith("RuntimeError: [Stage 1] failed to run backward of microbatch 0") and "no gradient" in msg
    msg, took = r0["backward_raises"]
    assert msg is not None and "rank 1 (stage 1) failed" in msg and "no gradient today" in msg and took < 10, msg

    for r in res:
        msg, took = r["microbatches"]
        assert msg.startswith("ValueError") and "n_microbatches=4" in msg and "n_microbatches=2" in msg, msg
        assert took < 10

    msg, _ = r0["indivisible"]
    assert msg.startswith("ValueError") and "4 equal microbatches" in msg and "[(3, 6), (3, 6), (2, 6), (2, 6)]" in msg
    msg, took = r1["indivisible"]
    assert msg is not None and "rank 0 (stage 0) failed" in msg and took < 10, msg

    msg, took = r1["mode"]
    assert msg is not None and "with tag" in msg and "this rank runs eval()" in msg and took < 10, msg
    msg, took = r0["mode"]
    assert msg is not None and "rank 1 (stage 1) failed" in msg and took < 10, msg

    msg, _ = r1["no_target"]
    assert msg.startswith("ValueError") and "needs target=" in msg, msg
    assert "rank 1 (stage 1) failed" in r0["no_target"][0]

    for r in res:
        assert r["no_grad"][0].startswith("RuntimeError: step() requires gradients to be enabled")
        assert r["index"][0] == "ValueError: Stage index 2 is out of range of 2"
        assert r["negative"][0].startswith("ValueError: Stage index -1 is negative")
        assert r["too_few_stages"][0] == "RuntimeError: Pipeline group size 2 cannot be larger than number of stages 1"
        assert "num_stages (4) must equal the pipeline group's size (2)" in r["single_needs_one_per_rank"][0]
        assert "must hold stages" in r["wrong_rank"][0]
        assert "must hold stages" in r["looped_placement"][0]
        assert r["too_few_microbatches"][0].startswith("ValueError: Number of microbatches (1) must be greater")
        assert "multiple of the number of rounds" in r["interleaved_rounds"][0]


# ---------------------------------------------------------------------- single process: split, merge, orders


def test_split_and_merge_follow_pytorch():
    import tinytorch as torch
    from tinytorch.distributed.pipelining.microbatch import TensorChunkSpec, merge_chunks, split_args_kwargs_into_chunks
    x = torch.arange(24.0).reshape(6, 4)
    mask = torch.arange(8).reshape(2, 4)
    args, kwargs = split_args_kwargs_into_chunks((x, "tag"), {"mask": mask, "scale": 2.0}, 2,
                                                 kwargs_chunk_spec={"mask": TensorChunkSpec(1), "scale": None})
    assert [a[0].shape for a in args] == [(3, 4), (3, 4)] and [a[1] for a in args] == ["tag", "tag"]
    assert [k["mask"].tolist() for k in kwargs] == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
    assert [k["scale"] for k in kwargs] == [2.0, 2.0]
    # tensor_split: uneven chunks; nested containers keep their structure.
    args, _ = split_args_kwargs_into_chunks(({"a": [x[:5]]},), None, 2)
    assert [a[0]["a"][0].shape[0] for a in args] == [3, 2]
    # The first tensor may lower the chunk count (as PyTorch, with a warning); a later one may not.
    args, _ = split_args_kwargs_into_chunks((x[:2],), None, 4)
    assert len(args) == 2
    with pytest.raises(RuntimeError, match="smaller than the number of chunks"):
        split_args_kwargs_into_chunks((x, x[:2]), None, 4)
    assert TensorChunkSpec.from_tuple((0, 1))[1].split_dim == 1 and str(TensorChunkSpec(1)) == "TensorChunkSpec(1)"
    assert TensorChunkSpec.from_dict({"m": 1})["m"].split_dim == 1
    merged = merge_chunks([(x[:3], 7), (x[3:], 7)], None)
    assert merged[0].tolist() == x.tolist() and merged[1] == 7
    merged = merge_chunks([x[:, :2], x[:, 2:]], TensorChunkSpec(1))
    assert merged.tolist() == x.tolist()
    # _Replicate hands a tensor whole to every microbatch; a _CustomReducer folds the outputs.
    from tinytorch.distributed.pipelining.microbatch import _CustomReducer, _Replicate
    args, _ = split_args_kwargs_into_chunks((x, mask), None, 3, args_chunk_spec=(TensorChunkSpec(0), _Replicate))
    assert [tuple(a[0].shape) for a in args] == [(2, 4)] * 3 and all(a[1] is mask for a in args)
    total = merge_chunks([(x[:3], torch.tensor(1.5)), (x[3:], torch.tensor(2.5))],
                         (TensorChunkSpec(0), _CustomReducer(torch.tensor(0.0), lambda a, b: a + b)))
    assert total[0].tolist() == x.tolist() and float(total[1]) == 4.0


@pytest.mark.parametrize("name,p,v,m", [("GPipe", 3, 1, 3), ("GPipe", 4, 1, 2), ("1F1B", 4, 1, 6),
                                        ("Interleaved1F1B", 2, 2, 4), ("Interleaved1F1B", 4, 2, 8),
                                        ("Interleaved1F1B", 4, 3, 6), ("Interleaved1F1B", 2, 2, 3),
                                        ("LoopedBFS", 3, 2, 5)])
def test_lowered_orders_pair_every_transfer_in_one_global_order(name, p, v, m):
    """Each stage runs each microbatch forward then backward once; each rank's sends and receives follow one
    global order (so rendezvous point-to-point cannot deadlock); a stage's inputs arrive before it computes."""
    from tinytorch.distributed.pipelining import schedules as S
    order = {"GPipe": lambda r: S._gpipe_order(r, m), "1F1B": lambda r: S._1f1b_order(r, p, m),
             "Interleaved1F1B": lambda r: S._interleaved_order(r, p, v, m),
             "LoopedBFS": lambda r: S._looped_bfs_order(r, p, v, m)}[name]
    n = p * v
    compute = {r: order(r) for r in range(p)}
    for r, acts in compute.items():
        for s in range(r, n, p):
            assert [a.microbatch_index for a in acts if a.stage_index == s and a.computation_type is S.F] == list(
                range(m))
            assert sorted(a.microbatch_index for a in acts if a.stage_index == s and a.computation_type is S.B) == \
                list(range(m))
    lowered = S._add_send_recv({r: list(a) for r, a in compute.items()}, lambda s: s % p, n)
    # Play the lowered lists with rendezvous semantics: a transfer happens only when both ends are at it.
    pos = {r: 0 for r in range(p)}
    have = set()
    while any(pos[r] < len(lowered[r]) for r in range(p)):
        moved = False
        for r in range(p):
            while pos[r] < len(lowered[r]):
                a = lowered[r][pos[r]]
                s, kind, mb = a
                if kind in (S.F, S.B):
                    need = (s, "act", mb) if kind is S.F else (s, "grad", mb)
                    local = (s == 0 if kind is S.F else s == n - 1) or \
                        (kind is S.F and (s - 1) % p == r) or (kind is S.B and (s + 1) % p == r)
                    assert local or need in have, f"rank {r} computes {a} before receiving its input"
                    pos[r] += 1
                    moved = True
                    continue
                dst = (s + 1) % p if kind is S.SEND_F else (s - 1) % p if kind is S.SEND_B else None
                src = (s - 1) % p if kind is S.RECV_F else (s + 1) % p if kind is S.RECV_B else None
                peer = dst if dst is not None else src
                other = lowered[peer][pos[peer]] if pos[peer] < len(lowered[peer]) else None
                match = {S.SEND_F: (s + 1, S.RECV_F), S.SEND_B: (s - 1, S.RECV_B),
                         S.RECV_F: (s - 1, S.SEND_F), S.RECV_B: (s + 1, S.SEND_B)}[kind]
                if other is None or (other.stage_index, other.computation_type) != match or \
                        other.microbatch_index != mb:
                    break
                recv = a if kind in (S.RECV_F, S.RECV_B) else other
                have.add((recv.stage_index, "act" if recv.computation_type is S.RECV_F else "grad", mb))
                pos[r] += 1
                pos[peer] += 1
                moved = True
        assert moved, f"deadlock at {[lowered[r][pos[r]] for r in range(p) if pos[r] < len(lowered[r])]}"


def test_1f1b_keeps_at_most_p_minus_s_microbatches_in_flight():
    from tinytorch.distributed.pipelining import schedules as S
    p, m = 4, 8
    for r in range(p):
        live = peak = 0
        for a in S._1f1b_order(r, p, m):
            live += 1 if a.computation_type is S.F else -1
            peak = max(peak, live)
        assert peak == p - r


def test_tracing_front_end_and_zero_bubble_names_raise_clearly():
    import tinytorch.distributed.pipelining as pp
    from tinytorch.distributed.pipelining import SplitPoint, pipe_split, pipeline
    for cls in (pp.ScheduleInterleavedZeroBubble, pp.ScheduleZBVZeroBubble, pp.ScheduleDualPipeV):
        with pytest.raises(NotImplementedError, match="use ScheduleInterleaved1F1B"):
            cls([], 4)
    assert SplitPoint.BEGINNING.value == 1 and SplitPoint.END.value == 2
    with pytest.raises(NotImplementedError, match="manual stage splitting is supported"):
        pipeline(object(), mb_args=(), split_spec={"layers.4": SplitPoint.BEGINNING})
    with pytest.raises(NotImplementedError, match="PipelineStage"):
        pipe_split()


def test_p2pop_and_batch_validate_their_arguments():
    import tinytorch as torch
    import tinytorch.distributed as dist
    with pytest.raises(ValueError, match="Expected ``op`` to be of type ``torch.distributed.isend``"):
        dist.P2POp(dist.all_reduce, torch.zeros(2), 1)
    with pytest.raises(ValueError, match="Each op is expected to to be of type"):
        dist.batch_isend_irecv([dist.isend])
    assert dist.batch_isend_irecv([]) == []


def test_pipeline_benchmark_smoke(tmp_path):
    """benchmarks/pipeline.py runs end to end (tiny, no timing asserted) and writes its table's JSON."""
    import json
    out = tmp_path / "w8.json"
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "pipeline.py"
    r = subprocess.run([sys.executable, str(bench), "--microbatches", "2", "--steps", "1", "--warmup", "0",
                        "--no-torch", "--out", str(out)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "idle/compute" in r.stdout
    row = json.loads(out.read_text())["microbatches"]["2"]
    assert row["predicted_idle_over_compute"] == 0.5
    assert row["tinytorch rank 0"]["compute_ms"] > 0 and row["tinytorch rank 1"]["step_ms"] > 0


# ---------------------------------------------------------------------- PyTorch's tutorial flow, unchanged


SCRIPT = Path(__file__).resolve().parents[1] / "compat_scripts" / "torch_pipeline.py"


def _launch(module, extra_env=None):
    import tinytorch
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(tinytorch.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    env.update({"OMP_NUM_THREADS": "1", **(extra_env or {})})
    cmd = [sys.executable, "-m", module] + (["--compat"] if module == "tinytorch.distributed.run" else []) + \
        ["--standalone", "--nproc-per-node", "2", str(SCRIPT)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("losses:")]
    assert len(lines) == 1, r.stdout
    return [float(v) for v in lines[0].split(":", 1)[1].split()]


def test_tutorial_flow_runs_unchanged_under_compat():
    """A PyTorch script in the pipelining tutorial's shape (ModuleDict transformer split by deleting layers,
    PipelineStage, ScheduleGPipe, step(x) on rank 0 and step(target=, losses=) on rank 1) under tinytorch-run
    --compat; with torch importable, the same script under torchrun gives the same losses."""
    ours = _launch("tinytorch.distributed.run")
    assert len(ours) == 3 and np.isfinite(ours).all() and ours[-1] < ours[0], ours  # three steps, and it learns
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    theirs = _launch("torch.distributed.run", {"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
