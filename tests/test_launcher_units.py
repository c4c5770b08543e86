"""Launcher pieces that need no rendezvous: flags, worker processes, error files and the summary."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tinytorch.distributed import run as launcher
from tinytorch.distributed.elastic.multiprocessing import Std, parse_std, start_worker_process, stop_processes
from tinytorch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure, record


def _config(argv, monkeypatch=None, env=None):
    if env:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
    return launcher.config_from_args(launcher.parse_args(argv))


def test_flags_both_spellings_and_defaults():
    c = _config(["--nproc_per_node", "3", "--max-restarts", "2", "--node_rank", "0", "w.py", "--lr", "1"])
    assert c.nproc_per_node == 3 and c.max_restarts == 2 and c.node_rank == 0
    assert c.args == [sys.executable, "-u", "w.py", "--lr", "1"]
    assert (c.min_nodes, c.max_nodes, c.rdzv_backend) == (1, 1, "static")
    assert c.rdzv_port == 0  # single node: free port, held by the agent
    c = _config(["--nnodes", "2", "--node-rank", "1", "w.py"])
    assert (c.rdzv_host, c.rdzv_port, c.node_rank) == ("127.0.0.1", 29500, 1)


def test_env_defaults_and_command_line_wins(monkeypatch):
    env = {"TINYTORCH_RUN_NPROC_PER_NODE": "4", "TINYTORCH_RUN_MAX_RESTARTS": "5",
           "TINYTORCH_RUN_STANDALONE": "1", "TINYTORCH_RUN_RDZV_ID": "job7"}
    c = _config(["--max-restarts", "1", "w.py"], monkeypatch, env)
    assert c.nproc_per_node == 4 and c.max_restarts == 1
    assert c.rdzv_backend == "c10d" and c.rdzv_port == 0 and c.run_id != "job7"  # standalone: fresh id


def test_standalone_module_nopython_and_endpoint():
    c = _config(["--standalone", "-m", "pkg.train", "x"])
    assert c.args == [sys.executable, "-u", "-m", "pkg.train", "x"]
    c = _config(["--no-python", "--rdzv-backend", "c10d", "--rdzv-endpoint", "node0", "--nnodes", "1:3", "./a.sh"])
    assert c.args == ["./a.sh"] and (c.rdzv_host, c.rdzv_port) == ("node0", 29400)
    assert (c.min_nodes, c.max_nodes) == (1, 3)
    with pytest.raises(ValueError, match="cannot be used together"):
        _config(["-m", "--no-python", "w.py"])
    with pytest.raises(SystemExit) as e:  # a bad flag value stops at the command line (argparse, exit 2)
        _config(["--nnodes", "3:2", "w.py"])
    assert e.value.code == 2


def test_nproc_per_node_values():
    assert launcher.determine_local_world_size("cpu") == os.cpu_count()
    assert launcher.determine_local_world_size("auto") >= 1
    assert launcher.determine_local_world_size("2") == 2
    with pytest.raises(ValueError):
        launcher.determine_local_world_size("many")
    gpus = launcher._gpu_count()
    if gpus == 0:
        with pytest.raises(ValueError, match="CUDA is not available"):
            launcher.determine_local_world_size("gpu")
    else:
        assert launcher.determine_local_world_size("gpu") == gpus


def test_parse_std():
    assert parse_std("3", 2) == {0: Std.ALL, 1: Std.ALL}
    assert parse_std("0:1,1:2", 3) == {0: Std.OUT, 1: Std.ERR, 2: Std.NONE}
    with pytest.raises(ValueError):
        parse_std("x", 1)


def test_record_writes_error_file(tmp_path):
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent("""
        from tinytorch.distributed.elastic.multiprocessing.errors import record

        @record
        def main():
            raise KeyError("missing thing")

        main()
    """))
    err = tmp_path / "error.json"
    proc = subprocess.run([sys.executable, str(script)], env={**os.environ, "TORCHELASTIC_ERROR_FILE": str(err)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "KeyError" in proc.stderr
    msg = json.loads(err.read_text())["message"]
    assert msg["message"] == "KeyError: 'missing thing'"
    assert "in main" in msg["extraInfo"]["py_callstack"] and int(msg["extraInfo"]["timestamp"]) > 0
    f = ProcessFailure(rank=3, local_rank=1, pid=proc.returncode, exitcode=1, error_file=str(err))
    assert f.message == "KeyError: 'missing thing'" and "raise KeyError" in f.traceback


def test_record_success_and_system_exit(tmp_path, monkeypatch):
    err = tmp_path / "e.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(err))
    assert record(lambda x: x + 1)(1) == 2
    with pytest.raises(SystemExit):
        record()(lambda: sys.exit(0))()
    assert not err.exists()
    with pytest.raises(SystemExit):
        record(lambda: sys.exit(3))()
    assert "SystemExit: 3" in err.read_text()


def test_summary_names_root_cause():
    a = ProcessFailure(rank=2, local_rank=0, pid=10, exitcode=-9, timestamp=100.0, hostname="h1")
    b = ProcessFailure(rank=1, local_rank=1, pid=11, exitcode=1, timestamp=50.0, hostname="h0",
                       message="ValueError: x", traceback="Traceback...\nValueError: x")
    e = ChildFailedError("train.py", {2: a, 1: b})
    assert e.get_first_failure() == (1, b)
    text = e.format_msg()
    root = text.split("Root Cause")[1]
    assert "rank      : 1 (local_rank: 1)" in root and "ValueError: x" in root and "host      : h0" in root
    assert "-9 (SIGKILL)" in text and "Signal 9 (SIGKILL) received by PID 10" in text
    assert text.splitlines()[1] == "train.py FAILED"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_worker_logs_and_stop_kills_group(tmp_path):
    code = ("import subprocess, sys, time; print('out', flush=True); print('err', file=sys.stderr, flush=True);"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            f"open({str(tmp_path / 'child')!r}, 'w').write(str(c.pid)); time.sleep(60)")
    w = start_worker_process([sys.executable, "-c", code], dict(os.environ), rank=0, local_rank=0,
                             log_dir=str(tmp_path / "logs"), redirect=Std.ERR, tee=Std.NONE, prefix="[r0]:")
    deadline = time.monotonic() + 30
    while not (tmp_path / "child").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int((tmp_path / "child").read_text())
    assert w.poll() is None and _alive(child)
    t0 = time.monotonic()
    stop_processes([w], signal.SIGTERM, timeout=5)
    assert time.monotonic() - t0 < 5
    assert w.popen.returncode == -signal.SIGTERM
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert (tmp_path / "logs" / "stdout.log").read_text() == "out\n"
    assert (tmp_path / "logs" / "stderr.log").read_text() == "err\n"


def test_sigterm_ignoring_worker_gets_sigkill(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    w = start_worker_process([sys.executable, "-c", code], dict(os.environ), 0, 0,
                             log_dir=str(tmp_path), redirect=Std.ALL, tee=Std.NONE, prefix="")
    deadline = time.monotonic() + 30
    while "ready" not in (tmp_path / "stdout.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    stop_processes([w], signal.SIGTERM, timeout=0.5)
    assert w.popen.returncode == -signal.SIGKILL
