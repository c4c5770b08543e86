"""tinytorch.compat: unmodified PyTorch scripts run on tinytorch (`python -m tinytorch.compat`, `tinytorch-run
--compat`), in subprocesses so this test process keeps the real torch for the parity tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tinytorch
from tinytorch.distributed import run as launcher

SCRIPTS = Path(__file__).parent / "compat_scripts"
PYDIR = str(Path(tinytorch.__file__).resolve().parents[1])
TIMEOUT = 120


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = PYDIR + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("OMP_NUM_THREADS", None)
    env.update({"TINYTORCH_RUN_MONITOR_INTERVAL": "0.05", "TINYTORCH_RUN_SHUTDOWN_TIMEOUT": "3"})
    return env


def _run(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=_env(), capture_output=True, text=True, timeout=TIMEOUT,
                          cwd=cwd)


def test_unmodified_script_runs_with_amp():
    r = _run("-m", "tinytorch.compat", str(SCRIPTS / "torch_train.py"), "--steps", "3", "--amp")
    assert r.returncode == 0, r.stderr
    assert "COMPAT_OK 0" in r.stdout


def test_imports_resolve_to_one_tinytorch_module_per_name(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "import torch, tinytorch\n"
        "import torch.nn as nn\n"
        "import torch.nn.functional as F\n"
        "from torch.cuda.amp import GradScaler\n"
        "import torch.utils.data, torch.optim.lr_scheduler, torch.amp, torch.backends.cudnn, torch._dynamo\n"
        "import torch.distributed as dist\n"
        "assert torch is tinytorch and nn is tinytorch.nn and F is tinytorch.nn.functional\n"
        "assert sys.modules['torch.nn.functional'] is tinytorch.nn.functional\n"
        "assert torch.nn.functional.__spec__.name == 'tinytorch.nn.functional'\n"
        "assert GradScaler is tinytorch.cuda.amp.GradScaler and dist is tinytorch.distributed\n"
        "assert __name__ == '__main__' and sys.argv == [sys.argv[0], 'a', '--b']\n"
        "try:\n"
        "    import torch.no_such_module\n"
        "except ModuleNotFoundError as e:\n"
        "    assert e.name == 'torch.no_such_module', e.name\n"
        "else:\n"
        "    raise AssertionError('imported a module that does not exist')\n"
        "print('PROBE_OK')\n")
    r = _run("-m", "tinytorch.compat", str(script), "a", "--b")
    assert r.returncode == 0, r.stderr
    assert "PROBE_OK" in r.stdout
    r = _run("-m", "tinytorch.compat", "-m", "probe", "a", "--b", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "PROBE_OK" in r.stdout


def test_missing_script_is_reported():
    r = _run("-m", "tinytorch.compat", "no_such_script.py")
    assert r.returncode != 0 and "can't open file 'no_such_script.py'" in r.stderr


def test_launcher_compat_flag_builds_the_worker_command():
    cfg = launcher.config_from_args(launcher.parse_args(["--compat", "--standalone", "train.py", "--x", "1"]))
    assert cfg.args == [sys.executable, "-u", "-m", "tinytorch.compat", "train.py", "--x", "1"]
    cfg = launcher.config_from_args(launcher.parse_args(["--compat", "-m", "pkg.train"]))
    assert cfg.args == [sys.executable, "-u", "-m", "tinytorch.compat", "-m", "pkg.train"]


def test_launcher_runs_unmodified_script_on_two_workers():
    r = _run("-m", "tinytorch.distributed.run", "--compat", "--standalone", "--nproc-per-node", "2",
             str(SCRIPTS / "torch_train.py"), "--steps", "2")
    assert r.returncode == 0, r.stderr
    assert "COMPAT_OK 0" in r.stdout and "COMPAT_OK 1" in r.stdout
