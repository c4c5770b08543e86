"""torch.multiprocessing: Python's multiprocessing, with tensors crossing processes through shared memory.

Everything of the standard module is re-exported (Process, Queue, Pool, get_context, ...), so changing
``import multiprocessing`` to ``import torch.multiprocessing`` is enough. A tensor in shared memory
(share_memory_()) that is put on a queue, sent over a pipe or passed to a spawned process arrives as the
same memory (see reductions), so an in-place update in one process (Hogwild-style training) is seen by all;
other tensors arrive as copies. spawn() and start_processes() run a function in several processes and
raise the first one's failure.
"""
from __future__ import annotations

import multiprocessing
import sys
from multiprocessing import *  # noqa: F401,F403 - the API is the standard module's
from typing import Set

from .reductions import init_reductions
from .spawn import (ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException,  # noqa: F401
                    SpawnContext, spawn, start_processes)

__all__ = ["set_sharing_strategy", "get_sharing_strategy", "get_all_sharing_strategies"]
__all__ += multiprocessing.__all__

if sys.platform in ("darwin", "win32"):
    _sharing_strategy = "file_system"
    _all_sharing_strategies = {"file_system"}
else:
    _sharing_strategy = "file_descriptor"
    _all_sharing_strategies = {"file_descriptor", "file_system"}


def set_sharing_strategy(new_strategy: str) -> None:
    """Choose how received CPU tensors hold their shared memory: 'file_descriptor' keeps a descriptor per
    block (so the tensor can be sent on without a copy), 'file_system' keeps none (for processes that
    receive more tensors than they may open descriptors)."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(f"invalid sharing strategy {new_strategy!r}, expected one of {_all_sharing_strategies}")
    _sharing_strategy = new_strategy


def get_sharing_strategy() -> str:
    """The current strategy for sharing CPU tensors."""
    return _sharing_strategy


def get_all_sharing_strategies() -> Set[str]:
    """The sharing strategies this system supports."""
    return _all_sharing_strategies


init_reductions()
