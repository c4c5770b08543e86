"""Model parallelism (W8): a tensor-parallel training step beside PyTorch's, on 2 local ranks.

    python benchmarks/parallel.py [--what tp] [--steps 1] [--rounds 16] [--threads 1] [--profile STEPS]

tp: 4 blocks of Linear(512, 2048) -> GELU -> Linear(2048, 512), the first Linear of each block ColwiseParallel and
  the second RowwiseParallel (parallelize_module on a 1-d mesh of 2 ranks), input 16 x 128 x 512 replicated,
  MSE loss, AdamW; one step = forward, backward, optimizer step. tinytorch runs on its ring backend, PyTorch's
  tensor parallelism on gloo, each as its own 2 processes, started together from the same weights; the two
  pairs take turns (--rounds rounds of --steps steps each, the other pair idle meanwhile, after a warm-up round
  of 2 steps each) so that both see the same machine load. Reported: median step time on rank 0, the ratio of
  the medians and the median of the per-round ratios (a round's tinytorch steps over the PyTorch steps right
  after them: robust to load that drifts between rounds) against issue 17's target (<= 0.8), each side's first
  loss (equal when both compute the same thing), and where the step's time goes: each step's CPU time (the
  rank's process_time: what a shared machine's other processes do not inflate) and, every round on both ranks
  after the steps, the matmul floor: one rank's 23 matrix products of a step (forward, input and weight
  gradients) run alone through that library's matmul on one thread, CPU time summed. floor / step CPU is the
  share of the step spent in BLAS; what is left is each library's own overhead. --profile N adds, per library,
  the functions that take rank 0's CPU time over N more steps under cProfile.
Writes benchmarks/results/parallel.json.

Sections are listed in SECTIONS: each takes the parsed arguments and returns its JSON entry after printing its
table. The pipeline half of W8 (a 1F1B schedule's measured idle time beside (p-1)/m) is added there as "pp".
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import statistics
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from harness import write_json  # noqa: E402
from tinytorch.bench._common import free_port, table  # noqa: E402

TP_BLOCKS, TP_DIM, TP_HIDDEN, TP_BATCH, TP_SEQ = 4, 512, 2048, 16, 128
PROFILE_ROWS = 14


def _tp_model(torch: Any, seed: int) -> Any:
    """The W8 model with weights drawn from NumPy (so both libraries start from the same values)."""
    import numpy as np
    nn = torch.nn
    model = nn.Sequential(*[nn.Sequential(nn.Linear(TP_DIM, TP_HIDDEN), nn.GELU(), nn.Linear(TP_HIDDEN, TP_DIM))
                            for _ in range(TP_BLOCKS)])
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            bound = 1.0 / np.sqrt(p.shape[-1] if p.ndim == 2 else TP_DIM)
            p.copy_(torch.from_numpy(g.uniform(-bound, bound, tuple(p.shape)).astype(np.float32)))
    return model


def _tp_worker(lib: str, rank: int, world: int, port: int, threads: int, commands: Any, results: Any) -> None:
    """One rank of one library: build, then run the steps each command asks for and report their times."""
    import time

    import numpy as np
    try:
        if lib == "tinytorch":
            import tinytorch as torch
            import tinytorch.distributed as dist
            from tinytorch.distributed.device_mesh import init_device_mesh
            from tinytorch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
            backend = "ring"
        else:
            import torch
            import torch.distributed as dist
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
            backend = "gloo"
        torch.set_num_threads(threads)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
        mesh = init_device_mesh("cpu", (world,))
        plan = {}
        for i in range(TP_BLOCKS):
            plan[f"{i}.0"] = ColwiseParallel()
            plan[f"{i}.2"] = RowwiseParallel()
        model = parallelize_module(_tp_model(torch, 0), mesh, plan)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        g = np.random.default_rng(1)
        x = torch.from_numpy(g.standard_normal((TP_BATCH, TP_SEQ, TP_DIM)).astype(np.float32))
        y = torch.from_numpy(g.standard_normal((TP_BATCH, TP_SEQ, TP_DIM)).astype(np.float32))
        losses: List[float] = []
        products = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in _tp_products(world)]

        def floor_ms() -> float:
            with torch.no_grad():
                t0 = time.process_time()
                for a, b in products:
                    torch.matmul(a, b)
                return (time.process_time() - t0) * 1e3

        def step() -> None:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(float(loss.item()))

        while True:
            cmd = commands.get(timeout=3600)
            if cmd is None:
                break
            if type(cmd) is tuple:  # ("profile", steps): where the CPU time of rank 0's steps goes
                results.put((lib, rank, "ok", {"profile": _profile(step, cmd[1], rank == 0)}))
                continue
            times, cpu = [], []
            for _ in range(cmd):
                dist.barrier()
                t0, c0 = time.perf_counter(), time.process_time()
                step()
                times.append((time.perf_counter() - t0) * 1e3)
                cpu.append((time.process_time() - c0) * 1e3)
            dist.barrier()
            results.put((lib, rank, "ok", {"times": times, "cpu": cpu, "floor": floor_ms(), "losses": list(losses)}))
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - reported to the parent verbatim
        results.put((lib, rank, "error", traceback.format_exc()))


def _profile(step: Callable[[], None], steps: int, report: bool) -> List[Any]:
    """Run `steps` steps under cProfile with CPU time as its clock (load on the machine does not count); the
    functions with the most time of their own, as (name, calls per step, ms per step)."""
    import cProfile
    import pstats
    import time
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    if not report:
        return []
    stats = pstats.Stats(prof).stats  # {(file, line, name): (calls, primitive calls, own time, cumulative, callers)}
    rows = sorted(((f"{os.path.basename(k[0])}:{k[2]}" if k[0] != "~" else k[2], v[0] / steps, v[2] * 1e3 / steps)
                   for k, v in stats.items()), key=lambda r: -r[2])
    total = sum(r[2] for r in rows)
    return [("(all)", 0, total)] + rows[:PROFILE_ROWS]


def _gather(results: Any, lib: str, world: int, timeout: float) -> Dict[int, Any]:
    got: Dict[int, Any] = {}
    while len(got) < world:
        try:
            who, rank, status, payload = results.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{lib}: the ranks did not report within {timeout:.0f}s") from None
        if status != "ok":
            raise RuntimeError(f"{who} rank {rank} failed:\n{payload}")
        got[rank] = payload
    return got


def _tp_products(world: int) -> List[Any]:
    """One rank's matrix products of a step as NumPy operand pairs (A, B) of A @ B: per block 2 forward, 2 weight
    gradients and 2 input gradients (the first block's input needs none), 23 in all."""
    import numpy as np
    n, din, dh = TP_BATCH * TP_SEQ, TP_DIM, TP_HIDDEN // world
    shapes = []
    for block in range(TP_BLOCKS):
        shapes += [((n, din), (din, dh)), ((n, dh), (dh, din))]  # forward: colwise, rowwise
        shapes += [((dh, n), (n, din)), ((din, n), (n, dh))]  # weight gradients
        shapes += [((n, din), (din, dh))] + ([((n, dh), (dh, din))] if block else [])  # input gradients
    g = np.random.default_rng(0)
    return [(g.standard_normal(a).astype(np.float32), g.standard_normal(b).astype(np.float32)) for a, b in shapes]


def tp_section(args: argparse.Namespace) -> Dict[str, Any]:
    """W8's tensor-parallel step: tinytorch (ring) and PyTorch (gloo), alternating."""
    libs = ["tinytorch"]
    try:
        import torch  # noqa: F401
        libs.append("torch")
    except ImportError:
        pass
    ctx = mp.get_context("spawn")
    world = 2
    channels, procs = {}, []
    for lib in libs:
        port = free_port()
        results = ctx.Queue()
        commands = [ctx.Queue() for _ in range(world)]
        channels[lib] = (commands, results)
        for r in range(world):
            p = ctx.Process(target=_tp_worker, args=(lib, r, world, port, args.threads, commands[r], results),
                            daemon=True)
            p.start()
            procs.append(p)
    rounds: Dict[str, List[Dict[str, Any]]] = {lib: [] for lib in libs}  # rank 0's report of each round
    try:
        for r in range(args.rounds + 1):  # the first round warms up (first-touch memory, caches) and is dropped
            for lib in libs:
                commands, results = channels[lib]
                for q in commands:
                    q.put(args.steps if r else 2)
                rounds[lib].append(_gather(results, lib, world, args.timeout)[0])
        profiles = {}
        for lib in libs if args.profile else []:
            commands, results = channels[lib]
            for q in commands:
                q.put(("profile", args.profile))
            profiles[lib] = _gather(results, lib, world, args.timeout)[0]["profile"]
        for lib in libs:
            for q in channels[lib][0]:
                q.put(None)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    rows, entry = [], {"model": f"{TP_BLOCKS} x Linear({TP_DIM}, {TP_HIDDEN}) -> GELU -> Linear({TP_HIDDEN}, "
                                f"{TP_DIM})", "input": [TP_BATCH, TP_SEQ, TP_DIM], "ranks": world,
                       "threads_per_rank": args.threads, "steps_per_round": args.steps, "rounds": args.rounds,
                       "load_average": os.getloadavg()[0]}
    med = statistics.median
    for lib in libs:
        kept = rounds[lib][1:]
        wall = [t for rd in kept for t in rd["times"]]
        cpu = [t for rd in kept for t in rd["cpu"]]
        floor = [rd["floor"] for rd in kept]
        entry[lib] = {"step_ms_median": med(wall), "step_ms": wall, "step_cpu_ms_median": med(cpu),
                      "step_cpu_ms": cpu, "matmul_floor_cpu_ms_median": med(floor), "matmul_floor_cpu_ms": floor,
                      "matmul_share_of_step_cpu": med(floor) / med(cpu), "first_loss": kept[0]["losses"][0]}
        rows.append((lib, med(wall), min(wall), med(cpu), med(floor), med(floor) / med(cpu), kept[0]["losses"][0]))
    if "torch" in libs:
        tt, pt = rounds["tinytorch"][1:], rounds["torch"][1:]
        entry["ratio_tinytorch_vs_torch"] = entry["tinytorch"]["step_ms_median"] / entry["torch"]["step_ms_median"]
        entry["paired_ratios"] = [med(t["times"]) / med(p["times"]) for t, p in zip(tt, pt)]
        entry["paired_ratio_median"] = med(entry["paired_ratios"])
        entry["paired_cpu_ratio_median"] = med([med(t["cpu"]) / med(p["cpu"]) for t, p in zip(tt, pt)])
        entry["paired_floor_ratio_median"] = med([t["floor"] / p["floor"] for t, p in zip(tt, pt)])
    print(f"W8 tensor parallel, 2 ranks x {args.threads} thread(s), {args.rounds} rounds of {args.steps} steps "
          f"(load average {entry['load_average']:.1f})")
    print(table(["library", "median ms", "min ms", "CPU ms", "matmul floor CPU ms", "floor / CPU", "first loss"],
                rows, ["{}", "{:.1f}", "{:.1f}", "{:.1f}", "{:.1f}", "{:.2f}", "{:.6f}"]))
    if "ratio_tinytorch_vs_torch" in entry:
        print(f"tinytorch / PyTorch: {entry['ratio_tinytorch_vs_torch']:.2f} (medians), "
              f"{entry['paired_ratio_median']:.2f} (median of per-round ratios); target <= 0.8; "
              f"CPU time {entry['paired_cpu_ratio_median']:.2f}, matmul floor "
              f"{entry['paired_floor_ratio_median']:.2f} (medians of per-round ratios)")
    for lib, rows in profiles.items():
        entry[lib]["profile_cpu_ms_per_step"] = rows
        print(f"\n{lib}, rank 0, {args.profile} steps under cProfile (CPU time; profiling adds to Python's share)")
        print(table(["function", "calls / step", "own CPU ms / step"], rows, ["{}", "{:.0f}", "{:.1f}"]))
    return entry


SECTIONS: Dict[str, Callable[[argparse.Namespace], Dict[str, Any]]] = {"tp": tp_section}


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--what", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    ap.add_argument("--steps", type=int, default=1, help="steps per round")
    ap.add_argument("--rounds", type=int, default=16, help="timed rounds per library (after one warm-up round)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="after the rounds, profile this many steps of each library (cProfile, CPU time)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for a round")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "parallel.json"))
    args = ap.parse_args(argv)
    result = {name: SECTIONS[name](args) for name in args.what}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
