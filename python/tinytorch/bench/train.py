"""`tinytorch-bench train`: step time, tokens/s, peak memory per rank, and exposed and hidden communication of
DDP, ZeRO-1/2/3, tensor-parallel and pipeline-parallel training steps on W2, W3 or a GPT preset.

    tinytorch-bench train --nproc 2 --model W3 --strategy ddp --steps 10 --json train.json
    tinytorch-bench train --nproc 2 --model W3 --strategy tp,pp --microbatches 4
    tinytorch-bench train --nproc 1 --model W3 --strategy none --trace w3_trace.json   # input of simulate --profile
    tinytorch-run --nproc-per-node 8 -m tinytorch.bench train --model gpt-125m --device cuda --strategy zero3

Strategies: `none` (each rank alone, no communication), `ddp` (nn.parallel.DistributedDataParallel), `zero1`
(DDP + tinytorch.distributed.optim.ZeroRedundancyOptimizer), `zero2`/`zero3` (tinytorch.distributed.fsdp
.fully_shard on every block and the root, reshard_after_forward False/True), `tp` (Megatron-LM's tensor
parallelism over all the ranks through parallelize_module: each block's qkv and fc ColwiseParallel, proj and out
RowwiseParallel, so four all-reduces per block and step; embeddings, layer norms and head replicated; the fused
qkv weight's rows ordered per rank as Megatron-LM lays them out, so each rank holds whole heads and the model is
the one-rank model), `pp` (a pipeline over all the ranks, one stage of L/world blocks each, the first also
embedding, the last also the final norm, head and loss; Schedule1F1B over --microbatches). tp and pp ranks
share one batch of --batch sequences; the data-parallel strategies give each rank its own. Each rank also
steps an unwrapped copy of the whole model on its batch, round-robin with the measured configuration, so load
on the machine hits both alike (`alone_ms`, the compute scale `validate` predicts each case from): for the
data-parallel strategies exposed communication = step - that copy's step (for DDP also the Reducer's own
measurement of all-reduce time hidden behind backward); tp and pp split the copy's work, so alone / step is
their speedup, and pp reports each rank's compute (the time inside its stage's forward and backward chunks)
and idle time. Step = zero_grad, forward, cross-entropy, backward, AdamW step. `--torch` builds PyTorch's
same configuration (its DDP, ZeroRedundancyOptimizer, fully_shard, parallelize_module or Schedule1F1B on a
gloo group) from the same weights in the same processes and steps it round-robin too (`torch_ms`, `vs_torch`).
Peak memory: the process's peak RSS on CPU; on GPU the bytes CuPy's pool holds (it keeps freed blocks, so
that is its high-water mark).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import time
from typing import Any, Callable, Dict, List, Optional

from ._cli import choice_list, nonnegative_int, positive_float, positive_int, usage_error
from ._common import free_port, launched, median, run_ranks, table, write_json

STRATEGIES = ("none", "ddp", "zero1", "zero2", "zero3", "tp", "pp")
MODEL_PARALLEL = ("tp", "pp")  # strategies that split one model (and one batch) over the ranks


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The train subcommand's flags."""
    from .model import GPT_PRESETS

    p.add_argument("--nproc", type=positive_int, default=None,
                   help="local ranks to spawn (default: launched ranks, else 2)")
    p.add_argument("--model", choices=list(dict.fromkeys(["W2", "W3", *GPT_PRESETS])), default="W3",
                   help="W2, W3, or a GPT preset (gpt-125m, ...)")
    p.add_argument("--strategy", type=choice_list(STRATEGIES), default="ddp",
                   help=f"comma-separated, of {', '.join(STRATEGIES)}")
    p.add_argument("--steps", type=positive_int, default=10)
    p.add_argument("--warmup", type=nonnegative_int, default=2, help="steps left out of the medians (< --steps)")
    p.add_argument("--batch", type=positive_int, default=None,
                   help="sequences per rank (GPT models), per tp/pp group for tp and pp (W3 default 16)")
    p.add_argument("--microbatches", type=positive_int, default=4,
                   help="pp: microbatches per step (Schedule1F1B; at least --nproc, dividing --batch)")
    p.add_argument("--seq", type=positive_int, default=None, help="sequence length (GPT models)")
    p.add_argument("--bucket-mb", type=positive_float, default=25.0, help="DDP's bucket_cap_mb")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--threads", type=positive_int, default=1, help="intra-op threads per rank")
    p.add_argument("--no-baseline", action="store_true", help="skip the unwrapped copy (no exposed-comm figure)")
    p.add_argument("--torch", action="store_true",
                   help="also step PyTorch's same configuration (gloo, CPU, same weights) round-robin on the same "
                        "ranks: torch_ms and vs_torch (the ratio of the medians)")
    p.add_argument("--trace", default=None, help="write rank 0's last step as a Chrome trace for simulate --profile "
                                                 "(data-parallel strategies)")
    p.add_argument("--json", default=None)
    p.add_argument("--plot", default=None, help="PNG of step time split into compute and exposed communication")
    p.add_argument("--timeout", type=positive_float, default=1800.0)


def _unit_name(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 and parts[1].isdigit() else parts[0]


def _units(model: Any) -> List[Any]:
    """The modules fully_shard wraps one by one: GPT blocks, or a Sequential's layers that hold parameters."""
    if hasattr(model, "blocks"):
        return list(model.blocks)
    return [m for m in model.children() if any(True for _ in m.parameters())]


def _api(lib: Any, module: str) -> Any:
    """`lib`'s submodule by PyTorch's name (tinytorch.distributed.fsdp, torch.distributed.fsdp, ...): the same
    wrapping code builds either library's configuration."""
    return importlib.import_module(f"{lib.__name__}.{module}")


def wrap(strategy: str, model: Any, lib: Any, bucket_mb: float, lr: float = 1e-3) -> tuple:
    """(module to call, optimizer, DDP module or None) for a strategy, in tinytorch or PyTorch (`lib`); the
    ZeRO APIs are imported by name when asked for, with a clear error when this build lacks them."""
    if strategy == "none":
        return model, lib.optim.AdamW(model.parameters(), lr=lr), None
    if strategy == "ddp":
        ddp = _api(lib, "nn.parallel").DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
        return ddp, lib.optim.AdamW(model.parameters(), lr=lr), ddp
    if strategy == "zero1":
        try:
            ZeroRedundancyOptimizer = _api(lib, "distributed.optim").ZeroRedundancyOptimizer
        except (ImportError, AttributeError) as e:
            raise RuntimeError(f"strategy zero1 needs {lib.__name__}.distributed.optim.ZeroRedundancyOptimizer, which "
                               f"this build does not have ({e})") from None
        ddp = _api(lib, "nn.parallel").DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
        return ddp, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=lib.optim.AdamW, lr=lr), ddp
    if strategy in ("zero2", "zero3"):
        try:
            fully_shard = _api(lib, "distributed.fsdp").fully_shard
        except (ImportError, AttributeError) as e:
            raise RuntimeError(f"strategy {strategy} needs {lib.__name__}.distributed.fsdp (fully_shard), which this "
                               f"build does not have ({e})") from None
        reshard = strategy == "zero3"
        for unit in _units(model):
            fully_shard(unit, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        return model, lib.optim.AdamW(model.parameters(), lr=lr), None
    raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")


def _forward_backward(call: Any, lib: Any) -> Callable[[Any, Any], Any]:
    """Forward, cross-entropy and backward of a model (wrapped or not): the loss."""
    def run(x: Any, y: Any) -> Any:
        loss = lib.nn.functional.cross_entropy(call(x), y)
        loss.backward()
        return loss
    return run


def _step(forward_backward: Callable[[Any, Any], Any], opt: Any) -> Callable[[Any, Any], Optional[float]]:
    """One training step: zero_grad, forward and backward, optimizer step; the loss as a float (reading it
    waits for the device), None on a pipeline rank without the loss."""
    def run(x: Any, y: Any) -> Optional[float]:
        opt.zero_grad()
        loss = forward_backward(x, y)
        opt.step()
        return None if loss is None else float(loss.detach())
    return run


def megatron_qkv_order(model: Any, lib: Any, tp: int) -> None:
    """Reorder each block's fused qkv rows [q; k; v] to [q_0 k_0 v_0; q_1 k_1 v_1; ...] (Megatron-LM's layout),
    so that ColwiseParallel's contiguous row shard r holds q, k and v of rank r's heads: the block's chunk(3)
    then splits each rank's output into its own heads' q, k and v, and the sharded model is the unsharded one."""
    import numpy as np

    for block in model.blocks:
        c = block.qkv.out_features // 3
        if c % tp or block.h % tp:
            raise ValueError(f"--strategy tp over {tp} ranks needs the width {c} and the {block.h} heads divisible "
                             f"by {tp}")
        w = c // tp
        idx = np.concatenate([j * c + r * w + np.arange(w) for r in range(tp) for j in range(3)])
        with lib.no_grad():
            for p in (block.qkv.weight, block.qkv.bias):
                p.copy_(lib.from_numpy(np.ascontiguousarray(p.detach().numpy()[idx])))


def tensor_parallel(model: Any, lib: Any, world: int, device: str) -> Any:
    """Megatron-LM's tensor parallelism of a GPT over all `world` ranks through parallelize_module: attention's
    qkv and the MLP's fc split by columns, proj and out by rows (an all-reduce after each in forward, one before
    each column-split input in backward: four per block)."""
    tp = _api(lib, "distributed.tensor.parallel")
    megatron_qkv_order(model, lib, world)
    model = model.to(device)
    mesh = _api(lib, "distributed.device_mesh").init_device_mesh(device.split(":")[0], (world,),
                                                                 mesh_dim_names=("tp",))
    plan = {"blocks.*.qkv": tp.ColwiseParallel(), "blocks.*.proj": tp.RowwiseParallel(),
            "blocks.*.fc": tp.ColwiseParallel(), "blocks.*.out": tp.RowwiseParallel()}
    return tp.parallelize_module(model, mesh, plan)


class _Pipeline:
    """This rank's stage of a GPT cut into `world` stages of L/world blocks, stepped by Schedule1F1B over
    `microbatches`; `compute_s` sums the time inside the stage's forward and backward chunks (the rest of a
    step is waiting on its neighbours, the bubble)."""

    def __init__(self, model: Any, lib: Any, rank: int, world: int, device: str, microbatches: int) -> None:
        from .workloads import gpt_stage

        pipelining = _api(lib, "distributed.pipelining")
        if len(model.blocks) % world:
            raise ValueError(f"--strategy pp over {world} ranks needs the {len(model.blocks)} blocks divisible by "
                             f"{world}")
        self.module = gpt_stage(lib, model, rank, world).to(device)
        self.stage = pipelining.PipelineStage(self.module, rank, world, lib.device(device))
        self.schedule = pipelining.Schedule1F1B(self.stage, n_microbatches=microbatches,
                                                loss_fn=lib.nn.functional.cross_entropy)
        self.first, self.last = rank == 0, rank == world - 1
        self.compute_s = 0.0
        for name in ("forward_one_chunk", "backward_one_chunk"):
            setattr(self.stage, name, self._timed(getattr(self.stage, name)))

    def _timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.compute_s += time.perf_counter() - t0
        return run

    def step(self, x: Any, y: Any) -> Any:
        """One schedule step (forward and backward of every microbatch); the mean microbatch loss on the last
        stage, None elsewhere."""
        losses: List[Any] = []
        self.schedule.step(*((x,) if self.first else ()), target=y if self.last else None, losses=losses)
        return sum(losses) / len(losses) if self.last else None


class _Recorder:
    """Post-accumulate-grad hooks that note when each parameter's gradient is ready (while armed)."""

    def __init__(self, model: Any) -> None:
        self.armed = False
        self.ready: List[tuple] = []
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self._hook(name, int(p.numel())))

    def _hook(self, name: str, numel: int) -> Callable[[Any], None]:
        def hook(_: Any) -> None:
            if self.armed:
                self.ready.append((time.monotonic_ns(), name, numel))
        return hook


def _activation_bytes(call: Any, x: Any, y: Any, lib: Any) -> Optional[int]:
    """Bytes the forward pass leaves alive for backward (NumPy's allocations through tracemalloc), on CPU."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        loss = lib.nn.functional.cross_entropy(call(x), y)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    loss.backward()
    return max(after - before, 0)


def _peak_bytes(device: str) -> int:
    if device.startswith("cuda"):
        import cupy

        pool = cupy.get_default_memory_pool()
        return int(pool.total_bytes())
    from ._common import peak_rss_bytes

    return peak_rss_bytes()


def worker(cfg: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """One rank: build, wrap, step round-robin with the unwrapped copy, measure; rank 0 returns every rank's."""
    import tinytorch
    import tinytorch.distributed as dist
    import tinytorch.nn  # noqa: F401

    from . import workloads
    from ._common import init_group

    tinytorch.set_num_threads(cfg["threads"])
    strategy = cfg["strategy"]
    device = cfg["device"]
    if device == "cuda":  # pick this rank's GPU before NCCL binds its communicator to the current device
        import cupy

        local = int(os.environ.get("LOCAL_RANK", "0"))
        cupy.cuda.Device(local).use()
        device = f"cuda:{local}"
    init_group("nccl" if device.startswith("cuda") else "ring")
    rank, world = dist.get_rank(), dist.get_world_size()
    runs = []  # (label, step function, opt, ddp, x, y, call, recorder)
    tokens = params = 0
    pipe: Optional[_Pipeline] = None
    configs = [("alone", "none", tinytorch)] if cfg["baseline"] and strategy != "none" else []
    configs.append((strategy, strategy, tinytorch))
    if cfg["torch"]:  # PyTorch's same configuration on its own gloo group, from the same weights
        import torch
        import torch.distributed as torch_dist

        torch.set_num_threads(cfg["threads"])
        torch_dist.init_process_group("gloo", init_method=f"tcp://{os.environ.get('MASTER_ADDR', '127.0.0.1')}:"
                                                          f"{cfg['torch_port']}", rank=rank, world_size=world)
        configs.append(("torch", strategy, torch))
    weights: Dict[str, Any] = {}
    for label, strat, lib in configs:
        lib.manual_seed(0)
        model, _, _, n_tokens = workloads.build(lib, cfg["model"], cfg["batch"], cfg["seq"])
        x_np, y_np = _rank_batch(workloads, cfg, 0 if strategy in MODEL_PARALLEL else rank)
        x, y = lib.from_numpy(x_np).to(device), lib.from_numpy(y_np).to(device)
        if label == strategy:
            params, tokens = sum(int(p.numel()) for p in model.parameters()), n_tokens  # before any sharding
            weights = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
        elif label == "torch":
            model.load_state_dict({k: lib.from_numpy(v) for k, v in weights.items()})
        if strat == "pp":
            stage = _Pipeline(model, lib, rank, world, device, cfg["microbatches"])
            pipe = stage if label == strategy else pipe
            call, opt, ddp, recorder = None, lib.optim.AdamW(stage.module.parameters(), lr=1e-3), None, None
            forward_backward = stage.step
        else:
            if strat == "tp":
                call, ddp = tensor_parallel(model, lib, world, device), None
                opt = lib.optim.AdamW(call.parameters(), lr=1e-3)
            else:
                call, opt, ddp = wrap(strat, model.to(device), lib, cfg["bucket_mb"])
            recorder = _Recorder(model) if label == strategy and strat != "tp" else None
            forward_backward = _forward_backward(call, lib)
        ddp = ddp if lib is tinytorch else None  # last_step_stats is tinytorch's Reducer's
        runs.append((label, _step(forward_backward, opt), opt, ddp, x, y, call, recorder))
    times: Dict[str, List[float]] = {r[0]: [] for r in runs}
    losses: List[Optional[float]] = []
    torch_losses: List[Optional[float]] = []
    compute: List[float] = []
    stats: List[Dict[str, Any]] = []
    solo: List[float] = []
    for i in range(cfg["steps"]):
        if cfg["solo"]:  # rank 0 steps the unwrapped copy while the other ranks wait, as a pipeline's bubble
            _, step, _, _, x, y, *_ = runs[0]
            dist.barrier()
            if rank == 0:
                t0 = time.perf_counter()
                step(x, y)
                solo.append(time.perf_counter() - t0)
            dist.barrier()
        order = runs if i % 2 == 0 else runs[::-1]
        for label, step, opt, ddp, x, y, call, rec in order:
            if pipe is not None:
                pipe.compute_s = 0.0
            t0 = time.perf_counter()
            loss = step(x, y)
            times[label].append(time.perf_counter() - t0)
            if label == strategy:
                losses.append(loss)
                if pipe is not None:
                    compute.append(pipe.compute_s)
            elif label == "torch":
                torch_losses.append(loss)
            if ddp is not None:
                stats.append(ddp.last_step_stats)
    trace = None
    if cfg["trace"]:  # every rank steps (a wrapped model communicates); rank 0 writes the file
        label, _, opt, ddp, x, y, call, rec = runs[-1]
        trace = trace_step(call, opt, x, y, lib, rec, cfg, params, tokens, device, write=rank == 0)
    w = cfg["warmup"]
    mine = {"rank": rank, "step_ms": 1e3 * median(times[strategy][w:]),
            "step_ms_all": [1e3 * t for t in times[strategy]], "peak_bytes": _peak_bytes(device), "losses": losses}
    if compute:
        mine["compute_ms"] = 1e3 * median(compute[w:])
        mine["idle_ms"] = 1e3 * median([t - c for t, c in zip(times[strategy][w:], compute[w:])])
    if "alone" in times:
        mine["alone_ms"] = 1e3 * median(times["alone"][w:])
    if solo:
        mine["solo_ms"] = 1e3 * median(solo[w:])
    if "torch" in times:
        mine["torch_ms"], mine["torch_losses"] = 1e3 * median(times["torch"][w:]), torch_losses
    if stats:
        st = stats[w:] or stats
        for k in ("comm_ms", "overlapped_ms", "exposed_ms", "overlap_fraction"):
            mine[k] = median([s[k] for s in st])
    everyone: List[Any] = [None] * world
    dist.all_gather_object(everyone, mine)
    dist.destroy_process_group()
    if cfg["torch"]:
        torch_dist.destroy_process_group()
    if rank != 0:
        return None
    return {"model": cfg["model"], "strategy": strategy, "world": world, "params": params,
            "tokens_per_step": tokens if strategy in MODEL_PARALLEL else tokens * world, "ranks": everyone,
            "trace": trace, "device": device, "microbatches": cfg["microbatches"] if strategy == "pp" else None}


def _rank_batch(workloads: Any, cfg: Dict[str, Any], rank: int) -> tuple:
    """Rank r's own batch (a different seed per rank, as data parallelism has)."""
    if cfg["model"] == "W2":
        return workloads.batch("W2", seed=rank)
    B, T = cfg["batch"], cfg["seq"]
    if cfg["model"] == "W3":
        return workloads.batch("W3", seed=rank, B=B or 16, T=T or 128)
    from .model import GPT_PRESETS

    return workloads.batch("W3", seed=rank, B=B or 1, T=T or 1024, V=GPT_PRESETS[cfg["model"]].get("vocab", 50257))


def trace_step(call: Any, opt: Any, x: Any, y: Any, lib: Any, rec: Any, cfg: Dict[str, Any], params: int,
               tokens: int, device: str, write: bool = True) -> Optional[str]:
    """Profile one more step: tinytorch.profiler's spans, the phases (forward, backward, optimizer), one
    grad_ready event per parameter and the step's metadata (parameters, tokens, activation bytes), as the
    Chrome trace `simulate --profile` reads."""
    from tinytorch.profiler import TRACK_USER, profile

    act = _activation_bytes(call, x, y, lib) if device == "cpu" else None  # tracemalloc sees host memory only
    opt.zero_grad()
    prof = profile()
    rec.ready.clear()
    rec.armed = True
    prof.start()
    t0 = time.monotonic_ns()
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(call(x), y)
    t1 = time.monotonic_ns()
    loss.backward()
    t2 = time.monotonic_ns()
    opt.step()
    loss.item()
    t3 = time.monotonic_ns()
    prof.stop()
    rec.armed = False
    for name, a, b in (("forward", t0, t1), ("backward", t1, t2), ("optimizer", t2, t3)):
        prof._add_event(name, "phase", a, b, TRACK_USER)
    for t, name, numel in rec.ready:
        prof._add_event("grad_ready", "grad_ready", t, t, TRACK_USER,
                        {"param": name, "numel": numel, "unit": _unit_name(name)})
    prof._add_event("bench_meta", "meta", t0, t0, TRACK_USER,
                    {"model": cfg["model"], "strategy": cfg["strategy"], "params": params, "tokens": tokens,
                     "activation_bytes": act})
    if not write:
        return None
    prof.export_chrome_trace(cfg["trace"])
    return cfg["trace"]


def summarize(res: Dict[str, Any]) -> Dict[str, Any]:
    """One row: rank 0's medians, the slowest rank's peak memory, tokens/s over all ranks, the first step's loss
    (the rank that has it: the last under pp); pp adds each rank's compute and idle time."""
    r0 = res["ranks"][0]
    def first(key: str) -> Optional[float]:
        got = [r[key][0] for r in res["ranks"] if r.get(key) and r[key][0] is not None]
        return got[0] if got else None

    row = {"model": res["model"], "strategy": res["strategy"], "world": res["world"], "params": res["params"],
           "step_ms": r0["step_ms"], "tokens_per_s": res["tokens_per_step"] / (r0["step_ms"] / 1e3),
           "first_loss": first("losses"), "microbatches": res.get("microbatches"),
           "torch_ms": r0.get("torch_ms"), "torch_first_loss": first("torch_losses"), "solo_ms": r0.get("solo_ms"),
           "peak_bytes_per_rank": [r["peak_bytes"] for r in res["ranks"]],
           "peak_mb_max": max(r["peak_bytes"] for r in res["ranks"]) / 2 ** 20,
           "alone_ms": r0.get("alone_ms"), "comm_ms": r0.get("comm_ms"), "step_ms_all": r0["step_ms_all"]}
    if res["strategy"] == "ddp" and "exposed_ms" in r0:  # the Reducer measured its all-reduces
        row["exposed_comm_ms"], row["hidden_comm_ms"] = r0["exposed_ms"], r0["overlapped_ms"]
    elif row["alone_ms"] is not None and res["strategy"] not in ("none", *MODEL_PARALLEL):
        # ZeRO: step - alone; for ZeRO-1 the hidden part is DDP's gradient all-reduce behind backward (its
        # parameter broadcast after the step is exposed by construction)
        row["exposed_comm_ms"] = max(r0["step_ms"] - row["alone_ms"], 0.0)
        row["hidden_comm_ms"] = r0.get("overlapped_ms")
    else:
        row["exposed_comm_ms"] = row["hidden_comm_ms"] = None
    if "compute_ms" in r0:
        row["compute_ms_per_rank"] = [r["compute_ms"] for r in res["ranks"]]
        row["idle_ms_per_rank"] = [r["idle_ms"] for r in res["ranks"]]
    row["trace"] = res.get("trace")
    return row


def render(rows: List[Dict[str, Any]]) -> str:
    """The measured table."""
    body = [(r["model"], r["strategy"], r["world"], r["step_ms"], r["alone_ms"], r["tokens_per_s"], r["peak_mb_max"],
             r["comm_ms"], r["exposed_comm_ms"], r["hidden_comm_ms"], r["torch_ms"],
             r["step_ms"] / r["torch_ms"] if r["torch_ms"] else None) for r in rows]
    return table(["model", "strategy", "world", "step_ms", "alone_ms", "tokens/s", "peak_MB/rank", "comm_ms",
                  "exposed_ms", "hidden_ms", "torch_ms", "vs_torch"], body,
                 ["{}", "{}", "{}", "{:.1f}", "{:.1f}", "{:.0f}", "{:.0f}", "{:.1f}", "{:.1f}", "{:.1f}", "{:.1f}",
                  "{:.2f}"])


def plot(rows: List[Dict[str, Any]], path: str) -> bool:
    """Bars: compute (step - exposed) and exposed communication per configuration (matplotlib, optional)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'tinytorch[plot]')")
        return False
    labels = [f"{r['model']} {r['strategy']} x{r['world']}" for r in rows]
    exp = [r["exposed_comm_ms"] or 0.0 for r in rows]
    comp = [r["step_ms"] - e for r, e in zip(rows, exp)]
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(rows)), 4))
    ax.bar(labels, comp, label="compute (and hidden communication)")
    ax.bar(labels, exp, bottom=comp, label="exposed communication")
    ax.set_ylabel("ms per step (rank 0, median)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
    return True


def run(model: str, strategy: str, nproc: Optional[int], steps: int = 10, warmup: int = 2, batch: Optional[int] = None,
        seq: Optional[int] = None, bucket_mb: float = 25.0, device: str = "cpu", threads: int = 1,
        baseline: bool = True, trace: Optional[str] = None, timeout: float = 1800.0,
        microbatches: int = 4, torch: bool = False, solo: bool = False) -> Optional[Dict[str, Any]]:
    """Measure one (model, strategy) on nproc spawned ranks (or the launched ones); rank 0's summary row.
    `solo` (with the baseline): rank 0 also steps the unwrapped copy while the other ranks wait at a barrier,
    round-robin with the rest (`solo_ms`; alone / solo is how much faster a rank computes when its neighbours
    wait, which `validate` gives the pipeline model)."""
    if solo and not baseline:
        raise ValueError("solo steps the unwrapped copy: it needs baseline=True")
    cfg = {"model": model, "strategy": strategy, "steps": steps, "warmup": warmup, "batch": batch, "seq": seq,
           "bucket_mb": bucket_mb, "device": device, "threads": threads, "baseline": baseline,
           "trace": os.path.abspath(trace) if trace else None, "microbatches": microbatches, "torch": torch, "solo": solo,
           "torch_port": int(os.environ["MASTER_PORT"]) + 1 if launched() else free_port()}
    res = run_ranks(worker, nproc, (cfg,), timeout=timeout)
    return summarize(res[0]) if res and res[0] is not None else None


def _check_model_parallel(args: argparse.Namespace, strategies: List[str]) -> None:
    """tp and pp flag combinations, reported as argparse reports a bad flag: a GPT model whose heads (tp) or
    blocks (pp) the ranks divide, and for pp a microbatch count of at least the ranks that divides the batch."""
    asked = [s for s in strategies if s in MODEL_PARALLEL]
    if not asked:
        return
    if args.model == "W2":
        usage_error(args, f"argument --strategy: {asked[0]} splits a GPT's blocks: use --model W3 or a GPT preset, "
                          f"not W2")
    if args.trace and len(asked) == len(strategies):
        usage_error(args, f"argument --trace: records one rank's whole step for simulate --profile; {asked[0]} "
                          f"splits the step over the ranks (add a data-parallel strategy, or leave --trace out)")
    from .model import GPT_PRESETS

    world = args.nproc or int(os.environ.get("WORLD_SIZE", "2"))
    pre = GPT_PRESETS[args.model]
    if "tp" in asked and pre["heads"] % world:
        usage_error(args, f"argument --strategy: tp over {world} ranks needs {args.model}'s {pre['heads']} heads "
                          f"divisible by {world}")
    if "pp" in asked:
        if pre["layers"] % world:
            usage_error(args, f"argument --strategy: pp over {world} ranks needs {args.model}'s {pre['layers']} "
                              f"blocks divisible by {world}")
        batch = args.batch or (16 if args.model == "W3" else 1)
        if args.microbatches < world or batch % args.microbatches:
            usage_error(args, f"argument --microbatches: Schedule1F1B over {world} stages needs at least {world} "
                              f"microbatches that divide --batch {batch}, got {args.microbatches}")


def main(args: argparse.Namespace) -> Optional[List[Dict[str, Any]]]:
    """Measure every requested strategy, print the table, write JSON and the plot."""
    strategies = args.strategy
    if args.warmup >= args.steps:
        usage_error(args, f"argument --warmup: must be less than --steps ({args.steps}), got {args.warmup}")
    nproc = args.nproc if args.nproc or launched() else 2
    _check_model_parallel(args, strategies)
    if args.torch and (args.device != "cpu" or importlib.util.find_spec("torch") is None):
        usage_error(args, "argument --torch: needs PyTorch importable and --device cpu")
    data_parallel = [s for s in strategies if s not in MODEL_PARALLEL]
    rows = []
    for s in strategies:
        trace = args.trace if data_parallel and s == data_parallel[-1] else None
        row = run(args.model, s, nproc, args.steps, args.warmup, args.batch, args.seq, args.bucket_mb, args.device,
                  args.threads, not args.no_baseline, trace, args.timeout, args.microbatches, args.torch)
        if row is None:
            return None  # a launched rank other than 0
        rows.append(row)
    print(render(rows))
    if args.json:
        write_json(args.json, {"rows": rows, "cpus": os.cpu_count(),
                               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    if args.plot:
        plot(rows, args.plot)
    return rows
