"""tinytorch-bench validate end to end at tiny settings: calibration files, cases, JSON (errors are reported,
not asserted: the machine is shared)."""
import json

from tinytorch.bench import main


def test_validate_writes_cases(tmp_path):
    out = tmp_path / "v.json"
    cases = main(["validate", "--out-dir", str(tmp_path / "cal"), "--sizes", "64K,256K", "--iters", "3",
                  "--worlds", "3", "--steps", "3", "--warmup", "1", "--repeats", "1", "--sweep-repeats", "1",
                  "--json", str(out), "--cases", "ddp,tp,pp"])
    saved = json.loads(out.read_text())["cases"]
    assert saved == cases
    kinds = {(c["strategy"], c["world"]) for c in cases}
    assert ("ddp", 2) in kinds and ("all_reduce", 3) in kinds and ("zero2", 2) not in kinds  # --cases chose
    # TP=2 and PP=2 (1F1B) are predicted from the same calibration and measured by train --strategy tp|pp
    layouts = {c["strategy"]: c for c in cases if c.get("layout")}
    assert set(layouts) == {"tp", "pp"}
    assert layouts["pp"]["layout"] == "tp1 pp2 dp1 1f1b" and layouts["tp"]["layout"] == "tp2 pp1 dp1 1f1b"
    for c in cases:
        assert set(c) >= {"strategy", "world", "model", "predicted_ms", "measured_ms", "error"}
        assert c["predicted_ms"] > 0
        if c["measured_ms"] is None:  # only ZeRO-2/3, in a build without tinytorch.distributed.fsdp
            assert c["strategy"] in ("zero2", "zero3") and c["error"] is None
            continue
        assert c["measured_ms"] > 0
        assert abs(c["error"] - (c["predicted_ms"] - c["measured_ms"]) / c["measured_ms"]) < 1e-12
        if c["strategy"] in ("ddp", "tp", "pp"):  # each predicted from its own run's unwrapped W3 steps
            assert len(c["alone_repeats_ms"]) == len(c["predicted_repeats_ms"]) == 1
    pp = layouts["pp"]
    assert 0 < pp["predicted_bubble_ms"] < pp["predicted_compute_ms"] < pp["predicted_ms"]
    assert len(pp["compute_ms_per_rank"][0]) == len(pp["idle_ms_per_rank"][0]) == 2
    assert len(pp["solo_speedup"]) == 1 and 1.0 <= pp["solo_speedup"][0] <= 2.0
    ddp = next(c for c in cases if c["strategy"] == "ddp")
    # the TP step splits the same batch over 2 ranks: less compute than a DDP rank's whole batch
    assert layouts["tp"]["predicted_ms"] < ddp["predicted_ms"]
    assert (tmp_path / "cal" / "w3_1rank_trace.json").exists()
    assert (tmp_path / "cal" / "calibration_sweep_2ranks.json").exists()
