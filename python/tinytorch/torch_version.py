"""torch.torch_version.TorchVersion: torch.__version__ is a str that compares as a version, with strings
("2.0", "1.13.1") and tuples ((2, 0)), so that `torch.__version__ >= "1.10"` is not a comparison of characters."""
from __future__ import annotations

import re
from typing import Any

__all__ = ["TorchVersion"]

_PRE = {"a": -3, "b": -2, "rc": -1}


def _key(v: Any) -> tuple:
    """A version as (release numbers padded to 3, pre-release rank): '2.13.0+cpu' -> ((2, 13, 0), 0); a
    pre-release sorts before its release ('2.0.0a0' < '2.0.0'); the local label (+cpu) is ignored."""
    if isinstance(v, (tuple, list)):
        nums = tuple(int(x) for x in v)
        return nums + (0,) * (3 - len(nums)), (0,)
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|rc)(\d*))?(?:\.?dev(\d*))?", str(v))
    if m is None:
        raise ValueError(f"Invalid version: '{v}'")
    nums = tuple(int(x) for x in m.group(1).split("."))
    pre = (_PRE[m.group(2)], int(m.group(3) or 0)) if m.group(2) else (-4,) if m.group(4) is not None else (0,)
    return nums + (0,) * (3 - len(nums)), pre


class TorchVersion(str):
    """A version string comparable with version strings and tuples."""

    def _cmp(self, other: Any, op) -> bool:
        try:
            return op(_key(self), _key(other))
        except (ValueError, TypeError):
            return NotImplemented

    def __lt__(self, other: Any) -> bool:
        return self._cmp(other, lambda a, b: a < b)

    def __le__(self, other: Any) -> bool:
        return self._cmp(other, lambda a, b: a <= b)

    def __gt__(self, other: Any) -> bool:
        return self._cmp(other, lambda a, b: a > b)

    def __ge__(self, other: Any) -> bool:
        return self._cmp(other, lambda a, b: a >= b)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str) and str.__eq__(self, other):
            return True
        return self._cmp(other, lambda a, b: a == b)

    __hash__ = str.__hash__
