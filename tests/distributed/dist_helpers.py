"""Run a function on N real processes (multiprocessing spawn) and collect results; every wait is bounded."""
from __future__ import annotations

import multiprocessing as mp
import os
import socket
import traceback
from typing import Any, Callable, List, Optional


def free_port() -> int:
    """A port the kernel just handed out (only for tests that need one before the store exists)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(fn: Callable, rank: int, world_size: int, port: int, env: dict, q: Any, args: tuple) -> None:
    os.environ.update(env)
    try:
        result = fn(rank, world_size, port, *args)
        q.put((rank, "ok", result))
    except BaseException as e:  # noqa: BLE001 - reported to the parent verbatim
        q.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run_ranks(
    fn: Callable,
    world_size: int,
    *args: Any,
    timeout: float = 30.0,
    env: Optional[dict] = None,
    expect_exit: Optional[List[int]] = None,
) -> List[Any]:
    """Start `world_size` spawned processes running fn(rank, world_size, port, *args); return per-rank results.

    Ranks listed in `expect_exit` may die without reporting (their result is None).
    """
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    base_env = {"OMP_NUM_THREADS": "1"}
    base_env.update(env or {})
    procs = [
        ctx.Process(target=_entry, args=(fn, r, world_size, port, base_env, q, args), daemon=True)
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    import queue as _queue
    import time

    results: List[Any] = [None] * world_size
    errors = {}
    expected = world_size - len(expect_exit or [])
    got = 0
    deadline = time.monotonic() + timeout
    try:
        while got < expected:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"ranks did not finish within {timeout}s; results so far: {results}, errors: {errors}")
            try:
                rank, status, payload = q.get(timeout=min(left, 1.0))
            except _queue.Empty:
                dead = [r for r, p in enumerate(procs)
                        if p.exitcode is not None and results[r] is None and r not in errors
                        and r not in (expect_exit or [])]
                if dead and q.empty():
                    raise AssertionError(f"rank(s) {dead} exited (codes {[procs[r].exitcode for r in dead]}) "
                                         f"without reporting; errors so far: {errors}")
                continue
            got += 1
            if status == "ok":
                results[rank] = payload
            else:
                errors[rank] = payload
    finally:
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    if errors:
        raise AssertionError("\n".join(f"rank {r} failed: {e}" for r, e in sorted(errors.items())))
    return results


def pytorch_fr_trace(*args: Any) -> str:
    """What PyTorch's own flight-recorder analyzer (torch.distributed.flight_recorder.fr_trace) reports on its
    "Flight Recorder" logger for these command-line arguments; the caller skips the test without torch."""
    import logging

    from torch.distributed.flight_recorder.fr_trace import main

    lines: List[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("Flight Recorder")
    log.addHandler(handler)
    try:
        main([str(a) for a in args])
    finally:
        log.removeHandler(handler)
    return "\n".join(lines)
