"""``tinytorch-run`` / ``python -m tinytorch.distributed.run``: torchrun's interface for tinytorch.

Single node, N workers (the store takes a free port the agent holds)::

    tinytorch-run --standalone --nproc-per-node 4 train.py --epochs 3

Two nodes (run on each; node 0 hosts the rendezvous store on 10.0.0.1:29500)::

    tinytorch-run --nnodes 2 --node-rank 0 --nproc-per-node 2 --rdzv-endpoint 10.0.0.1:29500 train.py
    tinytorch-run --nnodes 2 --node-rank 1 --nproc-per-node 2 --rdzv-endpoint 10.0.0.1:29500 train.py

Every flag can also be given as ``TINYTORCH_RUN_<FLAG>`` (e.g. ``TINYTORCH_RUN_NPROC_PER_NODE=4``) or
as torchrun's ``PET_<FLAG>`` (what Kubeflow's PyTorchJob sets: PET_NNODES, PET_NODE_RANK,
PET_MASTER_ADDR, ...). Inside a Slurm job, --nnodes, --node-rank, the rendezvous host and --rdzv-id
come from SLURM_NNODES, SLURM_NODEID, the first host of the node list and SLURM_JOB_ID
(``elastic/slurm.py``). Precedence: command line, TINYTORCH_RUN_*, PET_*, Slurm, built-in default.

Workers get torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
TORCHELASTIC_*...). MASTER_ADDR:MASTER_PORT is the agents' own store
(``TORCHELASTIC_USE_AGENT_STORE=True``), so ``init_process_group("env://")`` connects to it as a
client and no worker has to bind a port.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from ..bench._cli import nonnegative_float, nonnegative_int, positive_float
from .elastic import slurm as _slurm

__all__ = ["LaunchConfig", "get_args_parser", "parse_args", "config_from_args", "launch_agent", "main", "run"]

ENV_PREFIX = "TINYTORCH_RUN_"
TORCHRUN_ENV_PREFIX = "PET_"  # torchrun's prefix; Kubeflow's PyTorchJob sets these in every pod
DEFAULT_MASTER_PORT = 29500
DEFAULT_C10D_PORT = 29400


def _env_setting(dest: str) -> Optional[str]:
    """The value of ``TINYTORCH_RUN_<DEST>``, else torchrun's ``PET_<DEST>``, else None."""
    for prefix in (ENV_PREFIX, TORCHRUN_ENV_PREFIX):
        v = os.environ.get(prefix + dest.upper())
        if v is not None and v != "":
            return v
    return None


class _EnvDefault(argparse.Action):
    """An option whose default comes from ``TINYTORCH_RUN_<DEST>`` or ``PET_<DEST>`` when set."""

    def __init__(self, dest: str, default: Any = None, required: bool = False, **kwargs: Any) -> None:
        env = _env_setting(dest)
        if env is not None:
            default = env  # argparse applies the option's type to a string default
        if default is not None:
            required = False
        super().__init__(dest=dest, default=default, required=required, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, values)


class _EnvFlag(argparse.Action):
    """A store-true flag that ``TINYTORCH_RUN_<DEST>=1`` (or ``PET_<DEST>=1``) also turns on."""

    def __init__(self, dest: str, default: bool = False, required: bool = False, **kwargs: Any) -> None:
        env = _env_setting(dest) or ""
        default = env.strip().lower() in ("1", "true", "yes", "on") if env else default
        super().__init__(dest=dest, default=default, required=required, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, True)


def _spellings(name: str) -> list[str]:
    """Return ``--a-b`` plus torchrun's ``--a_b`` spelling."""
    out = [f"--{name}"]
    if "-" in name:
        out.append("--" + name.replace("-", "_"))
    return out


def _nnodes(text: str) -> str:
    """--nnodes: N or MIN:MAX with 0 < MIN <= MAX (torchrun: 'nnodes=... is not in "MIN:MAX" format')."""
    try:
        parse_min_max_nnodes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _nproc_per_node(text: str) -> str:
    """--nproc-per-node: a positive integer, cpu, gpu or auto (torchrun: 'Unsupported nproc_per_node value')."""
    value = str(text).strip().lower()
    if value in ("cpu", "gpu", "auto") or (value.isdigit() and int(value) >= 1):
        return value
    raise argparse.ArgumentTypeError(f"Unsupported nproc_per_node value: {text} (expected a positive integer, "
                                     "cpu, gpu or auto)")


def _port(text: str) -> int:
    """A TCP port, 0-65535 (0: the kernel picks a free one)."""
    try:
        port = int(str(text).strip())
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}")
    return port


def _endpoint(text: str) -> str:
    """--rdzv-endpoint: host[:port] ('' = none given, as torchrun's default)."""
    if text.strip():
        try:
            _split_endpoint(text, DEFAULT_MASTER_PORT)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected host[:port] with a port 0-65535, got {text!r}") from None
    return text


def _nonempty(text: str) -> str:
    """A name that must not be empty (an address, a role)."""
    if not str(text).strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty value, got {text!r}")
    return text


def _rdzv_conf(text: str) -> str:
    """--rdzv-conf: k=v,...; the timeouts a number of seconds > 0, is_host a boolean."""
    try:
        conf = _parse_rdzv_conf(text)
        for key in ("join_timeout", "read_timeout", "last_call_timeout", "close_timeout"):
            if key in conf and not float(conf[key]) > 0:
                raise ValueError(f"{key} must be a number of seconds > 0, got {conf[key]!r}")
        if conf.get("is_host", "true").lower() not in ("1", "true", "yes", "0", "false", "no"):
            raise ValueError(f"is_host must be true or false, got {conf['is_host']!r}")
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected key=value,... ({e})") from None
    return text


def _std_spec(text: str) -> str:
    """-r/--redirects and -t/--tee: 0-3, or local_rank:0-3,... (torchrun's Std.from_str format)."""
    if not re.fullmatch(r"\s*([0-3]|\d+:[0-3](,\d+:[0-3])*)\s*", str(text)):
        raise argparse.ArgumentTypeError(f"expected 0, 1, 2, 3 or local_rank:value pairs such as 0:1,1:2, "
                                         f"got {text!r}")
    return text


def get_args_parser() -> argparse.ArgumentParser:
    """Build the argument parser (torchrun's flags, hyphen and underscore spellings)."""
    p = argparse.ArgumentParser(
        prog="tinytorch-run",
        description="Start a tinytorch (or PyTorch-style) distributed job: torchrun's interface.",
        allow_abbrev=False,
    )
    a = p.add_argument
    a(*_spellings("nnodes"), action=_EnvDefault, dest="nnodes", type=_nnodes, default=None,
      help="number of nodes, N or MIN:MAX (MIN:MAX needs --rdzv-backend c10d); default SLURM_NNODES, else 1")
    a(*_spellings("nproc-per-node"), action=_EnvDefault, dest="nproc_per_node", type=_nproc_per_node, default="1",
      help="workers per node: an int, 'cpu' (CPU count), 'gpu' (GPU count) or 'auto' (GPUs if any, else CPUs)")
    a(*_spellings("node-rank"), action=_EnvDefault, dest="node_rank", type=nonnegative_int, default=None,
      help="this node's rank (static rendezvous; default SLURM_NODEID, else 0). With c10d, an optional ordering hint")
    a(*_spellings("master-addr"), action=_EnvDefault, dest="master_addr", type=_nonempty, default=None,
      help="node 0's address for the static rendezvous when --rdzv-endpoint is not given (default 127.0.0.1)")
    a(*_spellings("master-port"), action=_EnvDefault, dest="master_port", type=_port, default=None,
      help=f"node 0's port for the static rendezvous (default {DEFAULT_MASTER_PORT}; "
           "a single node picks a free port)")
    a(*_spellings("rdzv-backend"), action=_EnvDefault, dest="rdzv_backend", default="static",
      choices=["static", "c10d"], help="rendezvous: 'static' (fixed node ranks) or 'c10d' (ranks by arrival)")
    a(*_spellings("rdzv-endpoint"), action=_EnvDefault, dest="rdzv_endpoint", type=_endpoint, default=None,
      help="host[:port] of the rendezvous store, hosted by node 0 (static) or the agent on that host (c10d); "
           "under Slurm, default the first host of the node list (port MASTER_PORT when set)")
    a(*_spellings("rdzv-id"), action=_EnvDefault, dest="rdzv_id", default=None,
      help="job id shared by all nodes (TORCHELASTIC_RUN_ID); default SLURM_JOB_ID, else 'none'")
    a(*_spellings("rdzv-conf"), action=_EnvDefault, dest="rdzv_conf", type=_rdzv_conf, default="",
      help="k=v,... with join_timeout, read_timeout, last_call_timeout, close_timeout (seconds), is_host")
    a("--standalone", action=_EnvFlag, dest="standalone",
      help="single node: host the store on a free port (printed) with a fresh run id")
    a(*_spellings("max-restarts"), action=_EnvDefault, dest="max_restarts", type=nonnegative_int, default=0,
      help="worker-group restarts before the job fails")
    a(*_spellings("monitor-interval"), action=_EnvDefault, dest="monitor_interval", type=positive_float,
      default=0.1,
      help="seconds between checks of the workers")
    a(*_spellings("shutdown-timeout"), action=_EnvDefault, dest="shutdown_timeout", type=nonnegative_float,
      default=30.0,
      help="seconds between SIGTERM and SIGKILL when stopping workers")
    a(*_spellings("exit-barrier-timeout"), action=_EnvDefault, dest="exit_barrier_timeout", type=nonnegative_float,
      default=300.0, help="seconds a finished node waits for the other nodes to finish")
    a(*_spellings("log-dir"), action=_EnvDefault, dest="log_dir", default=None,
      help="keep each attempt's per-rank logs as <log-dir>/attempt_<n>/<rank>/{stdout,stderr}.log")
    a("-r", *_spellings("redirects"), action=_EnvDefault, dest="redirects", type=_std_spec, default="0",
      help="send streams only to the log files: 0 none, 1 stdout, 2 stderr, 3 both, or per local rank 0:1,1:2")
    a("-t", "--tee", action=_EnvDefault, dest="tee", type=_std_spec, default="0",
      help="send streams to the log files and the console (prefixed by rank); same format as --redirects")
    a("--role", action=_EnvDefault, dest="role", type=_nonempty, default="default", help="worker role name (ROLE_NAME)")
    a("-m", "--module", action=_EnvFlag, dest="module", help="run the script as 'python -m <module>'")
    a(*_spellings("no-python"), action=_EnvFlag, dest="no_python",
      help="execute the script directly instead of through the Python interpreter")
    a("--compat", action=_EnvFlag, dest="compat",
      help="run each worker through tinytorch.compat: the script's `import torch` resolves to tinytorch")
    p.add_argument("training_script", help="script (or module with -m, or program with --no-python) to run")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Parse the launcher's command line (``sys.argv[1:]`` by default)."""
    return get_args_parser().parse_args(argv)


def parse_min_max_nnodes(nnodes: str) -> tuple[int, int]:
    """Parse ``N`` or ``MIN:MAX``."""
    parts = str(nnodes).split(":")
    try:
        if len(parts) == 1:
            lo = hi = int(parts[0])
        elif len(parts) == 2:
            lo, hi = int(parts[0]), int(parts[1])
        else:
            raise ValueError
    except ValueError:
        raise ValueError(f'nnodes={nnodes} is not in "MIN:MAX" format: expected N or MIN:MAX, '
                         f"got {nnodes!r}") from None
    if not 0 < lo <= hi:
        raise ValueError(f"expected N or MIN:MAX with 0 < MIN <= MAX, got {nnodes!r}")
    return lo, hi


def _gpu_count() -> int:
    try:
        from tinytorch import cuda  # type: ignore[attr-defined]

        return int(cuda.device_count()) if cuda.is_available() else 0
    except (ImportError, AttributeError):
        pass
    try:
        import cupy  # type: ignore[import-not-found]

        return int(cupy.cuda.runtime.getDeviceCount()) if cupy.is_available() else 0
    except Exception:
        return 0


def determine_local_world_size(nproc_per_node: str) -> int:
    """Resolve ``--nproc-per-node`` (int, cpu, gpu, auto) to a worker count."""
    value = str(nproc_per_node).strip().lower()
    if value == "cpu":
        return os.cpu_count() or 1
    if value == "gpu":
        n = _gpu_count()
        if n == 0:
            raise ValueError("--nproc-per-node gpu: CUDA is not available")
        return n
    if value == "auto":
        return _gpu_count() or os.cpu_count() or 1
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"--nproc-per-node must be an int, cpu, gpu or auto; got {nproc_per_node!r}") from None
    if n < 1:
        raise ValueError(f"--nproc-per-node must be at least 1, got {n}")
    return n


def _parse_rdzv_conf(conf: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in conf.split(","))):
        if "=" not in item:
            raise ValueError(f"--rdzv-conf items are key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _split_endpoint(endpoint: str, default_port: int) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep:
        return endpoint, default_port
    if not port.isdigit() or int(port) > 65535 or not host.strip("[]"):
        raise ValueError(f"bad rendezvous endpoint {endpoint!r}: expected host[:port]")
    return host.strip("[]"), int(port)


@dataclass
class LaunchConfig:
    """Everything the agent needs, resolved from the command line and environment."""

    min_nodes: int
    max_nodes: int
    nproc_per_node: int
    rdzv_backend: str
    rdzv_host: str
    rdzv_port: int
    run_id: str
    node_rank: Optional[int]
    role: str = "default"
    max_restarts: int = 0
    monitor_interval: float = 0.1
    shutdown_timeout: float = 30.0
    exit_barrier_timeout: float = 300.0
    log_dir: Optional[str] = None
    redirects: str = "0"
    tee: str = "0"
    rdzv_configs: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    entrypoint_name: str = ""


def config_from_args(args: argparse.Namespace) -> LaunchConfig:
    """Turn parsed flags into a :class:`LaunchConfig`, applying torchrun's rules and defaults."""
    if args.module and args.no_python:
        raise ValueError("-m/--module and --no-python cannot be used together")
    # Slurm fills what neither the command line nor TINYTORCH_RUN_*/PET_* set; --standalone, or an
    # explicit --master-addr/--master-port, means the user chose the endpoint, so Slurm does not.
    slurm = {} if args.standalone else _slurm.launch_defaults(os.environ)
    if args.master_addr is not None or args.master_port is not None:
        slurm.pop("rdzv_endpoint", None)
    used = {k: v for k, v in slurm.items() if getattr(args, k) is None}
    if used:
        from .elastic.agent import log

        log("settings from Slurm: " + ", ".join(f"{k}={v}" for k, v in sorted(used.items())))
    nnodes = args.nnodes if args.nnodes is not None else used.get("nnodes", "1:1")
    rdzv_endpoint = args.rdzv_endpoint if args.rdzv_endpoint is not None else used.get("rdzv_endpoint", "")
    run_id_arg = args.rdzv_id if args.rdzv_id is not None else used.get("rdzv_id", "none")
    node_rank = args.node_rank
    if node_rank is None and "node_rank" in used:
        try:
            node_rank = int(used["node_rank"])
        except ValueError:
            raise ValueError(f"SLURM_NODEID must be an integer, got {used['node_rank']!r}") from None
    master_addr = args.master_addr if args.master_addr is not None else "127.0.0.1"
    min_nodes, max_nodes = parse_min_max_nnodes(nnodes)
    backend, run_id = args.rdzv_backend, run_id_arg
    if args.standalone:
        if max_nodes != 1:
            raise ValueError("--standalone runs a single node; drop --nnodes or use --rdzv-endpoint")
        backend, run_id = "c10d", str(uuid.uuid4())
        host, port = "127.0.0.1", 0
    elif rdzv_endpoint:
        host, port = _split_endpoint(rdzv_endpoint,
                                     DEFAULT_C10D_PORT if backend == "c10d" else DEFAULT_MASTER_PORT)
    elif backend == "static":
        host = master_addr
        # A single node needs no well-known port: the agent binds a free one and holds it.
        port = args.master_port if args.master_port is not None else (0 if max_nodes == 1 else DEFAULT_MASTER_PORT)
    else:
        raise ValueError("--rdzv-backend c10d needs --rdzv-endpoint host[:port] (or use --standalone)")
    if backend == "static" and node_rank is None:
        node_rank = 0
    if backend == "static" and not node_rank < max_nodes:
        raise ValueError(f"argument --node-rank: expected 0 <= node rank < --nnodes {max_nodes} with the static "
                         f"rendezvous, got {node_rank}")
    if args.compat and args.no_python:
        raise ValueError("--compat and --no-python cannot be used together")
    if args.no_python:
        cmd = [args.training_script]
    elif args.compat:
        cmd = [sys.executable, "-u", "-m", "tinytorch.compat"] + (["-m"] if args.module else [])
        cmd.append(args.training_script)
    elif args.module:
        cmd = [sys.executable, "-u", "-m", args.training_script]
    else:
        cmd = [sys.executable, "-u", args.training_script]
    return LaunchConfig(
        min_nodes=min_nodes, max_nodes=max_nodes,
        nproc_per_node=determine_local_world_size(args.nproc_per_node),
        rdzv_backend=backend, rdzv_host=host, rdzv_port=port, run_id=run_id, node_rank=node_rank,
        role=args.role, max_restarts=args.max_restarts, monitor_interval=args.monitor_interval,
        shutdown_timeout=args.shutdown_timeout, exit_barrier_timeout=args.exit_barrier_timeout,
        log_dir=args.log_dir, redirects=args.redirects, tee=args.tee,
        rdzv_configs=_parse_rdzv_conf(args.rdzv_conf),
        args=cmd + list(args.training_script_args),
        entrypoint_name=os.path.basename(args.training_script),
    )


def launch_agent(config: LaunchConfig) -> int:
    """Run one node's agent to completion; return the exit status (raises ChildFailedError on worker failure)."""
    from .elastic.agent import LocalElasticAgent, WorkerSpec, WorkerState, log
    from .elastic.multiprocessing.errors import ChildFailedError
    from .elastic.rendezvous import RendezvousHandler, RendezvousParameters

    conf = config.rdzv_configs
    is_host = conf.get("is_host")
    params = RendezvousParameters(
        backend=config.rdzv_backend, endpoint_host=config.rdzv_host, endpoint_port=config.rdzv_port,
        run_id=config.run_id, min_nodes=config.min_nodes, max_nodes=config.max_nodes,
        node_rank=config.node_rank, local_world_size=config.nproc_per_node, role=config.role,
        max_restarts=config.max_restarts,
        join_timeout=float(conf.get("join_timeout", 600)),
        read_timeout=float(conf.get("read_timeout", 60)),
        last_call_timeout=float(conf.get("last_call_timeout", 30)),
        close_timeout=float(conf.get("close_timeout", 30)),
        is_host=None if is_host is None else is_host.lower() in ("1", "true", "yes"),
    )
    spec = WorkerSpec(
        role=config.role, local_world_size=config.nproc_per_node, args=config.args,
        entrypoint_name=config.entrypoint_name, max_restarts=config.max_restarts,
        monitor_interval=config.monitor_interval, shutdown_timeout=config.shutdown_timeout,
        exit_barrier_timeout=config.exit_barrier_timeout, log_dir=config.log_dir,
        redirects=config.redirects, tee=config.tee, run_id=config.run_id,
    )
    result = LocalElasticAgent(spec, RendezvousHandler(params)).run()
    if result.state == WorkerState.SUCCEEDED:
        return 0
    if result.failures:
        raise ChildFailedError(config.entrypoint_name, result.failures, note=result.note)
    if result.note:
        log(result.note)
    return result.return_code or 1


def run(args: argparse.Namespace) -> int:
    """Launch from parsed arguments; print the failure summary and return the exit status."""
    from .elastic.agent import log
    from .elastic.multiprocessing.errors import ChildFailedError
    from .elastic.rendezvous import RendezvousError

    try:
        config = config_from_args(args)
    except ValueError as e:  # a bad combination of flags: reported as argparse reports a bad flag (exit 2)
        get_args_parser().error(str(e))
    try:
        return launch_agent(config)
    except ChildFailedError as e:
        print(e.format_msg(), file=sys.stderr, flush=True)
        return 1
    except RendezvousError as e:
        log(f"rendezvous failed: {e}")
        return 1
    except ValueError as e:  # inconsistent flags found while setting up (e.g. static with MIN:MAX)
        log(f"error: {e}")
        return 2


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point of ``tinytorch-run``."""
    sys.exit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
