"""torch.nn.modules.utils: the helpers custom layers import to take an int or a tuple (_pair(3) == (3, 3))."""
from __future__ import annotations

import collections.abc
from itertools import repeat
from typing import Any, Callable, List

__all__ = ["_single", "_pair", "_triple", "_quadruple", "_ntuple", "_reverse_repeat_tuple", "_list_with_default",
           "consume_prefix_in_state_dict_if_present"]


def _ntuple(n: int, name: str = "parse") -> Callable[[Any], tuple]:
    """A parser giving an iterable as a tuple and repeating anything else n times."""
    def parse(x: Any) -> tuple:
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """Each element of t, reversed, repeated n times: F.pad's order from a conv's padding."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size: List, defaults: List) -> List:
    """out_size with its None entries taken from the trailing dims of defaults (adaptive pooling)."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]


def consume_prefix_in_state_dict_if_present(state_dict: dict, prefix: str) -> None:
    """Strip `prefix` from the keys that have it, in place (a DataParallel/DDP checkpoint's 'module.'), and from
    the state dict's _metadata keys, as PyTorch does."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in [k for k in metadata if k == prefix.rstrip(".") or k.startswith(prefix)]:
            new = "" if key == prefix.rstrip(".") else key[len(prefix):]
            metadata[new] = metadata.pop(key)
