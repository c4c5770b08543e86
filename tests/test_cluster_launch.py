"""Cluster launch without a cluster: Slurm's and Kubeflow's environment variables, set by hand, drive
tinytorch-run and init_process_group("env://"); real processes, real TCPStore on 127.0.0.1."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tinytorch.distributed import run as launcher
from tinytorch.distributed.elastic.slurm import expand_hostlist, first_host, launch_defaults, process_env

WORKERS = Path(__file__).parent / "launcher_workers"
TIMEOUT = 60
CLUSTER_VARS = ("SLURM_", "PET_", "TINYTORCH_RUN_", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                "LOCAL_RANK")


@pytest.fixture
def clean_env(monkeypatch):
    """Start from an environment with no Slurm/Kubeflow/launcher variables (the runner may be in a job)."""
    for k in list(os.environ):
        if k.startswith(CLUSTER_VARS):
            monkeypatch.delenv(k)
    return monkeypatch


def _base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLUSTER_VARS)}
    env.pop("OMP_NUM_THREADS", None)
    return env


def _config(argv):
    return launcher.config_from_args(launcher.parse_args(argv))


@pytest.mark.parametrize("hostlist, hosts", [
    ("node01", ["node01"]),
    ("a,b,c", ["a", "b", "c"]),
    ("node[01-04,07],gpu-a[1-2]", ["node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("rack[1-2]-n[1,3]", ["rack1-n1", "rack1-n3", "rack2-n1", "rack2-n3"]),
    ("gpu[3]-ib,login", ["gpu3-ib", "login"]),
    ("10.0.0.[1-2]", ["10.0.0.1", "10.0.0.2"]),
])
def test_expand_hostlist(hostlist, hosts):
    assert expand_hostlist(hostlist) == hosts
    assert first_host(hostlist) == hosts[0]


@pytest.mark.parametrize("bad, why", [("node[1-2", "without"), ("node1-2]", "without"), ("n[a-b]", "not N"),
                                      ("n[5-2]", "backwards"), ("n[[1]]", "nested"), ("", "no hosts")])
def test_bad_hostlist_is_a_clear_error(bad, why):
    with pytest.raises(ValueError, match=why):
        expand_hostlist(bad)


def test_slurm_defaults_and_flag_precedence(clean_env):
    slurm = {"SLURM_JOB_ID": "4242", "SLURM_NNODES": "4", "SLURM_NODEID": "2",
             "SLURM_JOB_NODELIST": "node[01-04]", "SLURM_STEP_NODELIST": "node[02-05]"}
    for k, v in slurm.items():
        clean_env.setenv(k, v)
    c = _config(["w.py"])
    # The step's first node runs node rank 0; static rendezvous on torchrun's default port.
    assert (c.min_nodes, c.max_nodes, c.node_rank, c.run_id) == (4, 4, 2, "4242")
    assert (c.rdzv_backend, c.rdzv_host, c.rdzv_port) == ("static", "node02", 29500)
    clean_env.setenv("MASTER_PORT", "31337")
    c = _config(["--rdzv-backend", "c10d", "w.py"])
    assert (c.rdzv_host, c.rdzv_port, c.node_rank) == ("node02", 31337, 2)
    clean_env.setenv("SLURM_STEP_NUM_NODES", "3")  # srun -N3 inside the 4-node allocation
    assert _config(["w.py"]).max_nodes == 3
    # TINYTORCH_RUN_* and PET_* beat Slurm; the command line beats everything.
    clean_env.setenv("PET_NNODES", "3")
    clean_env.setenv("PET_NODE_RANK", "1")
    clean_env.setenv("TINYTORCH_RUN_NODE_RANK", "0")
    c = _config(["--rdzv-id", "mine", "w.py"])
    assert (c.max_nodes, c.node_rank, c.run_id) == (3, 0, "mine")
    c = _config(["--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "h:1", "w.py"])
    assert (c.max_nodes, c.node_rank, c.rdzv_host, c.rdzv_port) == (2, 1, "h", 1)
    # An explicit master address means the user picked the endpoint: Slurm's host is not used.
    c = _config(["--master-addr", "10.1.1.1", "w.py"])
    assert (c.rdzv_host, c.rdzv_port) == ("10.1.1.1", 29500)
    # --standalone ignores the allocation entirely.
    clean_env.delenv("PET_NNODES")
    c = _config(["--standalone", "w.py"])
    assert (c.max_nodes, c.rdzv_host, c.rdzv_port) == (1, "127.0.0.1", 0) and c.run_id != "4242"
    clean_env.setenv("SLURM_NODEID", "x")
    clean_env.delenv("PET_NODE_RANK")
    clean_env.delenv("TINYTORCH_RUN_NODE_RANK")
    with pytest.raises(ValueError, match="SLURM_NODEID must be an integer"):
        _config(["w.py"])


def test_kubeflow_pet_variables(clean_env):
    # What Kubeflow's training operator sets in a worker pod of a PyTorchJob with nprocPerNode.
    for k, v in {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "3",
                 "PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456", "PET_MAX_RESTARTS": "2"}.items():
        clean_env.setenv(k, v)
    c = _config(["train.py"])
    assert (c.max_nodes, c.node_rank, c.nproc_per_node, c.max_restarts) == (2, 1, 3, 2)
    assert (c.rdzv_backend, c.rdzv_host, c.rdzv_port) == ("static", "job-master-0", 23456)
    # Elastic PyTorchJob: c10d backend, endpoint and MIN:MAX nodes.
    for k, v in {"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "job-c10d:29400", "PET_NNODES": "1:4",
                 "PET_RDZV_ID": "pyjob"}.items():
        clean_env.setenv(k, v)
    c = _config(["train.py"])
    assert (c.rdzv_backend, c.rdzv_host, c.rdzv_port, c.min_nodes, c.max_nodes, c.run_id) == (
        "c10d", "job-c10d", 29400, 1, 4, "pyjob")
    assert _config(["--nproc-per-node", "1", "train.py"]).nproc_per_node == 1
    clean_env.setenv("PET_STANDALONE", "1")
    clean_env.delenv("PET_NNODES")
    assert _config(["train.py"]).rdzv_port == 0


def test_process_env_from_srun_variables():
    env = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
           "SLURM_STEP_NODELIST": "gpu-a[3-4]"}
    assert process_env(env) == {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "gpu-a3"}
    assert "MASTER_ADDR" not in process_env({**env, "MASTER_ADDR": "10.0.0.9"})
    assert process_env({**env, "RANK": "0"}) == {}  # a launcher started this rank: leave it alone
    assert process_env({k: v for k, v in env.items() if k != "SLURM_JOB_ID"}) == {}
    assert launch_defaults({}) == {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_srun_style_ranks_all_reduce(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    port = _free_port()  # rank 0's TCPStore binds it; a clash fails loudly ("address in use"), never hangs
    procs = []
    for rank in range(2):
        env = _base_env()
        env.update({"SLURM_JOB_ID": "99", "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2",
                    "SLURM_LOCALID": str(rank), "SLURM_JOB_NODELIST": "localhost",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        procs.append(subprocess.Popen([sys.executable, str(WORKERS / "srun_worker.py"), str(out)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    assert [p.returncode for p in procs] == [0, 0], outputs
    for rank in range(2):
        rec = json.loads((out / f"rank_{rank}.json").read_text())
        assert (rec["rank"], rec["world_size"]) == (rank, 2)
        assert rec["allreduce"] == [3.0, 6.0, 9.0]  # (1 + 2) * [1, 2, 3]
        assert rec["env"] == {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                              "MASTER_ADDR": "127.0.0.1"}


def test_tinytorch_run_under_single_node_slurm(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    env = _base_env()
    env.update({"SLURM_JOB_ID": "31415", "SLURM_NNODES": "1", "SLURM_NODEID": "0",
                "SLURM_JOB_NODELIST": "localhost", "TINYTORCH_RUN_MONITOR_INTERVAL": "0.05"})
    p = subprocess.run([sys.executable, "-m", "tinytorch.distributed.run", "--nproc-per-node", "2",
                        str(WORKERS / "env_worker.py"), str(out), "allreduce"],
                       env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert "settings from Slurm: nnodes=1, node_rank=0, rdzv_endpoint=localhost:0, rdzv_id=31415" in p.stderr
    ranks = {int(f.stem.split("_")[1]): json.loads(f.read_text()) for f in out.glob("rank_*.json")}
    assert sorted(ranks) == [0, 1]
    for r, rec in ranks.items():
        assert (rec["RANK"], rec["WORLD_SIZE"], rec["GROUP_RANK"]) == (str(r), "2", "0")
        assert rec["TORCHELASTIC_RUN_ID"] == "31415" and rec["MASTER_ADDR"] == "localhost"
        assert rec["allreduce"] == [3.0, 6.0, 9.0]
