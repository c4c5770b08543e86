"""save / load / load(mmap=True) of a GPT-shaped state dict (W3's model: width 256, 4 layers, plus AdamW's two
moments per weight), tinytorch beside PyTorch, both writing the same zip format to a file in --dir; then the
same state as a distributed checkpoint (dcp.save / dcp.load in one process) and what the checksums cost:
CRC-32C (tinytorch's, csrc/kernels/crc32c.cpp) and zlib's CRC-32 over the same bytes.
Median of --reps calls each. Prints a table, writes JSON.

    python benchmarks/serialization.py [--reps 5] [--dir /tmp] [--json PATH]
"""
import argparse
import os
import shutil
import tempfile
import zlib
from typing import Dict

import numpy as np

from harness import median_ms, write_json


def state(torch) -> Dict[str, object]:
    """W3-shaped weights and two moments each, ~9.5 M floats (38 MB) in 3 x 4 x 13 + 6 tensors."""
    rng = np.random.default_rng(0)
    shapes = {"tok.weight": (256, 256), "pos.weight": (128, 256), "head.weight": (256, 256)}
    for i in range(4):
        shapes.update({f"blocks.{i}.attn.qkv.weight": (768, 256), f"blocks.{i}.attn.proj.weight": (256, 256),
                       f"blocks.{i}.mlp.fc.weight": (1024, 256), f"blocks.{i}.mlp.proj.weight": (256, 1024),
                       f"blocks.{i}.ln1.weight": (256,), f"blocks.{i}.ln2.weight": (256,)})
    sd = {k: torch.from_numpy(rng.standard_normal(s, dtype=np.float32)) for k, s in shapes.items()}
    moments = {i: {"step": torch.tensor(10.0), "exp_avg": torch.zeros_like(v), "exp_avg_sq": torch.zeros_like(v)}
               for i, v in enumerate(sd.values())}
    return {"model": sd, "optimizer": {"state": moments, "param_groups": [{"lr": 1e-3, "params": list(moments)}]}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--dir", default=tempfile.gettempdir())
    p.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "serialization.json"))
    args = p.parse_args()
    libs = {}
    import tinytorch
    libs["tinytorch"] = tinytorch
    try:
        import torch
        torch.set_num_threads(1)
        libs["torch"] = torch
    except ImportError:
        pass
    results = {}
    for name, lib in libs.items():
        obj = state(lib)
        path = os.path.join(args.dir, f"bench_serialization_{name}.pt")
        lib.save(obj, path)
        results[name] = {
            "save_ms": median_ms(lambda: lib.save(obj, path), args.reps),
            "load_ms": median_ms(lambda: lib.load(path, weights_only=True), args.reps),
            "load_mmap_ms": median_ms(lambda: lib.load(path, weights_only=True, mmap=True), args.reps),
            "file_mb": os.path.getsize(path) / 2 ** 20,
        }
        os.unlink(path)
        dcp = __import__(f"{name}.distributed.checkpoint", fromlist=["save"])
        ckpt = os.path.join(args.dir, f"bench_dcp_{name}")
        fresh = state(lib)
        kw = {"no_dist": True} if name == "tinytorch" else {}
        dcp.save(obj, checkpoint_id=ckpt, **kw)
        results[name]["dcp_save_ms"] = median_ms(lambda: dcp.save(obj, checkpoint_id=ckpt, **kw), args.reps)
        results[name]["dcp_load_ms"] = median_ms(lambda: dcp.load(fresh, checkpoint_id=ckpt, **kw), args.reps)
        shutil.rmtree(ckpt)
    print(f"{'':10s} {'save ms':>9s} {'load ms':>9s} {'mmap ms':>9s} {'file MB':>8s} {'dcp save':>9s} {'dcp load':>9s}")
    for name, r in results.items():
        print(f"{name:10s} {r['save_ms']:9.1f} {r['load_ms']:9.1f} {r['load_mmap_ms']:9.1f} {r['file_mb']:8.1f} "
              f"{r['dcp_save_ms']:9.1f} {r['dcp_load_ms']:9.1f}")
    flat = np.concatenate([v.numpy().ravel() for v in state(tinytorch)["model"].values()] * 3).view(np.uint8)
    crc = {"bytes": int(flat.nbytes), "zlib_crc32_ms": median_ms(lambda: zlib.crc32(flat), args.reps)}
    if hasattr(tinytorch._C._cpu, "crc32c"):
        crc["crc32c_ms"] = median_ms(lambda: tinytorch._C._cpu.crc32c(flat), args.reps)
        print(f"checksums over {flat.nbytes / 2 ** 20:.1f} MB: CRC-32C {crc['crc32c_ms']:.1f} ms, "
              f"zlib CRC-32 {crc['zlib_crc32_ms']:.1f} ms")
    write_json(args.json, {"reps": args.reps, "results": results, "checksums": crc, "load_avg": os.getloadavg()})


if __name__ == "__main__":
    main()
