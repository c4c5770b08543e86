"""Flight recorder on real processes: what it records, every rank's dump when one rank stops, the analyzer naming
the rank and the sequence number it missed, mismatched collectives and sizes, SIGUSR1 and API dumps."""
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dist_helpers import pytorch_fr_trace, run_ranks

TIMEOUT = 5.0  # the process group timeout of the failing jobs: short, so the suite stays fast
WORKERS = Path(__file__).parent.parent / "launcher_workers"


def _init(rank, ws, port, prefix, timeout=TIMEOUT):
    import tinytorch.distributed as dist

    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = prefix
    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                            timeout=timeout)
    return dist


def fr_trace(*args):
    """Run the analyzer's command line; (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "tinytorch.distributed.flight_recorder.fr_trace", *map(str, args)],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def _load(path):
    with open(path, "rb") as f:
        return pickle.load(f)


# ---------------------------------------------------------------- one rank stops before its 6th all-reduce


def _stops_before_sixth(rank, ws, port, prefix):
    dist = _init(rank, ws, port, prefix)
    x = np.ones((3, 4), np.float32)
    for i in range(1, 9):
        if i == 6 and rank == ws - 1:
            # Stuck in Python (holding the GIL most of the time): only the C++ watchdog can dump for it.
            t0 = time.monotonic()
            while not os.path.exists(f"{prefix}{rank}") and time.monotonic() - t0 < 30:
                sum(range(1000))
            return "stuck", time.monotonic() - t0
        t0 = time.monotonic()
        try:
            dist.all_reduce(x)
        except dist.DistError as e:
            return type(e).__name__, time.monotonic() - t0, str(e)
    return "finished", 0.0


@pytest.fixture(scope="module")
def stopped_job(tmp_path_factory):
    """A 4-rank job whose last rank stops before its 6th all-reduce: (dump folder, per-rank results)."""
    d = tmp_path_factory.mktemp("stopped")
    return d, run_ranks(_stops_before_sixth, 4, str(d / "rank_"), timeout=90)


def test_a_rank_stuck_in_python_is_named_with_the_sequence_number_it_missed(stopped_job):
    d, res = stopped_job
    ws, prefix = len(res), str(d / "rank_")
    for rank in range(ws - 1):
        kind, elapsed, msg = res[rank]
        assert kind in ("DistTimeoutError", "DistNetworkError"), res[rank]
        assert elapsed < TIMEOUT + 3, (rank, elapsed, msg)  # the timeout, the straggler diagnosis, the dumps
    assert res[ws - 1][0] == "stuck" and res[ws - 1][1] < 30, res[ws - 1]
    assert sorted(os.listdir(d)) == [f"rank_{r}" for r in range(ws)]

    stuck, waiting = _load(f"{prefix}{ws - 1}"), _load(f"{prefix}0")
    assert [e["collective_seq_id"] for e in stuck["entries"]] == [1, 2, 3, 4, 5]
    assert {e["state"] for e in stuck["entries"]} == {"completed"}
    last = waiting["entries"][-1]
    assert (last["collective_seq_id"], last["profiling_name"], last["state"]) == (6, "ring:all_reduce", "started")
    assert last["input_sizes"] == [[3, 4]] and last["input_dtypes"] == ["Float"]
    assert last["time_discovered_completed_ns"] is None and last["timeout_ms"] == TIMEOUT * 1000
    assert waiting["pg_status"]["0"] == {"last_enqueued_collective": 6, "last_started_collective": 6,
                                         "last_completed_collective": 5}
    assert any(f["name"] == "_stops_before_sixth" for f in last["frames"]), last["frames"]

    rc, out, err = fr_trace(d, "-p", "rank_")
    assert rc == 0, err
    assert "Not all ranks joining collective, sequence number: 6" in err
    assert "missing ranks: {3}" in err and "collective: ring:all_reduce" in err and "group info: 0:default_pg" in err
    assert "rank 3 never joined ring:all_reduce sequence number 6 of group 0:default_pg" in err
    assert "its last collective in this group is ring:all_reduce, sequence number 5 (completed)" in err
    assert "ranks {0, 1, 2}: stuck in state 'started' at ring:all_reduce, sequence number 6" in err
    assert "has errors" not in err  # nobody called anything different


def test_pytorch_fr_trace_reads_tinytorch_dumps(stopped_job, tmp_path):
    pytest.importorskip("torch")
    d, res = stopped_job
    # PyTorch's analyzer accepts only its own backends' names ("nccl:", "gloo:", ...); with "ring:" read as
    # "gloo:" it reads tinytorch's dumps field for field and reaches the same verdict.
    for r in range(len(res)):
        dumped = _load(d / f"rank_{r}")
        for e in dumped["entries"]:
            e["profiling_name"] = e["profiling_name"].replace("ring:", "gloo:")
        with open(tmp_path / f"rank_{r}", "wb") as f:
            pickle.dump(dumped, f)
    theirs = pytorch_fr_trace(tmp_path, "-p", "rank_")
    assert "Not all ranks joining collective, sequence number: 6" in theirs and "missing ranks: {3}" in theirs


def test_launched_job_with_a_sleeping_rank_fails_within_its_timeout_and_every_rank_dumps(tmp_path):
    env = dict(os.environ, TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "trace_"), TINYTORCH_RUN_MONITOR_INTERVAL="0.05",
               TINYTORCH_RUN_SHUTDOWN_TIMEOUT="3")
    env.pop("OMP_NUM_THREADS", None)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tinytorch.distributed.run", "--nproc-per-node", "4",
                        str(WORKERS / "hang_worker.py"), "3", "6", str(TIMEOUT)],
                       capture_output=True, text=True, timeout=120, env=env)
    wall = time.monotonic() - t0
    assert p.returncode != 0, p.stderr
    assert "finished" not in p.stdout
    # Start-up of four workers on a small machine, the timeout, the dumps, the agent's stop.
    assert wall < 60, wall
    assert sorted(os.listdir(tmp_path)) == [f"trace_{r}" for r in range(4)], p.stderr
    assert "dump signal from rank" in p.stderr  # the sleeping rank dumped on the others' request
    rc, _, err = fr_trace(tmp_path)  # prefix inferred from the file names
    assert rc == 0, err
    assert "Not all ranks joining collective, sequence number: 6" in err and "missing ranks: {3}" in err


# ---------------------------------------------------------------- a wait that times out before the backend


def _wait_times_out_first(rank, ws, port, prefix):
    dist = _init(rank, ws, port, prefix, timeout=3.0)
    buf = np.zeros(4, np.float32)
    if rank == 1:
        time.sleep(2.4)  # rank 0's all-reduce starts only now, so its own deadline is 5.4 s after the wait began
        dist.send(np.ones(4, np.float32), dst=0)
        t0 = time.monotonic()
        while not os.path.exists(f"{prefix}0") and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        time.sleep(0.5)  # answer rank 0's dump request (the watchdog polls the store every second)
        return os.path.exists(f"{prefix}0")
    dist.irecv(buf, src=1)  # the progress thread runs jobs in order: the all-reduce waits behind this receive
    work = dist.all_reduce(np.ones(4, np.float32), async_op=True)
    t0 = time.monotonic()
    try:
        work.wait()
    except dist.DistTimeoutError as e:
        return str(e), time.monotonic() - t0, os.path.exists(f"{prefix}0")
    return "completed"


def test_a_wait_that_times_out_before_the_backend_reports_asks_every_rank_to_dump(tmp_path):
    # The waiting thread sees the group timeout (plus its second of grace) before the progress thread does: that
    # is a hang all the same, so the dumps are written then, not only when the backend fails the collective.
    res = run_ranks(_wait_times_out_first, 2, str(tmp_path / "rank_"), timeout=90)
    msg, waited, dumped = res[0]
    assert msg.startswith("rank 0: all_reduce") and "did not complete within 4s" in msg, msg
    assert 3.5 < waited < 20, waited  # 4 s, then up to TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC for the dumps
    assert dumped and res[1] is True
    assert sorted(os.listdir(tmp_path)) == ["rank_0", "rank_1"]


def _object_collective_hangs(rank, ws, port, prefix):
    dist = _init(rank, ws, port, prefix, timeout=2.0)
    dist.all_reduce(np.ones(2, np.float32))
    if rank == 1:  # never joins the object collective; dumps when rank 0 asks
        t0 = time.monotonic()
        while not os.path.exists(f"{prefix}0") and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        time.sleep(1.5)
        return os.path.exists(f"{prefix}1")
    try:
        dist.all_gather_object([None, None], {"step": 3})
    except dist.DistTimeoutError as e:
        return str(e)
    return "completed"


def test_an_object_collective_that_times_out_asks_every_rank_to_dump(tmp_path):
    res = run_ranks(_object_collective_hangs, 2, str(tmp_path / "rank_"), timeout=90)
    assert res[0] == "rank 0: all_gather_object #1 of group default_pg: rank 1 did not send its object within 2.0s"
    assert res[1] is True
    rc, _, err = fr_trace(tmp_path)
    assert rc == 0, err


# ---------------------------------------------------------------- different collectives or sizes at one seq


def _diverges(rank, ws, port, prefix, case):
    dist = _init(rank, ws, port, prefix)
    try:
        for i in range(1, 5):
            x = np.ones((2, 3) if (case == "size" and i == 3 and rank == 1) else (2, 2), np.float32)
            if case == "type" and i == 3 and rank == 1:
                dist.broadcast(x, 0)
            else:
                dist.all_reduce(x)
    except dist.DistError as e:
        return str(e)
    return None


@pytest.mark.parametrize("case, expected", [
    ("type", "Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'all_reduce' does not "
             "match found collective type: 'broadcast'"),
    ("size", "Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[2, 2]]' does not match "
             "found input sizes: '[[2, 3]]'"),
])
def test_different_collectives_or_sizes_at_one_sequence_number_are_named(tmp_path, case, expected):
    res = run_ranks(_diverges, 3, str(tmp_path / "rank_"), case, timeout=90)
    assert all(r is not None for r in res), res  # every rank's collective failed ...
    assert sorted(os.listdir(tmp_path)) == ["rank_0", "rank_1", "rank_2"]  # ... and every rank dumped
    rc, _, err = fr_trace(tmp_path, "-p", "rank_")
    assert rc == 0, err
    assert "Collective sequence number: 3 has errors" in err
    assert expected in err
    assert "Not all ranks joining" not in err
    other = "ring:broadcast" if case == "type" else "ring:all_reduce(input_sizes=[[2, 3]]"
    assert f"rank 1 called {other}" in err


# ---------------------------------------------------------------- what is recorded


def _records(rank, ws, port, prefix):
    from tinytorch.distributed import flight_recorder

    dist = _init(rank, ws, port, prefix, timeout=30)
    pair = dist.new_group([0, 2], group_desc="pair")
    x = np.ones(4, np.float64)
    if rank in (0, 2):
        dist.all_reduce(x, group=pair)
    dist.all_gather_into_tensor(np.empty(4 * ws), x)
    if rank == 0:
        dist.send(x, 1)
    elif rank == 1:
        dist.recv(x, 0)
    dist.barrier()
    if rank == 1:
        time.sleep(1.0)
    a = dist.all_reduce(np.ones(2, np.float32), async_op=True)
    b = dist.all_reduce(np.ones(2, np.float32), async_op=True)
    during = None
    if rank == 0:
        # The first waits for rank 1; the second is queued behind it.
        time.sleep(0.3)
        during = [e["state"] for e in flight_recorder.trace()["entries"][-2:]]
    a.wait()
    b.wait()
    t = flight_recorder.trace()
    as_json = json.loads(flight_recorder._dump_nccl_trace_json())
    dist.destroy_process_group()
    return t, during, as_json


def test_entries_record_groups_sequence_numbers_sizes_and_states(tmp_path):
    from tinytorch.distributed.flight_recorder import analysis

    res = run_ranks(_records, 3, str(tmp_path / "rank_"), timeout=90)
    traces = {r: t for r, (t, _, _) in enumerate(res)}
    as_json = res[0][2]  # PyTorch's JSON form: the same keys, lists for tuples, no frames
    assert as_json["entries"][0]["process_group"] == ["1", "pair"] and "frames" not in as_json["entries"][0]
    assert as_json["pg_config"] == traces[0]["pg_config"]
    assert res[0][1] == ["started", "scheduled"], res[0][1]
    t0 = traces[0]
    assert t0["version"] == "2.10"
    assert t0["pg_config"]["0"] == {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}
    assert t0["pg_config"]["1"] == {"name": "1", "desc": "pair", "ranks": "[0, 2]"}
    names = [(e["process_group"], e["profiling_name"], e["collective_seq_id"], e["p2p_seq_id"]) for e in t0["entries"]]
    assert names[:4] == [(("1", "pair"), "ring:all_reduce", 1, 0), (("0", "default_pg"), "ring:all_gather", 1, 0),
                         (("0", "default_pg"), "ring:send 0->1", 1, 1), (("0", "default_pg"), "ring:barrier", 2, 1)]
    gather = t0["entries"][1]
    assert gather["input_sizes"] == [[4]] and gather["output_sizes"] == [[12]] and gather["input_dtypes"] == ["Double"]
    assert [e["record_id"] for e in t0["entries"]] == list(range(len(t0["entries"])))
    assert all(e["state"] == "completed" and e["retired"] for e in t0["entries"])
    assert all(isinstance(e["time_discovered_completed_ns"], int) and e["duration_ms"] >= 0 for e in t0["entries"])
    recv = next(e for e in traces[1]["entries"] if e["is_p2p"])
    assert recv["profiling_name"] == "ring:recv 1<-0" and recv["p2p_seq_id"] == 1
    assert [e["process_group"][0] for e in traces[1]["entries"]].count("1") == 0  # rank 1 is not in the pair
    assert analysis.analyze(traces) == []  # every collective joined by every member, every send received


def _recorder_settings(rank, ws, port, prefix):
    from tinytorch.distributed import flight_recorder

    dist = _init(rank, ws, port, prefix)
    for _ in range(5):
        dist.all_reduce(np.ones(3, np.float32))
    entries = flight_recorder.trace()["entries"]
    try:
        flight_recorder.dump()
        dumped = True
    except RuntimeError as e:
        dumped = str(e)
    flight_recorder._reset_fr_recording()
    dist.all_reduce(np.ones(3, np.float32))
    after_reset = [(e["record_id"], e["collective_seq_id"]) for e in flight_recorder.trace()["entries"]]
    try:  # a mismatch: the group fails on every rank
        if rank == 1:
            dist.broadcast(np.ones(3, np.float32), 0)
        else:
            dist.all_reduce(np.ones(3, np.float32))
    except dist.DistError:
        pass
    return flight_recorder.enabled(), [(e["record_id"], e["collective_seq_id"]) for e in entries], dumped, after_reset


def test_buffer_size_wraps_and_zero_turns_recording_and_dumps_off(tmp_path):
    # The old name still works (PyTorch's rule), and a buffer of 3 keeps the newest 3 entries.
    small, off = tmp_path / "small", tmp_path / "off"
    small.mkdir()
    off.mkdir()
    res = run_ranks(_recorder_settings, 2, str(small) + "/r", env={"TORCH_NCCL_TRACE_BUFFER_SIZE": "3"}, timeout=60)
    assert res[0][:2] == (True, [(2, 3), (3, 4), (4, 5)]) and res[0][2] is True
    assert res[0][3] == [(5, 6)]  # after a reset: only the new entry, and record ids go on counting
    assert sorted(os.listdir(small)) == ["r0", "r1"]  # the explicit dump (then overwritten by the failure's)
    res = run_ranks(_recorder_settings, 2, str(off) + "/r", env={"TORCH_FR_BUFFER_SIZE": "0"}, timeout=60)
    assert res[0][:2] == (False, []) and res[0][3] == []
    assert "TORCH_FR_BUFFER_SIZE=0" in res[0][2]
    assert os.listdir(off) == []  # nothing recorded, nothing dumped on failure


def _dump_on_request(rank, ws, port, prefix):
    from tinytorch.distributed import flight_recorder

    dist = _init(rank, ws, port, prefix, timeout=30)
    for _ in range(3):
        dist.all_reduce(np.ones(2, np.float32))
    if rank == 0:
        os.kill(os.getpid(), signal.SIGUSR1)  # Python's default for SIGUSR1 would end the process
        t0 = time.monotonic()
        while not os.path.exists(f"{prefix}0") and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        path = f"{prefix}0"
    else:
        path = flight_recorder.dump()
    dist.all_reduce(np.ones(2, np.float32))  # training goes on
    expected = flight_recorder.dump_path()
    if rank == 0:
        # An op that destroy_process_group itself fails is no hang: nobody dumps for it.
        dist.all_reduce(np.ones(2, np.float32), async_op=True)
        time.sleep(0.2)
        dist.destroy_process_group()
    else:
        time.sleep(1.0)
    return path, expected


def test_sigusr1_and_the_api_dump_while_training_goes_on(tmp_path):
    prefix = str(tmp_path / "rank_")
    res = run_ranks(_dump_on_request, 2, prefix, timeout=60)
    for rank, (path, expected) in enumerate(res):
        assert path == expected == f"{prefix}{rank}"
        d = _load(path)
        assert [e["collective_seq_id"] for e in d["entries"]] == [1, 2, 3]  # the requested dumps, nothing later
        assert {e["state"] for e in d["entries"]} == {"completed"}
    assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]  # written to a temporary file, then renamed


def test_default_dump_path_follows_pytorch(tmp_path):
    code = ("from tinytorch.distributed import flight_recorder as fr; print(fr.dump_path(3)); print(fr.enabled())")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == [str(tmp_path / "torch" / "comm_lib_trace_rank_3"), "True"], out.stderr
    assert (tmp_path / "torch").is_dir()  # the default folder is created (a folder named by the variable is not)
