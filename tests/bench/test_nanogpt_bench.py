"""benchmarks/nanogpt.py --products on a few steps (nothing about speed is asserted): every product of nanoGPT's
step is counted once per call and routed as _narrow says: with OpenBLAS, forwards and input gradients to the
register-tiled kernel, weight gradients and the 65-wide lm_head's products to BLAS; with MKL, all to MKL."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_nanogpt(*args: str) -> subprocess.CompletedProcess:
    """benchmarks/nanogpt.py with these arguments, in a child process on this checkout's package."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "nanogpt.py"), *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_products_table_counts_and_routes_every_product(tmp_path):
    out = tmp_path / "products.json"
    res = _run_nanogpt("--products", "--iters", "2", "--warmup", "1", "--threads", "1", "--json", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "products per step: tinytorch" in res.stdout
    result = json.loads(out.read_text())
    rows = {tuple(r["shape"]): r for r in result["rows"]}
    # 4 layers: c_attn (128 -> 384), attn proj (128 -> 128), c_fc (128 -> 512), mlp proj (512 -> 128), each a
    # forward, an input gradient and a weight gradient over 12 x 64 = 768 tokens; lm_head (128 -> 65) once.
    want = {(768, 128, 384): (4, "kernel"), (768, 384, 128): (4, "kernel"), (384, 768, 128): (4, "BLAS"),
            (768, 128, 128): (8, "kernel"), (128, 768, 128): (4, "BLAS"),
            (768, 128, 512): (8, "kernel"), (768, 512, 128): (8, "kernel"),
            (512, 768, 128): (4, "BLAS"), (128, 768, 512): (4, "BLAS"),
            (768, 128, 65): (1, "BLAS"), (65, 768, 128): (1, "BLAS"), (768, 65, 128): (1, "BLAS")}
    if result["tinytorch_blas"] == "mkl":
        want = {shape: (count, "BLAS") for shape, (count, _) in want.items()}
    assert {shape: (r["per_step"], r["route"]) for shape, r in rows.items()} == want
    assert all(r["tinytorch_us"] > 0 for r in rows.values())
    assert 0 < result["tinytorch_products_ms"] < result["tinytorch_step_ms"]
    if importlib.util.find_spec("torch") is not None:
        assert all(r["torch_us"] > 0 for r in rows.values()) and result["torch_products_ms"] > 0


def test_compare_blas_steps_the_model_with_both_libraries(tmp_path):
    """--in-process --compare-blas times the model's steps with MKL's and with OpenBLAS's products and records both
    (nothing about speed is asserted); without the mkl wheel, use_blas('mkl') says what it needs."""
    from tinytorch import _threads
    if _threads._mkl_path() is None:
        with pytest.raises(RuntimeError, match="expected 'mkl' \\(with the mkl wheel installed\\) or 'openblas'"):
            _threads.use_blas("mkl")
        return
    out = tmp_path / "cb.json"
    res = _run_nanogpt("--in-process", "--compare-blas", "--iters", "3", "--warmup", "1", "--threads", "1",
                       "--json", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    row = json.loads(out.read_text())["threads"]["1"]
    assert row["tinytorch_openblas_ms"] > 0 and row["mkl_over_openblas"] > 0
    assert "tinytorch's matrix products: mkl" in res.stdout


def test_phases_split_each_step_and_add_up(tmp_path):
    """--phases times get_batch, forward, backward, clipping, AdamW and zero_grad apart (nothing about speed is
    asserted): every phase is timed, and their medians come to about the step's median."""
    out = tmp_path / "phases.json"
    res = _run_nanogpt("--phases", "--overhead", "--iters", "6", "--warmup", "2", "--threads", "1",
                       "--json", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    libs = json.loads(out.read_text())["ms"]
    assert set(libs) == ({"tinytorch", "torch"} if importlib.util.find_spec("torch") else {"tinytorch"})
    for ms in libs.values():
        parts = [ms[p] for p in ("batch", "forward", "backward", "clip", "optimizer", "zero_grad+item")]
        assert all(p > 0 for p in parts)
        assert 0.5 * ms["step"] < sum(parts) < 2 * ms["step"]
    assert "backward" in res.stdout and "optimizer" in res.stdout
