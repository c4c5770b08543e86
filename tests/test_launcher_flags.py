"""tinytorch-run's flags: a bad value stops at the command line with argparse's message (exit status 2, the
usage line, the flag and what it expects), with torchrun's wording where torchrun has an error of its own."""
import os
import subprocess
import sys

import pytest
from test_cluster_launch import clean_env  # noqa: F401 - the fixture: no Slurm/Kubeflow/launcher variables

from tinytorch.distributed import run as launcher

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _error(argv, capsys, via_run=False):
    with pytest.raises(SystemExit) as e:
        args = launcher.parse_args(argv)
        if via_run:  # flag combinations are checked when the launch is configured
            launcher.run(args)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tinytorch-run ") and "Traceback" not in err
    return err


def _both(name):
    """How argparse names a flag with torchrun's two spellings: --a-b/--a_b."""
    return f"--{name}/--{name.replace('-', '_')}"


CASES = [  # (argv, the flag as argparse names it, what it says)
    (["--nnodes", "0"], "--nnodes", "expected N or MIN:MAX with 0 < MIN <= MAX, got '0'"),
    (["--nnodes", "3:2"], "--nnodes", "expected N or MIN:MAX with 0 < MIN <= MAX, got '3:2'"),
    (["--nnodes", "1:2:3"], "--nnodes", 'nnodes=1:2:3 is not in "MIN:MAX" format'),
    (["--nnodes", "two"], "--nnodes", 'nnodes=two is not in "MIN:MAX" format'),
    (["--nproc-per-node", "0"], _both("nproc-per-node"),
     "Unsupported nproc_per_node value: 0 (expected a positive integer, cpu, gpu or auto)"),
    (["--nproc_per_node", "many"], _both("nproc-per-node"), "Unsupported nproc_per_node value: many"),
    (["--node-rank", "-1"], _both("node-rank"), "expected a non-negative integer, got '-1'"),
    (["--master-port", "70000"], _both("master-port"), "expected a port number 0-65535, got '70000'"),
    (["--master-port", "http"], _both("master-port"), "expected a port number 0-65535, got 'http'"),
    (["--master-addr", ""], _both("master-addr"), "expected a non-empty value, got ''"),
    (["--rdzv-backend", "etcd"], _both("rdzv-backend"), "invalid choice: 'etcd'"),
    (["--rdzv-endpoint", "node0:99999"], _both("rdzv-endpoint"),
     "expected host[:port] with a port 0-65535, got 'node0:99999'"),
    (["--rdzv-endpoint", "node0:port"], _both("rdzv-endpoint"), "expected host[:port]"),
    (["--rdzv-endpoint", ":29400"], _both("rdzv-endpoint"), "expected host[:port]"),
    (["--rdzv-conf", "join_timeout"], _both("rdzv-conf"),
     "expected key=value,... (--rdzv-conf items are key=value, got 'join_timeout')"),
    (["--rdzv-conf", "join_timeout=-5"], _both("rdzv-conf"),
     "expected key=value,... (join_timeout must be a number of seconds > 0, got '-5')"),
    (["--rdzv-conf", "read_timeout=soon"], _both("rdzv-conf"), "expected key=value,..."),
    (["--rdzv-conf", "is_host=maybe"], _both("rdzv-conf"),
     "expected key=value,... (is_host must be true or false, got 'maybe')"),
    (["--max-restarts", "-1"], _both("max-restarts"), "expected a non-negative integer, got '-1'"),
    (["--max_restarts", "1.5"], _both("max-restarts"), "expected a non-negative integer, got '1.5'"),
    (["--monitor-interval", "0"], _both("monitor-interval"), "expected a positive number, got '0'"),
    (["--shutdown-timeout", "-1"], _both("shutdown-timeout"), "expected a non-negative number, got '-1'"),
    (["--exit-barrier-timeout", "never"], _both("exit-barrier-timeout"), "expected a non-negative number"),
    (["-r", "5"], "-r/--redirects", "expected 0, 1, 2, 3 or local_rank:value pairs such as 0:1,1:2, got '5'"),
    (["--tee", "0:9"], "-t/--tee", "expected 0, 1, 2, 3 or local_rank:value pairs"),
    (["--role", " "], "--role", "expected a non-empty value, got ' '"),
]


@pytest.mark.parametrize("argv, flag, message", CASES, ids=[" ".join(a) for a, _, _ in CASES])
def test_each_flag_rejects_bad_values(argv, flag, message, capsys, clean_env):
    assert f"tinytorch-run: error: argument {flag}: {message}" in _error(argv + ["w.py"], capsys)


def test_environment_settings_are_checked_as_the_flag(capsys, clean_env):
    clean_env.setenv("TINYTORCH_RUN_NNODES", "0")
    assert "argument --nnodes: expected N or MIN:MAX" in _error(["w.py"], capsys)
    clean_env.delenv("TINYTORCH_RUN_NNODES")
    clean_env.setenv("PET_MAX_RESTARTS", "-2")
    want = f"argument {_both('max-restarts')}: expected a non-negative integer, got '-2'"
    assert want in _error(["w.py"], capsys)


@pytest.mark.parametrize("argv, message", [
    (["-m", "--no-python", "w.py"], "-m/--module and --no-python cannot be used together"),
    (["--compat", "--no-python", "w.py"], "--compat and --no-python cannot be used together"),
    (["--nnodes", "2", "--node-rank", "2", "w.py"], "argument --node-rank: expected 0 <= node rank < --nnodes 2 "
                                                    "with the static rendezvous, got 2"),
    (["--standalone", "--nnodes", "2", "w.py"], "--standalone runs a single node"),
    (["--rdzv-backend", "c10d", "w.py"], "--rdzv-backend c10d needs --rdzv-endpoint"),
])
def test_flag_combinations_exit_2_with_usage(argv, message, capsys, clean_env):
    assert message in _error(argv, capsys, via_run=True)


def test_accepted_values_parse():
    args = launcher.parse_args(["--nnodes", "1:4", "--nproc-per-node", "CPU", "--master-port", "0",
                                "--rdzv-endpoint", "[::1]:29400", "--rdzv-conf", "join_timeout=5,is_host=1",
                                "-r", "0:1,1:2", "--tee", "3", "w.py"])
    assert (args.nnodes, args.nproc_per_node, args.master_port) == ("1:4", "cpu", 0)
    assert launcher._split_endpoint(args.rdzv_endpoint, 1) == ("::1", 29400)


def test_the_console_command_exits_2(clean_env):
    res = subprocess.run([sys.executable, "-m", "tinytorch.distributed.run", "--nproc-per-node", "0", "w.py"],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert res.returncode == 2 and res.stderr.startswith("usage: tinytorch-run")
    assert "Unsupported nproc_per_node value: 0" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("argv, torchrun_says", [
    (["--nnodes", "1:2:3"], 'nnodes=1:2:3 is not in "MIN:MAX" format'),
    (["--nproc-per-node", "many"], "Unsupported nproc_per_node value: many"),
])
def test_torchrun_rejects_the_same_values_in_the_same_words(argv, torchrun_says, clean_env, capsys):
    pytest.importorskip("torch")
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", *argv, "w.py"], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode != 0 and torchrun_says in res.stderr
    assert torchrun_says in _error(argv + ["w.py"], capsys)
