"""nanoGPT's CPU recipe (karpathy/nanoGPT README: shakespeare_char, `--device=cpu --compile=False
--block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --dropout=0.0`), tinytorch beside PyTorch.

Three modes and a diagnostic, all alternating the libraries so that the machine's load hits both alike, at 1 and 2
intra-op threads. By default each library runs in its own process, one run after the other's, --runs times (a user
runs one library per process: at 2 threads two libraries in one process steal each other's second core, as both
pools poll for work for a while after each parallel region). --in-process steps both in one process, iteration by
iteration. Both report the ratio of the processes' CPU time per iteration (median) beside the wall-clock one: at 1
thread it leaves out the time other processes held the core. --products times each matrix product of the step in
both libraries (one process, alternating steps), per shape, with the route tinytorch took (register-tiled kernel
or BLAS): where a gap in the step comes from. --phases times the step's phases (batch, forward, backward, clip,
optimizer, zero_grad) in both libraries in one process. --overhead steps the same loop on a model shrunk until its kernels
take nothing (in one process): the Python, op dispatch and engine cost of an iteration, which no core count shortens.

    python benchmarks/nanogpt.py [--iters 30] [--warmup 5] [--runs 3] [--threads 1 2] [--json PATH]
    python benchmarks/nanogpt.py --in-process [--iters 30] [--warmup 5] [--threads 1 2] [--compare-blas]
    python benchmarks/nanogpt.py --script DIR [--iters 30] [--threads 1 2]
    python benchmarks/nanogpt.py --products [--iters 40] [--threads 1]
    python benchmarks/nanogpt.py --overhead [--iters 200] [--threads 1] [--phases]
    python benchmarks/nanogpt.py --phases [--iters 40] [--threads 1]

The first builds nanoGPT's model here (model.py's GPT: pre-LayerNorm blocks without bias, causal
scaled_dot_product_attention, GELU MLP, tied embedding, GPT-2 init) and steps it exactly as train.py's loop
does: get_batch from a uint16 token stream, forward with targets, backward, clip_grad_norm_(1.0), AdamW(lr
6e-4 warm-up schedule, betas (0.9, 0.99), weight decay 0.1 on 2-D weights), zero_grad(set_to_none=True). Both
libraries start from the same weights and read the same batches; the losses are printed side by side.

--script DIR runs an unmodified nanoGPT checkout in DIR (train.py, model.py, configurator.py,
config/train_shakespeare_char.py, data/shakespeare_char/{train,val}.bin, meta.pkl) as subprocesses:
`python train.py config/train_shakespeare_char.py <recipe>` and the same under `python -m tinytorch.compat`,
with OMP_NUM_THREADS set, and reads train.py's own `time ...ms` lines (median after the warm-up iterations).
"""
import argparse
import math
import os
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import write_json  # noqa: E402

# The README's CPU recipe (vocabulary: shakespeare_char's 65 characters).
N_LAYER, N_HEAD, N_EMBD, BLOCK, BATCH, VOCAB = 4, 4, 128, 64, 12, 65
RECIPE = ["--device=cpu", "--compile=False", "--eval_iters=20", "--log_interval=1", "--block_size=64",
          "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128", "--lr_decay_iters=2000", "--dropout=0.0"]


def gpt(torch):
    """nanoGPT's model.py GPT at the recipe's size (bias=False, dropout 0), built with `torch`'s API."""
    nn, F = torch.nn, torch.nn.functional

    class LayerNorm(nn.Module):
        def __init__(self, ndim):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))

        def forward(self, x):
            return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = LayerNorm(N_EMBD), LayerNorm(N_EMBD)
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD, bias=False)
            self.attn_proj = nn.Linear(N_EMBD, N_EMBD, bias=False)
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD, bias=False)
            self.mlp_proj = nn.Linear(4 * N_EMBD, N_EMBD, bias=False)
            self.gelu = nn.GELU()

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(self.ln_1(x)).split(N_EMBD, dim=2)
            k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, N_EMBD), nn.Embedding(BLOCK, N_EMBD)
            self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
            self.ln_f = LayerNorm(N_EMBD)
            self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
            self.wte.weight = self.lm_head.weight
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * N_LAYER) if name.endswith("proj.weight") else 0.02
                    torch.nn.init.normal_(p, mean=0.0, std=std)

        def forward(self, idx, targets):
            pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    return GPT()


def get_lr(it: int, learning_rate=1e-3, warmup_iters=100, lr_decay_iters=2000, min_lr=1e-4) -> float:
    """train.py's cosine schedule with warm-up (config/train_shakespeare_char.py's values)."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


class Trainer:
    """One library's nanoGPT model, AdamW and iteration loop (train.py's, without eval and logging)."""

    def __init__(self, torch, data: np.ndarray, state=None) -> None:
        torch.manual_seed(1337)
        self.torch, self.data = torch, data
        self.model = gpt(torch)
        if state is None:
            state = {k: v.detach().numpy().copy() for k, v in self.model.state_dict().items()}
        else:
            self.model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
        self.state = state
        params = [p for p in self.model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        self.opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))
        self.rng = np.random.default_rng(0)  # both libraries draw the same batches
        self.it, self.times, self.cpu_times, self.losses, self.phases = 0, [], [], [], []

    def get_batch(self):
        torch = self.torch
        ix = self.rng.integers(0, len(self.data) - BLOCK, BATCH)
        x = torch.stack([torch.from_numpy(self.data[i:i + BLOCK].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(self.data[i + 1:i + 1 + BLOCK].astype(np.int64)) for i in ix])
        return x, y

    def step(self) -> None:
        torch, clock = self.torch, time.perf_counter
        t0, c0 = clock(), time.process_time()
        for group in self.opt.param_groups:
            group["lr"] = get_lr(self.it)
        x, y = self.get_batch()
        t1 = clock()
        loss = self.model(x, y)
        t2 = clock()
        loss.backward()
        t3 = clock()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        t4 = clock()
        self.opt.step()
        t5 = clock()
        self.opt.zero_grad(set_to_none=True)
        self.losses.append(loss.item())
        t6 = clock()
        self.times.append(t6 - t0)
        self.cpu_times.append(time.process_time() - c0)
        self.phases.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5))
        self.it += 1


# What Trainer.step times apart (seconds each, per step, in Trainer.phases)
PHASES = ("batch", "forward", "backward", "clip", "optimizer", "zero_grad+item")


def phases(args) -> dict:
    """Where each library's step goes: both in this process, stepping alternately (as --in-process), each step
    cut into get_batch, forward (model + loss), backward, clip_grad_norm_, AdamW's step and zero_grad + item;
    median milliseconds per phase. With --overhead's shrunk model it splits the Python and dispatch cost."""
    import tinytorch
    try:
        import torch
    except ImportError:
        torch = None
    threads = args.threads[0]
    tinytorch.set_num_threads(threads)
    runs = {"tinytorch": Trainer(tinytorch, char_data())}
    if torch is not None:
        torch.set_num_threads(threads)
        runs["torch"] = Trainer(torch, char_data(), state=runs["tinytorch"].state)
    for _ in range(args.iters):
        for trainer in runs.values():
            trainer.step()
    table = {lib: {name: 1e3 * statistics.median(p[i] for p in tr.phases[args.warmup:])
                   for i, name in enumerate(PHASES)} for lib, tr in runs.items()}
    for lib, tr in runs.items():
        table[lib]["step"] = 1e3 * statistics.median(tr.times[args.warmup:])
    print(f"{'phase':>15} {'tinytorch ms':>13}" + (f" {'torch ms':>9} {'ratio':>6}" if torch is not None else ""))
    for name in PHASES + ("step",):
        line = f"{name:>15} {table['tinytorch'][name]:13.3f}"
        if torch is not None:
            line += f" {table['torch'][name]:9.3f} {table['tinytorch'][name] / table['torch'][name]:6.2f}"
        print(line)
    return {"mode": "phases", "threads": threads, "iters": args.iters, "warmup": args.warmup, "ms": table}


def char_data(n: int = 1 << 20, seed: int = 0) -> np.ndarray:
    """A token stream in shakespeare_char's format (uint16 ids below 65)."""
    return np.random.default_rng(seed).integers(0, VOCAB, n).astype(np.uint16)


def in_process(args) -> dict:
    import tinytorch
    from tinytorch import _threads
    try:
        import torch
    except ImportError:
        torch = None
    data = char_data()
    results = {"mode": "in-process", "iters": args.iters, "warmup": args.warmup, "threads": {}}
    print(f"{'threads':>7} {'tinytorch ms':>13} {'torch ms':>10} {'ratio':>6} {'cpu ratio':>9} "
          f"{'loss[0] tt / torch':>22} {'loss[-1] tt / torch':>22}")
    for threads in args.threads:
        tinytorch.set_num_threads(threads)
        if torch is not None:
            torch.set_num_threads(threads)
        mine = Trainer(tinytorch, data)
        theirs = Trainer(torch, data, state=mine.state) if torch is not None else None
        # --compare-blas: the same model stepped again with OpenBLAS's products, between MKL's steps and PyTorch's
        other = Trainer(tinytorch, data, state=mine.state) if args.compare_blas else None
        for _ in range(args.iters):  # alternate iteration by iteration
            if other is not None:
                _threads.use_blas("mkl")
            mine.step()
            if other is not None:
                _threads.use_blas("openblas")
                other.step()
            if theirs is not None:
                theirs.step()
        runs = {"tinytorch": mine} if theirs is None else {"tinytorch": mine, "torch": theirs}
        row = _row(threads, {lib: t.times[args.warmup:] for lib, t in runs.items()},
                   {lib: t.cpu_times[args.warmup:] for lib, t in runs.items()},
                   {lib: t.losses for lib, t in runs.items()})
        if other is not None:
            _threads.use_blas("mkl")
            row["tinytorch_openblas_ms"] = 1e3 * statistics.median(other.times[args.warmup:])
            row["mkl_over_openblas"] = row["tinytorch_ms"] / row["tinytorch_openblas_ms"]
            print(f"{'':7} tinytorch with OpenBLAS {row['tinytorch_openblas_ms']:.2f} ms: MKL / OpenBLAS "
                  f"{row['mkl_over_openblas']:.2f}" + (f", OpenBLAS / PyTorch "
                  f"{row['tinytorch_openblas_ms'] / row['torch_ms']:.2f}" if theirs is not None else ""))
        results["threads"][str(threads)] = row
    _print_scaling(results)
    return results


def child(args) -> None:
    """One library's run for `processes`: steps it --iters times and prints its times and losses as JSON."""
    lib = __import__(args.child)
    lib.set_num_threads(args.threads[0])
    with np.load(args.state) as f:
        state = {k: f[k] for k in f.files}
    tr = Trainer(lib, char_data(), state=state)
    for _ in range(args.iters):
        tr.step()
    print(json.dumps({"times": tr.times, "cpu_times": tr.cpu_times, "losses": tr.losses}))


def processes(args) -> dict:
    """Each library in its own process, run after run alternately (which goes first alternates too)."""
    import importlib.util

    import tinytorch
    libs = ["tinytorch"] + (["torch"] if importlib.util.find_spec("torch") else [])
    results = {"mode": "processes", "iters": args.iters, "warmup": args.warmup, "runs": args.runs, "threads": {}}
    print(f"{'threads':>7} {'tinytorch ms':>13} {'torch ms':>10} {'ratio':>6} {'cpu ratio':>9} "
          f"{'loss[0] tt / torch':>22} {'loss[-1] tt / torch':>22}")
    with tempfile.TemporaryDirectory() as tmp:
        state = os.path.join(tmp, "state.npz")
        np.savez(state, **Trainer(tinytorch, char_data()).state)
        for threads in args.threads:
            times = {lib: [] for lib in libs}
            cpu = {lib: [] for lib in libs}
            losses = {}
            for run in range(args.runs):
                for lib in (libs if run % 2 == 0 else libs[::-1]):
                    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", lib, "--threads",
                                          str(threads), "--iters", str(args.iters), "--state", state],
                                         capture_output=True, text=True, check=True).stdout
                    r = json.loads(out.strip().splitlines()[-1])
                    times[lib] += r["times"][args.warmup:]
                    cpu[lib] += r["cpu_times"][args.warmup:]
                    losses[lib] = r["losses"]
            row = _row(threads, times, cpu, losses)
            results["threads"][str(threads)] = row
    _print_scaling(results)
    return results


def products(args) -> dict:
    """Where the step's matrix products stand against PyTorch's: both libraries in this process, stepping
    alternately; each tinytorch product timed around `_ops.linalg._matmul` (with the route it took: the
    register-tiled kernel or BLAS), PyTorch's `aten::mm` calls read from torch.profiler. Per shape (M x K x N),
    median microseconds per call and the calls per step (a forward and an input gradient of one shape share a
    row); the sums are the step's products. PyTorch's step runs slower under the profiler, its products hardly."""
    import tinytorch
    import tinytorch._ops.nn as tt_nn
    from tinytorch._ops import linalg
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        torch = None
    threads = args.threads[0]
    tinytorch.set_num_threads(threads)
    mine = Trainer(tinytorch, char_data())
    theirs = None
    if torch is not None:
        torch.set_num_threads(threads)
        theirs = Trainer(torch, char_data(), state=mine.state)
    calls, routes, orig = {}, {}, linalg._matmul

    def timed(x, y):
        t0 = time.perf_counter()
        out = orig(x, y)
        dt = time.perf_counter() - t0
        if x.ndim == 2 and y.ndim == 2:
            M, K, N = x.shape[0], x.shape[1], y.shape[1]
            calls.setdefault((M, K, N), []).append(dt)
            routes.setdefault((M, K, N), set()).add("kernel" if linalg._narrow(M, N, K, x, y) else "BLAS")
        return out

    tt_nn._matmul = linalg._matmul = timed
    try:
        def steps(n: int) -> None:
            for _ in range(n):
                mine.step()
                if theirs is not None:
                    theirs.step()

        steps(args.warmup)
        calls.clear()
        if theirs is None:
            steps(args.iters)
            events = []
        else:
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                steps(args.iters)
            events = prof.events()
    finally:
        tt_nn._matmul = linalg._matmul = orig
    torch_us = {}
    for e in events:
        shapes = e.input_shapes or []
        if e.name == "aten::mm" and len(shapes) >= 2 and len(shapes[0]) == 2 and len(shapes[1]) == 2:
            torch_us.setdefault((shapes[0][0], shapes[0][1], shapes[1][1]), []).append(e.cpu_time_total)
    rows, total_tt, total_torch = [], 0.0, 0.0
    print(f"{'M x K x N':>16} {'per step':>8} {'route':>6} {'tinytorch us':>13} {'torch us':>9} {'ratio':>6}")
    for key in sorted(calls, key=lambda k: -sum(calls[k])):
        per_step = len(calls[key]) / args.iters
        ours = 1e6 * statistics.median(calls[key])
        route = "/".join(sorted(routes[key]))  # "BLAS/kernel" when products of one shape took both
        row = {"shape": list(key), "per_step": per_step, "route": route, "tinytorch_us": ours}
        line = f"{'x'.join(map(str, key)):>16} {per_step:8.0f} {route:>6} {ours:13.1f}"
        total_tt += ours * per_step
        if key in torch_us:
            row["torch_us"] = statistics.median(torch_us[key])
            row["ratio"] = ours / row["torch_us"]
            total_torch += row["torch_us"] * per_step
            line += f" {row['torch_us']:9.1f} {row['ratio']:6.2f}"
        print(line)
        rows.append(row)
    step_tt = 1e3 * statistics.median(mine.times[args.warmup:])
    print(f"products per step: tinytorch {total_tt / 1e3:.2f} ms of a {step_tt:.2f} ms step", end="")
    results = {"mode": "products", "threads": threads, "iters": args.iters, "rows": rows,
               "tinytorch_products_ms": total_tt / 1e3, "tinytorch_step_ms": step_tt}
    if theirs is not None:
        step_torch = 1e3 * statistics.median(theirs.times[args.warmup:])
        print(f"; PyTorch {total_torch / 1e3:.2f} ms of a {step_torch:.2f} ms step (under the profiler)", end="")
        results.update(torch_products_ms=total_torch / 1e3, torch_step_ms=step_torch)
    print()
    return results


def _row(threads: int, times: dict, cpu: dict, losses: dict) -> dict:
    """One thread count's medians per library (and tinytorch / PyTorch ratios), printed as a table line."""
    row = {}
    for lib in times:
        row.update({f"{lib}_ms": 1e3 * statistics.median(times[lib]),
                    f"{lib}_cpu_ms": 1e3 * statistics.median(cpu[lib]), f"{lib}_losses": losses[lib]})
    line = f"{threads:7d} {row['tinytorch_ms']:13.2f}"
    if "torch" in times:
        row["ratio"] = row["tinytorch_ms"] / row["torch_ms"]
        row["cpu_ratio"] = row["tinytorch_cpu_ms"] / row["torch_cpu_ms"]
        line += (f" {row['torch_ms']:10.2f} {row['ratio']:6.2f} {row['cpu_ratio']:9.2f}"
                 f" {losses['tinytorch'][0]:10.4f} / {losses['torch'][0]:9.4f}"
                 f" {losses['tinytorch'][-1]:10.4f} / {losses['torch'][-1]:9.4f}")
    print(line, flush=True)
    return row


def _print_scaling(results: dict) -> None:
    rows = results["threads"]
    if "1" in rows and "2" in rows:
        for lib in ("tinytorch", "torch"):
            if f"{lib}_ms" in rows["1"]:
                s = rows["1"][f"{lib}_ms"] / rows["2"][f"{lib}_ms"]
                results[f"{lib}_speedup_1_to_2"] = s
                print(f"{lib}: 1 -> 2 threads speed-up {s:.2f}x")


_TIME = re.compile(r"^iter (\d+): loss ([0-9.]+), time ([0-9.]+)ms")


def _run_script(directory: str, compat: bool, threads: int, iters: int) -> list:
    cmd = [sys.executable] + (["-m", "tinytorch.compat"] if compat else []) + [
        "train.py", "config/train_shakespeare_char.py", *RECIPE, f"--max_iters={iters}",
        f"--eval_interval={iters + 1000}", "--out_dir=/tmp/nanogpt_bench_out", "--always_save_checkpoint=False"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, cwd=directory, env=env, capture_output=True, text=True, check=True).stdout
    return [float(m.group(3)) for m in map(_TIME.match, out.splitlines()) if m]


def script(args) -> dict:
    """train.py itself, under each library, run after run alternately."""
    results = {"mode": "script", "iters": args.iters, "warmup": args.warmup, "threads": {}}
    print(f"{'threads':>7} {'tinytorch ms':>13} {'torch ms':>10} {'ratio':>6}")
    for threads in args.threads:
        times = {"tinytorch": [], "torch": []}
        for _ in range(args.runs):
            for lib in ("tinytorch", "torch"):
                times[lib] += _run_script(args.script, lib == "tinytorch", threads, args.iters)[args.warmup:]
        row = {f"{lib}_ms": statistics.median(t) for lib, t in times.items()}
        row["ratio"] = row["tinytorch_ms"] / row["torch_ms"]
        print(f"{threads:7d} {row['tinytorch_ms']:13.2f} {row['torch_ms']:10.2f} {row['ratio']:6.2f}", flush=True)
        results["threads"][str(threads)] = row
    _print_scaling(results)
    return results


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5, help="iterations left out of the median")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--script", help="a nanoGPT checkout to run train.py from, under both libraries")
    p.add_argument("--runs", type=int, default=3, help="runs (processes) of each library per thread count")
    p.add_argument("--in-process", action="store_true", help="both libraries in this process, step by step")
    p.add_argument("--compare-blas", action="store_true",
                   help="with --in-process: tinytorch's step with MKL's products (the tinytorch columns) and again "
                        "with OpenBLAS's, alternating with PyTorch's (needs the mkl extra)")
    p.add_argument("--products", action="store_true",
                   help="the step's matrix products per shape, both libraries in this process (first --threads)")
    p.add_argument("--phases", action="store_true",
                   help="time the step's phases (batch, forward, backward, clip, optimizer, zero_grad) in both "
                        "libraries, in one process (results/nanogpt_phases.json)")
    p.add_argument("--overhead", action="store_true",
                   help="the recipe shrunk to width 8, 4 tokens, batch 1 (the kernels then take nothing), in this "
                        "process: what an iteration costs in Python, dispatch and the engine")
    p.add_argument("--child", choices=["tinytorch", "torch"], help=argparse.SUPPRESS)
    p.add_argument("--state", help=argparse.SUPPRESS)
    p.add_argument("--json", help="where to write the results (default results/nanogpt.json, "
                                  "results/nanogpt_products.json with --products)")
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    if args.overhead:
        global N_EMBD, BLOCK, BATCH, N_HEAD
        N_EMBD, BLOCK, BATCH, N_HEAD = 8, 4, 1, 4
        args.in_process = True
    if args.products:
        results = products(args)
    elif args.phases:
        results = phases(args)
    else:
        results = script(args) if args.script else in_process(args) if args.in_process else processes(args)
    from tinytorch import _threads
    results["tinytorch_blas"] = _threads.blas  # the children choose as this process did (same TINYTORCH_BLAS)
    print(f"tinytorch's matrix products: {_threads.blas}")
    name = ("nanogpt_products.json" if args.products else "nanogpt_phases.json" if args.phases else
            "nanogpt_overhead.json" if args.overhead else "nanogpt.json")
    write_json(args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name), results)
    return results


if __name__ == "__main__":
    main()
