"""tinytorch-bench train on real ranks (W2, few steps; nothing about speed is asserted) and its trace as
simulate's input."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tinytorch.bench import simulate as S, train as T

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W2_PARAMS = 784 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10


def test_ddp_two_ranks_table_json_and_plot(tmp_path):
    out, png = tmp_path / "train.json", tmp_path / "train.png"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    res = subprocess.run([sys.executable, "-m", "tinytorch.bench", "train", "--nproc", "2", "--model", "W2",
                          "--strategy", "ddp", "--steps", "4", "--warmup", "1", "--json", str(out), "--plot", str(png)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "exposed_ms" in res.stdout and "tokens/s" in res.stdout
    row = json.loads(out.read_text())["rows"][0]
    assert row["strategy"] == "ddp" and row["world"] == 2 and row["params"] == W2_PARAMS
    assert row["step_ms"] > 0 and row["alone_ms"] > 0 and row["comm_ms"] > 0
    assert row["exposed_comm_ms"] >= 0 and row["hidden_comm_ms"] >= 0
    assert len(row["peak_bytes_per_rank"]) == 2 and min(row["peak_bytes_per_rank"]) > W2_PARAMS * 4
    assert row["tokens_per_s"] == pytest.approx(2 * 128 / (row["step_ms"] / 1e3))
    if importlib.util.find_spec("matplotlib"):
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_one_rank_trace_feeds_simulate(tmp_path):
    trace = tmp_path / "w2.json"
    row = T.run("W2", "none", 1, steps=2, warmup=1, baseline=False, trace=str(trace))
    assert row["world"] == 1 and row["trace"] == str(trace)
    w = S.load_profile(str(trace))
    assert w.params == W2_PARAMS
    assert [u.name for u in w.units] == ["0", "2", "4"]  # the Sequential's Linear layers, forward order
    assert w.grads[0][1] in (2048 * 10, 10)  # the last layer's gradients are ready first
    assert w.activation_bytes > 128 * 2048 * 4 and w.tokens == 128
    assert 0 < w.fwd_s and 0 < w.bwd_s and 0 <= w.opt_s


def test_zero_strategies_by_name():
    if importlib.util.find_spec("tinytorch.distributed.fsdp") is None:
        with pytest.raises(RuntimeError, match="strategy zero3 needs tinytorch.distributed.fsdp"):
            T.wrap("zero3", object(), _lib(), 25.0)
    else:
        row = T.run("W2", "zero3", 2, steps=2, warmup=1, baseline=False)
        assert row["strategy"] == "zero3" and row["world"] == 2 and row["step_ms"] > 0
    if importlib.util.find_spec("tinytorch.distributed.optim") is None:
        with pytest.raises(RuntimeError, match="strategy zero1 needs tinytorch.distributed.optim"):
            T.wrap("zero1", _Tiny(), _lib(), 25.0)
    with pytest.raises(SystemExit) as e:  # argparse's exit; the message is checked in test_cli_errors.py
        from tinytorch.bench import main
        main(["train", "--strategy", "zero4"])
    assert e.value.code == 2


class _Tiny:
    """Stands in for a module only up to DDP's constructor (never reached when the import fails first)."""


def _lib():
    import tinytorch
    return tinytorch


def test_tp_and_pp_train_the_one_rank_model():
    """tp (parallelize_module, Megatron's qkv order) and pp (Schedule1F1B over 2 stages) on 2 ranks start from
    the one-rank W3's loss on the same batch: the same model, split; pp reports each rank's compute and idle."""
    small = dict(steps=2, warmup=1, batch=4, seq=16, baseline=False)
    one = T.run("W3", "none", 1, **small)
    tp = T.run("W3", "tp", 2, **small)
    pp = T.run("W3", "pp", 2, microbatches=2, **dict(small, baseline=True), solo=True)
    for row in (tp, pp):
        assert row["world"] == 2 and row["params"] == one["params"] and row["step_ms"] > 0
        assert row["first_loss"] == pytest.approx(one["first_loss"], rel=1e-5)
        # tp and pp ranks share one batch: tokens/s counts it once
        assert row["tokens_per_s"] == pytest.approx(4 * 16 / (row["step_ms"] / 1e3))
        assert row["exposed_comm_ms"] is None  # alone is the whole model on the whole batch: nothing to subtract
    assert tp["alone_ms"] is None and tp["solo_ms"] is None
    assert pp["alone_ms"] > 0 and pp["solo_ms"] > 0  # rank 0's unwrapped step, with rank 1 busy and waiting
    assert pp["microbatches"] == 2 and tp["microbatches"] is None
    with pytest.raises(ValueError, match="solo steps the unwrapped copy: it needs baseline=True"):
        T.run("W3", "pp", 2, solo=True, **small)
    for compute, idle in zip(pp["compute_ms_per_rank"], pp["idle_ms_per_rank"]):
        assert 0 < compute and 0 <= idle
    assert "compute_ms_per_rank" not in tp


def test_megatron_qkv_order_gives_each_rank_its_heads():
    import numpy as np
    import tinytorch
    from tinytorch.bench import workloads

    tinytorch.manual_seed(0)
    model = workloads.gpt(tinytorch, T=16, d=8, h=4, L=1)
    w = model.blocks[0].qkv.weight.detach().numpy().copy()
    T.megatron_qkv_order(model, tinytorch, 2)
    got = model.blocks[0].qkv.weight.detach().numpy()
    q, k, v = w[:8], w[8:16], w[16:]
    # rank 0's contiguous half: q, k, v of heads 0-1; rank 1's: of heads 2-3
    np.testing.assert_array_equal(got[:12], np.concatenate([q[:4], k[:4], v[:4]]))
    np.testing.assert_array_equal(got[12:], np.concatenate([q[4:], k[4:], v[4:]]))
    with pytest.raises(ValueError, match="--strategy tp over 3 ranks needs the width 8 and the 4 heads"):
        T.megatron_qkv_order(model, tinytorch, 3)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not importable")
def test_torch_beside_tp_and_pp_from_the_same_weights():
    """--torch: PyTorch's parallelize_module / Schedule1F1B on gloo, stepped round-robin in the same ranks from
    the same weights, starts from tinytorch's loss."""
    for strategy in ("tp", "pp"):
        row = T.run("W3", strategy, 2, steps=2, warmup=1, batch=4, seq=16, microbatches=2, torch=True)
        assert row["torch_ms"] > 0 and row["alone_ms"] > 0
        assert row["torch_first_loss"] == pytest.approx(row["first_loss"], rel=1e-5)
