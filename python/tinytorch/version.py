"""torch.version: the release facts a script reads. tinytorch's own release is `package` (pip's version, the one
place it is stated: pyproject.toml reads it); `__version__` names the PyTorch release whose API tinytorch follows,
with tinytorch's release as its local label, so that `torch.__version__ >= "2.0"` gates take the branch written
for this API."""
from typing import Optional

package = "0.1.0"
api = "2.13.0"
__version__ = api + "+tinytorch." + package
git_version = "unknown"
debug = False
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None


def __getattr__(name: str):
    # torch.version.cuda: the CUDA runtime CuPy was built for, when it is installed (None: no CUDA, as a CPU
    # build of PyTorch says). Asked lazily: importing CuPy takes seconds.
    if name == "cuda":
        try:
            import cupy
        except ImportError:
            return None
        v = cupy.cuda.runtime.runtimeGetVersion()
        return f"{v // 1000}.{v % 1000 // 10}"
    raise AttributeError(f"module 'tinytorch.version' has no attribute '{name}'")
