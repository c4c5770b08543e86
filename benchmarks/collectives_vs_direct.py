"""tinytorch-bench collectives' all_reduce busbw beside timing tinytorch.distributed.all_reduce by hand, back to
back, for a few rounds (the check behind issue 11's "busbw agrees with a direct measurement").

    python benchmarks/collectives_vs_direct.py [--rounds 2] [--sizes 4M,16M] [--iters 20]
"""
import argparse
import time

import numpy as np

from tinytorch.bench import main as bench
from tinytorch.bench._common import format_size, parse_list, parse_size, spawn


def direct(nbytes: int, iters: int) -> float:
    """busbw (GB/s) of all_reduce on this rank's group: 3 warm-up calls, a barrier, the mean of `iters` calls,
    the slower rank's time."""
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method="env://", timeout=120)
    n = dist.get_world_size()
    buf = np.ones(nbytes // 4, np.float32)
    for _ in range(3):
        dist.all_reduce(buf)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf)
    t = np.array([(time.perf_counter() - t0) / iters])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.destroy_process_group()
    return nbytes / t[0] / 1e9 * 2 * (n - 1) / n


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sizes", default="4M,16M")
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    sizes = [parse_size(s) for s in parse_list(a.sizes)]
    out = []
    for r in range(a.rounds):
        rows = bench(["collectives", "--nproc", "2", "--op", "all_reduce", "--min-bytes", str(min(sizes)),
                      "--max-bytes", str(max(sizes)), "--step-factor", "2", "--iters", str(a.iters)])
        for nb in sizes:
            d = spawn(direct, 2, (nb, a.iters), timeout=600)[0]
            b = next(x["busbw_gbps"] for x in rows if x["bytes"] == nb)
            out.append(f"round {r} size {format_size(nb)}: bench busbw {b:.3f} GB/s, direct {d:.3f} GB/s, "
                       f"ratio {b / d:.2f}")
    print("\n".join(out))
