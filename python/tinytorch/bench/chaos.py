"""`tinytorch-bench chaos`: seeded fault trials on a sharded training job run by tinytorch-run.

    tinytorch-bench chaos --trials 50 --seed 0 [--json chaos.json] [--faults kill-worker,stop-worker,...]

Each trial starts two agents (`--nnodes 1:2`, c10d rendezvous, 2 workers each) on the job in
tinytorch.bench._chaos_train (a fully_shard MLP, a distributed checkpoint every k steps, resumed after every
restart) and injects one fault, chosen and timed by the seed:

  kill-worker         SIGKILL one worker mid-step
  kill-node           SIGKILL the second agent: it and its workers are gone; the group goes on at half the world
  kill-in-save        SIGKILL one worker while it is inside dcp.save (stopped there first, so the kill lands)
  stop-worker         SIGSTOP one worker (a hang): the others time out, the group restarts; every other rank
                      must have left a flight-recorder dump that names the stopped rank
  corrupt-checkpoint  flip a byte in, or truncate, one file of the newest checkpoint, then SIGKILL a worker: the
                      restart must refuse that checkpoint (naming the file) and resume from the previous one
  net-slow, net-loss, net-cut
                      the agents run in network namespaces of their own joined by a veth link (root and
                      iproute2 needed; skipped with the reason elsewhere) that the trial slows (netem delay, or
                      a tbf rate limit where the kernel has no netem), makes drop packets (netem loss, or a tbf
                      queue too short for the bursts) or takes down for a moment

A trial passes when the job finishes within its restarts, every step's loss equals that of the uninterrupted
run (bit for bit at that run's world size, within 1e-10 relative of a one-process run at any other),
every checkpoint left with metadata checks out (the job never resumed from one that was not complete), and no
process of the trial outlives the job. Recovery time: from the fault (or its end, for the network windows) to
the first training step completed after it.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _chaos_train as job
from ._cli import choice_list, nonnegative_float, nonnegative_int, positive_float, positive_int, usage_error
from ._common import free_port, median, table, write_json

FAULTS = ("kill-worker", "kill-node", "kill-in-save", "stop-worker", "corrupt-checkpoint",
          "net-slow", "net-loss", "net-cut")
NET_FAULTS = ("net-slow", "net-loss", "net-cut")
MARKER = "TINYTORCH_CHAOS_TRIAL"  # in every process a trial starts: how leftovers are found
LOSS_RTOL = 1e-10


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The chaos subcommand's flags."""
    p.add_argument("--trials", type=positive_int, default=10,
                   help="number of trials (faults go round-robin, order seeded)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fault order, targets and moments")
    p.add_argument("--faults", type=choice_list(FAULTS), default=list(FAULTS),
                   help=f"comma-separated subset of {', '.join(FAULTS)}")
    p.add_argument("--steps", type=positive_int, default=30, help="training steps of the job")
    p.add_argument("--ckpt-every", type=positive_int, default=5, help="steps between distributed checkpoints")
    p.add_argument("--step-time", type=nonnegative_float, default=0.05, help="seconds each step lasts at least")
    p.add_argument("--nproc-per-node", type=positive_int, default=2, help="workers per agent (two agents)")
    p.add_argument("--max-restarts", type=nonnegative_int, default=3, help="the job's --max-restarts")
    p.add_argument("--timeout", type=positive_float, default=15.0,
                   help="the workers' process group timeout (seconds)")
    p.add_argument("--trial-timeout", type=positive_float, default=300.0,
                   help="a trial still running after this fails")
    p.add_argument("--work-dir", default=None, help="where trials run (default: a temporary directory, removed "
                                                     "unless a trial failed)")
    p.add_argument("--json", default=None, help="write {'trials': [...], 'summary': {...}} here")


@dataclass
class Config:
    """How every job of a run is launched."""

    steps: int
    ckpt_every: int
    step_time: float
    nproc: int
    max_restarts: int
    timeout: float
    trial_timeout: float

    @property
    def world(self) -> int:
        return 2 * self.nproc

    def saves(self) -> List[int]:
        """The steps after which checkpoints are taken."""
        return [s for s in range(self.ckpt_every, self.steps, self.ckpt_every)]


# --------------------------------------------------------------------------------------------- progress
@dataclass
class Event:
    t: float
    round: int
    rank: int
    what: str


def _parse(line: str, rank: int) -> Optional[Event]:
    parts = line.split(" ", 3)
    return Event(float(parts[0]), int(parts[2]), rank, parts[3]) if len(parts) == 4 else None


class Progress:
    """Follows the ranks' progress files as they grow (reading only what is new), for timing faults."""

    def __init__(self, run_dir: str) -> None:
        self.dir = os.path.join(run_dir, "progress")
        self.offsets: Dict[str, int] = {}
        self.partial: Dict[str, str] = {}
        self.events: List[Event] = []

    def poll(self) -> List[Event]:
        """The events written since the last call."""
        new: List[Event] = []
        if not os.path.isdir(self.dir):
            return new
        for name in os.listdir(self.dir):
            m = re.fullmatch(r"rank(\d+)\.log", name)
            if m is None:
                continue
            with open(os.path.join(self.dir, name)) as f:
                f.seek(self.offsets.get(name, 0))
                text = self.partial.get(name, "") + f.read()
                self.offsets[name] = f.tell()
            *lines, self.partial[name] = text.split("\n")
            new.extend(e for e in (_parse(line, int(m.group(1))) for line in lines) if e is not None)
        self.events.extend(new)
        return new


def read_events(run_dir: str) -> List[Event]:
    """Every progress line the job's ranks wrote, oldest first."""
    return sorted(Progress(run_dir).poll(), key=lambda e: e.t)


def read_losses(run_dir: str) -> List[dict]:
    path = os.path.join(run_dir, "losses.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# --------------------------------------------------------------------------------------- network namespaces
def _sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=30, check=check)


class NetPair:
    """Two network namespaces joined by a veth link; addresses exist only inside them."""

    def __init__(self, tag: str, subnet: int) -> None:
        self.ns = (f"ttc{tag}a", f"ttc{tag}b")
        self.dev = (f"ttc{tag}a", f"ttc{tag}b")
        self.ip = (f"10.213.{subnet}.1", f"10.213.{subnet}.2")
        self.up = False

    def create(self) -> None:
        a, b = self.ns
        _sh("ip", "netns", "add", a)
        self.up = True
        _sh("ip", "netns", "add", b)
        _sh("ip", "link", "add", self.dev[0], "netns", a, "type", "veth", "peer", "name", self.dev[1], "netns", b)
        for ns, dev, ip in zip(self.ns, self.dev, self.ip):
            _sh("ip", "-n", ns, "addr", "add", f"{ip}/30", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")

    def exec_prefix(self, side: int) -> List[str]:
        return ["ip", "netns", "exec", self.ns[side]]

    def tc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run one tc command on both ends (egress shaping on each: both directions)."""
        res = None
        for ns, dev in zip(self.ns, self.dev):
            res = _sh("ip", "netns", "exec", ns, "tc", *[dev if a == "DEV" else a for a in args], check=check)
        assert res is not None
        return res

    def link(self, state: str) -> None:
        _sh("ip", "-n", self.ns[0], "link", "set", self.dev[0], state)

    def dropped(self) -> int:
        """Packets the qdiscs on both ends dropped."""
        total = 0
        for ns, dev in zip(self.ns, self.dev):
            out = _sh("ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev).stdout
            total += sum(int(x) for x in re.findall(r"dropped (\d+)", out))
        return total

    def delete(self) -> None:
        if self.up:
            for ns in self.ns:
                _sh("ip", "netns", "del", ns, check=False)
            self.up = False


def network_support() -> Tuple[Optional[str], bool]:
    """(why network trials cannot run here, or None; whether tc has netem)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux only", False
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "the ip and tc commands are missing (apt-get install iproute2)", False
    if os.geteuid() != 0:
        return "creating network namespaces needs root", False
    probe = NetPair(f"p{os.getpid() % 100000}", 254)
    try:
        probe.create()
    except (subprocess.CalledProcessError, OSError) as e:
        probe.delete()
        return f"cannot create network namespaces here ({(getattr(e, 'stderr', '') or str(e)).strip()})", False
    try:
        netem = probe.tc("qdisc", "add", "dev", "DEV", "root", "netem", "delay", "1ms", check=False).returncode == 0
    finally:
        probe.delete()
    return None, netem


# ------------------------------------------------------------------------------------------------- the job
def _pdeathsig() -> None:
    from ..distributed.elastic.multiprocessing.api import _child_preexec

    _child_preexec(os.getppid())


class Job:
    """The trial's two agents: agent 0 hosts the rendezvous store, agent 1 joins it."""

    def __init__(self, cfg: Config, run_dir: str, net: Optional[NetPair] = None) -> None:
        self.cfg, self.run_dir, self.net = cfg, run_dir, net
        self.trial_id = uuid.uuid4().hex
        self.progress = Progress(run_dir)
        self.agents: List[subprocess.Popen] = []
        self.logs: List[str] = []
        self.codes: List[Optional[int]] = []

    def _cmd(self, endpoint: str, is_host: bool) -> List[str]:
        c = self.cfg
        conf = f"is_host={int(is_host)},last_call_timeout=1,join_timeout=120,read_timeout=30,close_timeout=15"
        return [sys.executable, "-m", "tinytorch.distributed.run", "--rdzv-backend", "c10d", "--nnodes", "1:2",
                "--nproc-per-node", str(c.nproc), "--rdzv-endpoint", endpoint, "--rdzv-id", self.trial_id[:12],
                "--max-restarts", str(c.max_restarts), "--monitor-interval", "0.1", "--shutdown-timeout", "2",
                "--rdzv-conf", conf, "-m", "tinytorch.bench._chaos_train", "--run-dir", self.run_dir,
                "--steps", str(c.steps), "--ckpt-every", str(c.ckpt_every), "--timeout", str(c.timeout),
                "--step-time", str(c.step_time)]

    def start(self) -> None:
        os.makedirs(self.run_dir, exist_ok=True)
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        env[MARKER] = self.trial_id
        # Every rank's flight recorder dumps here when a collective fails (the hang trials read them).
        os.makedirs(os.path.join(self.run_dir, "fr"), exist_ok=True)
        env["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(self.run_dir, "fr", "rank_")
        if self.net is not None:
            env["TINYTORCH_RING_TRANSPORT"] = "tcp"  # the namespaces share a kernel: keep the ring on the link
            endpoint = f"{self.net.ip[0]}:29400"
        else:
            endpoint = f"127.0.0.1:{free_port()}"
        # The second agent first: it retries the endpoint until the first one hosts the store, so both usually
        # join round 0 together. Under load it may come after round 0 closed; the group then takes it in by
        # scale-up, and the faults aim at the first round with both agents.
        self.logs = [os.path.join(self.run_dir, f"agent{side}.log") for side in (0, 1)]
        started = {}
        for side in (1, 0):
            prefix = self.net.exec_prefix(side) if self.net is not None else []
            with open(self.logs[side], "wb") as out:
                started[side] = subprocess.Popen(prefix + self._cmd(endpoint, side == 0), env=env, stdout=out,
                                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                 preexec_fn=_pdeathsig)
        self.agents = [started[0], started[1]]

    def alive(self) -> bool:
        return any(p.poll() is None for p in self.agents)

    def wait(self, deadline: float) -> bool:
        """Wait for both agents; kill them at the deadline. Return whether they ended on their own."""
        for p in self.agents:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in self.agents:
                    if q.poll() is None:
                        q.kill()
                        q.wait(10)
                self.codes = [q.returncode for q in self.agents]
                return False
        self.codes = [p.returncode for p in self.agents]
        return True

    def leftovers(self, grace: float = 10.0) -> List[int]:
        """Processes of this trial still alive after ``grace`` seconds (then killed)."""
        needle = f"{MARKER}={self.trial_id}".encode()
        deadline = time.monotonic() + grace
        while True:
            found = []
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    with open(f"/proc/{d}/environ", "rb") as f:
                        if needle in f.read().split(b"\0"):
                            with open(f"/proc/{d}/stat") as s:
                                if s.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                                    found.append(int(d))
                except OSError:
                    continue
            if not found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return found

    def log_text(self) -> str:
        out = []
        for path in self.logs:
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    out.append(f.read())
        return "\n".join(out)


class JobEnded(Exception):
    """The job ended before the moment chosen for the fault came."""


def wait_event(j: Job, pred: Callable[[Event], bool], timeout: float, interval: float = 0.005) -> Event:
    """Follow the job's progress (every ``interval`` seconds) until an event satisfies ``pred``."""
    deadline = time.monotonic() + timeout
    for e in j.progress.events:
        if pred(e):
            return e
    while time.monotonic() < deadline:
        for e in j.progress.poll():
            if pred(e):
                return e
        if not j.alive():
            raise JobEnded("the job ended before the fault's moment")
        time.sleep(interval)
    raise JobEnded(f"the fault's moment did not come within {timeout:.0f}s")


def worker_pid(j: Job, rank: int, round_: int) -> int:
    e = wait_event(j, lambda e: e.rank == rank and e.round == round_ and e.what.startswith("start "), 60)
    return int(e.what.split()[4])


# ---------------------------------------------------------------------------------------------------- faults
@dataclass
class Injected:
    """What a fault did: when it ended (the clock recovery is measured from), a description, facts to check."""

    end: float
    when: str
    facts: Dict[str, Any] = field(default_factory=dict)


def _full_round(j: Job, cfg: Config) -> Tuple[int, int]:
    """The first round with every rank of both agents (round 0, unless the second agent came too late for it
    and the group took it in later) and the step that round resumed from."""
    start = wait_event(j, lambda e: e.rank == 0 and e.what.startswith("start ")
                       and int(e.what.split()[2]) == cfg.world, cfg.trial_timeout)
    resumed = wait_event(j, lambda e: e.rank == 0 and e.round == start.round and e.what.startswith("resumed "),
                         cfg.trial_timeout)
    return start.round, int(resumed.what.split()[1])


def _later_save(save: int, resumed: int, cfg: Config) -> int:
    """``save``, or the first checkpoint after ``resumed`` when the full round started past ``save``."""
    if save > resumed:
        return save
    later = [s for s in cfg.saves() if s > resumed]
    if not later:
        raise JobEnded(f"the full group started at step {resumed}, after the last checkpoint")
    return later[0]


def _mid_step(j: Job, rng: random.Random, cfg: Config, last: Optional[int] = None) -> Tuple[int, int, float]:
    """Wait until rank 0 of the full group finished a seeded step (at most ``last``), plus a seeded part of a
    step; return (round, step, delay)."""
    top = max(1, cfg.steps - 3 if last is None else last)
    step = rng.randint(1, top)
    delay = rng.uniform(0, cfg.step_time)
    round_, resumed = _full_round(j, cfg)
    if step <= resumed:
        step = resumed + 1 + (step - 1) % max(1, top - resumed)
    wait_event(j, lambda e: e.round == round_ and e.rank == 0 and e.what == f"step {step}", cfg.trial_timeout)
    time.sleep(delay)
    return round_, step, delay


def _signal_worker(sig: int, note: str) -> Callable[[Job, random.Random, Config, Optional[NetPair]], Injected]:
    """A fault that sends ``sig`` to a seeded worker at a seeded moment."""

    def inject(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair]) -> Injected:
        rank = rng.randrange(cfg.world)
        round_, step, delay = _mid_step(j, rng, cfg)
        os.kill(worker_pid(j, rank, round_), sig)
        return Injected(time.time(), f"step {step} +{delay * 1e3:.0f}ms, rank {rank}{note}", {"rank": rank})

    return inject


def fault_kill_node(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair]) -> Injected:
    _, step, delay = _mid_step(j, rng, cfg)
    j.agents[1].kill()  # the agent that does not host the store; its workers die with it (PR_SET_PDEATHSIG)
    return Injected(time.time(), f"step {step} +{delay * 1e3:.0f}ms, node 1 (ranks {cfg.nproc}-{cfg.world - 1})",
                    {"node_killed": True})


def fault_kill_in_save(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair]) -> Injected:
    save = rng.choice(cfg.saves())
    rank = rng.randrange(cfg.world)
    delay = rng.uniform(0, 0.001)
    round_, resumed = _full_round(j, cfg)
    save = _later_save(save, resumed, cfg)
    # Polled every half millisecond: a save of this job takes a few milliseconds.
    wait_event(j, lambda e: e.round == round_ and e.rank == rank and e.what == f"saving {save}", cfg.trial_timeout,
               interval=0.0005)
    time.sleep(delay)
    pid = worker_pid(j, rank, round_)
    os.kill(pid, signal.SIGSTOP)  # frozen where it is; then the kill lands exactly there
    j.progress.poll()
    inside = not any(e.round == round_ and e.rank == rank and e.what == f"saved {save}" for e in j.progress.events)
    # Whether the victim's own file of this save is in place: if not, no rank can complete the checkpoint (its
    # metadata needs every rank's file), so the restart must not resume from it. If it is, rank 0 may still
    # write the metadata and the checkpoint is whole.
    began = wait_event(j, lambda e: e.rank == rank and e.round == round_ and e.what.startswith("start "), 60).t
    mine = os.path.join(j.run_dir, "ckpt", f"step_{save}", f"__{rank}_0.distcp")
    written = os.path.exists(mine) and os.stat(mine).st_mtime >= began
    os.kill(pid, signal.SIGKILL)
    state = "its file written" if written else "its file not written: the checkpoint cannot complete"
    return Injected(time.time(), f"save of step {save} +{delay * 1e3:.1f}ms, rank {rank} "
                                 f"({'inside dcp.save' if inside else 'just after dcp.save'}; {state})",
                    {"save": save, "inside": inside, "file_written": written})


def fault_corrupt_checkpoint(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair]) -> Injected:
    save = rng.choice(cfg.saves()[1:] or cfg.saves())
    target = rng.choice([".metadata"] + [f"__{r}_0.distcp" for r in range(cfg.world)])
    mode = rng.choice(["flip", "truncate"])
    victim = rng.randrange(cfg.world)
    round_, resumed = _full_round(j, cfg)
    save = _later_save(save, resumed, cfg)
    wait_event(j, lambda e: e.round == round_ and e.rank == 0 and e.what == f"saved {save}", cfg.trial_timeout)
    path = os.path.join(j.run_dir, "ckpt", f"step_{save}", target)
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        pos = rng.randrange(size)
        if mode == "flip":
            f.seek(pos)
            old = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([old ^ rng.randrange(1, 256)]))
        else:
            f.truncate(pos)
    os.kill(worker_pid(j, victim, round_), signal.SIGKILL)  # the restart must read the damaged checkpoint
    what = f"byte {pos} of {size} flipped" if mode == "flip" else f"truncated to {pos} of {size} bytes"
    return Injected(time.time(), f"after save of step {save}: {target} {what}; rank {victim} killed",
                    {"save": save, "target": target})


def _net_window(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair], apply: Callable[[], str],
                clear: Callable[[], None]) -> Injected:
    assert net is not None
    window = rng.uniform(1.0, 3.0)
    _, step, delay = _mid_step(j, rng, cfg, last=cfg.steps // 2)  # the window should end before the job does
    how = apply()
    start = time.time()
    time.sleep(window)
    facts = {"dropped": net.dropped(), "window_start": start}
    clear()
    return Injected(time.time(), f"step {step} +{delay * 1e3:.0f}ms, {window:.1f}s of {how}", facts)


def fault_net_slow(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair]) -> Injected:
    assert net is not None

    def apply() -> str:
        if NETEM:
            net.tc("qdisc", "replace", "dev", "DEV", "root", "netem", "delay", "40ms", "10ms")
            return "netem delay 40ms+-10ms"
        net.tc("qdisc", "replace", "dev", "DEV", "root", "tbf", "rate", "4mbit", "burst", "32kb", "latency", "2s")
        return "tbf rate 4mbit (no netem in this kernel)"

    return _net_window(j, rng, cfg, net, apply, lambda: net.tc("qdisc", "del", "dev", "DEV", "root"))


def fault_net_loss(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair]) -> Injected:
    assert net is not None

    def apply() -> str:
        if NETEM:
            net.tc("qdisc", "replace", "dev", "DEV", "root", "netem", "loss", "10%")
            return "netem loss 10%"
        # A queue of two full frames at 20 Mbit/s: every burst longer than that loses its tail.
        net.tc("qdisc", "replace", "dev", "DEV", "root", "tbf", "rate", "20mbit", "burst", "4kb", "limit", "3kb")
        return "tbf tail drop (no netem in this kernel)"

    inj = _net_window(j, rng, cfg, net, apply, lambda: net.tc("qdisc", "del", "dev", "DEV", "root"))
    inj.when += f", {inj.facts['dropped']} packets dropped"
    return inj


def fault_net_cut(j: Job, rng: random.Random, cfg: Config, net: Optional[NetPair]) -> Injected:
    assert net is not None

    def apply() -> str:
        net.link("down")
        return "link down"

    return _net_window(j, rng, cfg, net, apply, lambda: net.link("up"))


INJECT: Dict[str, Callable[[Job, random.Random, Config, Optional[NetPair]], Injected]] = {
    "kill-worker": _signal_worker(signal.SIGKILL, ""), "kill-node": fault_kill_node,
    "kill-in-save": fault_kill_in_save, "stop-worker": _signal_worker(signal.SIGSTOP, " stopped"),
    "corrupt-checkpoint": fault_corrupt_checkpoint,
    "net-slow": fault_net_slow, "net-loss": fault_net_loss, "net-cut": fault_net_cut,
}
NETEM = False  # set by main() from network_support()


# ---------------------------------------------------------------------------------------------------- checks
def check_dumps(run_dir: str, world: int, victim: int) -> Tuple[Optional[str], List[str]]:
    """After a hang: every other rank left a flight-recorder dump and the analyzer names the stopped rank.
    Returns (why not, or None) and the analyzer's first lines."""
    from ..distributed.flight_recorder.analysis import analyze
    from ..distributed.flight_recorder.loader import TraceError, read_dir

    try:
        dumps, _ = read_dir(os.path.join(run_dir, "fr"), "rank_")
    except TraceError as e:
        return f"no flight-recorder dumps ({e})", []
    absent = sorted(set(range(world)) - {victim} - set(dumps))
    if absent:
        return f"ranks {absent} left no flight-recorder dump", []
    findings = analyze(dumps, allow_incomplete_ranks=True)
    lines = [line for f in findings for line in f.lines][:6]
    named = set().union(*(f.ranks for f in findings if f.kind in ("missing_ranks", "missing_dumps")))
    if victim not in named:
        return f"the flight-recorder analysis does not name the stopped rank {victim}: {lines}", lines
    return None, lines


def check_losses(run_dir: str, cfg: Config, reference: List[float], baseline: Optional[List[float]]) -> Optional[str]:
    """None when every step has a loss and every loss recorded equals the uninterrupted run's; else why not."""
    records = read_losses(run_dir)
    steps = {r["step"] for r in records}
    missing = sorted(set(range(cfg.steps)) - steps)
    if missing:
        return f"no loss for steps {missing}"
    for r in records:
        s, loss = r["step"], r["loss"]
        if baseline is not None and r["world"] == cfg.world and loss != baseline[s]:
            return f"step {s} (round {r['round']}, world {r['world']}): loss {loss!r} != uninterrupted {baseline[s]!r}"
        if abs(loss - reference[s]) > LOSS_RTOL * abs(reference[s]):
            return f"step {s} (round {r['round']}, world {r['world']}): loss {loss!r} vs one-process {reference[s]!r}"
    return None


def check_checkpoints(run_dir: str) -> Optional[str]:
    """None when every checkpoint that has metadata checks out file by file, piece by piece."""
    from ..distributed.checkpoint import CheckpointException, _dcp

    for step in job.checkpoints(run_dir):
        try:
            _dcp._verify(os.path.join(run_dir, "ckpt", f"step_{step}"))
        except CheckpointException as e:
            return f"step_{step} has metadata but does not check out: {e}"
    return None


def _resumes(events: List[Event]) -> Dict[int, int]:
    """Round -> the step rank 0 resumed from."""
    return {e.round: int(e.what.split()[1]) for e in events if e.rank == 0 and e.what.startswith("resumed ")}


def run_trial(index: int, fault: str, rng: random.Random, cfg: Config, work: str, reference: List[float],
              baseline: Optional[List[float]], net_tag: str) -> Dict[str, Any]:
    """One job with one fault; returns the trial's record (outcome 'recovered' or 'FAILED: why')."""
    run_dir = os.path.join(work, f"trial_{index:03d}_{fault}")
    net = NetPair(f"{net_tag}{index % 1000}", index % 250) if fault in NET_FAULTS else None
    rec: Dict[str, Any] = {"trial": index, "fault": fault, "when": None, "outcome": None, "restarts": 0,
                           "final_world": None, "recovery_s": None, "total_s": None, "run_dir": run_dir}
    t0 = time.monotonic()
    j = Job(cfg, run_dir, net)
    problems: List[str] = []
    inj: Optional[Injected] = None
    try:
        if net is not None:
            net.create()
        j.start()
        try:
            inj = INJECT[fault](j, rng, cfg, net)
            rec["when"] = inj.when
        except JobEnded as e:
            problems.append(f"fault not injected: {e}")
        if not j.wait(t0 + cfg.trial_timeout):
            problems.append(f"the job was still running after {cfg.trial_timeout:.0f}s")
    finally:
        leaked = j.leftovers()
        if net is not None:
            net.delete()
    rec["total_s"] = time.monotonic() - t0
    rec["agent_exit_codes"] = j.codes
    if leaked:
        problems.append(f"processes {leaked} outlived the job")
    events = read_events(run_dir)
    node_killed = bool(inj and inj.facts.get("node_killed"))
    if j.codes and j.codes[0] != 0:
        problems.append(f"the store-hosting agent exited with {j.codes[0]}")
    if len(j.codes) > 1 and j.codes[1] != 0 and not (node_killed and j.codes[1] == -signal.SIGKILL):
        problems.append(f"the second agent exited with {j.codes[1]}")
    why = check_losses(run_dir, cfg, reference, baseline)
    if why:
        problems.append(why)
    why = check_checkpoints(run_dir)
    if why:
        problems.append(why)
    starts = [e for e in events if e.what.startswith("start ")]
    rec["restarts"] = max([int(e.what.split()[6]) for e in starts], default=0)
    rec["rounds"] = len({e.round for e in starts})
    last_round = max((e.round for e in starts), default=0)
    rec["final_world"] = next((int(e.what.split()[2]) for e in starts if e.round == last_round), None)
    resumes = _resumes(events)
    rec["resumed_from"] = resumes
    if inj is not None:
        rec["facts"] = inj.facts
        fault_round = max((e.round for e in events if e.t <= inj.end), default=0)
        restarted = last_round > fault_round
        after = [e for e in events if e.rank == 0 and e.what.startswith("step ") and e.t > inj.end
                 and (e.round > fault_round or not restarted)]
        rec["recovery_s"] = (after[0].t - inj.end) if after else None
        if "window_start" in inj.facts:  # the longest wait between two steps while the link was degraded
            ts = [e.t for e in events if e.rank == 0 and e.what.startswith("step ")]
            gaps = [b - a for a, b in zip(ts, ts[1:]) if b > inj.facts["window_start"] and a < inj.end]
            rec["facts"]["longest_step_gap_s"] = max(gaps, default=None)
        if fault == "kill-in-save" and not inj.facts["file_written"] and \
                resumes.get(fault_round + 1) == inj.facts["save"]:
            problems.append(f"resumed from step_{inj.facts['save']}, which lacks the killed rank's file")
        if fault == "corrupt-checkpoint":
            save, target = inj.facts["save"], inj.facts["target"]
            refused = [e for e in events if e.round == fault_round + 1 and e.what.startswith(f"unusable {save} ")]
            if not refused or target not in refused[0].what:
                problems.append(f"the restart did not refuse step_{save} naming {target}")
            elif resumes.get(fault_round + 1) != save - cfg.ckpt_every:
                problems.append(f"resumed from {resumes.get(fault_round + 1)}, not the previous checkpoint "
                                f"{save - cfg.ckpt_every}")
            else:
                rec["error_seen"] = json.loads(refused[0].what.split(" ", 2)[2])
        if fault == "stop-worker":
            why, rec["fr_trace"] = check_dumps(run_dir, cfg.world, inj.facts["rank"])
            if why:
                problems.append(why)
        if fault == "net-loss" and not NETEM and inj.facts.get("dropped", 0) == 0:
            problems.append("the link dropped no packets")
    if rec["restarts"] > cfg.max_restarts:
        problems.append(f"{rec['restarts']} restarts, more than --max-restarts {cfg.max_restarts}")
    rec["outcome"] = "recovered" if not problems else "FAILED: " + "; ".join(problems)
    if problems:
        rec["agent_log_tail"] = j.log_text()[-4000:]
    return rec


def run_baseline(cfg: Config, work: str, reference: List[float]) -> Tuple[List[float], float]:
    """The uninterrupted job: its losses (checked against the one-process run) and how long it took."""
    run_dir = os.path.join(work, "baseline")
    j = Job(cfg, run_dir)
    t0 = time.monotonic()
    j.start()
    ended = j.wait(t0 + cfg.trial_timeout)
    took = time.monotonic() - t0
    leaked = j.leftovers()
    why = check_losses(run_dir, cfg, reference, None)
    if not ended or j.codes != [0, 0] or why or leaked:
        raise RuntimeError(f"the uninterrupted job failed (exit codes {j.codes}, {why or ''}, leftovers {leaked}):\n"
                           f"{j.log_text()[-4000:]}")
    losses = [0.0] * cfg.steps
    for r in read_losses(run_dir):
        losses[r["step"]] = r["loss"]
    return losses, took


def fault_order(faults: List[str], trials: int, rng: random.Random) -> List[str]:
    """Round-robin over the faults, each round in a seeded order: every fault gets its share."""
    out: List[str] = []
    while len(out) < trials:
        cycle = list(faults)
        rng.shuffle(cycle)
        out.extend(cycle)
    return out[:trials]


def main(args: argparse.Namespace) -> Dict[str, Any]:
    """Run the baseline and the trials, print the table and the per-fault summary, write JSON."""
    global NETEM
    cfg = Config(args.steps, args.ckpt_every, args.step_time, args.nproc_per_node, args.max_restarts, args.timeout,
                 args.trial_timeout)
    faults = list(dict.fromkeys(args.faults))
    if len(cfg.saves()) < 2:
        usage_error(args, f"--steps {cfg.steps} with --ckpt-every {cfg.ckpt_every} takes fewer than two "
                          "checkpoints; the checkpoint faults need two")
    skipped = None
    if any(f in NET_FAULTS for f in faults):
        skipped, NETEM = network_support()
        if skipped:
            print(f"# network faults skipped: {skipped}")
            faults = [f for f in faults if f not in NET_FAULTS]
    if not faults:
        raise SystemExit("no fault left to inject")
    work = args.work_dir or tempfile.mkdtemp(prefix="tinytorch_chaos_")
    os.makedirs(work, exist_ok=True)
    load_before = os.getloadavg()
    print(f"# chaos: {args.trials} trials, seed {args.seed}, {cfg.world} ranks on 2 agents, {cfg.steps} steps, "
          f"checkpoint every {cfg.ckpt_every}; load average {load_before[0]:.1f} on {os.cpu_count()} cores; "
          f"work dir {work}")
    reference = job.reference_losses(cfg.steps)
    baseline, base_s = run_baseline(cfg, work, reference)
    print(f"# uninterrupted job: {base_s:.1f} s, losses within {LOSS_RTOL:g} of the one-process run")
    rng = random.Random(args.seed)
    tag = f"{os.getpid() % 1000}"
    records = []
    for i, fault in enumerate(fault_order(faults, args.trials, rng)):
        rec = run_trial(i, fault, random.Random(rng.getrandbits(64)), cfg, work, reference, baseline, tag)
        records.append(rec)
        rs = "-" if rec["recovery_s"] is None else f"{rec['recovery_s']:.2f}"
        print(f"# trial {i}: {fault}: {rec['outcome']} (recovery {rs} s, total {rec['total_s']:.1f} s)", flush=True)
    print(table(["trial", "fault", "when", "outcome", "restarts", "world", "recovery_s", "total_s"],
                [(r["trial"], r["fault"], r["when"], r["outcome"][:60], r["restarts"], r["final_world"],
                  r["recovery_s"], r["total_s"]) for r in records],
                ["{}", "{}", "{}", "{}", "{}", "{}", "{:.2f}", "{:.1f}"]))
    summary: Dict[str, Any] = {}
    for f in dict.fromkeys(r["fault"] for r in records):
        mine = [r for r in records if r["fault"] == f]
        rec_s = [r["recovery_s"] for r in mine if r["recovery_s"] is not None]
        summary[f] = {"trials": len(mine), "recovered": sum(r["outcome"] == "recovered" for r in mine),
                      "recovery_s_median": median(rec_s) if rec_s else None,
                      "recovery_s_max": max(rec_s) if rec_s else None}
    print(table(["fault", "trials", "recovered", "recovery_s_median", "recovery_s_max"],
                [(f, s["trials"], s["recovered"], s["recovery_s_median"], s["recovery_s_max"])
                 for f, s in summary.items()], ["{}", "{}", "{}", "{:.2f}", "{:.2f}"]))
    ok = sum(r["outcome"] == "recovered" for r in records)
    load_after = os.getloadavg()
    print(f"# {ok} of {len(records)} trials recovered with nothing lost; load average {load_after[0]:.1f} "
          f"(1 min), {load_after[1]:.1f} (5 min) on {os.cpu_count()} cores")
    result = {"trials": records, "summary": summary, "seed": args.seed, "config": vars(cfg),
              "baseline_s": base_s, "network_skipped": skipped, "netem": NETEM,
              "load_avg_before": load_before, "load_avg_after": load_after, "cpus": os.cpu_count()}
    if args.json:
        write_json(args.json, result)
    if args.work_dir is None and ok == len(records):
        shutil.rmtree(work, ignore_errors=True)
    elif ok != len(records):
        print(f"# failed trials' files kept in {work}")
    return result
