"""The analytic scale model behind `tinytorch-bench simulate` and `validate`.

- Collectives: ring algorithms on one link class (steps * alpha + factor * bytes / beta, nccl-tests' factors
  2(n-1)/n and (n-1)/n), hierarchical across nodes (reduce-scatter inside the node, the 1/g shard across nodes
  on each GPU's own NIC, all-gather inside the node).
- DDP: gradients fill buckets in the order they become ready (first bucket 1 MiB, then --bucket-mb, as
  PyTorch's and tinytorch's DDP); a bucket's all-reduce starts when its last gradient is ready and the previous
  bucket's all-reduce is done (one communication stream); what outlasts backward is exposed.
- ZeRO-1: as DDP with reduce-scatter buckets, optimizer on 1/N of the state, then an all-gather of the
  parameters (exposed). ZeRO-2/3 (FSDP-style units): each unit's parameters are all-gathered before its
  forward, one unit ahead (prefetch); ZeRO-3 gathers again before each unit's backward (also one ahead),
  ZeRO-2 keeps them; each unit's gradients are reduce-scattered after its backward.
- Model states (ZeRO paper, Rajbhandari et al. 2020, section 3 and Figure 1): with K bytes of optimizer state,
  P bytes per parameter and G per gradient, DDP (P+G+K)Ψ, ZeRO-1 (P+G)Ψ + KΨ/N, ZeRO-2 PΨ + (G+K)Ψ/N,
  ZeRO-3 (P+G+K)Ψ/N; mixed-precision Adam is P=G=2, K=12 (16Ψ in all).
- Communication volume per GPU per step (ZeRO paper section 7): DDP 2Ψ elements (all-reduce = reduce-scatter
  + all-gather), ZeRO-1/2 the same, ZeRO-3 3Ψ (two all-gathers and a reduce-scatter), each times (N-1)/N.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .hardware import Hardware

STRATEGIES = ("ddp", "zero1", "zero2", "zero3")

# bytes per parameter of (parameters, gradients, optimizer states)
PRECISIONS = {"mixed": (2, 2, 12),  # fp16/bf16 params and grads; fp32 master, momentum, variance (ZeRO's K=12)
              "fp32": (4, 4, 8)}  # fp32 params and grads; Adam's two fp32 moments

# GPT sizes: layers, width, heads (GPT-3 paper, Brown et al. 2020, Table 2.1; 70B: Llama 2, Touvron et al. 2023),
# vocabulary 50257 and sequence 2048 unless given. The Megatron-LM papers' models (Korthikanti et al. 2022,
# Table 3; Narayanan et al. 2021, Table 1) use vocabulary 51200 and carry the global batch the papers trained
# them with. W3 is the reference workload's GPT-mini (tinytorch.bench.workloads.gpt, 16 sequences per rank).
GPT_PRESETS: Dict[str, Dict[str, Any]] = {
    "gpt-125m": {"layers": 12, "d": 768, "heads": 12},
    "gpt-350m": {"layers": 24, "d": 1024, "heads": 16},
    "gpt-760m": {"layers": 24, "d": 1536, "heads": 16},
    "gpt-1.3b": {"layers": 24, "d": 2048, "heads": 16},
    "gpt-2.7b": {"layers": 32, "d": 2560, "heads": 32},
    "gpt-6.7b": {"layers": 32, "d": 4096, "heads": 32},
    "gpt-13b": {"layers": 40, "d": 5120, "heads": 40},
    "gpt-70b": {"layers": 80, "d": 8192, "heads": 64, "params": 70e9},
    "gpt-175b": {"layers": 96, "d": 12288, "heads": 96},
    "megatron-22b": {"layers": 48, "d": 6144, "heads": 64, "vocab": 51200, "batch": 4},
    "gpt3-175b": {"layers": 96, "d": 12288, "heads": 96, "vocab": 51200, "batch": 1536},
    "mt-nlg-530b": {"layers": 105, "d": 20480, "heads": 128, "vocab": 51200, "batch": 2520},
    "megatron-1t": {"layers": 128, "d": 25600, "heads": 160, "vocab": 51200, "batch": 3072},
    "W3": {"layers": 4, "d": 256, "heads": 4, "vocab": 256, "seq": 128, "batch": 16},
}

RECOMPUTE = ("none", "selective", "full")


def gpt_params(layers: int, d: int, vocab: int = 50257, seq: int = 2048) -> float:
    """Parameter count of a GPT: per block 12 d^2 weights (attention 4d^2, MLP 8d^2) and 13 d biases and
    layer-norm parameters, plus token and position tables: 12 L d^2 (1 + 13/(12d) + (V+s)/(12Ld)) (Narayanan
    et al. 2021, section 5.1)."""
    return 12.0 * layers * d * d + 13.0 * layers * d + (vocab + seq) * d


def activation_bytes_per_layer(seq: int, micro_batch: int, d: int, heads: int, tp: int = 1,
                               sequence_parallel: bool = False, recompute: str = "none") -> float:
    """Bytes one transformer layer keeps for backward per microbatch, 16-bit activations and 1-byte dropout
    masks (Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer Models', Table 2):
    s b h (34 + 5as/h) without parallelism; with tensor parallelism s b h (10 + 24/t + 5as/(ht)) (10 = what stays
    replicated: layer-norm inputs, the QKV and MLP inputs, two dropout masks); with sequence parallelism too
    s b h (34/t + 5as/(ht)); selective recomputation drops the 5as/h attention term; full recomputation keeps
    the layer input only, 2 s b h."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"unknown recompute {recompute!r}; choose from {', '.join(RECOMPUTE)}")
    sbh = float(seq) * micro_batch * d
    if recompute == "full":
        return 2.0 * sbh
    attention = 0.0 if recompute == "selective" else 5.0 * heads * seq / (d * tp)
    if sequence_parallel:
        return sbh * (34.0 / tp + attention)
    return sbh * (10.0 + 24.0 / tp + attention)


def gpt_activation_bytes(layers: int, d: int, heads: int, seq: int, micro_batch: int) -> float:
    """Activations all `layers` keep for backward, no parallelism, no recomputation: s b h (34 + 5as/h) each."""
    return layers * activation_bytes_per_layer(seq, micro_batch, d, heads)


def model_state_bytes(strategy: str, params: float, world: int, precision: str = "mixed") -> float:
    """Bytes of parameters, gradients and optimizer states per GPU (ZeRO's formulas)."""
    p, g, k = PRECISIONS[precision]
    n = max(world, 1)
    return {"ddp": (p + g + k) * params, "zero1": (p + g) * params + k * params / n,
            "zero2": p * params + (g + k) * params / n, "zero3": (p + g + k) * params / n}[strategy]


def comm_bytes_per_gpu(strategy: str, params: float, world: int, precision: str = "mixed") -> float:
    """Bytes each GPU sends per step: (N-1)/N of 2Ψ elements for DDP and ZeRO-1/2, 3Ψ for ZeRO-3."""
    p, g, _ = PRECISIONS[precision]
    f = (world - 1) / world if world > 1 else 0.0
    if strategy == "ddp":
        return 2 * f * params * g
    if strategy in ("zero1", "zero2"):
        return f * params * (g + p)
    return f * params * (g + 2 * p)


# ------------------------------------------------------------------ collectives


def _ring(op: str, n: int, nbytes: float, alpha: float, beta: float) -> float:
    if n <= 1 or nbytes <= 0:
        return 0.0
    if op == "all_reduce":
        return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / beta
    if op == "broadcast":
        return (n - 1) * alpha + nbytes / beta
    return (n - 1) * alpha + (n - 1) / n * nbytes / beta  # all_gather, reduce_scatter, all_to_all


def collective_s(op: str, nbytes: float, world: int, hw: Hardware, gpus_per_node: Optional[int] = None) -> float:
    """Seconds for one collective of `nbytes` (the whole buffer, nccl-tests' size) over `world` GPUs: a ring
    inside one node, hierarchical (intra, inter, intra) across nodes."""
    if world <= 1 or nbytes <= 0:
        return 0.0
    g = min(gpus_per_node or hw.gpus_per_node, world)
    m = math.ceil(world / g)
    intra = hw.link(False, g)
    if m == 1:
        if op == "all_reduce" and nbytes <= hw.latency_path_bytes:
            a = intra.alpha_s if hw.latency_path_alpha_s is None else hw.latency_path_alpha_s * hw.slowdown(g)
            return (world - 1) * a + (world - 1) * nbytes / intra.beta_Bps
        return _ring(op, world, nbytes, intra.alpha_s, intra.beta_Bps)
    inter = hw.link(True, g)
    ia, ib, ea, eb = intra.alpha_s, intra.beta_Bps, inter.alpha_s, inter.beta_Bps
    shard = nbytes / g  # each GPU's own NIC carries 1/g of the buffer across nodes
    if op == "all_reduce":
        return _ring("reduce_scatter", g, nbytes, ia, ib) + _ring("all_reduce", m, shard, ea, eb) + \
            _ring("all_gather", g, nbytes, ia, ib)
    if op == "all_gather":
        return _ring("all_gather", m, shard, ea, eb) + _ring("all_gather", g, nbytes, ia, ib)
    if op == "reduce_scatter":
        return _ring("reduce_scatter", g, nbytes, ia, ib) + _ring("reduce_scatter", m, shard, ea, eb)
    if op == "broadcast":
        return _ring("broadcast", m, nbytes, ea, eb) + _ring("broadcast", g, nbytes, ia, ib)
    # all_to_all: (m-1)/m of each GPU's buffer leaves the node through its own NIC, (g-1)/N stays on NVLink
    return (world - 1) * ea + (m - 1) / m * nbytes / eb + (g - 1) / world * nbytes / ib


# ------------------------------------------------------------------ workloads


@dataclass
class Unit:
    """A layer (FSDP unit) in forward order: parameter count and its forward and backward seconds."""

    name: str
    params: float
    fwd_s: float
    bwd_s: float


@dataclass
class Workload:
    """One GPU's step: units in forward order, gradients as (seconds after backward starts, elements) in the
    order they become ready, the full optimizer step's seconds, activations kept for backward, tokens."""

    units: List[Unit]
    grads: List[Tuple[float, float]]
    opt_s: float
    activation_bytes: Optional[float] = None
    tokens: Optional[float] = None
    source: str = "analytic"
    notes: Dict[str, Any] = field(default_factory=dict)

    def scaled(self, factor: float) -> "Workload":
        """The same step with every compute time (and gradient-ready time) multiplied by factor: a single traced
        step gives the shape, the median of several steps the scale."""
        units = [Unit(u.name, u.params, u.fwd_s * factor, u.bwd_s * factor) for u in self.units]
        return Workload(units, [(t * factor, n) for t, n in self.grads], self.opt_s * factor, self.activation_bytes,
                        self.tokens, self.source, dict(self.notes, scaled_by=factor))

    @property
    def params(self) -> float:
        return sum(u.params for u in self.units)

    @property
    def fwd_s(self) -> float:
        return sum(u.fwd_s for u in self.units)

    @property
    def bwd_s(self) -> float:
        return sum(u.bwd_s for u in self.units)


def analytic_workload(params: float, hw: Hardware, tokens: float, layers: int = 32,
                      activation_bytes: Optional[float] = None, precision: str = "mixed") -> Workload:
    """A workload from counts alone: 6 Ψ FLOPs per token (forward 2, backward 4; Kaplan et al. 2020) at
    peak * mfu, in `layers` equal units whose gradients are ready when each unit's backward ends; the optimizer
    reads and writes every state byte once (memory bound)."""
    total = 6.0 * params * tokens / (hw.peak_flops * hw.mfu)
    per = params / layers
    units = [Unit(f"layer{k}", per, total / 3 / layers, 2 * total / 3 / layers) for k in range(layers)]
    bwd_unit = 2 * total / 3 / layers
    grads = [((k + 1) * bwd_unit, per) for k in range(layers)]
    state = sum(PRECISIONS[precision])
    opt = 2 * state * params / hw.mem_bw_Bps
    return Workload(units, grads, opt, activation_bytes, tokens)


# ------------------------------------------------------------------ step simulation


def _buckets(grads: List[Tuple[float, float]], elem_bytes: float, bucket_mb: float,
             first_bucket_mb: float) -> List[Tuple[float, float]]:
    """(ready seconds, bytes) of DDP's buckets filled in gradient-ready order."""
    out, cap, cur, ready = [], first_bucket_mb * (1 << 20), 0.0, 0.0
    for t, numel in grads:
        cur += numel * elem_bytes
        ready = max(ready, t)
        if cur >= cap:
            out.append((ready, cur))
            cur, cap = 0.0, bucket_mb * (1 << 20)
    if cur > 0:
        out.append((ready, cur))
    return out


def _bucketed(op: str, buckets: List[Tuple[float, float]], world: int, hw: Hardware,
              gpn: Optional[int]) -> Tuple[float, float]:
    """(end of the last bucket's collective, summed collective seconds), one communication stream."""
    free, total = 0.0, 0.0
    for ready, nbytes in buckets:
        d = collective_s(op, nbytes, world, hw, gpn)
        free = max(free, ready) + d
        total += d
    return free, total


def _sharded(w: Workload, world: int, hw: Hardware, gpn: Optional[int], p: float, g: float,
             regather: bool) -> Tuple[float, float, float]:
    """(forward end, backward end incl. the last reduce-scatter, comm seconds) of FSDP-style units with one
    unit of all-gather prefetch; ops run on one communication stream in the order they are issued."""
    comm_free, comm_total = 0.0, 0.0

    def run(op: str, nbytes: float, issue: float) -> float:
        nonlocal comm_free, comm_total
        d = collective_s(op, nbytes, world, hw, gpn)
        comm_free = max(comm_free, issue) + d
        comm_total += d
        return comm_free

    L = len(w.units)
    # forward: gather unit k+1 when unit k starts computing
    ag_end = [0.0] * L
    ag_end[0] = run("all_gather", w.units[0].params * p, 0.0)
    t = 0.0
    for k, u in enumerate(w.units):
        start = max(t, ag_end[k])
        if k + 1 < L:
            ag_end[k + 1] = run("all_gather", w.units[k + 1].params * p, start)
        t = start + u.fwd_s
    fwd_end = t
    # backward, last unit first
    order = list(range(L - 1, -1, -1))
    bag = {}
    if regather:
        bag[order[0]] = run("all_gather", w.units[order[0]].params * p, fwd_end)
    end = fwd_end
    for j, k in enumerate(order):
        start = max(end, bag.get(k, 0.0))
        if regather and j + 1 < L:
            nxt = order[j + 1]
            bag[nxt] = run("all_gather", w.units[nxt].params * p, start)
        end = start + w.units[k].bwd_s
        run("reduce_scatter", w.units[k].params * g, end)
    return fwd_end, max(end, comm_free), comm_total


def simulate_step(strategy: str, w: Workload, world: int, hw: Hardware, gpus_per_node: Optional[int] = None,
                  bucket_mb: float = 25.0, first_bucket_mb: float = 1.0, precision: str = "mixed") -> Dict[str, Any]:
    """Predicted step of one strategy at one world size: times in ms, bytes, scaling efficiency."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    p, g, _ = PRECISIONS[precision]
    F, B = w.fwd_s, w.bwd_s
    n = max(world, 1)
    if strategy in ("ddp", "zero1"):
        op = "all_reduce" if strategy == "ddp" else "reduce_scatter"
        end, comm = _bucketed(op, _buckets(w.grads, g, bucket_mb, first_bucket_mb), n, hw, gpus_per_node)
        exposed = max(0.0, end - B)
        opt = w.opt_s if strategy == "ddp" else w.opt_s / n
        tail = 0.0
        if strategy == "zero1":
            tail = collective_s("all_gather", w.params * p, n, hw, gpus_per_node)
            comm += tail
        step = F + B + exposed + opt + tail
        compute = F + B + opt
    else:
        fwd_end, bwd_end, comm = _sharded(w, n, hw, gpus_per_node, p, g, regather=strategy == "zero3")
        opt = w.opt_s / n
        step = bwd_end + opt
        compute = F + B + opt
    exposed_total = step - compute
    row: Dict[str, Any] = {
        "strategy": strategy, "world": world, "step_ms": 1e3 * step, "compute_ms": 1e3 * compute,
        "exposed_comm_ms": 1e3 * exposed_total, "hidden_comm_ms": 1e3 * max(comm - exposed_total, 0.0),
        "comm_ms": 1e3 * comm,
        "comm_bytes_per_gpu_per_step": comm_bytes_per_gpu(strategy, w.params, n, precision),
        "model_state_bytes_per_gpu": model_state_bytes(strategy, w.params, n, precision),
        "activation_bytes_per_gpu": w.activation_bytes,
        # weak scaling: the share of the step spent computing (1.0 = every GPU as fast as with free communication)
        "scaling_efficiency": compute / step if step > 0 else 1.0,
    }
    # the 3-D model's columns: one pipeline stage, no tensor split, every GPU a data-parallel rank
    row.update({"tp": 1, "pp": 1, "dp": world, "vpp": 1, "schedule": None, "microbatches": 1, "params": w.params,
                "activation_bytes_per_layer": w.notes.get("activation_bytes_per_layer"),
                "pipeline_bubble_fraction": 0.0, "tp_comm_bytes_per_gpu_per_step": 0.0,
                "pp_comm_bytes_per_gpu_per_step": 0.0,
                "dp_comm_bytes_per_gpu_per_step": row["comm_bytes_per_gpu_per_step"],
                "mfu": 6.0 * w.params * w.tokens / (step * hw.peak_flops) if w.tokens and step > 0 else None})
    if w.tokens:
        row["tokens_per_s_per_gpu"] = w.tokens / step
    mem = row["model_state_bytes_per_gpu"] + (w.activation_bytes or 0.0)
    row["fits_memory"] = bool(mem <= hw.memory_bytes) if not math.isnan(hw.memory_bytes) else None
    row["limited_by"] = _limit(row, hw)
    return row


def _limit(row: Dict[str, Any], hw: Hardware) -> str:
    """What bounds this configuration, in words."""
    if row["fits_memory"] is False:
        return "memory (does not fit)"
    if row["exposed_comm_ms"] > 0.25 * row["compute_ms"]:
        return "communication"
    return "compute"
