"""Run an unmodified PyTorch script on tinytorch: `python -m tinytorch.compat SCRIPT ARGS...` (or `-m MODULE`).

`install()` puts an import hook first on sys.meta_path that answers `torch` and every `torch.X.Y` with the
module object `tinytorch.X.Y` (one object per name: `import torch.nn as nn` gives tinytorch.nn itself, so
isinstance checks and module globals agree), then the script runs as `__main__` with sys.argv set as Python
would set it. A torch submodule tinytorch lacks raises the ordinary ModuleNotFoundError naming it.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
from types import ModuleType

_PREFIX = "torch"
_TARGET = "tinytorch"


def _target_name(fullname: str) -> str | None:
    if fullname == _PREFIX:
        return _TARGET
    if fullname.startswith(_PREFIX + "."):
        return _TARGET + fullname[len(_PREFIX):]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Hands back the already-imported tinytorch module, keeping its own __spec__ and __name__."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._spec = module.__spec__

    def create_module(self, spec):
        return self._module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import system stamped the alias spec on it: restore tinytorch's


class TorchAliasFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder: `torch[.X]` -> the module object `tinytorch[.X]`."""

    def find_spec(self, fullname: str, path=None, target=None):
        target_name = _target_name(fullname)
        if target_name is None:
            return None
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as e:
            if e.name == target_name:
                return None  # no counterpart: the import fails as 'No module named torch.X'
            raise
        is_pkg = hasattr(module, "__path__")
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(module), is_package=is_pkg)
        if is_pkg:
            spec.submodule_search_locations = list(module.__path__)
        return spec


def install() -> None:
    """Make `import torch...` resolve to tinytorch in this process (idempotent)."""
    if not any(isinstance(f, TorchAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchAliasFinder())
    real = sys.modules.get(_PREFIX)
    if real is not None and getattr(real, "__name__", None) != _TARGET:
        raise RuntimeError("the real torch is already imported in this process: tinytorch.compat must be "
                           "installed before anything imports torch")
    import tinytorch
    sys.modules[_PREFIX] = tinytorch
    for name, mod in list(sys.modules.items()):  # already-imported submodules: alias them now
        if name.startswith(_TARGET + ".") and mod is not None:
            sys.modules.setdefault(_PREFIX + name[len(_TARGET):], mod)


def main(argv: list[str] | None = None) -> None:
    """`python -m tinytorch.compat [-m MODULE | SCRIPT] ARGS...`: run it with torch -> tinytorch."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m tinytorch.compat [-m MODULE | SCRIPT] [ARGS...]\n"
              "Runs a PyTorch script with `import torch` resolved to tinytorch.", file=sys.stderr)
        raise SystemExit(0 if argv else 2)
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("tinytorch.compat: -m needs a module name")
        sys.argv = [argv[1]] + argv[2:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    if not os.path.exists(script):
        raise SystemExit(f"tinytorch.compat: can't open file '{script}': No such file or directory")
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` does
    runpy.run_path(os.path.abspath(script), run_name="__main__")  # __file__ absolute, as `python SCRIPT` gives


if __name__ == "__main__":
    main()
