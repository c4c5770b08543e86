"""DataLoader worker processes, tinytorch beside PyTorch (rounds alternate between the two).

1. Throughput: a map-style dataset whose items cost ~2 ms of NumPy work each (a 3 x 96 x 96 image through
   --passes elementwise passes), batch 16, one epoch of --batches batches with num_workers 0 and --workers;
   each figure is the median epoch time over --rounds rounds, workers started anew every epoch as by default.
   Each round also measures the ceiling: a quarter of the items on --workers forked processes.
2. Transfer of a 16 x 3 x 224 x 224 float32 batch (9.6 MB) from a worker: the cost of one copy (memcpy),
   what tinytorch's shared-memory hand-over costs (pickle with descriptors, send them over a Unix socket,
   map them; then also the receiver's first read of every page), what pickling the bytes would cost
   (pickle.dumps + loads), and per batch time through a loader with one persistent worker that only
   stacks ready images (the stack is the batch's one copy).

    python benchmarks/dataloader.py [--workers 2] [--rounds 5] [--batches 40] [--passes 120] [--json PATH]
"""
import argparse
import os
import pickle
import socket
import statistics
import time

import numpy as np

from harness import median_ms, write_json


class Augmented:
    """Item i: a seeded 3 x 96 x 96 image through `passes` NumPy passes (~2 ms at 120), and a label."""

    def __init__(self, lib, n: int, passes: int) -> None:
        self.lib, self.n, self.passes = lib, n, passes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        x = np.random.default_rng(i).standard_normal((3, 96, 96), dtype=np.float32)
        for _ in range(self.passes):
            x = np.tanh(x * 1.5)
        return self.lib.from_numpy(x), i % 10


class Images:
    """Ready 3 x 224 x 224 images: loading them costs only the batch's stack."""

    def __init__(self, lib, n: int) -> None:
        self.images = [lib.full((3, 224, 224), float(i)) for i in range(n)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        return self.images[i]


def _items_s(dataset, indices) -> float:
    t0 = time.perf_counter()
    for i in indices:
        dataset[i]
    return time.perf_counter() - t0


def parallel_ceiling(dataset, workers: int, items: int) -> float:
    """What the machine allows right now: `items` items computed in this process, divided by the wall time of
    the same items split over `workers` forked processes (no DataLoader). About `workers` on idle cores."""
    import multiprocessing
    serial = _items_s(dataset, range(items))
    t0 = time.perf_counter()
    procs = [multiprocessing.get_context("fork").Process(target=_items_s, args=(dataset, range(k, items, workers)))
             for k in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return serial / (time.perf_counter() - t0)


def epoch_s(lib, dataset, workers: int, batch: int = 16) -> float:
    t0 = time.perf_counter()
    for _ in lib.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers):
        pass
    return time.perf_counter() - t0


def per_batch_ms(lib, workers: int, batches: int) -> float:
    """Steady-state ms per 16-image batch (one persistent worker when workers > 0), after a warm-up epoch."""
    kw = {"num_workers": workers, "persistent_workers": True} if workers else {}
    loader = lib.utils.data.DataLoader(Images(lib, 16 * batches), batch_size=16, **kw)
    for _ in loader:
        pass
    t0 = time.perf_counter()
    for _ in loader:
        pass
    return 1e3 * (time.perf_counter() - t0) / batches


def transfer_ms(reps: int) -> dict:
    """Costs of handing one 9.6 MB batch to another process, measured over a socket pair in this one."""
    import tinytorch
    from tinytorch import _shared_memory
    from tinytorch.utils.data import default_collate
    items = [tinytorch.full((3, 224, 224), float(i)) for i in range(16)]
    src = np.random.default_rng(0).standard_normal((16, 3, 224, 224), dtype=np.float32)
    dst = np.empty_like(src)
    batch = tinytorch.from_numpy(_shared_memory.share_array(src))  # as a worker's default_collate leaves it
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def hand_over(touch: bool):
        payload, fds, _, _ = _shared_memory.dumps(batch)
        socket.send_fds(theirs, [b"f"], fds)
        _, got, _, _ = socket.recv_fds(ours, 1, len(fds))
        x = _shared_memory.loads(payload, got)
        if touch:  # one read per 4 KiB page: the receiver's page faults on its new mapping
            x.numpy().reshape(-1)[::1024].sum()

    out = {"batch_mb": src.nbytes / 1e6,
           "memcpy_ms": median_ms(lambda: np.copyto(dst, src), reps),
           "collate_in_process_ms": median_ms(lambda: default_collate(items), reps),
           "shared_handover_ms": median_ms(lambda: hand_over(False), reps),
           "shared_handover_first_read_ms": median_ms(lambda: hand_over(True), reps),
           "pickle_bytes_ms": median_ms(lambda: pickle.loads(pickle.dumps(batch, protocol=5)), reps)}
    ours.close()
    theirs.close()
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batches", type=int, default=40, help="batches of 16 per epoch")
    p.add_argument("--passes", type=int, default=120, help="NumPy passes per item (~2 ms at 120 on an idle core)")
    p.add_argument("--reps", type=int, default=20, help="repetitions of each transfer measurement")
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "dataloader.json"))
    args = p.parse_args()
    libs = {}
    import tinytorch
    libs["tinytorch"] = tinytorch
    try:
        import torch
        libs["torch"] = torch
    except ImportError:
        pass
    for lib in libs.values():
        lib.set_num_threads(1)
    load_before = load()
    ds = {name: Augmented(lib, 16 * args.batches, args.passes) for name, lib in libs.items()}
    item_ms = median_ms(lambda: ds["tinytorch"][0], 50)
    times = {(name, w): [] for name in libs for w in (0, args.workers)}
    ceilings = []
    for _ in range(args.rounds):
        ceilings.append(parallel_ceiling(ds["tinytorch"], args.workers, 16 * args.batches // 4))
        for w in (0, args.workers):
            for name, lib in libs.items():
                times[(name, w)].append(epoch_s(lib, ds[name], w))
    epoch = {f"{name}_w{w}_s": statistics.median(v) for (name, w), v in times.items()}
    results = {"item_ms": item_ms, "epoch": epoch, "machine_speedup": statistics.median(ceilings),
               "load_before": load_before, "load_after_throughput": load()}
    print(f"load average before: {load_before}; one item: {item_ms:.2f} ms; {args.batches} batches of 16, "
          f"median of {args.rounds} epochs")
    print(f"the machine's own speed-up of the items on {args.workers} plain processes: "
          f"{results['machine_speedup']:.2f}x (median of {args.rounds})")
    print(f"{'':10s} {'workers=0 s':>12s} {f'workers={args.workers} s':>12s} {'speed-up':>9s}")
    for name in libs:
        t0, tw = epoch[f"{name}_w0_s"], epoch[f"{name}_w{args.workers}_s"]
        print(f"{name:10s} {t0:12.3f} {tw:12.3f} {t0 / tw:8.2f}x")
        results[f"{name}_speedup"] = t0 / tw
    if "torch" in libs:
        ratio = epoch[f"tinytorch_w{args.workers}_s"] / epoch[f"torch_w{args.workers}_s"]
        results["tinytorch_over_torch_workers"] = ratio
        print(f"tinytorch / PyTorch time with {args.workers} workers: {ratio:.2f}")

    tr = transfer_ms(args.reps)
    tr.update({f"{name}_per_batch_w{w}_ms": per_batch_ms(lib, w, 10) for name, lib in libs.items() for w in (0, 1)})
    results["transfer"] = tr
    results["load_after"] = load()
    print(f"\n16 x 3 x 224 x 224 float32 batch ({tr['batch_mb']:.1f} MB), median ms:")
    print(f"  one memcpy {tr['memcpy_ms']:.2f} | default_collate in process {tr['collate_in_process_ms']:.2f} | "
          f"shared-memory hand-over {tr['shared_handover_ms']:.2f} (with the receiver's first read of every page "
          f"{tr['shared_handover_first_read_ms']:.2f}) | pickled bytes {tr['pickle_bytes_ms']:.2f}")
    for name in libs:
        print(f"  {name:10s} per batch: workers=0 {tr[f'{name}_per_batch_w0_ms']:.2f}, "
              f"1 worker {tr[f'{name}_per_batch_w1_ms']:.2f}")
    print(f"load average after: {results['load_after']}")
    write_json(args.json, {"args": vars(args), "results": results})


if __name__ == "__main__":
    main()
