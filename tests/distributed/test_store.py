"""TCPStore: API, port 0, adopted listening fd, multi-process rendezvous, timeouts, server death."""
import multiprocessing as mp
import os
import socket
import threading
import time

import pytest

import tinytorch.distributed as dist
from dist_helpers import run_ranks


@pytest.fixture
def store():
    s = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=5)
    yield s
    del s


def test_port_zero_and_basic_ops(store):
    assert store.port > 0
    store.set("k", "v")
    store.set("b", b"\x00\x01\xff")
    assert store.get("k") == b"v"
    assert store.get("b") == b"\x00\x01\xff"
    assert store.add("cnt", 5) == 5
    assert store.add("cnt", -2) == 3
    assert store.get("cnt") == b"3"
    assert store.check(["k", "cnt"]) is True
    assert store.check(["k", "missing"]) is False
    n = store.num_keys()
    assert store.delete_key("k") is True
    assert store.delete_key("k") is False
    assert store.num_keys() == n - 1
    store.set("empty", b"")
    assert store.get("empty") == b""


def test_compare_set(store):
    assert store.compare_set("cs", "", "first") == b"first"
    assert store.compare_set("cs", "wrong", "x") == b"first"
    assert store.compare_set("cs", "first", "second") == b"second"
    # Missing key with a non-empty expectation: returns the expectation unchanged and sets nothing.
    assert store.compare_set("absent", "exp", "x") == b"exp"
    assert store.check("absent") is False


def test_get_times_out_naming_key_and_timeout():
    s = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=0.3)
    t = time.monotonic()
    with pytest.raises(dist.DistTimeoutError, match=r"get\('never'\).*0\.3s"):
        s.get("never")
    assert time.monotonic() - t < 3
    # The client recovers after a timed-out wait.
    s.set("after", "1")
    assert s.get("after") == b"1"


def test_wait_wakes_on_set_from_another_client(store):
    other = dist.TCPStore("127.0.0.1", store.port, is_master=False, timeout=5)
    threading.Timer(0.2, lambda: other.set("late", "x")).start()
    t = time.monotonic()
    store.wait(["late"], timeout=5)
    assert time.monotonic() - t < 3
    with pytest.raises(dist.DistTimeoutError, match="never"):
        store.wait(["late", "never"], timeout=0.2)
    # add() wakes waiters too.
    threading.Timer(0.1, lambda: other.add("counter", 1)).start()
    store.wait("counter", timeout=5)


def test_large_value_and_many_keys(store):
    blob = os.urandom(3 * 1024 * 1024)
    store.set("blob", blob)
    assert store.get("blob") == blob
    for i in range(200):
        store.set(f"k{i}", str(i))
    assert all(store.get(f"k{i}") == str(i).encode() for i in range(0, 200, 17))


def test_master_listen_fd():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    s = dist.TCPStore("127.0.0.1", port, world_size=1, is_master=True, master_listen_fd=sock.fileno(), timeout=5)
    sock.close()  # the store took its own duplicate
    assert s.port == port
    c = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=5)
    c.set("x", "1")
    assert s.get("x") == b"1"


def test_client_without_server_errors_quickly():
    with socket.socket() as tmp:
        tmp.bind(("127.0.0.1", 0))
        port = tmp.getsockname()[1]
    t = time.monotonic()
    with pytest.raises(dist.DistNetworkError, match=f"127.0.0.1:{port}"):
        dist.TCPStore("127.0.0.1", port, is_master=False, timeout=0.5)
    assert time.monotonic() - t < 5


def test_wait_for_workers_timeout_reports_count():
    with pytest.raises(dist.DistTimeoutError, match=r"1/3 clients joined"):
        dist.TCPStore("127.0.0.1", 0, world_size=3, is_master=True, timeout=0.5)


def _rendezvous(rank, world_size, port):
    s = dist.TCPStore("127.0.0.1", port, world_size, rank == 0, timeout=10)
    s.set(f"addr/{rank}", f"host{rank}")
    got = [s.get(f"addr/{r}").decode() for r in range(world_size)]
    total = s.add("sum", rank + 1)
    s.add("done", 1)
    s.wait(["done"])
    while int(s.get("done")) < world_size:
        time.sleep(0.01)
    # Keep the master alive until everyone has finished reading.
    s.add("left", 1)
    if rank == 0:
        deadline = time.monotonic() + 10
        while int(s.add("left", 0)) < world_size and time.monotonic() < deadline:
            time.sleep(0.01)
    return got, total


@pytest.mark.parametrize("world_size", [2, 4])
def test_multiprocess_rendezvous(world_size):
    results = run_ranks(_rendezvous, world_size, timeout=30)
    for got, _ in results:
        assert got == [f"host{r}" for r in range(world_size)]
    totals = sorted(t for _, t in results)
    assert totals[-1] == sum(range(1, world_size + 1))


def _serve_then_die(port_q, go):
    s = dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, timeout=5)
    port_q.put(s.port)
    go.wait(10)
    os._exit(0)


def test_server_death_gives_error_not_hang():
    ctx = mp.get_context("spawn")
    q, go = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_serve_then_die, args=(q, go), daemon=True)
    p.start()
    try:
        port = q.get(timeout=20)
        c = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=2)
        c.set("a", "1")
        result = {}

        def blocked_get():
            try:
                c.get("never-set")
            except Exception as e:  # noqa: BLE001
                result["err"] = e

        th = threading.Thread(target=blocked_get)
        th.start()
        time.sleep(0.2)
        t = time.monotonic()
        go.set()
        th.join(10)
        assert not th.is_alive()
        assert time.monotonic() - t < 1.9, "a dead server must be noticed before the timeout"
        assert isinstance(result["err"], dist.DistNetworkError)
        assert "never-set" in str(result["err"])
        with pytest.raises(dist.DistNetworkError):
            c.set("b", "2")
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()
