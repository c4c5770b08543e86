"""tinytorch-bench simulate and its model: pure arithmetic against the ZeRO paper and closed forms."""
import json
import math
import os
import subprocess
import sys

import pytest

from tinytorch.bench import build_parser, hardware as H, model as M, simulate as S
from tinytorch.bench._common import format_size, parse_size

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(argv):
    return build_parser().parse_args(argv)._main(build_parser().parse_args(argv))


def test_zero_paper_figure1_and_comm_volume(tmp_path, capsys):
    out = tmp_path / "sim.json"
    rows = _run(["simulate", "--params", "7.5e9", "--world", "64", "--strategy", "ddp,zero1,zero2,zero3",
                 "--json", str(out)])
    gb = {r["strategy"]: r["model_state_bytes_per_gpu"] / 1e9 for r in rows}
    # ZeRO paper, Figure 1: 7.5B parameters, N_d = 64, K = 12
    assert round(gb["ddp"], 1) == 120.0
    assert round(gb["zero1"], 1) == 31.4
    assert round(gb["zero2"], 1) == 16.6
    assert round(gb["zero3"], 1) == 1.9
    comm = {r["strategy"]: r["comm_bytes_per_gpu_per_step"] for r in rows}
    assert comm["zero3"] / comm["ddp"] == pytest.approx(1.5)
    assert comm["zero1"] == pytest.approx(comm["ddp"]) and comm["zero2"] == pytest.approx(comm["ddp"])
    # DDP moves 2 (N-1)/N Ψ fp16 elements
    assert comm["ddp"] == pytest.approx(2 * 63 / 64 * 7.5e9 * 2)
    saved = json.loads(out.read_text())
    keys = {"strategy", "world", "step_ms", "compute_ms", "exposed_comm_ms", "comm_bytes_per_gpu_per_step",
            "model_state_bytes_per_gpu", "activation_bytes_per_gpu", "scaling_efficiency"}
    assert all(keys <= set(r) for r in saved["rows"])
    text = capsys.readouterr().out
    assert "120.00" in text and "31.41" in text and "16.64" in text and "1.88" in text


def test_cli_entry_point_prints_the_table():
    res = subprocess.run([sys.executable, "-m", "tinytorch.bench", "simulate", "--model", "gpt-1.3b", "--world",
                          "8,1024", "--strategy", "ddp,zero3", "--hardware", "a100"], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert res.returncode == 0, res.stderr
    assert "gpt-1.3b" in res.stdout and "zero3" in res.stdout and "1024" in res.stdout


def test_ring_and_hierarchical_collective_times():
    hw = H.load("h100")
    S_ = 1 << 30
    a, b = hw.intra.alpha_s, hw.intra.beta_Bps
    # one node: a ring, nccl-tests' factors
    assert M.collective_s("all_reduce", S_, 8, hw) == pytest.approx(14 * a + 2 * 7 / 8 * S_ / b)
    assert M.collective_s("all_gather", S_, 8, hw) == pytest.approx(7 * a + 7 / 8 * S_ / b)
    assert M.collective_s("broadcast", S_, 8, hw) == pytest.approx(7 * a + S_ / b)
    # 4 nodes of 8: reduce-scatter inside, all-reduce of the 1/8 shard across nodes, all-gather inside
    ea, eb = hw.inter.alpha_s, hw.inter.beta_Bps
    want = 2 * (7 * a + 7 / 8 * S_ / b) + 6 * ea + 2 * 3 / 4 * (S_ / 8) / eb
    assert M.collective_s("all_reduce", S_, 32, hw) == pytest.approx(want)
    assert M.collective_s("all_reduce", S_, 1, hw) == 0.0


def test_ddp_overlap_hides_small_buckets_and_exposes_large_ones():
    hw = H.load("h100")
    w = M.analytic_workload(1e9, hw, tokens=2048, layers=8)
    row = M.simulate_step("ddp", w, 8, hw)
    assert row["exposed_comm_ms"] < 0.2 * row["comm_ms"]  # NVLink: most of it hides behind backward
    slow = H.Hardware("slow", 8, H.Link(1e-5, 1e9), H.Link(1e-5, 1e9), hw.peak_flops, hw.mfu, hw.memory_bytes,
                      hw.mem_bw_Bps)
    row = M.simulate_step("ddp", w, 8, slow)
    # 1 GB/s: the all-reduce outlasts backward; the exposed part is what is left after the last gradient
    assert row["exposed_comm_ms"] > 0.5 * row["comm_ms"]
    assert row["step_ms"] == pytest.approx(row["compute_ms"] + row["exposed_comm_ms"])
    assert 0 < row["scaling_efficiency"] < 0.5


def test_zero3_prefetch_and_regather():
    hw = H.load("h100")
    w = M.analytic_workload(7.5e9, hw, tokens=2048, layers=32)
    z2 = M.simulate_step("zero2", w, 64, hw)
    z3 = M.simulate_step("zero3", w, 64, hw)
    assert z3["comm_ms"] == pytest.approx(1.5 * z2["comm_ms"], rel=0.05)  # a second all-gather per unit
    assert z3["step_ms"] >= z2["step_ms"]
    assert z2["compute_ms"] == pytest.approx(z3["compute_ms"])
    # with free links, the step is compute alone
    free = H.Hardware("free", 8, H.Link(0, 1e30), H.Link(0, 1e30), hw.peak_flops, hw.mfu, hw.memory_bytes,
                      hw.mem_bw_Bps)
    r = M.simulate_step("zero3", w, 64, free)
    assert r["exposed_comm_ms"] == pytest.approx(0, abs=1e-6)


def test_memory_formulas_fp32_and_activations():
    assert M.model_state_bytes("zero2", 1e9, 4, "fp32") == pytest.approx(4e9 + 12e9 / 4)
    assert M.model_state_bytes("zero3", 1e9, 1, "mixed") == pytest.approx(16e9)
    # Korthikanti et al.: s b h (34 + 5 a s / h) per layer
    assert M.gpt_activation_bytes(1, 1024, 16, 2048, 1) == pytest.approx(2048 * 1024 * (34 + 5 * 16 * 2))
    # Narayanan et al. 2021: 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh))
    assert M.gpt_params(12, 768) == pytest.approx(12 * 12 * 768 ** 2 * (1 + 13 / (12 * 768) + (50257 + 2048) /
                                                                       (12 * 12 * 768)))


def test_fit_alpha_beta_recovers_the_line():
    alpha, beta, n = 20e-6, 5e9, 2
    rows = [{"op": "all_reduce", "world": n, "bytes": s,
             "time_us": 1e6 * (2 * (n - 1) * alpha + 2 * (n - 1) / n * s / beta)} for s in (1 << 16, 1 << 20, 1 << 24)]
    a, b, w = H.fit_alpha_beta(rows)
    assert w == 2 and a == pytest.approx(alpha, rel=1e-6) and b == pytest.approx(beta, rel=1e-6)


def test_this_machine_shares_bandwidth_beyond_its_cores(tmp_path):
    rows = [{"op": "all_reduce", "world": 2, "bytes": s, "time_us": 10 + s / 1e3} for s in (1 << 16, 1 << 22)]
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps({"rows": rows}))
    hw = H.from_collectives(str(f), flops=1e10)
    hw.cpu_cores = 2
    assert hw.link(False, 4).beta_Bps == pytest.approx(hw.intra.beta_Bps / 2)
    assert hw.link(False, 2).beta_Bps == pytest.approx(hw.intra.beta_Bps)
    assert H.load(str(f)).name == "this-machine"


def test_this_machine_latency_path_for_small_all_reduces(tmp_path):
    # 2 ranks: ring sizes fit t = 2 alpha + S / beta; 64 KiB takes the latency path at 300 us
    beta = 1e9
    rows = [{"op": "all_reduce", "world": 2, "bytes": s, "time_us": 1e6 * (2 * 5e-6 + s / beta)}
            for s in (1 << 20, 1 << 22)]
    rows.append({"op": "all_reduce", "world": 2, "bytes": 1 << 16, "time_us": 300.0})
    f = tmp_path / "sweep.json"
    f.write_text(json.dumps({"rows": rows}))
    hw = H.from_collectives(str(f), flops=1e10)
    hw.cpu_cores = 4
    assert hw.intra.alpha_s == pytest.approx(5e-6) and hw.intra.beta_Bps == pytest.approx(beta)
    small = hw.latency_path_alpha_s
    assert small == pytest.approx(300e-6 - (1 << 16) / beta)
    # 3 ranks: (n-1) steps of the latency path, (n-1) S bytes through each rank
    assert M.collective_s("all_reduce", 1 << 16, 3, hw) == pytest.approx(2 * small + 2 * (1 << 16) / beta)
    assert M.collective_s("all_reduce", 1 << 20, 3, hw) == pytest.approx(4 * 5e-6 + 4 / 3 * (1 << 20) / beta)
    with pytest.raises(ValueError, match="needs --collectives"):
        H.load("this-machine")
    with pytest.raises(ValueError, match="unknown hardware"):
        H.load("tpu-v9")


def test_profile_units_and_gradient_order(tmp_path):
    """A synthetic trace in train --trace's format: two blocks, gradients of block 1 first."""
    ev = [{"ph": "X", "cat": "phase", "name": "forward", "ts": 0, "dur": 1000},
          {"ph": "X", "cat": "phase", "name": "backward", "ts": 1000, "dur": 2000},
          {"ph": "X", "cat": "phase", "name": "optimizer", "ts": 3000, "dur": 100},
          {"ph": "X", "cat": "grad_ready", "name": "grad_ready", "ts": 1900, "dur": 0,
           "args": {"param": "blocks.1.w", "numel": 300}},
          {"ph": "X", "cat": "grad_ready", "name": "grad_ready", "ts": 2600, "dur": 0,
           "args": {"param": "blocks.0.w", "numel": 100}},
          {"ph": "X", "cat": "meta", "name": "bench_meta", "ts": 0, "dur": 0,
           "args": {"params": 400, "tokens": 64, "activation_bytes": 1234}}]
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"traceEvents": ev}))
    w = S.load_profile(str(f))
    assert [u.name for u in w.units] == ["blocks.0", "blocks.1"]
    assert [u.params for u in w.units] == [100, 300]
    assert w.units[1].bwd_s == pytest.approx(0.9e-3) and w.units[0].bwd_s == pytest.approx(1.1e-3)
    assert w.fwd_s == pytest.approx(1e-3) and w.opt_s == pytest.approx(1e-4)
    assert w.grads == [(pytest.approx(0.9e-3), 300.0), (pytest.approx(1.6e-3), 100.0)]
    assert w.activation_bytes == 1234 and w.tokens == 64
    rows = S.predict(w, H.load("a100"), [1, 2], ["ddp"], precision="fp32")
    assert rows[0]["step_ms"] == pytest.approx(3.1) and rows[0]["exposed_comm_ms"] == 0
    assert rows[1]["step_ms"] == pytest.approx(3.1)  # 1600 bytes on NVLink: hidden behind backward
    slow = H.Hardware("slow", 8, H.Link(1e-3, 1e6), H.Link(1e-3, 1e6), 1e12, 1.0, 1e9, 1e9)
    # one bucket of 1600 B ready at 1.6 ms; 2 alpha + 2 (1/2) 1600 / 1e6 = 3.6 ms -> ends at 5.2 ms, 3.2 ms exposed
    r = S.predict(w, slow, [2], ["ddp"], precision="fp32")[0]
    assert r["exposed_comm_ms"] == pytest.approx(3.2) and r["step_ms"] == pytest.approx(6.3)


def test_sizes_and_bad_input():
    assert parse_size("1K") == 1024 and parse_size("256M") == 256 << 20 and parse_size("4096") == 4096
    assert format_size(4 << 20) == "4M"
    with pytest.raises(ValueError, match="cannot read size"):
        parse_size("lots")
    with pytest.raises(ValueError, match="unknown strategy"):
        M.simulate_step("zero4", M.analytic_workload(1e6, H.load("h100"), 1), 2, H.load("h100"))
    with pytest.raises(SystemExit) as e:
        _run(["simulate", "--params", "1e9", "--strategy", "ddp,zero9"])
    assert e.value.code == 2


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "sim.png"
    _run(["simulate", "--model", "gpt-125m", "--world", "8,64", "--plot", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_console_script_entry(monkeypatch, capsys):
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["tinytorch-bench"] == "tinytorch.bench:cli"
    from tinytorch.bench import cli

    monkeypatch.setattr(sys, "argv", ["tinytorch-bench", "simulate", "--params", "1e9", "--world", "8"])
    assert cli() == 0
    assert "ddp" in capsys.readouterr().out


def test_profile_groups_params_outside_blocks_into_the_root_unit(tmp_path):
    def ready(ts, name, n):
        return {"ph": "X", "cat": "grad_ready", "name": "grad_ready", "ts": ts, "dur": 0,
                "args": {"param": name, "numel": n}}

    ev = [{"ph": "X", "cat": "phase", "name": "forward", "ts": 0, "dur": 600},
          {"ph": "X", "cat": "phase", "name": "backward", "ts": 600, "dur": 1200},
          ready(700, "head.weight", 10), ready(1100, "blocks.1.w", 20), ready(1500, "blocks.0.w", 30),
          ready(1800, "tok.weight", 40)]
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"traceEvents": ev}))
    w = S.load_profile(str(f))
    assert [u.name for u in w.units] == ["root", "blocks.0", "blocks.1"]
    assert [u.params for u in w.units] == [50, 30, 20]
    assert sum(u.bwd_s for u in w.units) == pytest.approx(1.2e-3)
    assert [n for _, n in w.grads] == [10, 20, 30, 40]  # DDP still sees every gradient in its own order


def test_hardware_file_round_trip(tmp_path):
    hw = H.load("a100")
    hw.inter = H.Link(2e-6, 100e9, "a faster fabric")
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(hw.to_json()))
    back = H.load(str(f))
    assert back == hw
    assert M.collective_s("all_gather", 1 << 30, 16, back) < M.collective_s("all_gather", 1 << 30, 16, H.load("a100"))
