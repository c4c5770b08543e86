"""ZeRO (W6 and issue 10's targets): memory, traffic and speed of DDP, ZeRO-1, ZeRO-2 and ZeRO-3 on local ranks,
beside PyTorch's DDP and FSDP2 on gloo when torch is importable.

    python benchmarks/zero.py [--what memory speed] [--ranks 4] [--steps 12] [--warmup 3]

memory (W6): a 33.6M-parameter model (8 x Linear(2048, 2048), ReLU between, AdamW, batch 16) on --ranks ranks,
  one fresh set of processes per configuration. Each rank reports its peak RSS growth (VmHWM after training,
  less its RSS before the model was built; the high-water mark is reset there), the model-state bytes it holds
  (parameters, gradients and optimizer state of its own), and the payload bytes its collectives sent in one
  step as counted by the ring backend. ZeRO-3 is built on the meta device and materialized already sharded.
  Run with MALLOC_MMAP_THRESHOLD_=65536 and TINYTORCH_KEEP_FREED_MEMORY=0 (set here) so freed blocks go back at
  once and RSS follows what is alive.
speed (W3): the GPT-mini with fully_shard on each block and on the root, 2 ranks, one thread each; tinytorch
  and PyTorch FSDP2 (gloo) built in the same two processes and stepped alternately; median step time, and the
  share of all-gather and reduce-scatter time the host did not block on (hidden under compute).
Writes benchmarks/results/zero.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

W6_LAYERS, W6_WIDTH, W6_BATCH = 8, 2048, 16


def _w6(torch):
    nn = torch.nn
    layers = []
    for i in range(W6_LAYERS):
        layers.append(nn.Linear(W6_WIDTH, W6_WIDTH))
        if i < W6_LAYERS - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _rss_kb(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def _state_bytes(model: Any, opt: Any) -> Dict[str, int]:
    """Bytes of this rank's own parameters, gradients and optimizer state (local pieces of DTensors)."""
    seen = set()
    params = grads = 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        params += p._data.nbytes
        if p._grad is not None:
            grads += p._grad._data.nbytes
    inner = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer keeps its partition's optimizer inside
    state = sum(v._data.nbytes for st in inner.state.values() for v in st.values() if hasattr(v, "_data"))
    return {"params": params, "grads": grads, "optim": state, "total": params + grads + state}


def _memory_rank(rank: int, world: int, port: int, cfg: Dict[str, Any]) -> Dict[str, Any]:
    import numpy as np
    lib_name, strategy = cfg["lib"], cfg["strategy"]
    x_np = np.random.default_rng(rank).standard_normal((W6_BATCH, W6_WIDTH)).astype(np.float32)
    if lib_name == "torch":
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    else:
        import tinytorch as torch
        import tinytorch.distributed as dist
        dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    cuda = cfg.get("device") == "cuda"
    x = torch.from_numpy(x_np).to(cfg.get("device", "cpu"))
    dist.barrier()
    base = _rss_kb()
    _reset_peak()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base_dev = torch.cuda.memory_allocated()
    torch.manual_seed(0)
    if strategy in ("zero2", "zero3"):
        if lib_name == "torch":
            from torch.distributed.fsdp import fully_shard
        else:
            from tinytorch.distributed.fsdp import fully_shard
        with torch.device("meta"):
            model = _w6(torch)
        mesh = dist.init_device_mesh(cfg.get("device", "cpu"), (world,))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh, reshard_after_forward=strategy == "zero3")
        fully_shard(model, mesh=mesh, reshard_after_forward=strategy == "zero3")
        model.to_empty(device=cfg.get("device", "cpu"))
        for m in model.modules():
            if hasattr(m, "reset_parameters"):
                m.reset_parameters()
        train = model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        model = _w6(torch).to(cfg.get("device", "cpu"))
        train = torch.nn.parallel.DistributedDataParallel(model)
        if strategy == "zero1":
            if lib_name == "torch":
                from torch.distributed.optim import ZeroRedundancyOptimizer
            else:
                from tinytorch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.AdamW, lr=1e-3)
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    pg = None
    if lib_name == "tinytorch":
        pg = dist.distributed_c10d._resolve(None)
    sent = []
    for _ in range(cfg["steps"]):
        s0 = pg._bytes_sent() if pg is not None else 0
        opt.zero_grad(set_to_none=False) if strategy == "ddp_keep" else opt.zero_grad()
        loss = train(x).square().mean()
        loss.backward()
        opt.step()
        sent.append((pg._bytes_sent() if pg is not None else 0) - s0)
    peak = _rss_kb("VmHWM")
    if cuda:  # on a GPU the figure is the device memory's peak growth
        peak, base = torch.cuda.max_memory_allocated() / 1024, base_dev / 1024
    out = {"rss_growth_mb": (peak - base) / 1024, "sent_bytes_per_step": sent[-1],
           "params": sum(p.numel() for p in model.parameters())}
    if lib_name == "tinytorch":
        out["state"] = _state_bytes(model, opt)
    dist.destroy_process_group()
    return out


def _speed_rank(rank: int, world: int, port: int, cfg: Dict[str, Any]) -> Dict[str, Any]:
    import models

    import tinytorch
    import tinytorch.distributed as tdist
    from tinytorch.distributed.fsdp import fully_shard as t_fully_shard
    x_np, y_np = models.batch("W3", seed=rank)
    tdist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    runners = []

    def build(lib, fully_shard):
        lib.manual_seed(0)
        model = models.gpt(lib)
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        return model, lib.optim.AdamW(model.parameters(), lr=1e-3)

    m, opt = build(tinytorch, t_fully_shard)
    runners.append(("tinytorch FSDP2", m, opt, tinytorch, tinytorch.from_numpy(x_np), tinytorch.from_numpy(y_np)))
    if cfg["torch"]:
        import torch
        import torch.distributed as pdist
        from torch.distributed.fsdp import fully_shard as p_fully_shard
        torch.set_num_threads(1)
        pdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{cfg['torch_port']}", rank=rank,
                                 world_size=world)
        m, opt = build(torch, p_fully_shard)
        runners.append(("torch FSDP2 gloo", m, opt, torch, torch.from_numpy(x_np), torch.from_numpy(y_np)))
    times: Dict[str, List[float]] = {r[0]: [] for r in runners}
    comm: List[Dict[str, float]] = []
    for step in range(cfg["steps"]):
        k = step % len(runners)
        for label, model, opt, lib, x, y in runners[k:] + runners[:k]:
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            times[label].append(time.perf_counter() - t0)
            if lib is tinytorch:
                states = model._fsdp_state.states
                spans = [s for st in states if st.group is not None for s in st.group.stats]
                total = sum(s["end_ns"] - s["start_ns"] for s in spans)
                blocked = sum(min(s["blocked_ns"], s["end_ns"] - s["start_ns"]) for s in spans)
                comm.append({"comm_ms": total / 1e6, "exposed_ms": blocked / 1e6,
                             "hidden": 1 - blocked / total if total else 0.0, "collectives": len(spans)})
    tdist.destroy_process_group()
    if cfg["torch"]:
        pdist.destroy_process_group()
    return {"times": times, "comm": comm}


def _rank_main(fn_name: str, cfg: Dict[str, Any]) -> Dict[str, Any]:
    """A spawned rank: run one of the measurements above with the launcher environment the harness gives it."""
    return globals()[fn_name](int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["MASTER_PORT"]),
                              cfg)


def _spawn(fn_name: str, cfg: Dict[str, Any], world: int, env: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
    from tinytorch.bench._common import free_port, spawn
    return spawn(_rank_main, world, (fn_name, dict(cfg, torch_port=free_port())), timeout=900.0, env=env)


def memory(ranks: int, have_torch: bool, steps: int = 3, device: str = "cpu") -> Dict[str, Any]:
    """W6 at `ranks` ranks: one fresh process set per configuration (device cuda: the ranks share the GPU over
    the ring backend, and the figure is device memory; PyTorch's side runs on the CPU only)."""
    env = {"MALLOC_MMAP_THRESHOLD_": "65536", "TINYTORCH_KEEP_FREED_MEMORY": "0", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    configs = [("tinytorch", s) for s in ("ddp", "zero1", "zero2", "zero3")]
    if have_torch and device == "cpu":
        configs += [("torch", "ddp"), ("torch", "zero3")]
    out: Dict[str, Any] = {}
    psi = W6_LAYERS * (W6_WIDTH * W6_WIDTH + W6_WIDTH)
    n = ranks
    formula = {"ddp": 2 * psi * (n - 1) / n, "zero1": 3 * psi * (n - 1) / n, "zero2": 2 * psi * (n - 1) / n,
               "zero3": 3 * psi * (n - 1) / n}
    state_formula = {"ddp": 16 * psi, "zero1": 8 * psi + 8 * psi / n, "zero2": 4 * psi + 12 * psi / n,
                     "zero3": 16 * psi / n}
    print(f"\nW6 memory and traffic: {psi / 1e6:.1f}M parameters, AdamW, {ranks} ranks (rank 0 shown; growth is the "
          "max over ranks)")
    print(f"{'config':18} {'RSS growth MB':>14} {'vs DDP':>7} {'state MB':>9} {'formula MB':>10} "
          f"{'sent/step elems':>16} {'formula':>12} {'ratio':>6}")
    for lib, strategy in configs:
        res = _spawn("_memory_rank", {"lib": lib, "strategy": strategy, "steps": steps, "device": device}, ranks, env)
        growth = max(r["rss_growth_mb"] for r in res)
        row = {"rss_growth_mb_max": growth, "rss_growth_mb": [r["rss_growth_mb"] for r in res],
               "params": res[0]["params"]}
        if lib == "tinytorch":
            elems = res[0]["sent_bytes_per_step"] / 4
            row.update(state_bytes=res[0]["state"], state_formula_bytes=state_formula[strategy],
                       sent_elements_per_step=elems, sent_formula_elements=formula[strategy],
                       sent_ratio=elems / formula[strategy])
        out[f"{lib} {strategy}"] = row
    base = {lib: out.get(f"{lib} ddp", {}).get("rss_growth_mb_max") for lib in ("tinytorch", "torch")}
    for key, row in out.items():
        lib = key.split()[0]
        row["vs_ddp"] = row["rss_growth_mb_max"] / base[lib] if base.get(lib) else None
        state = row.get("state_bytes", {}).get("total")
        print(f"{key:18} {row['rss_growth_mb_max']:14.1f} {row['vs_ddp']:7.2f} "
              + (f"{state / 2**20:9.1f} {row['state_formula_bytes'] / 2**20:10.1f} "
                 f"{row['sent_elements_per_step']:16.0f} {row['sent_formula_elements']:12.0f} "
                 f"{row['sent_ratio']:6.3f}" if state is not None else ""))
    return out


def speed(steps: int, warmup: int, have_torch: bool) -> Dict[str, Any]:
    """W3 under fully_shard (each block and the root), 2 ranks, one thread each, tinytorch and PyTorch alternating."""
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    res = _spawn("_speed_rank", {"steps": steps, "torch": have_torch}, 2, env)
    r0 = res[0]
    med = {k: 1e3 * statistics.median(v[warmup:]) for k, v in r0["times"].items()}
    comm = r0["comm"][warmup:]
    out: Dict[str, Any] = {"step_ms": med, "step_times_ms_rank0": {k: [round(1e3 * t, 2) for t in v]
                                                                    for k, v in r0["times"].items()},
                           "comm_ms": statistics.median(c["comm_ms"] for c in comm),
                           "exposed_ms": statistics.median(c["exposed_ms"] for c in comm),
                           "hidden": statistics.median(c["hidden"] for c in comm),
                           "collectives_per_step": comm[-1]["collectives"]}
    print("\nW3 under fully_shard (each block + root), 2 ranks, 1 thread each")
    print(f"{'config':20} {'step ms':>9}")
    for k, v in med.items():
        print(f"{k:20} {v:9.1f}")
    print(f"tinytorch: all-gather + reduce-scatter {out['comm_ms']:.1f} ms a step, exposed {out['exposed_ms']:.1f} ms, "
          f"hidden {out['hidden']:.0%} ({out['collectives_per_step']} collectives)")
    if "torch FSDP2 gloo" in med:
        tt = r0["times"]["tinytorch FSDP2"][warmup:]
        pt = r0["times"]["torch FSDP2 gloo"][warmup:]
        out["ratio"] = med["tinytorch FSDP2"] / med["torch FSDP2 gloo"]
        out["round_ratio"] = statistics.median(a / b for a, b in zip(tt, pt))
        print(f"tinytorch / torch FSDP2 = {out['ratio']:.2f} (median of per-round ratios {out['round_ratio']:.2f}; "
              "target <= 0.80)")
    return out


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--what", nargs="+", default=["memory", "speed"], choices=["memory", "speed"])
    p.add_argument("--ranks", type=int, default=4, help="ranks for the memory run")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where W6's model lives")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out", default=os.path.join(HERE, "results", "zero.json"))
    args = p.parse_args(argv)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    results: Dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg(), "torch": have_torch}
    if "memory" in args.what:
        results["memory"] = memory(args.ranks, have_torch, device=args.device)
    if "speed" in args.what:
        results["speed"] = speed(args.steps, args.warmup, have_torch)
    results["load_avg_end"] = os.getloadavg()
    from harness import write_json
    write_json(args.out, results)
    return results


if __name__ == "__main__":
    main()
