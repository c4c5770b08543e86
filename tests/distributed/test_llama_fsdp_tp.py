"""The FSDP + TP Llama program (tests/compat_scripts/llama_fsdp_tp.py: complex rotary embeddings, the PyTorch
example's TP/SP plan, FSDP1 on the dp mesh dim, AdamW foreach) under `tinytorch-run --compat` at 2 ranks (tp only)
and 4 ranks (dp 2 x tp 2) gives one process's losses on the whole batch."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "compat_scripts" / "llama_fsdp_tp.py"


def _env(extra=None):
    import tinytorch
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(tinytorch.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    env.update({"OMP_NUM_THREADS": "1", **(extra or {})})
    return env


def _losses(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("losses:")]
    assert len(lines) == 1, r.stdout + r.stderr
    return [float(v) for v in lines[0].split(":", 1)[1].split()]


@pytest.mark.parametrize("world", [2, 4])
def test_llama_fsdp_tp_program_matches_one_process(world):
    dp = world // 2
    ours = _losses([sys.executable, "-m", "tinytorch.distributed.run", "--compat", "--standalone", "--nproc-per-node",
                    str(world), str(SCRIPT)], _env())
    ref = _losses([sys.executable, "-m", "tinytorch.compat", str(SCRIPT)], _env({"DP_SIZE": str(dp)}))
    assert len(ours) == 4 and ours[-1] < 0.5 * ours[0], ours  # one batch seen four times: it learns
    np.testing.assert_allclose(ours, ref, rtol=1e-5)
