"""What the flight recorder costs: W4's collectives (benchmarks/collectives.py's timing loop) and W5's DDP step
(benchmarks/ddp.py's models, tinytorch DDP at the default 25 MB buckets) with the recorder on
(TORCH_FR_BUFFER_SIZE=2000, stacks recorded: PyTorch's defaults) and off (0), on 2 local ranks, and the cost
of one op alone (an all_reduce on a group of one rank: Python, the backend call and the recorder, no data moved).

    python benchmarks/flight_recorder.py [--rounds 6] [--steps 15] [--sizes 4K 64K 1M]

The recorder reads its settings once per process, so each round spawns one pair of ranks per setting; the order
on/off alternates from round to round, so that load changes on the machine hit both alike. Reported: per metric,
the median over rounds of each round's median time, the ratio on/off, and the spread of the off rounds
(max/min), the noise the ratio should be read against. Writes JSON.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _rank_main(cfg: Dict[str, Any]) -> Dict[str, float]:
    """One rank of one setting: every metric's median time in microseconds."""
    import numpy as np

    import collectives
    import models

    import tinytorch
    import tinytorch.distributed as dist
    from tinytorch.bench._common import init_group
    from tinytorch.distributed import flight_recorder
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    init_group("ring", timeout=120)
    rank, n = dist.get_rank(), dist.get_world_size()
    assert flight_recorder.enabled() == cfg["on"], "TORCH_FR_BUFFER_SIZE did not reach the rank"
    out: Dict[str, float] = {}
    # The recorder's own cost per op, with no data moved: all_reduce on a group of one rank.
    alone = [dist.new_group([r]) for r in range(n)][rank]
    one = np.ones(1, np.float32)
    loops, cpu = [], []
    for _ in range(7):
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(2000):
            dist.all_reduce(one, group=alone)
        loops.append((time.perf_counter() - t0) / 2000)
        cpu.append((time.thread_time() - c0) / 2000)
    out["per-op cost (1-rank all_reduce)"] = 1e6 * statistics.median(loops)
    # It runs on the calling thread: its CPU time is the op's cost without the waits other processes cause.
    out["per-op CPU time (same)"] = 1e6 * statistics.median(cpu)
    for coll in collectives.COLLECTIVES:
        for nbytes in cfg["sizes"]:
            t = collectives.bench_one(dist, lambda c: np.ones(c, np.float32), coll, nbytes, n, rank,
                                      cfg["iters"], dist.barrier)
            out[f"W4 {coll} {nbytes} B"] = 1e6 * t
    for workload, build in (("W2", models.mlp), ("W3", models.gpt)):
        tinytorch.manual_seed(0)
        model = DDP(build(tinytorch))
        opt = tinytorch.optim.AdamW(model.parameters(), lr=1e-3)
        x_np, y_np = models.batch(workload, seed=rank)
        x, y = tinytorch.from_numpy(x_np), tinytorch.from_numpy(y_np)
        times = []
        for _ in range(cfg["steps"]):
            t0 = time.perf_counter()
            opt.zero_grad()
            tinytorch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            times.append(time.perf_counter() - t0)
        out[f"W5 {workload} DDP step"] = 1e6 * statistics.median(times[cfg["warmup"]:])
    dist.destroy_process_group()
    return out


def main() -> None:
    from tinytorch.bench._common import parse_size, spawn, table, write_json

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=15, help="DDP steps per round (the first --warmup not timed)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=50, help="timed collectives per size per round")
    p.add_argument("--sizes", nargs="+", default=[4 << 10, 64 << 10, 1 << 20], type=parse_size,
                   help="message sizes of the collectives (4K, 64K, 1M: the default)")
    p.add_argument("--json", default=os.path.join(HERE, "results", "flight_recorder.json"))
    args = p.parse_args()
    for name, v in (("--rounds", args.rounds), ("--steps", args.steps - args.warmup), ("--iters", args.iters)):
        if v < 1:
            p.error(f"{name} must leave at least one timed repetition")
    runs: Dict[str, List[Dict[str, float]]] = {"on": [], "off": []}
    for r in range(args.rounds):
        for setting in (("on", "off") if r % 2 == 0 else ("off", "on")):
            cfg = {"on": setting == "on", "sizes": args.sizes, "iters": args.iters, "steps": args.steps,
                   "warmup": args.warmup}
            env = {"TORCH_FR_BUFFER_SIZE": "2000" if setting == "on" else "0"}
            runs[setting].append(spawn(_rank_main, 2, (cfg,), timeout=900, env=env)[0])
            print(f"round {r + 1}/{args.rounds} recorder {setting} done", flush=True)
    rows, summary = [], {}
    for metric in runs["on"][0]:
        on = statistics.median(x[metric] for x in runs["on"])
        off_all = [x[metric] for x in runs["off"]]
        off = statistics.median(off_all)
        summary[metric] = {"on_us": on, "off_us": off, "ratio": on / off, "off_spread": max(off_all) / min(off_all),
                           "on_rounds_us": [x[metric] for x in runs["on"]], "off_rounds_us": off_all}
        rows.append((metric, on, off, on / off, max(off_all) / min(off_all)))
    print(table(["metric", "on (us)", "off (us)", "on/off", "off max/min"], rows,
                ["{}", "{:.1f}", "{:.1f}", "{:.3f}", "{:.2f}"]))
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    write_json(args.json, {"command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpus": os.cpu_count(),
                           "load_avg_end": load, "rounds": args.rounds, "metrics": summary})


if __name__ == "__main__":
    main()
