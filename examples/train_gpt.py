"""Train GPT-mini on bytes of text: the main job.

By default the corpus is the Python standard library's own source (always present); --data takes any
text file. Shows a progress line (loss, tokens/s), evaluates on held-out text every --eval-every
steps, checkpoints atomically (--resume continues), and at the end writes the loss curve (PNG) and
prints a sample of generated text.

    python examples/train_gpt.py --minutes 3
    tinytorch-run --nproc-per-node 2 examples/train_gpt.py      # data parallel on 2 ranks
    tinytorch-run --nproc-per-node 2 examples/train_gpt.py --fsdp                              # ZeRO-3
    tinytorch-run --nproc-per-node 2 examples/train_gpt.py --fsdp --reshard-after-forward false  # ZeRO-2
    python examples/train_gpt.py --workers 2     # batches loaded by 2 DataLoader worker processes
"""
from __future__ import annotations

import argparse
import glob
import importlib
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPTConfig, build, uniform_loss  # noqa: E402


def stdlib_corpus(max_bytes: int) -> bytes:
    """Concatenated .py files of the running Python's standard library, in a fixed order."""
    root = os.path.dirname(os.__file__)
    out, total = [], 0
    for path in sorted(glob.glob(os.path.join(root, "*.py"))):
        with open(path, "rb") as f:
            chunk = f.read()
        out.append(chunk)
        total += len(chunk)
        if total >= max_bytes:
            break
    return b"".join(out)[:max_bytes]


class Windows:
    """Training pairs: `context` bytes starting at index i, and the same shifted by one (next-byte targets)."""

    def __init__(self, tokens, context: int) -> None:
        self.tokens, self.context = tokens, context

    def __len__(self) -> int:
        return len(self.tokens) - self.context - 1

    def __getitem__(self, i: int):
        window = self.tokens[i:i + self.context + 1]
        return window[:-1], window[1:]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="a text file to train on (default: the Python standard library's source)")
    p.add_argument("--max-bytes", type=int, default=4_000_000, help="corpus size cap")
    p.add_argument("--steps", type=int, default=100_000, help="stop after this many steps")
    p.add_argument("--minutes", type=float, default=3.0, help="stop after this much training time")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--out", default="runs/gpt", help="checkpoint, loss history and plot go here")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--sample-bytes", type=int, default=300)
    p.add_argument("--bucket-cap-mb", type=float, default=4.0,
                   help="DDP bucket size: this 13 MiB model gets 4 buckets, so all-reduces overlap backward "
                        "(PyTorch's default, 25, makes only 2)")
    p.add_argument("--workers", type=int, default=0,
                   help="DataLoader worker processes that load training batches (0: load in the training process)")
    p.add_argument("--trace-step", type=int, default=5,
                   help="under DDP or with --workers, profile this step: OUT/trace.json (Perfetto) and "
                        "OUT/timeline.png (needs matplotlib)")
    p.add_argument("--fsdp", action="store_true",
                   help="shard parameters, gradients and optimizer state over the ranks with fully_shard on each "
                        "block and the root (ZeRO-3); checkpoints become distributed checkpoints (OUT/dcp)")
    p.add_argument("--reshard-after-forward", default="true", choices=["true", "false"],
                   help="with --fsdp: false keeps parameters gathered from forward to backward (ZeRO-2)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--backend", default="tinytorch", choices=["tinytorch", "torch"],
                   help="run the same script on PyTorch for comparison")
    return p.parse_args(argv)


class Progress:
    """One self-rewriting status line on a terminal; a line every few seconds otherwise."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.tty = sys.stdout.isatty()
        self.every_s, self.last = every_s, 0.0

    def update(self, text: str) -> None:
        now = time.time()
        if self.tty:
            sys.stdout.write("\r" + text.ljust(100))
            sys.stdout.flush()
        elif now - self.last >= self.every_s:
            print(text, flush=True)
            self.last = now

    def line(self, text: str) -> None:
        if self.tty:
            sys.stdout.write("\r" + " " * 100 + "\r")
        print(text, flush=True)


def write_trace(prof, out: str, rank: int, world: int, dist, mode: str) -> None:
    """Every rank writes its trace of the step; rank 0 merges them and draws the timeline."""
    import tinytorch.profiler as profiler
    path = os.path.join(out, f"trace_rank{rank}.json")
    prof.export_chrome_trace(path)
    if world > 1:
        dist.barrier()
    if rank == 0:
        parts = [os.path.join(out, f"trace_rank{r}.json") for r in range(world)]
        merged = os.path.join(out, "trace.json")
        profiler.merge_chrome_traces(parts, merged)
        for p in parts:
            os.remove(p)
        png = os.path.join(out, "timeline.png")
        drawn = profiler.timeline_png(merged, png, title=f"one {mode} step of GPT-mini on {world} ranks")
        print(f"trace of one step: {merged} (open in Perfetto)" + (f", timeline: {png}" if drawn else ""),
              flush=True)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch = importlib.import_module(args.backend)
    F = torch.nn.functional
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    distributed = world > 1
    if distributed:
        import tinytorch.distributed as dist
        dist.init_process_group("ring" if args.device == "cpu" else "nccl")
    device = torch.device(args.device if args.device == "cpu" else f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
    is_main = rank == 0
    os.makedirs(args.out, exist_ok=True)

    data = open(args.data, "rb").read()[:args.max_bytes] if args.data else stdlib_corpus(args.max_bytes)
    import numpy as np
    tokens = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    split = int(len(tokens) * 0.9)
    train_tokens, val_tokens = tokens[:split], tokens[split:]
    cfg = GPTConfig(context=args.context, width=args.width, heads=args.heads, layers=args.layers)

    torch.manual_seed(args.seed)
    model = build(torch, cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    train_model = model
    fsdp = distributed and args.fsdp
    if fsdp:
        fully_shard = importlib.import_module(f"{args.backend}.distributed.fsdp").fully_shard
        reshard = args.reshard_after_forward == "true"
        for block in model.blocks:
            fully_shard(block, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
    elif distributed:
        train_model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.05, total_iters=args.warmup)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.steps - args.warmup), eta_min=args.lr / 10)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[args.warmup])

    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    dcp_path = os.path.join(args.out, "dcp")
    history = {"train": [], "val": []}
    step = 0
    if fsdp:
        dcp = importlib.import_module(f"{args.backend}.distributed.checkpoint")
        dsd = importlib.import_module(f"{args.backend}.distributed.checkpoint.state_dict")

        def sharded_state() -> dict:
            return {"model": dsd.get_model_state_dict(model), "optimizer": dsd.get_optimizer_state_dict(model, opt),
                    "scheduler": sched.state_dict(), "step": step, "history": json.dumps(history)}

        def save_checkpoint() -> None:
            dcp.save(sharded_state(), checkpoint_id=dcp_path)
    else:
        def save_checkpoint() -> None:
            if is_main:
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                            "scheduler": sched.state_dict(), "step": step, "history": json.dumps(history)}, ckpt_path)
    if args.resume and fsdp and os.path.exists(os.path.join(dcp_path, ".metadata")):
        state = sharded_state()
        dcp.load(state, checkpoint_id=dcp_path)
        dsd.set_model_state_dict(model, state["model"])
        dsd.set_optimizer_state_dict(model, opt, state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step, history = int(state["step"]), json.loads(state["history"])
        if is_main:
            print(f"resumed from {dcp_path} at step {step}")
    elif args.resume and not fsdp and os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        step, history = int(ckpt["step"]), json.loads(ckpt["history"])
        if is_main:
            print(f"resumed from {ckpt_path} at step {step}")

    # Training batches: windows at random starts, drawn by the loader's sampler (its own stream per rank and
    # resume step) and loaded by --workers processes; pinned for an asynchronous copy on a GPU.
    train_set = Windows(train_tokens, args.context)
    sampler = torch.utils.data.RandomSampler(
        train_set, replacement=True, num_samples=args.batch_size * max(1, args.steps - step),
        generator=torch.Generator().manual_seed(args.seed + 1000 * rank + step))
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                                         num_workers=args.workers, pin_memory=args.device != "cpu")
    train_batches = iter(loader)
    rng = np.random.default_rng(args.seed + 1000 * rank + step)

    def val_batch():
        starts = rng.integers(0, len(val_tokens) - args.context - 1, size=args.batch_size)
        x = np.stack([val_tokens[s:s + args.context] for s in starts])
        y = np.stack([val_tokens[s + 1:s + 1 + args.context] for s in starts])
        return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            losses = [F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                      for x, y in (val_batch() for _ in range(args.eval_batches))]
        model.train()
        return sum(losses) / len(losses)

    if is_main:
        print(f"{args.backend}: GPT {n_params / 1e6:.2f}M parameters, {len(tokens) / 1e6:.2f}M bytes of "
              f"{'text from ' + args.data if args.data else 'Python standard library source'}, "
              f"{world} rank(s); uniform baseline ln(256) = {uniform_loss():.3f}", flush=True)
    progress = Progress()
    start, tokens_seen, first_loss = time.time(), 0, None
    deadline = start + args.minutes * 60

    def out_of_time() -> bool:
        # Every rank must stop after the same step (each step's collectives need them all): rank 0's clock decides.
        late = time.time() >= deadline
        if not distributed:
            return late
        flag = torch.tensor([1.0 if late else 0.0], device=device)
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    while step < args.steps and not out_of_time():
        tracing = (distributed or args.workers > 0) and step + 1 == args.trace_step
        if tracing:
            import tinytorch.profiler
            prof = tinytorch.profiler.profile()
            prof.start()
        x, y = next(train_batches)  # the trace shows this as enumerate(DataLoader)#...__next__
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        # zero_grad before forward: under DDP, forward hands each parameter a fresh view into its bucket.
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(train_model(x).flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        if tracing:
            prof.stop()
            write_trace(prof, args.out, rank, world, dist if distributed else None,
                        "FSDP (ZeRO-3)" if fsdp else "DDP" if distributed else f"{args.workers}-worker loading")
        tokens_seen += x.numel() * world
        value = loss.item()
        first_loss = value if first_loss is None else first_loss
        history["train"].append([step, value])
        elapsed = time.time() - start
        if is_main:
            progress.update(f"step {step:5d} | loss {value:.3f} | {tokens_seen / elapsed:,.0f} tok/s | "
                            f"lr {sched.get_last_lr()[0]:.2e} | {elapsed:5.0f}s")
        if step % args.eval_every == 0:
            val = evaluate()
            history["val"].append([step, val])
            if is_main:
                progress.line(f"step {step:5d} | train {value:.3f} | val {val:.3f} | "
                              f"{tokens_seen / elapsed:,.0f} tok/s")
            save_checkpoint()
    val = evaluate()
    history["val"].append([step, val])
    result = {"backend": args.backend, "steps": step, "first_loss": first_loss, "final_val_loss": val,
              "tokens_per_s": tokens_seen / max(time.time() - start, 1e-9), "uniform": uniform_loss()}
    save_checkpoint()
    prompt = torch.from_numpy(np.frombuffer(b"def ", dtype=np.uint8).astype(np.int64)).reshape(1, -1).to(device)
    gen = torch.Generator(device=device).manual_seed(args.seed) if args.backend == "tinytorch" else None
    # Under FSDP every forward gathers parameters from all ranks, so every rank generates (the same text).
    out = model.generate(prompt, args.sample_bytes, generator=gen) if is_main or fsdp else None
    if is_main:
        progress.line(f"done: {step} steps, val loss {val:.3f} (uniform baseline {uniform_loss():.3f})")
        with open(os.path.join(args.out, "history.json"), "w") as f:
            json.dump(history, f)
        plot_path = os.path.join(args.out, "loss.png")
        from tinytorch.utils.plot import line_chart
        series = {"train": tuple(zip(*history["train"])), "validation": tuple(zip(*history["val"]))}
        if line_chart(plot_path, {k: v for k, v in series.items() if v}, title="GPT-mini byte-level loss",
                      xlabel="step", ylabel="cross-entropy", hlines={"uniform ln 256": uniform_loss()}):
            print(f"loss curve: {plot_path}")
        text = bytes(int(b) for b in out[0].tolist()).decode("utf-8", errors="replace")
        print("sample:\n" + text)
    if distributed:
        dist.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
