"""What the bench subcommands share: sizes like 1K/256M, local rank spawning with bounded waits, the
process group of a run (spawned or launched by tinytorch-run), medians, tables and JSON."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import re
import socket
import statistics
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """'1K' -> 1024, '256M' -> 268435456, '4096' -> 4096 (nccl-tests' -b/-e syntax, binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", str(text), re.IGNORECASE)
    if m is None:
        raise ValueError(f"cannot read size {text!r}: expected a number with an optional K, M, G or T suffix")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_size(n: float) -> str:
    """4194304 -> '4M' (the largest binary unit that divides evenly)."""
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{int(n // _UNITS[unit])}{unit}"
    return str(int(n))


def parse_list(text: str, cast: Callable[[str], Any] = str) -> List[Any]:
    """'a,b, c' -> ['a', 'b', 'c'] (cast applied to each)."""
    return [cast(x.strip()) for x in str(text).split(",") if x.strip()]


def median(xs: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return float(statistics.median(xs))


def write_json(path: str, obj: Any) -> None:
    """Write obj as JSON to path (creating its folder), atomically, and say where."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)
    print(f"wrote {path}")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], formats: Optional[Sequence[str]] = None) -> str:
    """A right-aligned plain-text table (nccl-tests' style: one header line starting with '#')."""
    formats = formats or ["{}"] * len(headers)
    cells = [[f.format(v) if v is not None else "-" for f, v in zip(formats, r)] for r in rows]
    widths = [max([len(h)] + [len(c[k]) for c in cells]) for k, h in enumerate(headers)]
    out = ["#" + "  ".join(h.rjust(w) for h, w in zip(headers, widths))]
    for c in cells:
        out.append(" " + "  ".join(v.rjust(w) for v, w in zip(c, widths)))
    return "\n".join(out)


def free_port() -> int:
    """A port the kernel just handed out, for a local rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launched() -> bool:
    """True when a launcher (tinytorch-run, torchrun, srun with env) started this process as one rank."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_group(backend: str, rank: Optional[int] = None, world: Optional[int] = None, port: Optional[int] = None,
               timeout: float = 300.0) -> None:
    """Join the run's process group: env:// under a launcher, tcp://127.0.0.1:port for spawned local ranks."""
    import tinytorch.distributed as dist

    if dist.is_initialized():
        return
    if port is None:
        dist.init_process_group(backend, init_method="env://", timeout=timeout)
    else:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timeout)


def _entry(fn: Callable[..., Any], rank: int, world: int, port: int, env: Dict[str, str], q: Any,
           args: tuple) -> None:
    os.environ.update(env)
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                       "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    try:
        q.put((rank, "ok", fn(*args)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent verbatim
        q.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def spawn(fn: Callable[..., Any], nproc: int, args: tuple = (), timeout: float = 1800.0,
          env: Optional[Dict[str, str]] = None) -> List[Any]:
    """Run fn(*args) on `nproc` fresh local processes that see a launcher's environment (RANK, WORLD_SIZE,
    MASTER_ADDR/PORT), so the same code runs spawned or under tinytorch-run; returns the per-rank results.
    Raises the first rank's error, or TimeoutError after `timeout` seconds."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    base = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    base.update(env or {})
    procs = [ctx.Process(target=_entry, args=(fn, r, nproc, port, base, q, args), daemon=True) for r in range(nproc)]
    # The environment also goes in before the children start: some of it is read at process start-up
    # (glibc's MALLOC_* settings), before _entry could set it.
    saved = {k: os.environ.get(k) for k in base}
    os.environ.update(base)
    try:
        for p in procs:
            p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    results: List[Any] = [None] * nproc
    deadline = time.monotonic() + timeout
    try:
        for _ in range(nproc):
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{nproc} local ranks did not finish within {timeout:.0f}s")
                try:
                    rank, status, payload = q.get(timeout=min(left, 2.0))
                    break
                except queue.Empty:
                    if all(p.exitcode is not None for p in procs) and q.empty():
                        codes = [p.exitcode for p in procs]
                        raise RuntimeError(f"local ranks exited (codes {codes}) without reporting") from None
            if status != "ok":
                raise RuntimeError(f"rank {rank} failed: {payload}")
            results[rank] = payload
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    return results


def run_ranks(fn: Callable[..., Any], nproc: Optional[int], args: tuple = (), timeout: float = 1800.0) -> List[Any]:
    """fn(*args) on every rank: this process's rank under a launcher (result in a one-element list on rank 0,
    [] elsewhere), or `nproc` spawned local ranks (all their results)."""
    if launched() and nproc:
        raise SystemExit(f"--nproc {nproc} spawns local ranks, but this process is already rank "
                         f"{os.environ['RANK']} of {os.environ['WORLD_SIZE']} started by a launcher: leave --nproc out")
    if launched():
        res = fn(*args)
        return [res] if int(os.environ["RANK"]) == 0 else []
    return spawn(fn, nproc or 1, args, timeout=timeout)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (ru_maxrss), the CPU ranks' 'peak memory'."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
