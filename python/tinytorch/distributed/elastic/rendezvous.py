"""Rendezvous of the agents of one job over the communication layer's TCPStore.

One agent hosts the store on a listening socket it binds itself and keeps for the whole job
(``master_listen_fd``), so there is no pick-a-free-port-then-close race and the store outlives
worker restarts. The other agents connect as clients, bounded by ``read_timeout``.

Rounds: round ``r`` is attempt ``r`` (workers see it as ``TINYTORCH_RDZV_ROUND``; their
``TORCHELASTIC_RESTART_COUNT`` counts only the failures before it). In each round every agent
publishes a descriptor; once all have arrived, every agent computes the same ranks from the same
descriptors. Keys, all under ``tt_rdzv/<run_id>/``:

- ``r<r>/claim/<node_rank>``, ``r<r>/node/<group_rank>``: static backend membership
- ``r<r>/joined``, ``r<r>/size``, ``r<r>/slot/<i>``: c10d backend membership (join order, closed size);
  ``joined - size`` nodes arrived after the round closed and wait for the next one (scale-up)
- ``r<r>/restart``: the group starts round ``r+1``: its value says why (a failure, or nodes waiting
  to join) and how many failures the job has had, so every agent counts restarts alike
- ``r<r>/done``: count of nodes whose workers all succeeded (the exit barrier)
- ``abort``: the job failed for good; the value names the root cause
- ``finished``: the job succeeded; a node still waiting to join leaves without error
- ``left``: count of agents that are leaving; the host keeps the store up until all have left

Workers use the same store (``TORCHELASTIC_USE_AGENT_STORE=True``): their ``MASTER_ADDR`` and
``MASTER_PORT`` point at it, so ``init_process_group("env://")`` connects as a client.
"""
from __future__ import annotations

import errno
import functools
import ipaddress
import json
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Optional, TypeVar

__all__ = [
    "RendezvousError",
    "RendezvousConnectionError",
    "RendezvousTimeoutError",
    "RendezvousClosedError",
    "RendezvousGracefulExitError",
    "RendezvousParameters",
    "RendezvousInfo",
    "RendezvousHandler",
    "PeerEvent",
]

DEFAULT_C10D_PORT = 29400


class RendezvousError(RuntimeError):
    """Base class of rendezvous failures."""


class RendezvousConnectionError(RendezvousError):
    """The rendezvous store could not be reached or hosted."""


class RendezvousTimeoutError(RendezvousError):
    """Not every node joined in time."""


class RendezvousClosedError(RendezvousError):
    """The job was aborted by another node while this one was joining."""

    def __init__(self, msg: str, payload: Optional[dict] = None) -> None:
        super().__init__(msg)
        self.payload = payload


class RendezvousGracefulExitError(RendezvousError):
    """The job finished while this node waited to be taken in: nothing is left for it to do."""


@dataclass
class RendezvousParameters:
    """Everything an agent needs to find the others."""

    backend: str  # "static" or "c10d"
    endpoint_host: str
    endpoint_port: int
    run_id: str
    min_nodes: int
    max_nodes: int
    node_rank: Optional[int]  # required by static; a sort hint for c10d
    local_world_size: int
    role: str = "default"
    max_restarts: int = 0
    join_timeout: float = 600.0
    read_timeout: float = 60.0
    last_call_timeout: float = 30.0
    close_timeout: float = 30.0
    poll_interval: float = 0.05
    is_host: Optional[bool] = None


@dataclass
class RendezvousInfo:
    """Result of one round: this node's place in the group and every node's descriptor."""

    round: int
    group_rank: int
    group_world_size: int
    nodes: list[dict] = field(default_factory=list)  # descriptors in group-rank order
    master_addr: str = ""
    master_port: int = 0
    restart_count: int = 0  # failures before this round (membership changes do not count)

    def base_rank(self) -> int:
        """Return the global rank of this node's local rank 0."""
        return sum(n["local_world_size"] for n in self.nodes[: self.group_rank])

    def world_size(self) -> int:
        """Return the total number of workers."""
        return sum(n["local_world_size"] for n in self.nodes)

    def role_rank_and_size(self) -> tuple[int, int]:
        """Return (role rank of local rank 0, role world size) among nodes of this node's role."""
        role = self.nodes[self.group_rank]["role"]
        same = [n for n in self.nodes if n["role"] == role]
        before = sum(n["local_world_size"] for n in self.nodes[: self.group_rank] if n["role"] == role)
        return before, sum(n["local_world_size"] for n in same)


@dataclass
class PeerEvent:
    """Something another node decided: ``kind`` is "restart" or "abort"; ``payload`` names the cause
    (for a restart, also ``cause``: "failure" or "membership", and ``failures``: the job's count so far)."""

    kind: str
    payload: Optional[dict] = None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def _is_local_address(host: str) -> bool:
    """Return True when ``host`` resolves to an address of this machine (binding it succeeds)."""
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return False
    for *_, addr in infos:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((addr[0], 0))
                return True
            except OSError:
                continue
    return False


F = TypeVar("F", bound=Callable[..., Any])


def _store_op(fn: F) -> F:
    """Turn a store failure (host gone, connection reset, store timeout) into a RendezvousConnectionError."""

    @functools.wraps(fn)
    def wrapper(self: "RendezvousHandler", *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except RendezvousError:
            raise
        except RuntimeError as e:  # the store's DistError family
            # Reconnecting would only retry until read_timeout; leaving must not wait on a dead host.
            self._store_lost = True
            raise RendezvousConnectionError(
                f"lost the rendezvous store at {self.endpoint} during {fn.__name__}: {e}") from e

    return wrapper  # type: ignore[return-value]


def _store_class() -> Any:
    from tinytorch.distributed import TCPStore  # the communication layer's C++ store

    return TCPStore


class RendezvousHandler:
    """Hosts or joins the job's store and runs rendezvous rounds, restart requests and the exit barrier."""

    def __init__(self, params: RendezvousParameters) -> None:
        p = params
        if p.backend not in ("static", "c10d"):
            raise ValueError(f"unknown rendezvous backend {p.backend!r} (expected static or c10d)")
        if not 0 < p.min_nodes <= p.max_nodes:
            raise ValueError(f"bad --nnodes {p.min_nodes}:{p.max_nodes}: need 0 < MIN <= MAX")
        if p.backend == "static":
            if p.min_nodes != p.max_nodes:
                raise ValueError("the static rendezvous needs a fixed --nnodes N; use --rdzv-backend c10d for MIN:MAX")
            if p.node_rank is None or not 0 <= p.node_rank < p.max_nodes:
                raise ValueError(f"--node-rank must be in [0, {p.max_nodes}) with the static rendezvous, got {p.node_rank}")
        self.params = p
        self.store: Any = None
        self.is_host = False
        self.port = p.endpoint_port
        self._listen_sock: Optional[socket.socket] = None
        self._prefix = f"tt_rdzv/{p.run_id}/"
        self._last_size = 1
        self._last_round = 0
        self._left = False
        self._store_lost = False

    # ----------------------------------------------------------------- store
    @property
    def endpoint(self) -> str:
        """Return ``host:port`` of the rendezvous store (the real port once hosted)."""
        return f"{self.params.endpoint_host}:{self.port}"

    def setup(self) -> None:
        """Host the store (static node 0, or the c10d agent on the endpoint's machine) or connect to it."""
        p = self.params
        if p.is_host is not None:
            want_host = p.is_host
        elif p.backend == "static":
            want_host = p.node_rank == 0
        else:
            want_host = _is_local_address(p.endpoint_host)
        if want_host:
            sock = self._try_bind()
            if sock is not None:
                self._host_store(sock)
                return
            if p.backend == "static" or p.is_host:
                raise RendezvousConnectionError(
                    f"cannot host the rendezvous store on {self.endpoint}: address already in use "
                    "(another job on this port? pick another --master-port / --rdzv-endpoint port)")
            # c10d: another agent on this machine already hosts it; join as a client.
        if self.port == 0:
            raise RendezvousConnectionError("a rendezvous endpoint with port 0 can only be used by the agent that hosts it")
        self._connect_store()

    def _try_bind(self) -> Optional[socket.socket]:
        p = self.params
        # A loopback endpoint stays on loopback; otherwise listen on every interface, like c10d,
        # because a hostname may resolve to an address other nodes cannot route to.
        bind_host = "127.0.0.1" if _is_loopback(p.endpoint_host) else "0.0.0.0"
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind_host, p.endpoint_port))
            sock.listen(512)
        except OSError as e:
            sock.close()
            if e.errno == errno.EADDRINUSE:
                return None
            raise RendezvousConnectionError(f"cannot listen on {bind_host}:{p.endpoint_port} for the rendezvous store: {e}") from e
        return sock

    def _host_store(self, sock: socket.socket) -> None:
        p = self.params
        self._listen_sock = sock  # held for the whole job: the port cannot be taken from under us
        self.port = sock.getsockname()[1]
        client_host = "127.0.0.1"
        try:
            self.store = _store_class()(client_host, self.port, is_master=True, wait_for_workers=False,
                                        timeout=timedelta(seconds=p.read_timeout),
                                        master_listen_fd=sock.fileno())
        except Exception as e:
            raise RendezvousConnectionError(f"cannot start the rendezvous store on {self.endpoint}: {e}") from e
        self.is_host = True

    def _connect_store(self) -> None:
        p = self.params
        try:
            self.store = _store_class()(p.endpoint_host, self.port, is_master=False, wait_for_workers=False,
                                        timeout=timedelta(seconds=p.read_timeout))
        except Exception as e:
            raise RendezvousConnectionError(
                f"could not reach the rendezvous endpoint {self.endpoint} within {p.read_timeout:g}s "
                f"(is the node-0 agent running, and is the port reachable from this host?): {e}") from e

    def _k(self, key: str) -> str:
        return self._prefix + key

    def _check(self, key: str) -> bool:
        return bool(self.store.check([self._k(key)]))

    def _get_json(self, key: str) -> Any:
        v = self.store.get(self._k(key))
        return json.loads(v.decode() if isinstance(v, (bytes, bytearray)) else v)

    def _set_json(self, key: str, value: Any) -> None:
        self.store.set(self._k(key), json.dumps(value))

    def _counter(self, key: str) -> int:
        return int(self.store.add(self._k(key), 0))

    # ----------------------------------------------------------------- rounds
    def _descriptor(self) -> dict:
        p = self.params
        return {
            "host": socket.getfqdn(),
            "pid": os.getpid(),
            "local_world_size": p.local_world_size,
            "role": p.role,
            "node_rank": p.node_rank if p.node_rank is not None else 0,
            "store_host": self.is_host,
            "max_restarts": p.max_restarts,
        }

    def _abort_payload(self) -> Optional[dict]:
        if self._check("abort"):
            return self._get_json("abort")
        return None

    def _raise_if_aborted(self) -> None:
        payload = self._abort_payload()
        if payload is not None:
            raise RendezvousClosedError(f"the job was aborted by another node: {payload.get('reason', '')}", payload)
        if self._check("finished"):
            raise RendezvousGracefulExitError("the job finished before this node was taken in")

    @_store_op
    def next_rendezvous(self, round_: int) -> RendezvousInfo:
        """Join round ``round_`` and return this node's ranks once the round is complete."""
        deadline = time.monotonic() + self.params.join_timeout
        if self.params.backend == "static":
            info = self._join_static(round_, deadline)
        else:
            info = self._join_c10d(round_, deadline)
        restarts = {n["max_restarts"] for n in info.nodes}
        if len(restarts) > 1:
            raise RendezvousError(f"nodes disagree on --max-restarts ({sorted(restarts)}); use one value on every node")
        info.master_addr = self.params.endpoint_host
        info.master_port = self.port
        if info.round > 0 and self._check(f"r{info.round - 1}/restart"):
            info.restart_count = int(self._get_json(f"r{info.round - 1}/restart").get("failures", 0))
        self._last_size = info.group_world_size
        self._last_round = info.round
        return info

    def _wait_for(self, keys: list[str], deadline: float, what: str) -> None:
        full = [self._k(k) for k in keys]
        while not self.store.check(full):
            self._raise_if_aborted()
            if time.monotonic() > deadline:
                missing = [k for k in keys if not self._check(k)]
                raise RendezvousTimeoutError(
                    f"timed out after {self.params.join_timeout:g}s waiting for {what} at {self.endpoint} "
                    f"(missing: {', '.join(missing)})")
            time.sleep(self.params.poll_interval)

    def _join_static(self, r: int, deadline: float) -> RendezvousInfo:
        p = self.params
        assert p.node_rank is not None
        n = p.max_nodes
        if int(self.store.add(self._k(f"r{r}/claim/{p.node_rank}"), 1)) > 1:
            raise RendezvousError(f"node rank {p.node_rank} joined twice in round {r} at {self.endpoint}: "
                                  "is --node-rank unique on every node?")
        self._set_json(f"r{r}/node/{p.node_rank}", self._descriptor())
        self._wait_for([f"r{r}/node/{i}" for i in range(n)], deadline, f"{n} nodes to join round {r}")
        nodes = [self._get_json(f"r{r}/node/{i}") for i in range(n)]
        return RendezvousInfo(r, p.node_rank, n, nodes)

    def _join_c10d(self, r: int, deadline: float) -> RendezvousInfo:
        p = self.params
        while True:
            idx = int(self.store.add(self._k(f"r{r}/joined"), 1)) - 1
            me = self._descriptor()
            self._set_json(f"r{r}/slot/{idx}", me)
            size = self._close_c10d_round(r, deadline)
            if idx < size:
                break
            # Arrived after the round closed: wait for the group to restart into the next round.
            self._wait_for([f"r{r}/restart"], deadline, f"round {r} (already running with {size} nodes) to restart")
            r += 1
        self._wait_for([f"r{r}/slot/{i}" for i in range(size)], deadline, f"{size} nodes to publish round {r}")
        nodes = [self._get_json(f"r{r}/slot/{i}") for i in range(size)]
        # Deterministic group ranks: by --node-rank, then the store host first, then host name and pid.
        order = sorted(range(size), key=lambda i: (nodes[i]["node_rank"], not nodes[i]["store_host"],
                                                   nodes[i]["host"], nodes[i]["pid"]))
        nodes = [nodes[i] for i in order]
        return RendezvousInfo(r, order.index(idx), size, nodes)

    def _close_c10d_round(self, r: int, deadline: float) -> int:
        """Wait until round ``r`` has MAX nodes, or MIN nodes and ``last_call_timeout`` passed; return its size."""
        p = self.params
        size_key = self._k(f"r{r}/size")
        min_seen_at: Optional[float] = None
        while True:
            if self.store.check([size_key]):
                return int(self._raw_get(size_key))
            self._raise_if_aborted()
            joined = self._counter(f"r{r}/joined")
            now = time.monotonic()
            if joined >= p.min_nodes and min_seen_at is None:
                min_seen_at = now
            if joined >= p.max_nodes or (min_seen_at is not None and now - min_seen_at >= p.last_call_timeout):
                # First writer wins; everyone adopts the stored value.
                value = self.store.compare_set(size_key, "", str(min(joined, p.max_nodes)))
                return int(value.decode() if isinstance(value, (bytes, bytearray)) else value)
            if now > deadline:
                raise RendezvousTimeoutError(
                    f"timed out after {p.join_timeout:g}s waiting for {p.min_nodes} nodes at {self.endpoint} "
                    f"(round {r}: {joined} joined)")
            time.sleep(p.poll_interval)

    def _raw_get(self, full_key: str) -> str:
        v = self.store.get(full_key)
        return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)

    # ------------------------------------------------------- group decisions
    @_store_op
    def peer_event(self, round_: int) -> Optional[PeerEvent]:
        """Return a restart or abort another node requested during round ``round_``, if any."""
        payload = self._abort_payload()
        if payload is not None:
            return PeerEvent("abort", payload)
        if self._check(f"r{round_}/restart"):
            return PeerEvent("restart", self._get_json(f"r{round_}/restart"))
        return None

    @_store_op
    def num_nodes_waiting(self, round_: int) -> int:
        """Return how many nodes arrived after round ``round_`` closed and wait to be taken in (c10d only).

        Nodes beyond MAX are not counted (they are spares), nor are any once a node of the round has
        finished: the group is ending, a restart would only run finished work again."""
        if self.params.backend != "c10d" or not self._check(f"r{round_}/size") or self._counter(f"r{round_}/done"):
            return 0
        size = int(self._raw_get(self._k(f"r{round_}/size")))
        return max(0, min(self._counter(f"r{round_}/joined"), self.params.max_nodes) - size)

    @_store_op
    def request_restart(self, round_: int, payload: dict) -> dict:
        """Ask every node to stop its workers and join round ``round_ + 1``; return the request that holds
        (another node's, when two asked at once: the first writer wins)."""
        value = self.store.compare_set(self._k(f"r{round_}/restart"), "", json.dumps(payload))
        return json.loads(value.decode() if isinstance(value, (bytes, bytearray)) else value)

    def abort(self, payload: dict) -> None:
        """Mark the job failed for good; peers stop their workers and exit non-zero."""
        if self._store_lost:
            return
        try:
            self.store.compare_set(self._k("abort"), "", json.dumps(payload))
        except Exception:
            pass  # store already gone: peers will notice that on their own

    @_store_op
    def finish(self) -> None:
        """Mark the job succeeded, so that a node still waiting to join leaves instead of waiting on."""
        self.store.set(self._k("finished"), "1")

    @_store_op
    def exit_barrier(self, round_: int, timeout: float) -> Optional[PeerEvent]:
        """Wait until every node's workers succeeded in ``round_``; return a peer's restart/abort instead if one comes."""
        size = self._last_size
        self.store.add(self._k(f"r{round_}/done"), 1)
        deadline = time.monotonic() + timeout
        while self._counter(f"r{round_}/done") < size:
            ev = self.peer_event(round_)
            if ev is not None:
                return ev
            if time.monotonic() > deadline:
                raise RendezvousTimeoutError(
                    f"timed out after {timeout:g}s in the exit barrier of round {round_} at {self.endpoint}: "
                    "some node's workers are still running")
            time.sleep(self.params.poll_interval)
        return None

    def shutdown(self) -> None:
        """Leave the job; the host keeps the store up (bounded by ``close_timeout``) until every agent left."""
        if self.store is None:
            return
        try:
            if not self._left and not self._store_lost:
                self._left = True
                self.store.add(self._k("left"), 1)
            if self.is_host:
                # Nodes still waiting to join the last round count too: they must see "finished" before the store goes.
                expected = self._last_size
                if self.params.backend == "c10d":
                    expected = max(expected, self._counter(f"r{self._last_round}/joined"))
                deadline = time.monotonic() + self.params.close_timeout
                while self._counter("left") < expected and time.monotonic() < deadline:
                    time.sleep(self.params.poll_interval)
        except Exception:
            pass  # leaving anyway; a dead store is not an error at this point
        finally:
            self.store = None
            if self._listen_sock is not None:
                self._listen_sock.close()
                self._listen_sock = None
