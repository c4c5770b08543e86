"""Hardware profiles for `tinytorch-bench simulate`: per link class (inside a node, between nodes) a latency
alpha and a bus bandwidth beta, plus peak FLOP/s, achievable FLOP/s fraction, memory and memory bandwidth.

beta is a *bus* bandwidth in nccl-tests' sense (bytes per second per GPU per direction), so a ring collective
of S bytes over n ranks on one link class takes steps * alpha + factor(n) * S / beta, with nccl-tests' factor
(2(n-1)/n for all_reduce, (n-1)/n for all_gather/reduce_scatter). Profiles:

- `h100`: one NVIDIA DGX/HGX H100 SXM5 80GB node per 8 GPUs, NVLink 4 inside, one 400 Gb/s NDR InfiniBand
  NIC per GPU between nodes (DGX H100's 8x ConnectX-7).
- `a100`: DGX A100 80GB, NVLink 3 inside, one 200 Gb/s HDR InfiniBand NIC per GPU between nodes.
- `this-machine`: fitted from a `tinytorch-bench collectives --json` file (see `from_collectives`).
- a FILE.json with the same fields as `Hardware` (links as {"intra": {...}, "inter": {...}}).

Every number below names its source; alpha values and the achievable-FLOP/s fraction are assumptions stated as
such (calibrate with `this-machine`-style files from a real sweep to replace them).
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class Link:
    """One link class: per-step latency (seconds) and bus bandwidth (bytes/s per GPU per direction)."""

    alpha_s: float
    beta_Bps: float
    source: str = ""


@dataclass
class Hardware:
    """What the analytic model needs to know about a cluster."""

    name: str
    gpus_per_node: int
    intra: Link
    inter: Link
    peak_flops: float  # dense FLOP/s per GPU at the training precision
    mfu: float  # fraction of peak_flops a training step achieves (model FLOPs utilization)
    memory_bytes: float  # per GPU
    mem_bw_Bps: float  # per GPU, for the optimizer step (memory bound)
    cpu_cores: Optional[int] = None  # CPU "devices" only: ranks beyond this many share cores
    calib_ranks: Optional[int] = None  # ranks per node of the sweep the links were fitted on
    # tinytorch's ring backend all-reduces messages up to this size by one all-gather of the whole buffer and a
    # local reduction (docs/distributed.md): (n-1) steps moving (n-1) S per rank instead of 2 (n-1)/n S
    latency_path_bytes: int = 0
    latency_path_alpha_s: Optional[float] = None  # its per-step latency, fitted on those sizes (else intra's)
    sources: Dict[str, str] = field(default_factory=dict)

    def link(self, inter_node: bool, ranks_on_node: int) -> Link:
        """The link class used, its bandwidth scaled down when more ranks than cores share this CPU machine
        (the ring backend's copies and reductions are CPU work)."""
        base = self.inter if inter_node else self.intra
        f = self.slowdown(ranks_on_node)
        return base if f == 1.0 else Link(base.alpha_s * f, base.beta_Bps / f, base.source)

    def slowdown(self, ranks_on_node: int) -> float:
        """How much slower communication is with this many ranks on a CPU machine than in its calibration sweep:
        ranks beyond the cores share them (1.0 on GPUs)."""
        if not self.cpu_cores:
            return 1.0
        share = min(1.0, self.cpu_cores / max(ranks_on_node, 1))
        calib = min(1.0, self.cpu_cores / max(self.calib_ranks or 1, 1))
        return calib / share

    def to_json(self) -> Dict[str, Any]:
        """A dict that `load` reads back."""
        return asdict(self)


def _h100() -> Hardware:
    return Hardware(
        name="h100", gpus_per_node=8,
        intra=Link(alpha_s=3e-6, beta_Bps=450e9,
                   source="NVLink 4: 900 GB/s total bidirectional per H100 SXM5 = 450 GB/s per direction (NVIDIA "
                          "H100 Tensor Core GPU datasheet); alpha 3 us per ring step is an assumption of the order "
                          "of NCCL's small-message latency inside a node"),
        inter=Link(alpha_s=8e-6, beta_Bps=50e9,
                   source="DGX H100: 8x ConnectX-7 400 Gb/s NDR InfiniBand, one per GPU = 50 GB/s per GPU per "
                          "direction (NVIDIA DGX H100 user guide); alpha 8 us per ring step is an assumption "
                          "(IB latency ~1-2 us plus NCCL protocol overhead)"),
        peak_flops=989e12, mfu=0.45, memory_bytes=80e9, mem_bw_Bps=3.35e12,
        sources={"peak_flops": "989 TFLOP/s dense BF16, H100 SXM5 (NVIDIA H100 datasheet; 1979 with sparsity)",
                 "mfu": "assumption: 45% model FLOPs utilization, typical of Megatron-LM-style GPT training "
                        "(Narayanan et al. 2021 report 44-52% on A100)",
                 "memory_bytes": "80 GB HBM3 (datasheet)", "mem_bw_Bps": "3.35 TB/s HBM3 (datasheet)"})


def _a100() -> Hardware:
    return Hardware(
        name="a100", gpus_per_node=8,
        intra=Link(alpha_s=3e-6, beta_Bps=300e9,
                   source="NVLink 3: 600 GB/s total bidirectional per A100 SXM4 = 300 GB/s per direction (NVIDIA "
                          "A100 datasheet); alpha 3 us per ring step is an assumption"),
        inter=Link(alpha_s=8e-6, beta_Bps=25e9,
                   source="DGX A100: 8x ConnectX-6 200 Gb/s HDR InfiniBand, one per GPU = 25 GB/s per GPU per "
                          "direction (NVIDIA DGX A100 user guide); alpha 8 us per ring step is an assumption"),
        peak_flops=312e12, mfu=0.45, memory_bytes=80e9, mem_bw_Bps=2.039e12,
        sources={"peak_flops": "312 TFLOP/s dense BF16, A100 SXM4 (NVIDIA A100 datasheet)",
                 "mfu": "assumption: 45% (Narayanan et al. 2021: 44-52% on A100 for GPT)",
                 "memory_bytes": "80 GB HBM2e (datasheet)", "mem_bw_Bps": "2.039 TB/s HBM2e (datasheet)"})


PROFILES = {"h100": _h100, "a100": _a100}
RING_LATENCY_PATH_BYTES = 256 << 10  # csrc/nccl_ring: all-reduces up to 256 KiB take the latency path


def fit_alpha_beta(rows: List[Dict[str, Any]]) -> tuple:
    """(alpha seconds per ring step, bus bandwidth bytes/s, world) fitted to a sweep's all_reduce rows (or any
    op's when there is no all_reduce): least squares on time = steps * alpha + factor * bytes / beta, weighted
    by 1/time^2 so small and large messages count alike (relative error)."""
    from .collectives import bus_factor

    use = [r for r in rows if r["op"] == "all_reduce"] or list(rows)
    large = [r for r in use if r["bytes"] > RING_LATENCY_PATH_BYTES]
    if len(large) >= 2:  # fit the ring algorithm on the sizes that take it
        use = large
    if len(use) < 2:
        raise ValueError("fitting alpha and beta needs a sweep with at least two sizes")
    op, n = use[0]["op"], int(use[0]["world"])
    steps = 2 * (n - 1) if op == "all_reduce" else (n - 1)
    xs = [bus_factor(op, n) * r["bytes"] for r in use]
    ts = [r["time_us"] * 1e-6 for r in use]
    w = [1.0 / t ** 2 for t in ts]
    sw = sum(w)
    sx = sum(wi * x for wi, x in zip(w, xs))
    st = sum(wi * t for wi, t in zip(w, ts))
    sxx = sum(wi * x * x for wi, x in zip(w, xs))
    sxt = sum(wi * x * t for wi, x, t in zip(w, xs, ts))
    den = sw * sxx - sx * sx
    b = (sw * sxt - sx * st) / den if den else 0.0
    a = (st - b * sx) / sw
    if b <= 0:  # flat times: latency bound at every size; take the largest message's bandwidth
        b = ts[-1] / xs[-1]
        a = 0.0
    return max(a, 0.0) / steps, 1.0 / b, n


def measure_flops(seconds: float = 0.5) -> float:
    """Achieved float32 GEMM FLOP/s of one thread of this machine (512^3 products through NumPy)."""
    import time

    import numpy as np

    a = np.random.default_rng(0).standard_normal((512, 512), dtype=np.float32)
    a @ a
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ a
        n += 1
    return 2 * 512 ** 3 * n / (time.perf_counter() - t0)


def from_collectives(path: str, flops: Optional[float] = None) -> Hardware:
    """`this-machine`: links fitted from a collectives sweep (one node: both link classes the same), FLOP/s
    measured (or given), memory from the OS."""
    with open(path) as f:
        data = json.load(f)
    alpha, beta, n = fit_alpha_beta(data["rows"])
    # Messages on the latency path: (n-1) steps of alpha_small plus (n-1) S / beta; alpha_small from their median.
    small = [r for r in data["rows"] if r["op"] == "all_reduce" and r["bytes"] <= RING_LATENCY_PATH_BYTES]
    alpha_small = None
    if small:
        est = sorted(max(r["time_us"] * 1e-6 / (n - 1) - r["bytes"] / beta, 0.0) for r in small)
        alpha_small = est[len(est) // 2]
    link = Link(alpha, beta, source=f"fitted to {os.path.basename(path)} ({n} ranks, all_reduce rows)")
    try:
        mem = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        mem = math.nan
    cores = os.cpu_count() or 1
    # one node: every local rank, however many, shares this machine's memory (no inter-node stage)
    return Hardware(name="this-machine", gpus_per_node=1 << 20, intra=link, inter=link,
                    peak_flops=flops if flops is not None else measure_flops(), mfu=1.0, memory_bytes=mem,
                    mem_bw_Bps=10e9, cpu_cores=cores, calib_ranks=n, latency_path_bytes=RING_LATENCY_PATH_BYTES,
                    latency_path_alpha_s=alpha_small,
                    sources={"links": link.source, "peak_flops": "measured float32 GEMM, one thread",
                             "mem_bw_Bps": "assumption: 10 GB/s for one core's optimizer pass"})


def load(spec: str, collectives_json: Optional[str] = None) -> Hardware:
    """A profile by name (h100, a100, this-machine) or from a JSON file of Hardware's fields."""
    key = spec.lower()
    if key in PROFILES:
        return PROFILES[key]()
    if key == "this-machine":
        if not collectives_json:
            raise ValueError("--hardware this-machine needs --collectives FILE.json (from `tinytorch-bench "
                             "collectives --json FILE.json`)")
        return from_collectives(collectives_json)
    if os.path.exists(spec):
        with open(spec) as f:
            d = json.load(f)
        if "rows" in d:  # a collectives sweep itself
            return from_collectives(spec)
        d["intra"], d["inter"] = Link(**d["intra"]), Link(**d["inter"])
        return Hardware(**d)
    raise ValueError(f"unknown hardware {spec!r}: use h100, a100, this-machine, or a JSON file")
