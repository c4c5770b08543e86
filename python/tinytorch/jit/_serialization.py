"""torch.jit.save / torch.jit.load for tinytorch's eager script modules.

The archive is a tinytorch.save checkpoint (PyTorch's zip layout) whose pickle holds the scripted module itself,
with any `_extra_files` beside it. It is not a TorchScript archive: PyTorch's torch.jit.load cannot read it (there is
no TorchScript code in it), and tinytorch cannot read TorchScript archives written by PyTorch (they hold compiled
TorchScript, not Python objects); load tells the latter apart and says so. Loading unpickles Python classes, so load
only files from a trusted source, as with torch.load(weights_only=False).
"""
from __future__ import annotations

import os
import warnings
import zipfile
from typing import Any, BinaryIO, Dict, Optional, Union

from ._script import ScriptFunction, ScriptModule

__all__ = ["load", "save"]

_MARKER = "tinytorch.jit archive"
_FileLike = Union[str, os.PathLike, BinaryIO]


def save(m: Any, f: _FileLike, _extra_files: Optional[Dict[str, Any]] = None) -> None:
    """Write the scripted or traced module (or ScriptFunction) `m` to the path or file `f`."""
    warnings.warn("`torch.jit.save` is deprecated. Please switch to `torch.export`.", DeprecationWarning,
                  stacklevel=1)
    if not isinstance(m, (ScriptModule, ScriptFunction)):
        raise AttributeError(f"'{type(m).__name__}' object has no attribute 'save': torch.jit.save expects a "
                             "ScriptModule or ScriptFunction (use torch.jit.script or torch.jit.trace first)")
    from ..serialization import save as _save
    extra = {name: content if isinstance(content, bytes) else str(content).encode("utf-8")
             for name, content in (_extra_files or {}).items()}
    _save({_MARKER: 1, "module": m, "extra_files": extra}, f)


def _is_torchscript_archive(f: _FileLike) -> bool:
    """True for a zip written by PyTorch's torch.jit.save (it has constants.pkl and TorchScript code)."""
    try:
        if isinstance(f, (str, os.PathLike)):
            with zipfile.ZipFile(f) as z:
                names = z.namelist()
        else:
            start = f.tell()
            try:
                with zipfile.ZipFile(f) as z:
                    names = z.namelist()
            finally:
                f.seek(start)
    except (zipfile.BadZipFile, OSError):
        return False
    return any(n.endswith("/constants.pkl") for n in names)


def load(f: _FileLike, map_location: Any = None, _extra_files: Optional[Dict[str, Any]] = None,
         _restore_shapes: bool = False) -> Any:
    """Read a module written by torch.jit.save (tinytorch's); map_location moves its tensors as in torch.load, and
    the values of `_extra_files` are replaced by the saved contents (bytes) of the files it names."""
    warnings.warn("`torch.jit.load` is deprecated. Please switch to `torch.export`.", DeprecationWarning,
                  stacklevel=1)
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
        raise ValueError(f"The provided filename {os.fspath(f)} does not exist")
    if isinstance(f, (str, os.PathLike)) and os.path.isdir(f):
        raise ValueError(f"The provided filename {os.fspath(f)} is a directory")
    if _is_torchscript_archive(f):
        raise RuntimeError("this file is a TorchScript archive written by PyTorch's torch.jit.save; tinytorch has "
                           "no TorchScript runtime and cannot read it: load the model's state_dict into its Python "
                           "class instead")
    from ..serialization import load as _load
    obj = _load(f, map_location=map_location, weights_only=False)
    if not (isinstance(obj, dict) and obj.get(_MARKER) == 1):
        raise RuntimeError("this file was not written by torch.jit.save (it holds no scripted module): read it with "
                           "torch.load")
    if _extra_files is not None:
        for name in _extra_files:
            if name in obj["extra_files"]:
                _extra_files[name] = obj["extra_files"][name]
    return obj["module"]
