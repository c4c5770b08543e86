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
    tinytorch-run --nproc-per-node 4 examples/train_gpt.py --pp 2 --tp 2 --ac    # 2 stages, each over 2 TP ranks

Layouts compose as torchtitan's: the world is pp x dp_replicate x dp_shard x tp ranks (that mesh, outer to
inner). --pp cuts the blocks into stages run by a pipeline schedule; each stage is made tensor-parallel over its
--tp ranks (Megatron-LM's column/row-parallel linears), then its blocks are wrapped for activation checkpointing
(--ac), then sharded with fully_shard over --dp-shard ranks (HSDP when --dp-replicate is also > 1) or, with
--dp-replicate alone, wrapped in DDP. Sharded layouts write distributed checkpoints (OUT/dcp), which --resume
reads at any layout.
"""
from __future__ import annotations

import argparse
import glob
import importlib
import json
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
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree (Megatron-LM's tensor model parallel)")
    p.add_argument("--pp", type=int, default=1, help="pipeline stages over this many ranks")
    p.add_argument("--dp-shard", type=int, default=None,
                   help="ranks fully_shard shards each stage over (default: 1, or all that is left with --fsdp)")
    p.add_argument("--dp-replicate", type=int, default=None,
                   help="data-parallel replicas (default: all ranks that are left); with --dp-shard > 1 this is "
                        "HSDP, alone it is DDP")
    p.add_argument("--ac", action="store_true",
                   help="activation checkpointing: every block's forward runs again in backward instead of keeping "
                        "its activations")
    p.add_argument("--pp-schedule", default="1F1B", choices=["GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS"],
                   help="with --pp: the pipeline schedule (the last two run 2 stages per rank)")
    p.add_argument("--microbatches", type=int, default=None,
                   help="with --pp: microbatches per step (default: one per stage), dividing --batch-size")
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


def write_trace(prof, out: str, rank: int, world: int, dist, mode: str, pipeline: bool) -> None:
    """Every rank writes its trace of the step; rank 0 merges them and draws the timeline (and, for a pipeline,
    its schedule: each stage's microbatches)."""
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
        if pipeline:
            from tinytorch.utils.plot import pipeline_schedule
            stages_png = os.path.join(out, "pipeline.png")
            if pipeline_schedule(stages_png, merged, title=f"one {mode} step of GPT-mini"):
                print(f"pipeline schedule: {stages_png}", flush=True)


class Layout:
    """How the ranks are laid out: the sizes of pp x dp_replicate x dp_shard x tp (torchtitan's mesh order) and
    this rank's place in each; the mesh has the dims larger than one."""

    def __init__(self, args, world: int) -> None:
        self.tp, self.pp = args.tp, args.pp
        shard = args.dp_shard if args.dp_shard is not None else (-1 if args.fsdp else 1)
        replicate = args.dp_replicate if args.dp_replicate is not None else (1 if shard == -1 else -1)
        if shard == -1 and replicate == -1:
            raise ValueError("--dp-shard and --dp-replicate cannot both be -1 (all the ranks that are left)")
        sizes = {"pp": self.pp, "dp_replicate": replicate, "dp_shard": shard, "tp": self.tp}
        known = 1
        for name, n in sizes.items():
            if n != -1 and n < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be a positive number of ranks (or -1 for "
                                 f"dp-shard/dp-replicate: all that are left), got {n}")
            known *= 1 if n == -1 else n
        for name, n in sizes.items():
            if n == -1:
                sizes[name] = world // known if world % known == 0 else 0
        if sizes["pp"] * sizes["dp_replicate"] * sizes["dp_shard"] * sizes["tp"] != world:
            raise ValueError(f"the layout needs --pp {self.pp} x --dp-replicate {replicate} x --dp-shard {shard} x "
                             f"--tp {self.tp} ranks, but WORLD_SIZE is {world}: make the product equal the world "
                             "size (-1 takes the ranks that are left)")
        self.dp_replicate, self.dp_shard = sizes["dp_replicate"], sizes["dp_shard"]
        self.dp = self.dp_replicate * self.dp_shard
        if self.tp > 1 and self.dp_replicate > 1 and self.dp_shard == 1:
            raise ValueError("DDP (--dp-replicate without --dp-shard) does not compose with tensor parallelism; "
                             "use --dp-shard (FSDP) or --dp-replicate with --dp-shard (HSDP)")
        if args.heads % self.tp or 256 % self.tp or args.context % self.tp:
            raise ValueError(f"--tp {self.tp} must divide --heads ({args.heads}), --context ({args.context}) and "
                             "the vocabulary (256): each rank takes whole heads and equal rows of the embeddings")
        self.sharded = self.tp > 1 or self.pp > 1 or self.dp_shard > 1
        self.sizes = sizes
        self.names = tuple(n for n, v in sizes.items() if v > 1)
        self.mesh = None

    def init_mesh(self, device_type: str) -> None:
        """The device mesh of a sharded layout (after init_process_group); DDP alone needs none."""
        if self.sharded:
            import tinytorch.distributed as dist
            self.mesh = dist.init_device_mesh(device_type, tuple(self.sizes[n] for n in self.names),
                                              mesh_dim_names=self.names)

    def rank_in(self, name: str) -> int:
        return self.mesh.get_local_rank(name) if name in self.names and self.mesh is not None else 0

    @property
    def dp_rank(self) -> int:
        """Which data-parallel replica this rank is: ranks with the same one train on the same batches."""
        if self.mesh is None:  # one process, or DDP over all ranks
            return int(os.environ.get("RANK", "0"))
        return self.rank_in("dp_replicate") * self.dp_shard + self.rank_in("dp_shard")

    def dp_mesh(self):
        """The mesh fully_shard shards over: dp_shard, or (dp_replicate, dp_shard) for HSDP."""
        dims = tuple(n for n in ("dp_replicate", "dp_shard") if n in self.names)
        return self.mesh[dims if len(dims) > 1 else dims[0]]

    def describe(self) -> str:
        parts = [f"{n}{getattr(self, n)}" for n in ("pp", "dp_replicate", "dp_shard", "tp") if getattr(self, n) > 1]
        return " x ".join(parts) or "1 rank"


def tp_plan(torch, module) -> dict:
    """Megatron-LM's tensor parallelism for GPT-mini: the embeddings split by rows (VocabParallelEmbedding), the
    attention's qkv and the MLP's first linear by output features (column-parallel), their projections by input
    features (row-parallel: partial outputs all-reduced), the head column-parallel with its logits gathered. The
    plan names only the modules this (pipeline) piece has."""
    from importlib import import_module
    tensor = import_module(f"{torch.__name__}.distributed.tensor")
    par = import_module(f"{torch.__name__}.distributed.tensor.parallel")
    plan = {"tok": par.RowwiseParallel(input_layouts=tensor.Replicate()),
            "pos": par.RowwiseParallel(input_layouts=tensor.Replicate()),
            "blocks.*.qkv": par.ColwiseParallel(), "blocks.*.proj": par.RowwiseParallel(),
            "blocks.*.fc": par.ColwiseParallel(), "blocks.*.out": par.RowwiseParallel(),
            "head": par.ColwiseParallel(output_layouts=tensor.Replicate())}
    return {k: v for k, v in plan.items() if getattr(module, k.split(".")[0]) is not None}


def pipeline_piece(torch, model, blocks: dict, first: bool, last: bool):
    """A GPT holding some of `model`'s modules, as torchtitan's manual split cuts a model: the blocks keep their
    global names (blocks.5...), so checkpoints of every layout hold the same keys; the embeddings stay on the
    first stage, the final norm and head on the last (None elsewhere)."""
    piece = type(model).__new__(type(model))
    torch.nn.Module.__init__(piece)
    piece.tok, piece.pos = (model.tok, model.pos) if first else (None, None)
    piece.blocks = torch.nn.ModuleDict(blocks)
    piece.ln, piece.head = (model.ln, model.head) if last else (None, None)
    return piece


def clip_grad_norm(torch, params, max_norm: float, holders: int, reduce: bool) -> float:
    """clip_grad_norm_ for a model laid out over the ranks: each rank sums the squares of its gradients' local
    pieces, divided by how many ranks hold the same piece (`holders` ranks hold a stage; a shard is held by
    holders / its number of shards), so one all-reduce over all ranks gives the whole model's squared norm."""
    total = torch.zeros((), dtype=torch.float64, device=params[0].device)
    for p in params:
        if p.grad is None:
            continue
        g, copies = p.grad, holders
        if hasattr(g, "placements"):
            for d, placement in enumerate(g.placements):
                if placement.is_shard():
                    copies //= g.device_mesh.size(d)
            g = g.to_local()
        total += g.double().pow(2).sum() / copies
    if reduce:
        import tinytorch.distributed as dist
        dist.all_reduce(total)
    norm = float(total) ** 0.5
    coef = min(1.0, max_norm / (norm + 1e-6))
    for p in params:
        if p.grad is not None:
            p.grad.mul_(coef)
    return norm


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch = importlib.import_module(args.backend)
    F = torch.nn.functional
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    distributed = world > 1
    layout = Layout(args, world)
    if distributed:
        import tinytorch.distributed as dist
        dist.init_process_group("ring" if args.device == "cpu" else "nccl")
        layout.init_mesh("cpu" if args.device == "cpu" else "cuda")
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
    # Pipeline parallelism: this rank's stages (pp-rank r holds r, r + pp, ... of pp * v stages), each a piece of
    # the model with its blocks.
    looped = args.pp_schedule in ("Interleaved1F1B", "LoopedBFS")
    n_stages = layout.pp * (2 if looped and layout.pp > 1 else 1)
    if n_stages > args.layers:
        raise ValueError(f"{n_stages} pipeline stages need at least as many blocks, got --layers {args.layers}")
    my_stages = list(range(layout.rank_in("pp"), n_stages, layout.pp))
    is_first, is_last = 0 in my_stages, n_stages - 1 in my_stages
    blocks_of = [list(b) for b in np.array_split(np.arange(args.layers), n_stages)]
    full = model
    pieces = [model] if layout.pp == 1 else [
        pipeline_piece(torch, full, {str(i): full.blocks[i] for i in blocks_of[s]}, s == 0, s == n_stages - 1)
        for s in my_stages]
    # torchtitan's order on each piece: tensor parallelism, then activation checkpointing, then FSDP/HSDP (or DDP).
    if layout.tp > 1:
        parallelize_module = importlib.import_module(f"{args.backend}.distributed.tensor.parallel").parallelize_module
        for piece in pieces:
            parallelize_module(piece, layout.mesh["tp"], tp_plan(torch, piece))
    if args.ac:
        ac = importlib.import_module(f"{args.backend}.distributed.algorithms._checkpoint.checkpoint_wrapper")
        blocks = set(full.blocks.children())
        for piece in pieces:
            ac.apply_activation_checkpointing(piece, check_fn=lambda m: m in blocks)
    fsdp = distributed and layout.dp_shard > 1
    if fsdp:
        fully_shard = importlib.import_module(f"{args.backend}.distributed.fsdp").fully_shard
        reshard = args.reshard_after_forward == "true"
        for piece in pieces:
            for block in piece.blocks.children():
                fully_shard(block, mesh=layout.dp_mesh(), reshard_after_forward=reshard)
            fully_shard(piece, mesh=layout.dp_mesh(), reshard_after_forward=reshard)
    elif layout.dp_replicate > 1:
        group = layout.mesh.get_group("dp_replicate") if layout.mesh is not None else None
        pieces = [torch.nn.parallel.DistributedDataParallel(piece, bucket_cap_mb=args.bucket_cap_mb,
                                                            process_group=group) for piece in pieces]
        train_model = pieces[0]
    # `model` holds every parameter this rank trains, under its global name: the optimizer's and the checkpoints'.
    if len(pieces) > 1:
        model = pipeline_piece(torch, full, {k: b for piece in pieces for k, b in getattr(
            piece, "module", piece).blocks.items()}, is_first, is_last)
    elif layout.pp > 1:
        model = getattr(pieces[0], "module", pieces[0])
    schedule = None
    if layout.pp > 1:
        pipelining = importlib.import_module(f"{args.backend}.distributed.pipelining")
        microbatches = args.microbatches or n_stages
        if args.batch_size % microbatches:
            raise ValueError(f"--batch-size {args.batch_size} does not split into --microbatches {microbatches}")
        stages = [pipelining.PipelineStage(piece, s, n_stages, device, group=layout.mesh.get_group("pp"))
                  for piece, s in zip(pieces, my_stages)]

        def loss_fn(logits, target):
            return F.cross_entropy(logits.flatten(0, 1), target.flatten())

        cls = pipelining.schedules.get_schedule_class(args.pp_schedule)
        schedule = cls(stages if looped else stages[0], n_microbatches=microbatches, loss_fn=loss_fn)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    warmup = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.05, total_iters=args.warmup)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, args.steps - args.warmup), eta_min=args.lr / 10)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[args.warmup])

    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    dcp_path = os.path.join(args.out, "dcp")
    history = {"train": [], "val": []}
    step = 0
    dcp = importlib.import_module(f"{args.backend}.distributed.checkpoint")
    dsd = importlib.import_module(f"{args.backend}.distributed.checkpoint.state_dict")
    # Optimizer state flattened as torchtitan keeps it ("state.<fqn>.exp_avg", "param_groups.<fqn>.lr"): pipeline
    # stages hold different parameters, so no two ranks write one key differently.
    flat = dsd.StateDictOptions(flatten_optimizer_state_dict=True)

    def sharded_state() -> dict:
        return {"model": dsd.get_model_state_dict(model), "optimizer": dsd.get_optimizer_state_dict(model, opt, options=flat),
                "scheduler": sched.state_dict(), "step": step, "history": json.dumps(history)}

    def save_checkpoint() -> None:
        if layout.sharded:
            dcp.save(sharded_state(), checkpoint_id=dcp_path)
        elif is_main:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(), "step": step, "history": json.dumps(history)}, ckpt_path)
    # A sharded layout reads the distributed checkpoint; one process or DDP reads checkpoint.pt, or the
    # distributed checkpoint when there is none (a sharded run resumed on fewer ranks).
    has_dcp = os.path.exists(os.path.join(dcp_path, ".metadata"))
    if args.resume and has_dcp and (layout.sharded or not os.path.exists(ckpt_path)):
        state = sharded_state()
        dcp.load(state, checkpoint_id=dcp_path)
        dsd.set_model_state_dict(model, state["model"])
        dsd.set_optimizer_state_dict(model, opt, state["optimizer"], options=flat)
        sched.load_state_dict(state["scheduler"])
        step, history = int(state["step"]), json.loads(state["history"])
        if is_main:
            print(f"resumed from {dcp_path} at step {step} ({layout.describe()})")
    elif args.resume and not layout.sharded and os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        step, history = int(ckpt["step"]), json.loads(ckpt["history"])
        if is_main:
            print(f"resumed from {ckpt_path} at step {step}")

    # Training batches: windows at random starts, drawn by the loader's sampler (its own stream per data-parallel
    # replica and resume step: the ranks of one replica's stages and tensor-parallel groups see the same batches)
    # and loaded by --workers processes; pinned for an asynchronous copy on a GPU.
    train_set = Windows(train_tokens, args.context)
    sampler = torch.utils.data.RandomSampler(
        train_set, replacement=True, num_samples=args.batch_size * max(1, args.steps - step),
        generator=torch.Generator().manual_seed(args.seed + 1000 * layout.dp_rank + step))
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                                         num_workers=args.workers, pin_memory=args.device != "cpu")
    train_batches = iter(loader)
    rng = np.random.default_rng(args.seed + 1000 * layout.dp_rank + step)

    def val_batch():
        starts = rng.integers(0, len(val_tokens) - args.context - 1, size=args.batch_size)
        x = np.stack([val_tokens[s:s + args.context] for s in starts])
        y = np.stack([val_tokens[s + 1:s + 1 + args.context] for s in starts])
        return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)

    def global_mean(mine: float | None) -> float:
        """A loss averaged over the data-parallel replicas, onto every rank; `mine` is None on ranks that have none
        (pipeline stages before the last). The ranks of one replica hold the same value, so each adds its share."""
        if not distributed:
            return mine
        total = torch.tensor([0.0 if mine is None else mine / (world // (layout.pp * layout.dp))],
                             dtype=torch.float64, device=device)
        dist.all_reduce(total)
        return float(total.item()) / layout.dp

    def step_loss(x, y, train: bool) -> float:
        """The loss of one batch, with its backward when training: through the model, or one step of the pipeline
        schedule (its last stage averages the microbatches' losses)."""
        if schedule is None:
            loss = F.cross_entropy((train_model if train else model)(x).flatten(0, 1), y.flatten())
            if train:
                loss.backward()
            return global_mean(loss.item())
        losses = []
        run = schedule.step if train else schedule.eval
        run(*((x,) if is_first else ()), **({"target": y, "losses": losses} if is_last else {}))
        return global_mean(sum(float(v) for v in losses) / len(losses) if is_last else None)

    def evaluate() -> float:
        model.eval()
        with torch.no_grad():
            losses = [step_loss(*val_batch(), train=False) for _ in range(args.eval_batches)]
        model.train()
        return sum(losses) / len(losses)

    if is_main:
        ranks = f"{world} rank(s)" + (f" ({layout.describe()})" if layout.names else "")
        print(f"{args.backend}: GPT {n_params / 1e6:.2f}M parameters, {len(tokens) / 1e6:.2f}M bytes of "
              f"{'text from ' + args.data if args.data else 'Python standard library source'}, "
              f"{ranks}; uniform baseline ln(256) = {uniform_loss():.3f}", flush=True)
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
        value = step_loss(x, y, train=True)
        # Sharded layouts sum the squares over all ranks, each stage's counted once; DDP's gradients are whole.
        clip_grad_norm(torch, params, 1.0, layout.tp * layout.dp if layout.sharded else 1, layout.sharded)
        opt.step()
        sched.step()
        step += 1
        if tracing:
            prof.stop()
            mode = (layout.describe() + (f" ({args.pp_schedule}, {microbatches} microbatches)" if schedule else "")
                    if layout.sharded else "DDP" if distributed else f"{args.workers}-worker loading")
            write_trace(prof, args.out, rank, world, dist if distributed else None, mode, schedule is not None)
        tokens_seen += x.numel() * layout.dp
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
    # Under FSDP and TP every forward needs all ranks, so every rank generates (the same text); pipeline stages
    # cannot generate one token at a time (a checkpoint resumed on one process can).
    sample = layout.pp == 1 and (is_main or layout.sharded)
    out = model.generate(prompt, args.sample_bytes, generator=gen) if sample else None
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
        if out is not None:
            print("sample:\n" + bytes(int(b) for b in out[0].tolist()).decode("utf-8", errors="replace"))
        else:
            print(f"no sample under pipeline parallelism: `--resume` {dcp_path} on one process samples it")
    if distributed:
        dist.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
