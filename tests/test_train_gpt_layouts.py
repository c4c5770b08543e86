"""examples/train_gpt.py at composed layouts (ranks started by hand, as test_ddp's example test does): a pipeline
of two stages, each tensor-parallel over two ranks with activation checkpointing, whose traced step shows every
stage's microbatches; its distributed checkpoint resumed at other layouts (one process, tp2, pp2 interleaved)
continues with equal losses; and the layout errors."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed"))
from dist_helpers import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["--width", "32", "--heads", "4", "--layers", "4", "--context", "16", "--batch-size", "4",
         "--max-bytes", "100000", "--eval-every", "100", "--eval-batches", "1", "--sample-bytes", "8",
         "--minutes", "5", "--warmup", "2"]


def _run(out, world: int, *flags: str) -> list:
    """Every rank's output of one run of the example at `world` ranks."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        cmd = [sys.executable, os.path.join(ROOT, "examples", "train_gpt.py"), *SMALL, "--out", str(out), *flags]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for rank, (p, text) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}:\n{text}"
    return outs


def _train_losses(out) -> list:
    with open(os.path.join(out, "history.json")) as f:
        return [loss for _, loss in json.load(f)["train"]]


def test_pp2_x_tp2_with_ac_traces_its_stages_and_resumes_at_other_layouts(tmp_path):
    first = tmp_path / "pp2_tp2"
    outs = _run(first, 4, "--pp", "2", "--tp", "2", "--ac", "--steps", "3", "--microbatches", "4",
                "--trace-step", "2")
    assert "4 rank(s) (pp2 x tp2)" in outs[0] and "done: 3 steps" in outs[0], outs[0]
    assert "no sample under pipeline parallelism" in outs[0]
    with open(first / "trace.json") as f:
        spans = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "pipeline"]
    # every rank ran its stage's 4 microbatches forward and backward (1F1B); ranks 0, 1 are stage 0, 2, 3 stage 1
    for pid in range(4):
        names = sorted(e["name"] for e in spans if e["pid"] == pid)
        stage = pid // 2
        assert names == sorted(f"stage {stage} {d} mb {m}" for d in ("fwd", "bwd") for m in range(4)), (pid, names)
    if _has_matplotlib():
        assert (first / "pipeline.png").stat().st_size > 0
    assert os.path.exists(first / "dcp" / ".metadata") and not os.path.exists(first / "checkpoint.pt")

    # The step-3 checkpoint resumed at three other layouts: each continues to step 6 with the same losses.
    layouts = {"one_process": (1, []), "tp2": (2, ["--tp", "2"]),
               "pp2_interleaved": (2, ["--pp", "2", "--pp-schedule", "Interleaved1F1B"])}
    losses = {}
    for name, (world, flags) in layouts.items():
        out = tmp_path / name
        shutil.copytree(first, out)
        text = _run(out, world, *flags, "--resume", "--steps", "6", "--trace-step", "0")[0]
        assert "resumed from" in text and "at step 3" in text, text
        losses[name] = _train_losses(out)
        assert len(losses[name]) == 6
    np.testing.assert_allclose(losses["one_process"][:3], _train_losses(first), rtol=0)  # carried in the checkpoint
    for name in ("tp2", "pp2_interleaved"):
        np.testing.assert_allclose(losses[name][3:], losses["one_process"][3:], rtol=1e-4, err_msg=name)


def test_fsdp_x_tp_checkpoint_resumes_under_fsdp_alone_and_under_pp_x_fsdp(tmp_path):
    """2-D sharded state (fully_shard over dp2 of tensor-parallel parameters) saved, then resumed with the same two
    data-parallel replicas at two other layouts: the logged losses (the replicas' mean) agree."""
    first = tmp_path / "dp2_tp2"
    assert "4 rank(s) (dp_shard2 x tp2)" in _run(first, 4, "--dp-shard", "2", "--tp", "2", "--steps", "2")[0]
    losses = {}
    for name, (world, flags) in {"fsdp": (2, ["--fsdp"]), "pp2_dp2": (4, ["--pp", "2", "--dp-shard", "2"])}.items():
        out = tmp_path / name
        shutil.copytree(first, out)
        assert "at step 2" in _run(out, world, *flags, "--resume", "--steps", "4", "--trace-step", "0")[0]
        losses[name] = _train_losses(out)
    np.testing.assert_allclose(losses["pp2_dp2"], losses["fsdp"], rtol=1e-4)


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("world,flags,message", [
    (2, ["--tp", "2", "--pp", "2"], "needs --pp 2 x --dp-replicate -1 x --dp-shard 1 x --tp 2 ranks, but WORLD_SIZE is 2"),
    (4, ["--tp", "2", "--dp-replicate", "2"], "DDP (--dp-replicate without --dp-shard) does not compose with tensor"),
    (2, ["--tp", "2", "--heads", "3"], "--tp 2 must divide --heads (3)"),
    (2, ["--dp-shard", "-1", "--dp-replicate", "-1"], "cannot both be -1"),
    (2, ["--pp", "0"], "--pp must be a positive number of ranks"),
])
def test_layout_errors_before_any_process_group(monkeypatch, world, flags, message):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import train_gpt
    monkeypatch.setenv("WORLD_SIZE", str(world))
    with pytest.raises(ValueError) as e:
        train_gpt.main(flags)
    assert message in str(e.value)
