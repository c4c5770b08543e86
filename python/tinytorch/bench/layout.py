"""3-D layouts of a GPT (tensor x pipeline x data parallel) for `tinytorch-bench simulate --tp/--pp/--search`,
counted as the two Megatron-LM papers count:

- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM":
  parameters 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh)); FLOPs per iteration 96 B s l h^2 (1 + s/(6h) + V/(16lh))
  with full recomputation, 72 B s l h^2 (1 + s/(6h) + V/(12lh)) without (the model FLOPs of MFU); pipeline
  bubble (p-1)/m for GPipe and 1F1B, (p-1)/(v m) for the interleaved schedule with v model chunks per rank;
  tensor parallelism: two all-reduces of b s h elements in forward and two in backward per layer and
  microbatch, 8 b s h (t-1)/t elements through each GPU; pipeline: b s h per stage boundary, direction and
  microbatch, b s h / t with the paper's scatter/gather (Megatron-LM's default, and what sequence parallelism
  sends anyway).
- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models": per-layer activation
  bytes of Table 2 (`model.activation_bytes_per_layer`); the first stage holds p microbatches under 1F1B (L
  layers' worth whatever p is), times 1 + (p-1)/(p v) interleaved, all m under GPipe, plus the embedding's
  dropout mask (s b h p / t) and, with p = 1, the output layer's inputs and fp32 logits (4 s b h / t (1 + V/h));
  selective recomputation costs 72 B L s h^2 s/(6h) more FLOPs (its Appendix A: 1 + s/(3h) in place of
  1 + s/(6h)), full recomputation one more forward.

Step time: a pipeline rank runs m microbatches through its L/p layers (v chunks interleaved). One microbatch
slot = its FLOPs / (t x peak x hardware.mfu) + its tensor-parallel collectives (on the critical path, as in
Megatron-LM; one more forward's worth under full recomputation) + one receive per chunk and direction; the
pipeline takes (m + (p-1)/v) slots of the slowest rank (the bubble is the papers' fraction of the ideal time);
then the data-parallel gradient reduction (after the pipeline flush, as in the paper) and the optimizer step.
Ranks are ordered as Megatron-LM orders them: tensor innermost (consecutive GPUs of a node), then data, then
pipeline, so a tensor group stays on NVLink while t <= GPUs per node, and pipeline neighbours are t d ranks apart
(across nodes once the job spans more than one). The last stage also computes the logits (6 b s h V FLOPs per
microbatch) and the first holds the embedding tables. Not modelled: overlap of data-parallel communication
with backward, the tied embedding's gradient all-reduce between first and last stage, allocator fragmentation
and communication buffers (`fits_memory` is model states + activations <= the GPU's memory).

A measured step (`measured=`, a traced one-rank Workload of the same model, as `validate` calibrates) replaces
the FLOP counts: each block's traced forward and backward seconds, the rest (embeddings, final norm, head,
loss) on the last stage, scaled to a microbatch by tokens and divided by t.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from . import model as M
from .hardware import Hardware

SCHEDULES = ("gpipe", "1f1b", "interleaved")


@dataclass(frozen=True)
class Transformer:
    """A GPT's shape: layers L, hidden size h, attention heads a, sequence length s, vocabulary V; `batch` is
    the global batch (sequences) its paper trained with, when it has one."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq: int = 2048
    vocab: int = 50257
    batch: Optional[int] = None

    @classmethod
    def preset(cls, name: str, seq: Optional[int] = None) -> "Transformer":
        """A `model.GPT_PRESETS` entry, its sequence length replaced by `seq` when given."""
        pre = M.GPT_PRESETS[name]
        return cls(name, pre["layers"], pre["d"], pre["heads"], seq or pre.get("seq", 2048),
                   pre.get("vocab", 50257), pre.get("batch"))

    @property
    def params(self) -> float:
        """Narayanan et al.'s P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12lh))."""
        return M.gpt_params(self.layers, self.hidden, self.vocab, self.seq)

    @property
    def layer_params(self) -> float:
        """One block: 12 h^2 weights and 13 h biases and layer-norm parameters."""
        return 12.0 * self.hidden ** 2 + 13.0 * self.hidden

    def layer_forward_flops(self, b: int) -> float:
        """One layer's forward for b sequences: 24 b s h^2 (the four matmuls) + 4 b s^2 h (scores, scores x V)."""
        s, h = self.seq, self.hidden
        return 24.0 * b * s * h * h + 4.0 * b * s * s * h

    def recompute_flops(self, b: int, recompute: str) -> float:
        """Extra FLOPs one layer spends recomputing for b sequences: one forward (full); 12 b s^2 h
        (selective: the paper's Appendix A, 72 B s h^2 x s/(6h) per layer); none."""
        if recompute == "full":
            return self.layer_forward_flops(b)
        if recompute == "selective":
            return 12.0 * b * self.seq ** 2 * self.hidden
        return 0.0

    def logits_flops(self, b: int) -> float:
        """The output layer for b sequences, forward and backward: 6 b s h V."""
        return 6.0 * b * self.seq * self.hidden * self.vocab

    def model_flops(self, global_batch: int) -> float:
        """FLOPs of one iteration without recomputation, the numerator of MFU:
        72 B s L h^2 (1 + s/(6h) + V/(12 L h))."""
        return global_batch * (3.0 * self.layers * self.layer_forward_flops(1) + self.logits_flops(1))

    def hardware_flops(self, global_batch: int, recompute: str) -> float:
        """FLOPs of one iteration as executed: the model FLOPs plus recomputation (96 B s l h^2 (1 + s/(6h) +
        V/(16lh)) with full recomputation)."""
        return self.model_flops(global_batch) + global_batch * self.layers * self.recompute_flops(1, recompute)


@dataclass(frozen=True)
class Layout:
    """How a job splits one model: tensor (tp), pipeline (pp, vpp model chunks per rank) and data (dp)
    parallel sizes, the pipeline schedule, microbatch and global batch (sequences), sequence parallelism,
    activation recomputation, and the data-parallel strategy (ddp, or ZeRO-1/2/3 over the dp ranks)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    vpp: int = 1
    schedule: str = "1f1b"
    micro_batch: int = 1
    global_batch: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    strategy: str = "ddp"

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def microbatches(self) -> int:
        """m: microbatches each pipeline runs per iteration, B / (b d)."""
        return self.global_batch // (self.micro_batch * self.dp)

    def name(self) -> str:
        """'tp8 pp16 dp8 1f1b' (with v, sp and recomputation when they are on)."""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        parts.append(f"interleaved v{self.vpp}" if self.schedule == "interleaved" else self.schedule)
        if self.sequence_parallel:
            parts.append("sp")
        if self.recompute != "none":
            parts.append(f"{self.recompute} recompute")
        return " ".join(parts)

    def check(self, model: Transformer) -> None:
        """Raise ValueError, naming the flag, when this layout cannot run `model`."""
        for flag, v in (("--tp", self.tp), ("--pp", self.pp), ("dp", self.dp), ("--vpp", self.vpp),
                        ("--micro-batch", self.micro_batch), ("--global-batch", self.global_batch)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{flag} must be a positive integer, got {v!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.recompute not in M.RECOMPUTE:
            raise ValueError(f"--recompute must be one of {', '.join(M.RECOMPUTE)}, got {self.recompute!r}")
        if self.strategy not in M.STRATEGIES:
            raise ValueError(f"--strategy must be one of {', '.join(M.STRATEGIES)}, got {self.strategy!r}")
        if model.heads % self.tp or model.hidden % self.tp:
            raise ValueError(f"--tp {self.tp} must divide {model.name}'s {model.heads} attention heads and hidden "
                             f"size {model.hidden}")
        if model.layers % (self.pp * self.vpp):
            raise ValueError(f"--pp {self.pp} x --vpp {self.vpp} must divide {model.name}'s {model.layers} layers")
        if (self.schedule == "interleaved") != (self.vpp > 1):
            raise ValueError(f"--schedule interleaved and --vpp > 1 go together, got --schedule {self.schedule} "
                             f"with --vpp {self.vpp}")
        if self.schedule == "interleaved" and self.pp < 2:
            raise ValueError("--schedule interleaved needs --pp >= 2")
        if self.global_batch % (self.micro_batch * self.dp):
            raise ValueError(f"--global-batch {self.global_batch} must be a multiple of --micro-batch x dp = "
                             f"{self.micro_batch} x {self.dp}")
        m = self.microbatches
        if self.pp > 1 and self.schedule != "gpipe" and m < self.pp:
            raise ValueError(f"--schedule {self.schedule} needs at least --pp {self.pp} microbatches per pipeline, "
                             f"got global batch / (micro-batch x dp) = {m}")
        if self.schedule == "interleaved" and m % self.pp:
            raise ValueError(f"--schedule interleaved needs the microbatches per pipeline ({m}) to be a multiple "
                             f"of --pp {self.pp}")


def bubble_fraction(schedule: str, pp: int, microbatches: int, vpp: int = 1) -> float:
    """Pipeline idle time over ideal time: (p-1)/m, or (p-1)/(v m) interleaved (Narayanan et al. 2021)."""
    if schedule == "interleaved":
        return (pp - 1) / (vpp * microbatches)
    return (pp - 1) / microbatches


def in_flight(lay: Layout) -> float:
    """Microbatches whose activations the first stage holds at its peak: min(m, p) under 1F1B,
    p (1 + (p-1)/(p v)) interleaved, m under GPipe (Korthikanti et al. 2022, section 4.2.3)."""
    p, m = lay.pp, lay.microbatches
    if lay.schedule == "gpipe":
        return float(m)
    if lay.schedule == "interleaved":
        return p * (1.0 + (p - 1) / (p * lay.vpp))
    return float(min(m, p))


def _elem(precision: str) -> int:
    """Bytes per activation element: the parameters' size (2 mixed, 4 fp32)."""
    return M.PRECISIONS[precision][0]


def activation_bytes(model: Transformer, lay: Layout, precision: str = "mixed") -> Tuple[float, float]:
    """(bytes per layer per microbatch, the first stage's peak bytes): Table 2's row for the layout times L/p
    layers times the microbatches in flight, plus the embedding's dropout mask and, with p = 1, the output
    layer's inputs and fp32 logits. The paper counts 16-bit activations; fp32 doubles the count."""
    scale = _elem(precision) / 2
    per_layer = scale * M.activation_bytes_per_layer(model.seq, lay.micro_batch, model.hidden, model.heads, lay.tp,
                                                     lay.sequence_parallel, lay.recompute)
    sbh = float(model.seq) * lay.micro_batch * model.hidden
    split = lay.tp if lay.sequence_parallel else 1
    extra = sbh / split  # the embedding's 1-byte dropout mask
    if lay.pp == 1:
        extra += scale * 4 * sbh / split + 4 * model.seq * lay.micro_batch * model.vocab / lay.tp
    return per_layer, in_flight(lay) * (model.layers / lay.pp * per_layer + extra)


def p2p_sends_per_microbatch(pp: int, vpp: int) -> int:
    """Point-to-point sends of the busiest pipeline rank per microbatch: each of its v chunks sends forward
    unless it is the last stage and backward unless it is the first (chunk c of rank r is stage c p + r)."""
    if pp == 1:
        return 0
    last = pp * vpp - 1
    return max(sum((c * pp + r != last) + (c * pp + r != 0) for c in range(vpp)) for r in range(pp))


# Ops a pre-LN block runs whole on every tensor-parallel rank without sequence parallelism (aten names, as
# tinytorch.profiler and PyTorch's profiler give them): its two layer norms and two residual adds. Each occurs
# once more outside the blocks (the final norm, the token + position embedding sum).
TP_REPLICATED_OPS = ("aten::native_layer_norm", "aten::layer_norm", "aten::add")


def replicated_share(model: Transformer, measured: M.Workload) -> float:
    """The share of the traced blocks' compute that tensor parallelism does not split: the replicated ops'
    traced seconds (`op_s`, forward and backward), the blocks' 2L of the 2L+1 calls of each (same shapes), over
    the blocks' seconds. 0 for a trace without per-op spans."""
    op_s = measured.notes.get("op_s") or {}
    blocks = sum(u.fwd_s + u.bwd_s for u in measured.units if u.name.split(".")[-1].isdigit())
    if not op_s or blocks <= 0:
        return 0.0
    repl = sum(op_s.get(name, 0.0) for name in TP_REPLICATED_OPS) * 2 * model.layers / (2 * model.layers + 1)
    return min(repl * measured.notes.get("scaled_by", 1.0) / blocks, 1.0)


def _stage_units(model: Transformer, lay: Layout, hw: Hardware, measured: Optional[M.Workload]
                 ) -> List[Tuple[float, float, float, float, float]]:
    """Per pipeline rank, per microbatch: (compute seconds tensor parallelism splits, compute seconds it
    repeats on every tensor-parallel rank, recompute seconds, parameters it splits, parameters it repeats).
    Counted: every FLOP splits (Megatron-LM's vocabulary-parallel embedding and output layer too). Measured:
    the blocks have one shape, so each costs the traced blocks' mean (a single traced step on a loaded machine
    splits its time among them unevenly: whichever block a preemption fell in looks slower); a block's time
    splits but for its `replicated_share` (layer norms and residual adds, split only with sequence
    parallelism); embeddings, final norm, head and loss run whole on every tensor-parallel rank, as
    tinytorch-bench train's tp plan leaves them."""
    p, v, b = lay.pp, lay.vpp, lay.micro_batch
    per_rank = model.layers // p
    if measured is None:
        X = hw.peak_flops * hw.mfu
        layer_s = 3 * model.layer_forward_flops(b) / X
        rec_s = model.recompute_flops(b, lay.recompute) / X
        out = []
        for r in range(p):
            params = per_rank * model.layer_params
            params += (model.vocab + model.seq) * model.hidden if r == 0 else 0.0
            params += model.vocab * model.hidden if r == p - 1 and p > 1 else 0.0  # tied output copy
            logits = model.logits_flops(b) / X if r == p - 1 else 0.0
            out.append((per_rank * layer_s + logits, 0.0, per_rank * rec_s, params, 0.0))
        return out
    blocks = [u for u in measured.units if u.name.split(".")[-1].isdigit()]
    rest = [u for u in measured.units if not u.name.split(".")[-1].isdigit()]
    if len(blocks) != model.layers:
        raise ValueError(f"the traced step has {len(blocks)} blocks (units named '<name>.<index>'), "
                         f"{model.name} has {model.layers} layers")
    frac = b * model.seq / measured.tokens if measured.tokens else 1.0 / lay.microbatches
    s, h = model.seq, model.hidden
    rec = {"none": 0.0, "selective": 3.0 * s / (6.0 * h + s), "full": 1.0}[lay.recompute]  # x forward
    rho = 0.0 if lay.tp == 1 or lay.sequence_parallel else replicated_share(model, measured)
    chunk = model.layers // (p * v)
    fwd = sum(u.fwd_s for u in blocks) / len(blocks) * frac
    both = sum(u.fwd_s + u.bwd_s for u in blocks) / len(blocks) * frac
    out = [[0.0] * 5 for _ in range(p)]
    for k, u in enumerate(blocks):
        r = (k // chunk) % p
        out[r][0] += (1 - rho) * both
        out[r][1] += rho * both
        out[r][2] += rec * fwd
        out[r][3] += u.params
    for u in rest:
        out[p - 1][1] += (u.fwd_s + u.bwd_s) * frac
        out[p - 1][4] += u.params
    return [tuple(x) for x in out]  # type: ignore[misc]


def _dp_seconds(strategy: str, params: float, dp: int, hw: Hardware, gpn: int, precision: str) -> float:
    """The data-parallel reduction after the flush, over dp ranks strided by t (gpn / t of them per node)."""
    pb, gb, _ = M.PRECISIONS[precision]
    if strategy == "ddp":
        return M.collective_s("all_reduce", params * gb, dp, hw, gpn)
    gathers = 2 if strategy == "zero3" else 1
    return M.collective_s("reduce_scatter", params * gb, dp, hw, gpn) + \
        gathers * M.collective_s("all_gather", params * pb, dp, hw, gpn)


def simulate_layout(model: Transformer, lay: Layout, hw: Hardware, precision: str = "mixed",
                    gpus_per_node: Optional[int] = None, measured: Optional[M.Workload] = None,
                    solo_speedup: float = 1.0) -> Dict[str, Any]:
    """One predicted row for `model` under `lay` on `hw`: memory, communication bytes, step time, MFU.

    `solo_speedup` k: how many times faster a rank computes while its pipeline neighbour waits than while both
    compute (CPU ranks that share cores with each other and other load; 1 where each rank has its own device).
    Two stages then finish sooner than (m + 1) slots: a rank's bubble (one slot of work, s) runs solo in s/k,
    and each rank's wait is the other's solo time, so with W = m s of work per rank, T = W + (2 - k) s / k.
    For p = 2 that is exact in this picture; for more stages the same factor scales each of the p - 1 bubble
    slots (an approximation: the ramp has other busy ranks too)."""
    lay.check(model)
    gpn = gpus_per_node or hw.gpus_per_node
    t, p, d, v, m = lay.tp, lay.pp, lay.dp, lay.vpp, lay.microbatches
    elem = _elem(precision)
    sbh_bytes = float(model.seq) * lay.micro_batch * model.hidden * elem
    layers_rank = model.layers // p
    tp_collectives = 4 + (2 if lay.recompute == "full" else 0)  # per layer per microbatch
    if lay.sequence_parallel:  # all-gather + reduce-scatter in place of each all-reduce: the same ring time
        tp_one = M.collective_s("all_gather", sbh_bytes, t, hw, gpn) + \
            M.collective_s("reduce_scatter", sbh_bytes, t, hw, gpn)
    else:
        tp_one = M.collective_s("all_reduce", sbh_bytes, t, hw, gpn)
    tp_s = layers_rank * tp_collectives * tp_one
    sends = p2p_sends_per_microbatch(p, v)
    p2p_bytes = sbh_bytes / t
    link = hw.link(lay.world > gpn, min(lay.world, gpn))
    p2p_s = 2 * v * (link.alpha_s + p2p_bytes / link.beta_Bps) if p > 1 else 0.0

    stages = _stage_units(model, lay, hw, measured)
    state = sum(M.PRECISIONS[precision])
    shard = d if lay.strategy != "ddp" else 1  # ZeRO shards the optimizer step over the dp ranks
    compute_s = max((c + r) / t + whole for c, whole, r, _, _ in stages)
    slot = compute_s + tp_s + p2p_s  # the pipeline runs at its slowest stage's pace
    tails = []  # (dp reduction, optimizer) of each rank, after the flush
    for *_, split, whole in stages:
        params = split / t + whole
        opt = 2 * state * params / hw.mem_bw_Bps if measured is None else measured.opt_s * params / measured.params
        tails.append((_dp_seconds(lay.strategy, params, d, hw, max(1, gpn // t), precision), opt / shard))
    dp_s, opt_s = max(tails, key=sum)
    params_gpu = max(split / t + whole for *_, split, whole in stages)
    k = min(max(solo_speedup, 1.0), 2.0) if p > 1 else 1.0  # at most the sibling's whole share
    bubble_s = (p - 1) / v * slot * (2.0 / k - 1.0)
    step = m * slot + bubble_s + dp_s + opt_s
    compute = m * compute_s + opt_s
    per_layer, act = activation_bytes(model, lay, precision)
    states = M.model_state_bytes(lay.strategy, params_gpu, d, precision)
    row: Dict[str, Any] = {
        "layout": lay.name(), "strategy": lay.strategy, "world": lay.world, "tp": t, "pp": p, "dp": d, "vpp": v,
        "schedule": lay.schedule, "micro_batch": lay.micro_batch, "global_batch": lay.global_batch,
        "microbatches": m, "sequence_parallel": lay.sequence_parallel, "recompute": lay.recompute,
        "params": model.params, "params_per_gpu": params_gpu,
        "activation_bytes_per_layer": per_layer, "activation_bytes_per_gpu": act,
        "pipeline_bubble_fraction": bubble_fraction(lay.schedule, p, m, v),
        "model_state_bytes_per_gpu": states, "memory_bytes_per_gpu": states + act,
        "tp_comm_bytes_per_gpu_per_step": layers_rank * m * tp_collectives * 2 * (t - 1) / t * sbh_bytes,
        "pp_comm_bytes_per_gpu_per_step": m * sends * p2p_bytes,
        "dp_comm_bytes_per_gpu_per_step": M.comm_bytes_per_gpu(lay.strategy, params_gpu, d, precision),
        "step_ms": 1e3 * step, "compute_ms": 1e3 * compute, "bubble_ms": 1e3 * bubble_s, "solo_speedup": k,
        "tp_comm_ms": 1e3 * m * tp_s, "pp_comm_ms": 1e3 * m * p2p_s, "dp_comm_ms": 1e3 * dp_s,
        "exposed_comm_ms": 1e3 * (m * (tp_s + p2p_s) + dp_s),
        "mfu": model.model_flops(lay.global_batch) / (step * lay.world * hw.peak_flops),
        "hfu": model.hardware_flops(lay.global_batch, lay.recompute) / (step * lay.world * hw.peak_flops),
        "tokens_per_s_per_gpu": lay.global_batch * model.seq / (step * lay.world),
        "scaling_efficiency": compute / step,
    }
    row["comm_bytes_per_gpu_per_step"] = sum(row[f"{k}_comm_bytes_per_gpu_per_step"] for k in ("tp", "pp", "dp"))
    row["fits_memory"] = None if math.isnan(hw.memory_bytes) else bool(row["memory_bytes_per_gpu"] <= hw.memory_bytes)
    row["limited_by"] = _limit(row)
    return row


def _limit(row: Dict[str, Any]) -> str:
    """What bounds this layout, in words: memory, else the largest overhead beyond a quarter of compute."""
    if row["fits_memory"] is False:
        return "memory (does not fit)"
    costs = {"pipeline bubble": row["bubble_ms"], "tensor-parallel comm": row["tp_comm_ms"],
             "pipeline comm": row["pp_comm_ms"], "data-parallel comm": row["dp_comm_ms"]}
    worst = max(costs, key=lambda k: costs[k])
    return worst if costs[worst] > 0.25 * row["compute_ms"] else "compute"


def _divisors(n: int) -> List[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def candidates(model: Transformer, world: int, global_batch: int, gpus_per_node: int,
               fixed: Dict[str, Any]) -> Iterator[Layout]:
    """Every layout of `model` on `world` GPUs that can run: tensor parallel sizes dividing the heads, within
    one node; pipeline sizes dividing the layers; micro-batches 1-8 and every schedule, v, recomputation and
    sequence-parallel setting, each unless `fixed` names it (keys as Layout's fields, a value or a list)."""
    def choices(key: str, default: Sequence[Any]) -> Sequence[Any]:
        if key not in fixed:
            return default
        return fixed[key] if isinstance(fixed[key], list) else [fixed[key]]

    tps = [k for k in _divisors(world) if k <= gpus_per_node and model.heads % k == 0 and model.hidden % k == 0]
    for tp in choices("tp", tps):
        pps = [k for k in _divisors(world // tp) if model.layers % k == 0] if world % tp == 0 else []
        for pp in choices("pp", pps):
            if world % (tp * pp):
                continue
            dp = world // (tp * pp)
            scheds = [("1f1b", 1)] if pp == 1 else [("1f1b", 1), ("gpipe", 1)] + \
                [("interleaved", v) for v in _divisors(model.layers // pp) if 1 < v <= 8]
            for (sched, v), b, sp, rec, strat in itertools.product(
                    scheds, choices("micro_batch", [1, 2, 4, 8]), choices("sequence_parallel", [False, True]),
                    choices("recompute", list(M.RECOMPUTE)), choices("strategy", ["ddp"])):
                if "schedule" in fixed and sched not in choices("schedule", SCHEDULES):
                    continue
                if "vpp" in fixed and v not in choices("vpp", [1]):
                    continue
                if sp and tp == 1:
                    continue
                lay = Layout(tp, pp, dp, v, sched, b, global_batch, sp, rec, strat)
                try:
                    lay.check(model)
                except ValueError:
                    continue
                yield lay


def search(model: Transformer, world: int, hw: Hardware, global_batch: int, precision: str = "mixed",
           gpus_per_node: Optional[int] = None, fixed: Optional[Dict[str, Any]] = None,
           measured: Optional[M.Workload] = None) -> List[Dict[str, Any]]:
    """Rows of every candidate layout, the ones that fit memory first, each group fastest first."""
    gpn = gpus_per_node or hw.gpus_per_node
    rows = [simulate_layout(model, lay, hw, precision, gpn, measured)
            for lay in candidates(model, world, global_batch, gpn, fixed or {})]
    return sorted(rows, key=lambda r: (r["fits_memory"] is False, r["step_ms"]))


def to_json(model: Transformer) -> Dict[str, Any]:
    """The model's shape and parameter count for a JSON report."""
    return dict(asdict(model), params=model.params)

