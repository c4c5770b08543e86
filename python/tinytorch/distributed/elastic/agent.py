"""LocalElasticAgent: rendezvous, start the local workers, watch them, restart the group on failure
or when nodes arrive.

Restarts are all-or-nothing across nodes: a node whose worker fails stops its workers and asks
every node (through the store) to start the next round; when no restarts remain it aborts the job,
publishing the root cause so every agent prints the same summary. Under ``--nnodes MIN:MAX`` a node
that arrives while the group runs waits at the rendezvous; the agents see it at their monitor
interval and restart the group with it (scale-up). As in torchrun, only failures use up
``--max-restarts``; membership changes do not.
"""
from __future__ import annotations

import enum
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

from .multiprocessing.api import Std, WorkerProcess, parse_std, start_worker_process, stop_processes
from .multiprocessing.errors import ChildFailedError, ProcessFailure
from .rendezvous import (PeerEvent, RendezvousClosedError, RendezvousGracefulExitError, RendezvousHandler,
                         RendezvousInfo)

__all__ = ["WorkerSpec", "WorkerState", "WorkerGroup", "RunResult", "SignalException", "LocalElasticAgent"]

HANDLED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


def log(msg: str) -> None:
    """Print one agent message to stderr."""
    print(f"[tinytorch-run] {msg}", file=sys.stderr, flush=True)


class SignalException(Exception):
    """Raised in the agent's main thread when it receives a signal it forwards to the workers."""

    def __init__(self, sigval: int) -> None:
        super().__init__(f"agent (pid {os.getpid()}) received {signal.Signals(sigval).name}")
        self.sigval = sigval


class WorkerState(str, enum.Enum):
    """State of the local worker group."""

    INIT = "INIT"
    HEALTHY = "HEALTHY"
    STOPPED = "STOPPED"  # stopped to take in new nodes
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


@dataclass
class WorkerSpec:
    """What to run on this node and how to treat it."""

    role: str
    local_world_size: int
    args: list[str]  # full command line of one worker
    entrypoint_name: str  # for messages: the script or module name
    max_restarts: int = 0
    monitor_interval: float = 0.1
    shutdown_timeout: float = 30.0
    exit_barrier_timeout: float = 300.0
    log_dir: Optional[str] = None
    redirects: str = "0"
    tee: str = "0"
    run_id: str = "none"


@dataclass
class WorkerGroup:
    """The local workers of one attempt."""

    spec: WorkerSpec
    state: WorkerState = WorkerState.INIT
    restart_count: int = 0
    info: Optional[RendezvousInfo] = None
    workers: list[WorkerProcess] = field(default_factory=list)


@dataclass
class RunResult:
    """Outcome of :meth:`LocalElasticAgent.run`."""

    state: WorkerState
    failures: dict[int, ProcessFailure] = field(default_factory=dict)
    note: str = ""
    return_code: int = 0


class LocalElasticAgent:
    """Runs one node's share of the job until it succeeds, fails for good, or is signalled."""

    def __init__(self, spec: WorkerSpec, rdzv: RendezvousHandler) -> None:
        self.spec = spec
        self.rdzv = rdzv
        self.group = WorkerGroup(spec)
        self._hostname = socket.getfqdn()
        self._omp_notice_done = False
        self._signalled = False
        self._redirects = parse_std(spec.redirects, spec.local_world_size)
        self._tee = parse_std(spec.tee, spec.local_world_size)
        if spec.log_dir is not None:
            self._log_root = os.path.abspath(spec.log_dir)
            self._tmp_root: Optional[str] = None
        else:
            # Error files (and captured logs, if asked for) still need a home.
            self._tmp_root = tempfile.mkdtemp(prefix=f"tinytorch_run_{spec.run_id}_")
            self._log_root = self._tmp_root
        self._capture = spec.log_dir is not None or any(self._redirects.values()) or any(self._tee.values())

    # ------------------------------------------------------------------ run
    def run(self) -> RunResult:
        """Rendezvous, run and monitor the workers, restarting while restarts remain; forward signals."""
        old_handlers = self._install_signal_handlers()
        try:
            self.rdzv.setup()
            if self.rdzv.is_host:
                log(f"rendezvous store listening on {self.rdzv.endpoint} (run id {self.spec.run_id})")
            if self._capture and self._tmp_root is not None:
                log(f"worker logs: {self._tmp_root}/attempt_<n>/<rank>/ (pass --log-dir to choose)")
            return self._invoke_run()
        except SignalException as e:
            log(f"{e}; forwarding {signal.Signals(e.sigval).name} to the workers")
            code = self._shutdown_workers(e.sigval)
            if self.rdzv.store is not None:
                self.rdzv.abort({"reason": f"{e} on {self._hostname}"})
            return RunResult(WorkerState.FAILED, return_code=code)
        finally:
            self._stop_workers()
            self.rdzv.shutdown()
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            # Keep the error files a failure summary points at; drop an unused temporary directory.
            if self._tmp_root is not None and not self._capture and self.group.state == WorkerState.SUCCEEDED:
                shutil.rmtree(self._tmp_root, ignore_errors=True)

    def _invoke_run(self) -> RunResult:
        spec = self.spec
        round_ = 0
        while True:
            try:
                info = self.rdzv.next_rendezvous(round_)
            except RendezvousClosedError as e:
                return self._peer_abort_result(e.payload or {})
            except RendezvousGracefulExitError as e:
                log(f"{e}; leaving")
                self.group.state = WorkerState.SUCCEEDED
                return RunResult(WorkerState.SUCCEEDED, note=str(e))
            round_ = info.round  # a late c10d node may join a later round
            self._start_workers(info)
            outcome, payload = self._monitor(info)
            if outcome == WorkerState.SUCCEEDED:
                ev = self.rdzv.exit_barrier(round_, spec.exit_barrier_timeout)
                if ev is None:
                    self.rdzv.finish()
                    self.group.state = WorkerState.SUCCEEDED
                    return RunResult(WorkerState.SUCCEEDED)
                if ev.kind == "abort":
                    return self._peer_abort_result(ev.payload or {})
                self._stop_workers()  # reaps what the finished workers may have left in their groups
                log(f"{self._describe(ev.payload)}; restarting the group")
                round_ += 1
                continue
            if outcome == WorkerState.FAILED:
                failures: dict[int, ProcessFailure] = payload
                self._stop_workers()
                _, root = ChildFailedError(spec.entrypoint_name, failures).get_first_failure()
                reason = (f"rank {root.rank} on {root.hostname} exited with {root.exit_description()}")
                if info.restart_count < spec.max_restarts:
                    held = self.rdzv.request_restart(round_, {"reason": reason, "cause": "failure",
                                                              "failures": info.restart_count + 1})
                    log(f"worker group failed ({reason}); restarting ({held['failures']}/{spec.max_restarts})")
                    round_ += 1
                    continue
                log(f"worker group failed ({reason}); no restarts left (--max-restarts={spec.max_restarts})")
                self.rdzv.abort({"reason": reason, "root_cause": root.to_dict()})
                return RunResult(WorkerState.FAILED, failures, return_code=1)
            if outcome == WorkerState.STOPPED:
                waiting: int = payload
                log(f"[{spec.role}] Detected {waiting} new nodes from group_rank={info.group_rank}; "
                    "will restart worker group")
                self.rdzv.request_restart(round_, {"reason": f"{waiting} new node(s) waiting to join",
                                                   "cause": "membership", "failures": info.restart_count})
                self._stop_workers()
                round_ += 1
                continue
            # A peer decided: stop our (healthy) workers and follow.
            ev = payload
            self._stop_workers()
            if ev.kind == "abort":
                return self._peer_abort_result(ev.payload or {})
            log(f"{self._describe(ev.payload)}; restarting the group")
            round_ += 1

    @staticmethod
    def _describe(payload: Optional[dict]) -> str:
        """Say why another node restarted the group."""
        payload = payload or {}
        if payload.get("cause") == "membership":
            return f"the group is taking in new nodes ({payload.get('reason', '')})"
        return f"another node failed ({payload.get('reason', '')})"

    def _peer_abort_result(self, payload: dict) -> RunResult:
        reason = payload.get("reason", "another node failed")
        root = payload.get("root_cause")
        failures = {root["rank"]: ProcessFailure.from_dict(root)} if root else {}
        return RunResult(WorkerState.FAILED, failures,
                         note=f"stopped because another node failed: {reason}", return_code=1)

    # -------------------------------------------------------------- workers
    def _worker_env(self, info: RendezvousInfo, local_rank: int) -> dict[str, str]:
        spec = self.spec
        base = info.base_rank()
        role_base, role_world = info.role_rank_and_size()
        env = dict(os.environ)
        env.update({
            "RANK": str(base + local_rank),
            "LOCAL_RANK": str(local_rank),
            "GROUP_RANK": str(info.group_rank),
            "ROLE_RANK": str(role_base + local_rank),
            "ROLE_NAME": spec.role,
            "LOCAL_WORLD_SIZE": str(spec.local_world_size),
            "WORLD_SIZE": str(info.world_size()),
            "GROUP_WORLD_SIZE": str(info.group_world_size),
            "ROLE_WORLD_SIZE": str(role_world),
            "MASTER_ADDR": info.master_addr,
            "MASTER_PORT": str(info.master_port),
            "TORCHELASTIC_RESTART_COUNT": str(info.restart_count),
            "TINYTORCH_RDZV_ROUND": str(info.round),
            "TORCHELASTIC_MAX_RESTARTS": str(spec.max_restarts),
            "TORCHELASTIC_RUN_ID": spec.run_id,
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "PYTHONUNBUFFERED": "1",
        })
        if "OMP_NUM_THREADS" not in os.environ and spec.local_world_size > 1:
            env["OMP_NUM_THREADS"] = "1"
            if not self._omp_notice_done:
                self._omp_notice_done = True
                log("OMP_NUM_THREADS is unset; setting it to 1 for each of the "
                    f"{spec.local_world_size} workers on this node to avoid oversubscription")
        return env

    def _start_workers(self, info: RendezvousInfo) -> None:
        spec = self.spec
        self.group.info = info
        self.group.restart_count = info.restart_count
        self.group.workers = []
        base = info.base_rank()
        log(f"attempt {info.round}: node {info.group_rank}/{info.group_world_size}, "
            f"ranks {base}..{base + spec.local_world_size - 1} of {info.world_size()}, "
            f"store {info.master_addr}:{info.master_port}")
        for lr in range(spec.local_world_size):
            rank = base + lr
            env = self._worker_env(info, lr)
            rank_dir = os.path.join(self._log_root, f"attempt_{info.round}", str(rank))
            os.makedirs(rank_dir, exist_ok=True)
            env["TORCHELASTIC_ERROR_FILE"] = os.path.join(rank_dir, "error.json")
            self.group.workers.append(start_worker_process(
                spec.args, env, rank, lr,
                log_dir=rank_dir if self._capture else None,
                redirect=self._redirects.get(lr, Std.NONE),
                tee=self._tee.get(lr, Std.NONE),
                prefix=f"[{spec.role}{rank}]:",
            ))
        self.group.state = WorkerState.HEALTHY

    def _monitor(self, info: RendezvousInfo) -> tuple[WorkerState, object]:
        """Poll until all workers succeeded, one failed, a peer asked for a restart or abort (INIT), or
        nodes wait to join (STOPPED, with their number)."""
        while True:
            time.sleep(self.spec.monitor_interval)
            codes = [w.poll() for w in self.group.workers]
            failed = [w for w, c in zip(self.group.workers, codes) if c not in (None, 0)]
            if failed:
                self.group.state = WorkerState.FAILED
                return WorkerState.FAILED, {
                    w.rank: ProcessFailure(rank=w.rank, local_rank=w.local_rank, pid=w.pid,
                                           exitcode=int(w.popen.returncode), error_file=w.error_file,
                                           hostname=self._hostname, timestamp=w.exit_observed_at or time.time())
                    for w in failed
                }
            if all(c == 0 for c in codes):
                for w in self.group.workers:
                    w.close_logs()
                return WorkerState.SUCCEEDED, None
            ev: Optional[PeerEvent] = self.rdzv.peer_event(info.round)
            if ev is not None:
                return WorkerState.INIT, ev
            waiting = self.rdzv.num_nodes_waiting(info.round)
            if waiting:
                self.group.state = WorkerState.STOPPED
                return WorkerState.STOPPED, waiting

    def _stop_workers(self, sig: int = signal.SIGTERM) -> None:
        if self.group.workers:
            stop_processes(self.group.workers, sig, self.spec.shutdown_timeout)
            self.group.workers = []

    def _shutdown_workers(self, sig: int) -> int:
        """Forward ``sig`` to every worker group; return the exit status to leave with (shell convention)."""
        workers = self.group.workers
        stop_processes(workers, sig, self.spec.shutdown_timeout)
        self.group.workers = []
        codes = [w.popen.returncode for w in workers]
        bad = [c for c in codes if c not in (None, 0)]
        if not workers:
            return 128 + sig
        if not bad:
            return 0
        return 128 - bad[0] if bad[0] < 0 else bad[0]

    def _install_signal_handlers(self) -> dict:
        def handler(signum: int, frame: object) -> None:
            # Only the first signal interrupts; the shutdown it starts is already bounded (SIGKILL).
            if not self._signalled:
                self._signalled = True
                raise SignalException(signum)
            log(f"received {signal.Signals(signum).name} again; still stopping the workers")

        old = {}
        for name in HANDLED_SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                old[sig] = signal.signal(sig, handler)
            except ValueError:
                pass  # not the main thread: signals cannot be caught here
        return old
