"""The 3-D simulator against the Megatron-LM papers: hand-computed figures for GPT-3 175B at t=8, p=16 from
their formulas, the figures the papers report where the formulas give them, and the step model's closed forms
(pure arithmetic: no processes)."""
import json

import pytest

from tinytorch.bench import hardware as H
from tinytorch.bench import layout as L
from tinytorch.bench import main
from tinytorch.bench import model as M
from tinytorch.bench import validate as V

GPT3 = L.Transformer.preset("gpt3-175b")
SBH = 2048 * 1 * 12288  # s b h of GPT-3 at micro-batch 1: 25,165,824


def _lay(**kw):
    base = dict(tp=8, pp=16, dp=8, global_batch=1536)
    base.update(kw)
    return L.Layout(**base)


def _free(hw):
    """hw with free links and an instant optimizer: only compute and the pipeline's bubble remain."""
    return H.Hardware("free", hw.gpus_per_node, H.Link(0.0, 1e30), H.Link(0.0, 1e30), hw.peak_flops, hw.mfu,
                      hw.memory_bytes, 1e30)


def test_gpt3_shape_and_parameters():
    assert (GPT3.layers, GPT3.hidden, GPT3.heads, GPT3.seq, GPT3.vocab) == (96, 12288, 96, 2048, 51200)
    # 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh)), by hand
    assert GPT3.params == pytest.approx(12 * 96 * 12288 ** 2 * (1 + 13 / (12 * 12288) + 53248 / (12 * 96 * 12288)))
    assert round(GPT3.params / 1e9, 1) == 174.6


# Narayanan et al. 2021, Table 1: (parameters in billions as printed, heads, hidden, layers); V=51200, s=2048
TABLE1 = [(1.7, 24, 2304, 24), (3.6, 32, 3072, 30), (7.5, 32, 4096, 36), (18.4, 48, 6144, 40), (39.1, 64, 8192, 48),
          (76.1, 80, 10240, 60), (145.6, 96, 12288, 80), (310.1, 128, 16384, 96), (529.6, 128, 20480, 105),
          (1008.0, 160, 25600, 128)]


@pytest.mark.parametrize("billions, heads, hidden, layers", TABLE1)
def test_parameter_count_reproduces_narayanan_table1(billions, heads, hidden, layers):
    assert round(L.Transformer("t", layers, hidden, heads, 2048, 51200).params / 1e9, 1) == billions


def test_table2_per_layer_activation_bytes_at_t8():
    """Korthikanti et al. 2022, Table 2, for GPT-3 (5as/h = 80) at t = 8, b = 1, by hand."""
    def per_layer(**kw):
        return L.activation_bytes(GPT3, _lay(**kw))[0]

    assert L.activation_bytes(GPT3, _lay(tp=1, pp=1, dp=1024))[0] == 114 * SBH  # sbh (34 + 5as/h)
    assert per_layer() == 23 * SBH == 578_813_952  # sbh (10 + 24/t + 5as/(ht)) = sbh (10 + 3 + 10)
    assert per_layer(sequence_parallel=True) == 14.25 * SBH == 358_612_992  # sbh (34/t + 5as/(ht))
    assert per_layer(recompute="selective") == 13 * SBH == 327_155_712  # sbh (10 + 24/t)
    assert per_layer(sequence_parallel=True, recompute="selective") == 4.25 * SBH == 106_954_752  # sbh 34/t
    assert per_layer(recompute="full") == 2 * SBH == 50_331_648  # the layer input, 2 sbh


def test_korthikanti_reported_figures():
    mtnlg = L.Transformer.preset("mt-nlg-530b")
    for model, attention, saved in ((GPT3, 80, 0.70), (mtnlg, 64, 0.65)):
        assert 5 * model.heads * model.seq / model.hidden == attention
        full = M.activation_bytes_per_layer(model.seq, 1, model.hidden, model.heads)
        sel = M.activation_bytes_per_layer(model.seq, 1, model.hidden, model.heads, recompute="selective")
        assert round(1 - sel / full, 2) == saved  # "saves 70% and 65% of the activation memory"
        base = M.activation_bytes_per_layer(model.seq, 1, model.hidden, model.heads, tp=8)
        both = M.activation_bytes_per_layer(model.seq, 1, model.hidden, model.heads, 8, True, "selective")
        assert 4.5 < base / both < 5.5  # "about 5x less memory than the tensor-parallel baseline"
    # selective recomputation's extra FLOPs: 2.7% for GPT-3, 1.6% for MT-NLG
    for model, extra in ((GPT3, 0.027), (mtnlg, 0.016)):
        more = model.hardware_flops(8, "selective") / model.model_flops(8) - 1
        assert round(more, 3) == extra


def test_first_stage_holds_p_microbatches_l_layers_whatever_p():
    lay = _lay(sequence_parallel=True, recompute="selective")  # m = 1536 / 8 = 192 >= p
    per_layer, act = L.activation_bytes(GPT3, lay)
    mask = 16 * SBH / 8  # the embedding's dropout mask, s b h p / t
    assert act == pytest.approx(96 * per_layer + mask)  # p microbatches x L/p layers = L layers
    assert act == pytest.approx(96 * 4.25 * SBH + 2 * SBH)  # = 10.32 GB by hand
    # the same L layers' worth at p = 8
    act8 = L.activation_bytes(GPT3, _lay(pp=8, dp=16, sequence_parallel=True, recompute="selective"))[1]
    assert act8 - 8 * SBH / 8 == pytest.approx(act - mask)
    # interleaved, v = 2: times 1 + (p-1)/(p v) = 1 + 15/32
    inter = L.activation_bytes(GPT3, _lay(vpp=2, schedule="interleaved", sequence_parallel=True,
                                          recompute="selective"))[1]
    assert inter == pytest.approx((96 * per_layer + mask) * (1 + 15 / 32))
    # GPipe keeps every microbatch: m x L/p layers
    gpipe = L.activation_bytes(GPT3, _lay(schedule="gpipe", global_batch=512, sequence_parallel=True,
                                          recompute="selective"))[1]
    assert gpipe == pytest.approx(64 * (6 * per_layer + SBH / 8))
    # fewer microbatches than stages in flight only under GPipe; 1F1B refuses m < p
    with pytest.raises(ValueError, match="needs at least --pp 16 microbatches"):
        L.simulate_layout(GPT3, _lay(global_batch=64), H.load("a100"))


def test_bubble_fraction_narayanan():
    assert L.bubble_fraction("1f1b", 16, 192) == 15 / 192 == 0.078125
    assert L.bubble_fraction("gpipe", 16, 192) == 15 / 192
    assert L.bubble_fraction("interleaved", 16, 192, 2) == 15 / 384
    row = L.simulate_layout(GPT3, _lay(vpp=3, schedule="interleaved"), H.load("a100"))
    assert row["pipeline_bubble_fraction"] == 15 / (3 * 192) and row["microbatches"] == 192


def test_bubble_is_the_papers_fraction_of_step_time():
    """With free links and optimizer, bubble time / ideal time is exactly (p-1)/m or (p-1)/(v m)."""
    hw = _free(H.load("a100"))
    for lay in (_lay(), _lay(vpp=2, schedule="interleaved"), _lay(schedule="gpipe")):
        r = L.simulate_layout(GPT3, lay, hw)
        assert r["bubble_ms"] / r["compute_ms"] == pytest.approx(r["pipeline_bubble_fraction"])
        assert r["step_ms"] == pytest.approx(r["compute_ms"] + r["bubble_ms"])


def test_tensor_and_pipeline_traffic_per_gpu():
    r = L.simulate_layout(GPT3, _lay(), H.load("a100"))
    # four all-reduces of b s h per layer per microbatch: 8 b s h (t-1)/t elements x 2 bytes, 6 layers, m = 192
    assert r["tp_comm_bytes_per_gpu_per_step"] == pytest.approx(8 * SBH * 7 / 8 * 2 * 6 * 192)
    assert r["tp_comm_bytes_per_gpu_per_step"] == pytest.approx(405_874_409_472)
    # a middle stage sends b s h / t forward and back per microbatch
    assert r["pp_comm_bytes_per_gpu_per_step"] == pytest.approx(192 * 2 * SBH / 8 * 2)
    # sequence parallelism: same volume; full recomputation: the recomputed forward's two more
    sp = L.simulate_layout(GPT3, _lay(sequence_parallel=True), H.load("a100"))
    assert sp["tp_comm_bytes_per_gpu_per_step"] == pytest.approx(r["tp_comm_bytes_per_gpu_per_step"])
    full = L.simulate_layout(GPT3, _lay(recompute="full"), H.load("a100"))
    assert full["tp_comm_bytes_per_gpu_per_step"] == pytest.approx(1.5 * r["tp_comm_bytes_per_gpu_per_step"])
    # data parallel: DDP all-reduces the first stage's parameters, 2 (d-1)/d x 2 bytes each
    first = (6 * GPT3.layer_params + (51200 + 2048) * 12288) / 8
    assert r["params_per_gpu"] == pytest.approx(first)
    assert r["dp_comm_bytes_per_gpu_per_step"] == pytest.approx(2 * 7 / 8 * first * 2)
    assert r["model_state_bytes_per_gpu"] == pytest.approx(16 * first)


def test_p2p_sends_of_the_busiest_rank():
    assert L.p2p_sends_per_microbatch(1, 1) == 0
    assert L.p2p_sends_per_microbatch(2, 1) == 1  # stage 0 sends forward only, stage 1 backward only
    assert L.p2p_sends_per_microbatch(4, 1) == 2
    assert L.p2p_sends_per_microbatch(4, 2) == 4  # every chunk of a middle rank sends both ways


def test_flops_narayanan_and_training_time_estimates():
    B, s, l, h, V = 1536, 2048, 96, 12288, 51200
    assert GPT3.hardware_flops(B, "full") == pytest.approx(96 * B * s * l * h ** 2 * (1 + s / (6 * h) +
                                                                                     V / (16 * l * h)))
    assert GPT3.model_flops(B) == pytest.approx(72 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (12 * l * h)))
    assert GPT3.hardware_flops(B, "none") == GPT3.model_flops(B)
    # The paper's end-to-end estimate 8 T P / (n X): F per token is 8 P to within the dropped terms; 175B on 300B
    # tokens at 1024 GPUs x 140 TF/s takes 34 days, 1T on 450B tokens at 3072 x 163 TF/s 84 days.
    for model, tokens, n, X, days in ((GPT3, 300e9, 1024, 140e12, 34),
                                      (L.Transformer.preset("megatron-1t"), 450e9, 3072, 163e12, 84)):
        per_token = model.hardware_flops(1, "full") / model.seq
        assert per_token == pytest.approx(8 * model.params, rel=0.03)
        assert round(8 * tokens * model.params / (n * X) / 86400) == days


def test_mfu_is_the_hardware_efficiency_when_nothing_else_costs():
    hw = _free(H.load("h100"))
    r = L.simulate_layout(GPT3, L.Layout(tp=8, pp=1, dp=1, global_batch=8), hw)
    assert r["mfu"] == pytest.approx(hw.mfu, rel=1e-9)
    full = L.simulate_layout(GPT3, L.Layout(tp=8, pp=1, dp=1, global_batch=8, recompute="full"), hw)
    assert full["mfu"] == pytest.approx(hw.mfu * GPT3.model_flops(8) / GPT3.hardware_flops(8, "full"))


def test_measured_w3_tensor_and_pipeline_cases_on_a_calibrated_machine():
    """validate's TP=2 and PP=2 (1F1B) cases: a traced W3 step (root + 4 blocks) and a fitted link give the
    prediction in closed form."""
    units = [M.Unit("root", 1000.0, 0.010, 0.020)] + [M.Unit(f"blocks.{k}", 4000.0, 0.030, 0.060) for k in range(4)]
    w = M.Workload(units, [], 0.008, tokens=16 * 128)
    link = H.Link(50e-6, 2e9)
    hw = H.Hardware("this-machine", 1 << 20, link, link, 1e10, 1.0, 64e9, 10e9, cpu_cores=2, calib_ranks=2)
    tp_case, pp_case = [c for c in V.TRAINING_CASES if c.layout is not None]
    assert (tp_case.strategy, pp_case.strategy) == ("tp", "pp")
    w3 = V.W3
    # TP=2: both ranks on the batch of 16, the blocks' compute and parameters halve, the root (embeddings, final
    # norm, head, loss) runs whole on both; 4 all-reduces of 16 x 128 x 256 fp32 per block
    ar = 2 * link.alpha_s + (16 * 128 * 256 * 4) / link.beta_Bps  # 2 ranks: 2 (n-1)/n = 1
    want = 4 * 0.090 / 2 + 0.030 + 4 * 4 * ar + 0.008 * (16000 / 2 + 1000) / 17000
    assert V.predict(tp_case, w, hw) == pytest.approx(1e3 * want)
    # a block's layer norms and residual adds (per-op seconds of the trace) stay whole on each rank too: 2L of
    # the 2L+1 calls of each are the blocks'
    traced = M.Workload(units, [], 0.008, tokens=16 * 128,
                        notes={"op_s": {"aten::native_layer_norm": 0.018, "aten::add": 0.009, "aten::addmm": 0.2}})
    rho = (0.018 + 0.009) * 8 / 9 / (4 * 0.090)
    assert L.replicated_share(w3, traced) == pytest.approx(rho)
    want_rho = 4 * 0.090 * (1 - rho) / 2 + 4 * 0.090 * rho + 0.030 + 4 * 4 * ar + 0.008 * 9000 / 17000
    assert V.predict(tp_case, traced, hw) == pytest.approx(1e3 * want_rho)
    assert V.predict(tp_case, traced.scaled(2.0), hw) == pytest.approx(
        1e3 * (2 * (want_rho - 4 * 4 * ar) + 4 * 4 * ar))  # the share is of the scaled step too
    # PP=2, 4 microbatches of 4: stage 0 = blocks 0-1, stage 1 = blocks 2-3 + root (slower); one receive per
    # direction per microbatch of 4 x 128 x 256 fp32; (m + p - 1) slots; the optimizer of the larger stage
    slot = (2 * 0.090 + 0.030) / 4 + 2 * (link.alpha_s + 4 * 128 * 256 * 4 / link.beta_Bps)
    want = (4 + 1) * slot + 0.008 * 9000 / 17000
    assert V.predict(pp_case, w, hw) == pytest.approx(1e3 * want)
    # a rank computing 1.6x faster while its neighbour waits: the bubble's slot of work runs in slot / 1.6 and the
    # neighbour's wait is that long, T = m s + (2/k - 1) s; at k = 2 the bubble is gone; k is kept in [1, 2]
    assert V.predict(pp_case, w, hw, 1.6) == pytest.approx(1e3 * (want - slot + (2 / 1.6 - 1) * slot))
    assert V.predict(pp_case, w, hw, 3.0) == pytest.approx(1e3 * (want - slot))
    assert V.predict(pp_case, w, hw, 0.5) == pytest.approx(1e3 * want)
    assert V.predict(tp_case, w, hw, 1.6) == pytest.approx(1e3 * (4 * 0.090 / 2 + 0.030 + 4 * 4 * ar +
                                                                  0.008 * 9000 / 17000))  # no pipeline, no bubble
    # blocks of one shape cost the traced blocks' mean, however one traced step split the time among them
    uneven = M.Workload(units[:1] + [M.Unit(f"blocks.{k}", 4000.0, 0.030 + d, 0.060 + 2 * d)
                                     for k, d in enumerate((0.02, 0.01, -0.01, -0.02))], [], 0.008, tokens=16 * 128)
    assert V.predict(pp_case, uneven, hw) == pytest.approx(1e3 * want)
    row = L.simulate_layout(w3, pp_case.layout, hw, "fp32", measured=w)
    assert row["pipeline_bubble_fraction"] == 0.25 and row["pp_comm_bytes_per_gpu_per_step"] == 4 * 4 * 128 * 256 * 4
    with pytest.raises(ValueError, match="has 4 blocks"):
        L.simulate_layout(GPT3, L.Layout(tp=8, global_batch=8), hw, "fp32", measured=w)


def test_search_finds_the_fastest_layout_that_fits():
    hw = H.load("a100")
    rows = L.search(GPT3, 1024, hw, 1536)
    fit = [r for r in rows if r["fits_memory"]]
    assert fit and len(fit) < len(rows)  # some layouts (e.g. no model parallelism) do not fit 80 GB
    assert all(r["memory_bytes_per_gpu"] <= 80e9 for r in fit)
    assert [r["step_ms"] for r in fit] == sorted(r["step_ms"] for r in fit)
    assert rows[:len(fit)] == fit
    assert not any(r["tp"] == 1 and r["pp"] == 1 and r["fits_memory"] for r in rows)
    # everything the search tried is a valid layout of the model on 1024 GPUs
    assert all(r["world"] == 1024 and 96 % r["tp"] == 0 and 96 % (r["pp"] * r["vpp"]) == 0 for r in rows)
    # fixed flags stay fixed
    some = L.search(GPT3, 1024, hw, 1536, fixed={"tp": 8, "recompute": "selective"})
    assert some and all(r["tp"] == 8 and r["recompute"] == "selective" for r in some)


def test_cli_3d_rows_json_and_search(tmp_path, capsys):
    out = tmp_path / "sim.json"
    rows = main(["simulate", "--model", "gpt3-175b", "--world", "1024", "--tp", "8", "--pp", "16",
                 "--sequence-parallel", "--recompute", "selective", "--hardware", "a100", "--json", str(out)])
    keys = {"tp", "pp", "dp", "vpp", "schedule", "microbatches", "params", "activation_bytes_per_layer",
            "activation_bytes_per_gpu", "pipeline_bubble_fraction", "model_state_bytes_per_gpu",
            "tp_comm_bytes_per_gpu_per_step", "pp_comm_bytes_per_gpu_per_step", "dp_comm_bytes_per_gpu_per_step",
            "step_ms", "mfu"}
    saved = json.loads(out.read_text())
    assert keys <= set(saved["rows"][0]) and saved["rows"] == rows and saved["model"]["layers"] == 96
    r = rows[0]
    assert (r["tp"], r["pp"], r["dp"], r["microbatches"]) == (8, 16, 8, 192)
    assert r["activation_bytes_per_layer"] == 4.25 * SBH and r["fits_memory"]
    assert "tp8 pp16 dp8 1f1b sp selective recompute" in capsys.readouterr().out
    rows = main(["simulate", "--model", "gpt3-175b", "--world", "1024", "--hardware", "a100", "--search", "--top",
                 "3"])
    text = capsys.readouterr().out
    assert len(rows) == 3 and "layouts fit, fastest first" in text and all(r["fits_memory"] for r in rows)
    rows = main(["simulate", "--model", "megatron-1t", "--world", "8", "--search", "--top", "2"])
    assert "none of" in capsys.readouterr().out and not any(r["fits_memory"] for r in rows)


def test_ddp_zero_rows_carry_the_3d_columns():
    rows = main(["simulate", "--model", "gpt-13b", "--world", "8,64", "--strategy", "ddp,zero3"])
    for r in rows:
        assert (r["tp"], r["pp"], r["dp"], r["vpp"], r["microbatches"]) == (1, 1, r["world"], 1, 1)
        assert r["pipeline_bubble_fraction"] == 0 and r["tp_comm_bytes_per_gpu_per_step"] == 0
        assert r["dp_comm_bytes_per_gpu_per_step"] == r["comm_bytes_per_gpu_per_step"]
        assert r["activation_bytes_per_layer"] == M.activation_bytes_per_layer(2048, 1, 5120, 40)
        assert 0 < r["mfu"] <= H.load("h100").mfu
