"""tinytorch-bench chaos, a short seeded run: real agents, real workers, real signals and files; every fault kind
the bench injects (network ones where this process may create network namespaces) must be recovered from."""
import json
import random

from tinytorch.bench import chaos, main


def test_fault_order_is_seeded_and_fair():
    faults = list(chaos.FAULTS)
    order = chaos.fault_order(faults, 20, random.Random(5))
    assert order == chaos.fault_order(faults, 20, random.Random(5))
    assert order != chaos.fault_order(faults, 20, random.Random(6))
    assert sorted(order[:8]) == sorted(faults) and sorted(order[8:16]) == sorted(faults)


def test_seeded_trials_recover_with_nothing_lost(tmp_path):
    out = tmp_path / "chaos.json"
    # The hang (stop-worker) waits out a process group timeout: it is left to the bench's own runs.
    faults = ["kill-node", "kill-in-save", "corrupt-checkpoint", "net-cut"]
    res = main(["chaos", "--trials", "4", "--seed", "3", "--faults", ",".join(faults), "--steps", "12",
                "--ckpt-every", "3", "--nproc-per-node", "1", "--timeout", "8", "--work-dir", str(tmp_path / "w"),
                "--json", str(out)])
    trials = res["trials"]
    assert json.loads(out.read_text())["trials"] == json.loads(json.dumps(trials))
    assert len(trials) == 4
    bad = [(t["fault"], t["outcome"], t.get("agent_log_tail", "")[-1500:])
           for t in trials if t["outcome"] != "recovered"]
    assert not bad, bad
    ran = {t["fault"] for t in trials}
    expected = set(faults) if res["network_skipped"] is None else set(faults) - {"net-cut"}
    assert ran == expected
    for t in trials:
        assert t["recovery_s"] is not None and t["recovery_s"] >= 0
        if t["fault"] in ("kill-node", "kill-in-save", "corrupt-checkpoint"):
            assert t["restarts"] == 1
        if t["fault"] == "kill-node":
            assert t["final_world"] == 1 and t["agent_exit_codes"][0] == 0
        if t["fault"] == "corrupt-checkpoint":
            target = t["facts"]["target"]
            assert target in t["error_seen"] and "CheckpointException" in t["error_seen"]
    assert set(res["summary"]) == expected
