"""Read a job's shape from Slurm's environment, so ``tinytorch-run`` and ``init_process_group("env://")``
need no flags inside ``sbatch``/``srun``.

Two ways to start under Slurm:

* one ``tinytorch-run`` per node (``srun --ntasks-per-node=1 tinytorch-run ...``): the launcher takes
  ``--nnodes`` from SLURM_STEP_NUM_NODES (else SLURM_NNODES), ``--node-rank`` from SLURM_NODEID, the
  rendezvous host from the first host of the step's (else the job's) node list and ``--rdzv-id`` from
  SLURM_JOB_ID (:func:`launch_defaults`);
* one rank per Slurm task (``srun --ntasks-per-node=G python train.py``): ``init_process_group`` takes
  RANK from SLURM_PROCID, WORLD_SIZE from SLURM_NTASKS and LOCAL_RANK from SLURM_LOCALID
  (:func:`process_env`).
"""
from __future__ import annotations

import re
from typing import Mapping, Optional

__all__ = ["expand_hostlist", "first_host", "in_slurm_job", "launch_defaults", "process_env"]

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top_level(text: str) -> list[str]:
    """Split at commas that are not inside brackets (``a[1,3],b`` -> ``a[1,3]``, ``b``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"bad Slurm hostlist {text!r}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"bad Slurm hostlist {text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"bad Slurm hostlist {text!r}: '[' without ']'")
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _expand_ranges(spec: str, hostlist: str) -> list[str]:
    """Expand the inside of one bracket (``01-04,07``), keeping the zero padding of each range."""
    out: list[str] = []
    for item in spec.split(","):
        m = _RANGE.match(item.strip())
        if not m:
            raise ValueError(f"bad Slurm hostlist {hostlist!r}: {item!r} is not N or N-M")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise ValueError(f"bad Slurm hostlist {hostlist!r}: range {item!r} runs backwards")
        width = len(lo_s)  # Slurm pads every number of a range to the width of its first bound
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def expand_hostlist(hostlist: str) -> list[str]:
    """Expand Slurm's compressed host list (``node[01-04,07],gpu-a[1-2]``) into host names, in order."""
    hosts: list[str] = []
    for item in _split_top_level(hostlist):
        # Each bracket multiplies: ``r[1-2]n[1-2]`` is r1n1, r1n2, r2n1, r2n2 (as scontrol prints it).
        names = [""]
        pos = 0
        for m in re.finditer(r"\[([^\]]*)\]", item):
            prefix = item[pos:m.start()]
            names = [n + prefix + s for n in names for s in _expand_ranges(m.group(1), hostlist)]
            pos = m.end()
        names = [n + item[pos:] for n in names]
        hosts.extend(names)
    if not hosts:
        raise ValueError(f"bad Slurm hostlist {hostlist!r}: no hosts")
    return hosts


def first_host(hostlist: str) -> str:
    """Return the first host of a compressed Slurm host list (the one that runs node rank 0)."""
    return expand_hostlist(hostlist)[0]


def in_slurm_job(env: Mapping[str, str]) -> bool:
    """True inside a Slurm allocation (SLURM_JOB_ID is set)."""
    return bool(env.get("SLURM_JOB_ID"))


def _node_list(env: Mapping[str, str]) -> Optional[str]:
    # Under srun the step's list is the one SLURM_NODEID counts in; a batch script has only the job's.
    return env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")


def launch_defaults(env: Mapping[str, str]) -> dict[str, str]:
    """Launcher settings Slurm implies: nnodes, node_rank, rdzv_endpoint (host[:MASTER_PORT]), rdzv_id.

    Empty outside a Slurm job. MASTER_ADDR, when set, replaces the first host of the node list; the port
    is MASTER_PORT when set, a free one on a single node, else the rendezvous backend's default.
    """
    if not in_slurm_job(env):
        return {}
    out: dict[str, str] = {"rdzv_id": env["SLURM_JOB_ID"]}
    # Under srun, SLURM_NNODES is the whole allocation; a step on fewer nodes (srun -N1) has its own count.
    nnodes = env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES")
    if nnodes:
        out["nnodes"] = nnodes
    if env.get("SLURM_NODEID"):
        out["node_rank"] = env["SLURM_NODEID"]
    host = env.get("MASTER_ADDR")
    if not host:
        nodes = _node_list(env)
        host = first_host(nodes) if nodes else None
    if host:
        port = env.get("MASTER_PORT")
        if not port and nnodes == "1":
            port = "0"  # one node: the agent binds a free port, as a plain single-node launch does
        out["rdzv_endpoint"] = f"{host}:{port}" if port else host
    return out


def process_env(env: Mapping[str, str]) -> dict[str, str]:
    """RANK, WORLD_SIZE, LOCAL_RANK (and MASTER_ADDR from the node list) for a rank started by srun.

    Empty outside a Slurm job step and when RANK or WORLD_SIZE is already set (a launcher started the
    rank); otherwise only what is missing from ``env``.
    """
    if not in_slurm_job(env) or not env.get("SLURM_PROCID") or not env.get("SLURM_NTASKS"):
        return {}
    if env.get("RANK") or env.get("WORLD_SIZE"):
        return {}
    out: dict[str, str] = {}
    for name, slurm_name in (("RANK", "SLURM_PROCID"), ("WORLD_SIZE", "SLURM_NTASKS"),
                             ("LOCAL_RANK", "SLURM_LOCALID")):
        if not env.get(name) and env.get(slurm_name):
            out[name] = env[slurm_name]
    if not env.get("MASTER_ADDR"):
        nodes = _node_list(env)
        if nodes:
            out["MASTER_ADDR"] = first_host(nodes)  # task 0 runs on the step's first node
    return out
