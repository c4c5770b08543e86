"""The c10d rendezvous's membership bookkeeping on a real TCPStore: nodes waiting to join a closed round,
restart requests (first writer wins), the failure count every node reads alike, spares, and the job's end."""
from __future__ import annotations

import threading
import time

import pytest

from tinytorch.distributed.elastic.rendezvous import (RendezvousGracefulExitError, RendezvousHandler,
                                                      RendezvousParameters)


def _handler(port: int, host: bool = False, max_nodes: int = 3) -> RendezvousHandler:
    h = RendezvousHandler(RendezvousParameters(
        backend="c10d", endpoint_host="127.0.0.1", endpoint_port=port, run_id="units", min_nodes=1,
        max_nodes=max_nodes, node_rank=None, local_world_size=1, join_timeout=20, read_timeout=20,
        last_call_timeout=0.3, close_timeout=2, poll_interval=0.01, is_host=host))
    h.setup()
    return h


class _Join(threading.Thread):
    """next_rendezvous(round) on a thread; its result or error kept."""

    def __init__(self, h: RendezvousHandler, round_: int) -> None:
        super().__init__(daemon=True)
        self.h, self.round, self.info, self.error = h, round_, None, None
        self.start()

    def run(self) -> None:
        try:
            self.info = self.h.next_rendezvous(self.round)
        except Exception as e:  # noqa: BLE001 - inspected by the test
            self.error = e

    def result(self):
        self.join(20)
        assert not self.is_alive(), "next_rendezvous did not return"
        if self.error is not None:
            raise self.error
        return self.info


def _until(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_waiting_nodes_restart_requests_failure_count_and_the_end():
    host = _handler(0, host=True)
    a, b, spare = _handler(host.port), _handler(host.port), _handler(host.port)
    try:
        r0 = [_Join(host, 0), _Join(a, 0)]
        infos = [j.result() for j in r0]  # MAX is 3: the round closes at 2 after the last call
        assert [i.group_world_size for i in infos] == [2, 2] and {i.restart_count for i in infos} == {0}
        assert host.num_nodes_waiting(0) == 0
        late = _Join(b, 0)  # arrives after round 0 closed: waits for the group to restart
        _until(lambda: host.num_nodes_waiting(0) == 1)
        assert late.is_alive() and a.peer_event(0) is None
        # Two nodes ask at once: the first request holds for everyone.
        first = {"reason": "1 new node(s) waiting to join", "cause": "membership", "failures": 0}
        assert host.request_restart(0, first) == first
        assert a.request_restart(0, {"reason": "rank 1 failed", "cause": "failure", "failures": 1}) == first
        ev = a.peer_event(0)
        assert ev.kind == "restart" and ev.payload == first
        r1 = [_Join(host, 1), _Join(a, 1)]
        infos = [j.result() for j in r1] + [late.result()]
        assert {(i.round, i.group_world_size, i.restart_count) for i in infos} == {(1, 3, 0)}  # not a failure
        assert sorted(i.group_rank for i in infos) == [0, 1, 2]
        # A failure restart is counted, the same on every node.
        host.request_restart(1, {"reason": "rank 2 failed", "cause": "failure", "failures": 1})
        r2 = [_Join(h, 2) for h in (host, a, b)]
        assert {(i.group_world_size, i.restart_count) for i in (j.result() for j in r2)} == {(3, 1)}
        # At MAX a newcomer is a spare: nobody restarts for it.
        waiting = _Join(spare, 0)
        _until(lambda: host._counter("r2/joined") == 4)
        assert host.num_nodes_waiting(2) == 0
        # The job's end releases it without error.
        host.finish()
        with pytest.raises(RendezvousGracefulExitError, match="the job finished before this node was taken in"):
            waiting.result()
    finally:
        for h in (spare, b, a, host):
            h.shutdown()


def test_no_scale_up_once_a_node_of_the_round_has_finished():
    host = _handler(0, host=True, max_nodes=2)
    other = _handler(host.port, max_nodes=2)
    try:
        assert _Join(host, 0).result().group_world_size == 1
        late = _Join(other, 0)
        _until(lambda: host.num_nodes_waiting(0) == 1)
        # The exit barrier counts this node as done: the group is ending, restarting would redo finished work.
        threading.Thread(target=lambda: host.exit_barrier(0, 0.5), daemon=True).start()
        _until(lambda: host.num_nodes_waiting(0) == 0)
        host.finish()
        with pytest.raises(RendezvousGracefulExitError):
            late.result()
    finally:
        other.shutdown()
        host.shutdown()
