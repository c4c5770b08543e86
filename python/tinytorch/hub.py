"""torch.hub's download side: load_state_dict_from_url and download_url_to_file, which model files call for
pretrained weights. Files are cached under get_dir()/checkpoints ($TORCH_HOME/hub, default ~/.cache/torch/hub),
downloaded to a temporary file and renamed, and checked against the hash prefix in the file name when asked.
Loading code from a GitHub repository (hub.load, hub.list) is not supported: it runs the repository's hubconf.py,
written for PyTorch's own modules."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import urllib.request
from typing import Any, Dict, Optional
from urllib.parse import urlparse

__all__ = ["download_url_to_file", "get_dir", "load_state_dict_from_url", "set_dir", "load", "list", "help"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
_hub_dir: list = [None]


def get_dir() -> str:
    """Where hub caches downloads: set_dir's, else $TORCH_HOME/hub, else $XDG_CACHE_HOME/torch/hub."""
    if _hub_dir[0] is not None:
        return _hub_dir[0]
    home = os.getenv("TORCH_HOME") or os.path.join(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                   "torch")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d: str) -> None:
    _hub_dir[0] = os.path.expanduser(d)


def download_url_to_file(url: str, dst: str, hash_prefix: Optional[str] = None, progress: bool = True) -> None:
    """Download url to dst through a temporary file in dst's folder (renamed when complete and, with
    hash_prefix, when its SHA-256 starts with it)."""
    dst = os.path.expanduser(dst)
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".partial-", dir=folder)
    try:
        sha = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as src:
            while True:
                chunk = src.read(1 << 16)
                if not chunk:
                    break
                out.write(chunk)
                sha.update(chunk)
        if hash_prefix is not None and not sha.hexdigest().startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{sha.hexdigest()}")')
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_state_dict_from_url(url: str, model_dir: Optional[str] = None, map_location: Any = None,
                             progress: bool = True, check_hash: bool = False, file_name: Optional[str] = None,
                             weights_only: bool = False) -> Dict[str, Any]:
    """torch.load of the file at url, downloaded once into model_dir (default get_dir()/checkpoints)."""
    from .serialization import load as _load
    model_dir = os.path.join(get_dir(), "checkpoints") if model_dir is None else model_dir
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        match = HASH_REGEX.search(filename) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress=progress)
    return _load(cached, map_location=map_location, weights_only=weights_only)


def _no_code(name: str):
    def f(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"torch.hub.{name}: loading models from a repository's hubconf.py is not "
                                  f"supported by tinytorch (the code is written for PyTorch); download the weights "
                                  f"with torch.hub.load_state_dict_from_url and build the model in your script")
    f.__name__ = name
    return f


load, list, help = _no_code("load"), _no_code("list"), _no_code("help")  # noqa: A001
