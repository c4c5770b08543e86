"""tinytorch-run end to end: real agents, real workers, the real TCPStore on 127.0.0.1; every wait bounded."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "launcher_workers"
TIMEOUT = 60  # upper bound for one agent; the tests normally take a second or two


class Agent:
    """A ``python -m tinytorch.distributed.run`` process whose stderr is collected as it arrives."""

    def __init__(self, args: list[str], env: dict | None = None) -> None:
        full_env = dict(os.environ)
        full_env.pop("OMP_NUM_THREADS", None)
        # Keep the tests quick: fast polling, short grace period; still real signals and sockets.
        full_env.update({"TINYTORCH_RUN_MONITOR_INTERVAL": "0.05", "TINYTORCH_RUN_SHUTDOWN_TIMEOUT": "3"})
        full_env.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "tinytorch.distributed.run", *args], env=full_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.err_lines: list[str] = []
        self.out = ""
        self._t = threading.Thread(target=self._read_err, daemon=True)
        self._t.start()
        self._t_out = threading.Thread(target=self._read_out, daemon=True)
        self._t_out.start()

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.err_lines.append(line)

    def _read_out(self) -> None:
        self.out = self.proc.stdout.read()

    @property
    def err(self) -> str:
        return "".join(self.err_lines)

    def wait_for(self, pattern: str, timeout: float = TIMEOUT) -> re.Match:
        """Wait until stderr matches ``pattern``; return the match."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.err)
            if m:
                return m
            if self.proc.poll() is not None:
                self._t.join(5)
                m = re.search(pattern, self.err)
                if m:
                    return m
                raise AssertionError(f"agent exited ({self.proc.returncode}) before {pattern!r}:\n{self.err}")
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {pattern!r}:\n{self.err}")

    def store_port(self) -> int:
        """Return the port the hosting agent printed."""
        return int(self.wait_for(r"rendezvous store listening on [\d.]+:(\d+)").group(1))

    def finish(self, timeout: float = TIMEOUT) -> int:
        """Wait for the agent to exit; kill it (and fail) if it does not."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"agent did not finish in {timeout}s:\n{self.err}")
        self._t.join(5)
        self._t_out.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def agents():
    started: list[Agent] = []

    def start(*args: str, env: dict | None = None) -> Agent:
        a = Agent(list(args), env)
        started.append(a)
        return a

    yield start
    for a in started:
        a.kill()


def _ranks(out: Path) -> dict[int, dict]:
    return {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in out.glob("rank_*.json")}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def _wait_dead(pids: list[int], timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _read_pids(out: Path, n: int, timeout: float = TIMEOUT) -> list[int]:
    deadline = time.monotonic() + timeout
    while len(list(out.glob("pids_*"))) < n:
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.05)
    return [int(x) for p in out.glob("pids_*") for x in p.read_text().split()]


def test_standalone_env_logs_and_printed_port(agents, tmp_path):
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    a = agents("--standalone", "--nproc-per-node", "2", "--log-dir", str(logs), "--role", "trainer",
               str(WORKERS / "env_worker.py"), str(out), "--flag", "x")
    port = a.store_port()
    assert a.finish() == 0, a.err
    assert "OMP_NUM_THREADS is unset; setting it to 1" in a.err
    ranks = _ranks(out)
    assert sorted(ranks) == [0, 1]
    for r, env in ranks.items():
        assert env["RANK"] == env["LOCAL_RANK"] == env["ROLE_RANK"] == str(r)
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["ROLE_WORLD_SIZE"]) == ("2", "2", "2")
        assert (env["GROUP_RANK"], env["GROUP_WORLD_SIZE"], env["ROLE_NAME"]) == ("0", "1", "trainer")
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", str(port))
        assert env["TORCHELASTIC_RESTART_COUNT"] == "0" and env["TORCHELASTIC_MAX_RESTARTS"] == "0"
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True" and env["OMP_NUM_THREADS"] == "1"
        assert len(env["TORCHELASTIC_RUN_ID"]) == 36  # a fresh uuid per standalone job
        assert env["argv"] == ["--flag", "x"]
        rank_dir = logs / "attempt_0" / str(r)
        assert env["TORCHELASTIC_ERROR_FILE"] == str(rank_dir / "error.json")
        assert (rank_dir / "stdout.log").read_text() == f"hello from rank {r}\n"
        assert (rank_dir / "stderr.log").read_text() == f"stderr of rank {r}\n"
    assert "[trainer1]:hello from rank 1" in a.out  # teed to the console, prefixed


def test_two_static_nodes_through_one_endpoint(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-id", "job2"]
    script = [str(WORKERS / "env_worker.py"), str(out), "allreduce"]
    # Node 0 binds port 0 and prints it: no free-port guessing, no race.
    n0 = agents(*common, "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:0", *script)
    port = n0.store_port()
    n1 = agents(*common, "--node_rank", "1", "--rdzv_endpoint", f"127.0.0.1:{port}", *script)
    assert n0.finish() == 0, n0.err
    assert n1.finish() == 0, n1.err
    ranks = _ranks(out)
    assert sorted(ranks) == [0, 1, 2, 3]
    for r, env in ranks.items():
        assert env["RANK"] == str(r) and env["LOCAL_RANK"] == str(r % 2) and env["GROUP_RANK"] == str(r // 2)
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["GROUP_WORLD_SIZE"]) == ("4", "2", "2")
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", str(port))
        assert env["TORCHELASTIC_RUN_ID"] == "job2"
        # Sum over ranks of (rank + 1) * [1, 2, 3], computed by the ring backend.
        assert env["allreduce"] == [10.0, 20.0, 30.0]


def test_two_c10d_nodes_rank_by_store_host(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    common = ["--rdzv-backend", "c10d", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-id", "jobc"]
    host = agents(*common, "--rdzv-endpoint", "127.0.0.1:0", "--rdzv-conf", "is_host=1",
                  str(WORKERS / "env_worker.py"), str(out))
    port = host.store_port()
    other = agents(*common, "--rdzv-endpoint", f"127.0.0.1:{port}", str(WORKERS / "env_worker.py"), str(out))
    assert other.finish() == 0, other.err
    assert host.finish() == 0, host.err
    ranks = _ranks(out)
    assert [ranks[r]["GROUP_RANK"] for r in (0, 1)] == ["0", "1"]
    assert {ranks[r]["WORLD_SIZE"] for r in (0, 1)} == {"2"}


def test_crash_on_first_attempt_restarts_and_succeeds(agents, tmp_path):
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    a = agents("--standalone", "--nproc-per-node", "2", "--max-restarts", "2", "--log-dir", str(logs),
               str(WORKERS / "crash_worker.py"), "once", "1", str(out))
    assert a.finish() == 0, a.err
    # Rank 0 may or may not finish attempt 0 before rank 1's crash stops it; attempt 1 must be complete.
    done = {p.name for p in out.iterdir()}
    assert {"ok_rank_0_attempt_1", "ok_rank_1_attempt_1"} <= done and "ok_rank_1_attempt_0" not in done
    assert (out / "ok_rank_1_attempt_1").read_text() == "1"  # TORCHELASTIC_RESTART_COUNT=1
    assert "boom on rank 1 attempt 0" in (logs / "attempt_0" / "1" / "error.json").read_text()
    assert (logs / "attempt_1" / "1" / "stdout.log").exists()
    assert not (logs / "attempt_2").exists()


def test_always_crashing_worker_fails_with_summary(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    a = agents("--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
               str(WORKERS / "crash_worker.py"), "always", "1", str(out))
    assert a.finish() == 1, a.err
    summary = a.err.split("crash_worker.py FAILED")[1]
    root = summary.split("Root Cause (first observed failure):")[1]
    assert "rank      : 1 (local_rank: 1)" in root and "exitcode  : 1" in root
    assert "ValueError: boom on rank 1 attempt 1" in root and 'crash_worker.py", line' in root
    assert "host      :" in root and "time      :" in root
    assert "restarting (1/1)" in a.err and "no restarts left" in a.err


def test_failure_on_one_node_restarts_both_nodes(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--max-restarts", "1"]
    # Ranks 0-2 block in init_process_group waiting for rank 3 on attempt 0: the restart must stop them.
    script = [str(WORKERS / "crash_worker.py"), "once", "3", str(out), "allreduce"]
    n0 = agents(*common, "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:0", *script)
    n1 = agents(*common, "--node-rank", "1", "--rdzv-endpoint", f"127.0.0.1:{n0.store_port()}", *script)
    assert n1.finish() == 0, n1.err
    assert n0.finish() == 0, n0.err
    assert sorted(p.name for p in out.iterdir()) == [f"ok_rank_{r}_attempt_1" for r in range(4)]
    # Attempt 1 reuses the agent store: the process group must not trip over attempt 0's keys.
    assert {(out / f"ok_rank_{r}_attempt_1").read_text() for r in range(4)} == {"1 10"}


def test_failure_on_one_node_fails_every_node(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    common = ["--nnodes", "2", "--nproc-per-node", "1"]
    script = [str(WORKERS / "crash_worker.py"), "always", "1", str(out)]
    n0 = agents(*common, "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:0", *script)
    n1 = agents(*common, "--node-rank", "1", "--rdzv-endpoint", f"127.0.0.1:{n0.store_port()}", *script)
    assert n1.finish() == 1
    assert n0.finish() == 1
    for a in (n0, n1):
        root = a.err.split("Root Cause (first observed failure):")[1]
        assert "rank      : 1 (local_rank: 0)" in root and "boom on rank 1 attempt 0" in root


@pytest.mark.parametrize("sig,trap,expected", [
    (signal.SIGTERM, False, 128 + signal.SIGTERM),  # workers killed by the forwarded signal
    (signal.SIGINT, False, 128 + signal.SIGINT),
    (signal.SIGTERM, True, 7),  # workers that shut down gracefully decide the status
])
def test_signal_to_agent_is_forwarded_and_leaves_no_worker_behind(agents, tmp_path, sig, trap, expected):
    out = tmp_path / "out"
    out.mkdir()
    a = agents("--standalone", "--nproc-per-node", "2", str(WORKERS / "sleep_worker.py"), str(out),
               *(["trap"] if trap else []))
    pids = _read_pids(out, 2)  # two workers and a child of each
    assert all(_alive(p) for p in pids)
    a.proc.send_signal(sig)
    rc = a.finish(timeout=20)
    assert rc == expected, a.err
    assert f"forwarding {signal.Signals(sig).name} to the workers" in a.err
    assert _wait_dead(pids) == []


def test_signal_to_one_node_stops_the_whole_job(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    common = ["--nnodes", "2", "--nproc-per-node", "1"]
    script = [str(WORKERS / "sleep_worker.py"), str(out)]
    n0 = agents(*common, "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:0", *script)
    n1 = agents(*common, "--node-rank", "1", "--rdzv-endpoint", f"127.0.0.1:{n0.store_port()}", *script)
    pids = _read_pids(out, 2)
    n1.proc.send_signal(signal.SIGTERM)
    assert n1.finish(timeout=20) == 128 + signal.SIGTERM, n1.err
    assert n0.finish(timeout=20) == 1, n0.err
    assert "stopped because another node failed" in n0.err and "received SIGTERM" in n0.err
    assert _wait_dead(pids) == []


def test_sigkilled_agent_takes_its_workers_down(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    a = agents("--standalone", "--nproc-per-node", "2", str(WORKERS / "sleep_worker.py"), str(out))
    _read_pids(out, 2)
    pids = [[int(x) for x in (out / f"pids_{r}").read_text().split()] for r in range(2)]
    workers = [v[0] for v in pids]
    assert all(_alive(p) for p in workers)
    a.proc.kill()  # no chance to forward anything: PR_SET_PDEATHSIG does the job
    a.proc.wait(20)
    try:
        assert _wait_dead(workers) == []
    finally:
        # The workers' own children are not covered by the death signal; they hold the agent's pipes.
        for _, child in pids:
            if _alive(child):
                os.kill(child, signal.SIGKILL)
    a.finish(timeout=20)


def test_losing_the_store_host_stops_the_other_node(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    common = ["--nnodes", "2", "--nproc-per-node", "1"]
    script = [str(WORKERS / "sleep_worker.py"), str(out)]
    n0 = agents(*common, "--node-rank", "0", "--rdzv-endpoint", "127.0.0.1:0", *script)
    n1 = agents(*common, "--node-rank", "1", "--rdzv-endpoint", f"127.0.0.1:{n0.store_port()}", *script)
    pids = _read_pids(out, 2)
    n0.proc.kill()
    try:
        assert n1.finish(timeout=20) == 1
        assert "lost the rendezvous store at 127.0.0.1:" in n1.err
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
    n0.finish(timeout=20)


def test_unreachable_endpoint_fails_within_timeout(agents, tmp_path):
    import socket

    # A port nobody listens on: bound (so nobody else takes it) but not listening.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        t0 = time.monotonic()
        a = agents("--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", f"127.0.0.1:{port}",
                   "--rdzv-conf", "read_timeout=2", str(WORKERS / "env_worker.py"), str(tmp_path))
        rc = a.finish(timeout=30)
    elapsed = time.monotonic() - t0
    assert rc == 1
    assert f"could not reach the rendezvous endpoint 127.0.0.1:{port} within 2s" in a.err
    assert 1.5 < elapsed < 15


def test_static_port_in_use_is_a_clear_error(agents, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        a = agents("--nnodes", "2", "--node-rank", "0", "--master-port", str(port),
                   str(WORKERS / "env_worker.py"), str(tmp_path))
        assert a.finish(timeout=30) == 1
    assert f"cannot host the rendezvous store on 127.0.0.1:{port}: address already in use" in a.err


def test_module_and_no_python_entrypoints(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    a = agents("--standalone", "-m", "env_worker", str(out), env={"PYTHONPATH": str(WORKERS)})
    assert a.finish() == 0, a.err
    assert _ranks(out)[0]["WORLD_SIZE"] == "1"
    a = agents("--standalone", "--nproc_per_node", "2", "--no-python", "/bin/sh", "-c",
               f'echo "$RANK/$WORLD_SIZE" > {out}/sh_$RANK')
    assert a.finish() == 0, a.err
    assert [(out / f"sh_{r}").read_text() for r in (0, 1)] == ["0/2\n", "1/2\n"]


def test_elastic_min_max_nodes_closes_after_last_call(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    a = agents("--rdzv-backend", "c10d", "--nnodes", "1:2", "--rdzv-endpoint", "127.0.0.1:0",
               "--rdzv-conf", "is_host=1,last_call_timeout=0.3", str(WORKERS / "env_worker.py"), str(out))
    assert a.finish() == 0, a.err
    assert _ranks(out)[0]["GROUP_WORLD_SIZE"] == "1"


def test_console_script_is_declared():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "tinytorch-run"]
    assert ep.value == "tinytorch.distributed.run:main"


def test_a_stopped_worker_is_continued_so_the_forwarded_signal_ends_it(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    a = agents("--standalone", "--nproc-per-node", "2", str(WORKERS / "sleep_worker.py"), str(out))
    pids = _read_pids(out, 2)
    worker0 = int((out / "pids_0").read_text().split()[0])
    os.kill(worker0, signal.SIGSTOP)  # a hung worker
    a.proc.send_signal(signal.SIGTERM)
    # Ended by the SIGTERM (143), not by the SIGKILL that follows the grace period (137).
    assert a.finish(timeout=20) == 128 + signal.SIGTERM, a.err
    assert _wait_dead(pids) == []


# ------------------------------------------------------------------ elastic membership (c10d, --nnodes MIN:MAX)

def _progress(run: Path) -> list[tuple[int, int, str]]:
    """(round, rank, event) of the chaos job's progress files (tinytorch.bench._chaos_train)."""
    out = []
    for p in sorted((run / "progress").glob("rank*.log")):
        for line in p.read_text().splitlines():
            _, _, rnd, what = line.split(" ", 3)
            out.append((int(rnd), int(p.stem[4:]), what))
    return out


def test_a_node_that_arrives_is_taken_in_and_training_goes_on_at_world_4(agents, tmp_path):
    from tinytorch.bench._chaos_train import reference_losses

    run, steps = tmp_path / "run", 40
    job = ["-m", "tinytorch.bench._chaos_train", "--run-dir", str(run), "--steps", str(steps), "--ckpt-every", "4",
           "--step-time", "0.25"]
    # --max-restarts 0: taking a node in is a membership change, not a restart.
    common = ["--rdzv-backend", "c10d", "--nnodes", "1:2", "--nproc-per-node", "2", "--max-restarts", "0"]
    a = agents(*common, "--rdzv-endpoint", "127.0.0.1:0", "--rdzv-conf", "is_host=1,last_call_timeout=0.5", *job)
    port = a.store_port()
    deadline = time.monotonic() + TIMEOUT
    while (0, 0, "saved 4") not in _progress(run):  # node A alone has trained and checkpointed at world 2
        assert time.monotonic() < deadline and a.proc.poll() is None, a.err
        time.sleep(0.05)
    b = agents(*common, "--rdzv-endpoint", f"127.0.0.1:{port}", *job)
    assert a.finish(timeout=180) == 0, a.err
    assert b.finish(timeout=60) == 0, b.err
    assert "[default] Detected 1 new nodes from group_rank=0; will restart worker group" in a.err
    assert "attempt 1: node 1/2, ranks 2..3 of 4" in b.err and "attempt 0" not in b.err  # B waited for round 1
    events = _progress(run)
    starts = {(r, k): w for r, k, w in events if w.startswith("start ")}
    assert sorted(starts) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert all(" world 2 " in starts[(0, k)] for k in (0, 1))
    assert all(" world 4 " in w and w.endswith("restarts 0") for (r, _), w in starts.items() if r == 1)
    # Round 1 resumed from the newest checkpoint round 0 had written, on every rank.
    last_saved = max(int(w.split()[1]) for r, k, w in events if r == 0 and k == 0 and w.startswith("saved "))
    assert {w for r, _, w in events if r == 1 and w.startswith("resumed ")} == {f"resumed {last_saved}"}
    losses = [json.loads(line) for line in (run / "losses.jsonl").read_text().splitlines()]
    assert {rec["step"] for rec in losses} == set(range(steps))
    assert {(rec["round"], rec["world"]) for rec in losses} == {(0, 2), (1, 4)}
    assert [rec["step"] for rec in losses if rec["round"] == 1] == list(range(last_saved, steps))
    ref = reference_losses(steps)
    for rec in losses:
        assert rec["loss"] == pytest.approx(ref[rec["step"]], rel=1e-10, abs=0)


def test_a_node_waiting_when_the_job_finishes_leaves_cleanly(agents, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # MAX is 1: the second node is a spare; it is never taken in, and the job's end releases it.
    common = ["--rdzv-backend", "c10d", "--nnodes", "1:1", "--no-python", "/bin/sh", "-c",
              f"sleep 3; echo done > {out}/$RANK"]
    a = agents("--rdzv-endpoint", "127.0.0.1:0", "--rdzv-conf", "is_host=1", *common)
    port = a.store_port()
    b = agents("--rdzv-endpoint", f"127.0.0.1:{port}", *common)
    assert a.finish() == 0, a.err
    assert b.finish() == 0, b.err
    assert "the job finished before this node was taken in; leaving" in b.err
    assert "attempt" not in b.err and "Detected" not in a.err
    assert [p.name for p in out.iterdir()] == ["0"]
