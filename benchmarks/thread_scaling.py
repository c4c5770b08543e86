"""What the second thread buys, op by op, in a whole training step: W2, W3 or nanoGPT's recipe in one process,
stepped at 1 and at 2 threads in alternating blocks of --block steps, each op's and node's time taken from
tinytorch's profiler (an op's span includes the Python before it). Rows: the ops that take the most time at
1 thread, their time at each count and the speed-up; last, the whole step of tinytorch and (when importable, run
the same way in the same process) PyTorch. Prints a table, writes JSON.

    python benchmarks/thread_scaling.py [--workload W3] [--rounds 3] [--block 2] [--top 25] [--json PATH]
"""
import argparse
import collections
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import write_json  # noqa: E402


def trainer(lib, workload: str):
    """An object with step(), one training step of `workload` built with `lib`'s API."""
    if workload == "nanogpt":
        import nanogpt
        return nanogpt.Trainer(lib, nanogpt.char_data())
    import train_step
    return train_step.Trainer(lib, workload)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=["W2", "W3", "nanogpt"], default="W3")
    p.add_argument("--rounds", type=int, default=3, help="blocks at each thread count")
    p.add_argument("--block", type=int, default=2, help="profiled steps per block")
    p.add_argument("--top", type=int, default=25, help="rows: the ops taking the most time at 1 thread")
    p.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "thread_scaling.json"))
    args = p.parse_args(argv)
    import tinytorch
    libs = {"tinytorch": tinytorch}
    try:
        import torch
        libs["torch"] = torch
    except ImportError:
        pass
    runs = {name: trainer(lib, args.workload) for name, lib in libs.items()}
    ops = {1: collections.defaultdict(float), 2: collections.defaultdict(float)}
    steps = {(name, n): [] for name in libs for n in (1, 2)}
    for _ in range(args.rounds):
        for n in (1, 2):
            for name, lib in libs.items():
                lib.set_num_threads(n)
                runs[name].step()  # a step first: the other library's threads are asleep by its end
                for _ in range(args.block):
                    t0 = time.perf_counter()
                    if name == "tinytorch":
                        with tinytorch.profiler.profile() as prof:
                            runs[name].step()
                        for e in prof.events():
                            ops[n][e.name] += e.duration_ms / (args.rounds * args.block)
                    else:
                        runs[name].step()
                    steps[(name, n)].append(1e3 * (time.perf_counter() - t0))
    rows = []
    for op in sorted(ops[1], key=lambda k: -ops[1][k])[:args.top]:
        one, two = ops[1][op], ops[2].get(op, 0.0)
        rows.append({"op": op, "ms_1": one, "ms_2": two, "speedup": one / two if two else None})
    step = {name: {"ms_1": statistics.median(steps[(name, 1)]), "ms_2": statistics.median(steps[(name, 2)])}
            for name in libs}
    print(f"{args.workload}: ops and nodes by time at 1 thread ({args.rounds} x {args.block} profiled steps each)")
    print(f"{'op / node':52} {'1 thread ms':>12} {'2 threads ms':>13} {'speed-up':>9}")
    for r in rows:
        sp = f"{r['speedup']:8.2f}x" if r["speedup"] else f"{'-':>9}"
        print(f"{r['op'][:52]:52} {r['ms_1']:12.3f} {r['ms_2']:13.3f} {sp}")
    for name, s in step.items():
        print(f"{'step, ' + name + (' (profiled)' if name == 'tinytorch' else ''):52} {s['ms_1']:12.2f} "
              f"{s['ms_2']:13.2f} {s['ms_1'] / s['ms_2']:8.2f}x")
    results = {"workload": args.workload, "rounds": args.rounds, "block": args.block, "ops": rows, "step": step}
    write_json(args.json, results)
    return results


if __name__ == "__main__":
    main()
