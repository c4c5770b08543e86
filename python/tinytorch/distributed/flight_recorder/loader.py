"""Read a directory of flight-recorder dumps (one pickle per rank, named <prefix><rank>), tinytorch's or PyTorch's."""
from __future__ import annotations

import os
import pickle
import re
from typing import Any, Dict, List, Optional, Tuple

_RANK_SUFFIX = re.compile(r"([\w\-]*?)(\d+)$")


class TraceError(ValueError):
    """The dumps cannot be analyzed as given (no files, unreadable, different versions, ...)."""


def infer_prefix(names: List[str]) -> str:
    """The common prefix of names of the form <prefix><rank> (PyTorch's rule: it must be the same for every file)."""
    prefixes = {m.group(1) for m in (_RANK_SUFFIX.match(n) for n in names) if m}
    if len(prefixes) != 1:
        raise TraceError("Unable to automatically determine the common prefix for the trace file names. "
                         f"Please specify --prefix argument manually (candidates: {sorted(prefixes)})")
    return prefixes.pop()


def _version_tuple(v: Any, path: str) -> Tuple[int, int]:
    parts = str(v).split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise TraceError(f"{path}: version {v!r} is not of the form 'major.minor'")
    return int(parts[0]), int(parts[1])


def read_dir(trace_dir: str, prefix: Optional[str] = None) -> Tuple[Dict[int, Dict[str, Any]], str]:
    """{rank: dump} for every file <prefix><rank> in trace_dir (a name whose suffix is not a number, such as a
    dump still being written, is skipped), and the dumps' common version string."""
    if not os.path.isdir(trace_dir):
        raise TraceError(f"trace directory {trace_dir!r} does not exist or is not a directory")
    names = sorted(n for n in os.listdir(trace_dir) if os.path.isfile(os.path.join(trace_dir, n)))
    if prefix is None:
        prefix = infer_prefix(names)
    dumps: Dict[int, Dict[str, Any]] = {}
    for name in names:
        if not name.startswith(prefix) or not name[len(prefix):].isdigit():
            continue
        path = os.path.join(trace_dir, name)
        try:
            with open(path, "rb") as f:
                d = pickle.load(f)
        except Exception as e:  # noqa: BLE001 - any unreadable file is reported by name
            raise TraceError(f"{path}: not a flight-recorder dump ({type(e).__name__}: {e})") from None
        if not isinstance(d, dict) or "version" not in d:
            raise TraceError(f"{path}: not a flight-recorder dump (expected a dict with a 'version' key)")
        d.setdefault("entries", [])
        d.setdefault("pg_config", {})
        dumps[int(name[len(prefix):])] = d
    if not dumps:
        raise TraceError(f"no files loaded from {trace_dir} with prefix {prefix}")
    versions = {r: str(d["version"]) for r, d in dumps.items()}
    first_rank = min(versions)
    version = versions[first_rank]
    _version_tuple(version, os.path.join(trace_dir, f"{prefix}{first_rank}"))
    for r, v in versions.items():
        if v != version:
            raise TraceError(f"Rank {r} has different version {v} from the given version {version}")
    return dumps, version
