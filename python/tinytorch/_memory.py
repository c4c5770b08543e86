"""Host memory policy: keep freed blocks of large arrays in the process instead of giving them back to the
kernel, so the next step's arrays of the same sizes reuse them.

A training step allocates and frees the same large activation and gradient arrays every iteration. glibc
serves arrays above its mmap threshold with fresh mmap()s and trims the heap top on free, so each step
page-faults its arrays in again. Raising the mmap threshold and the trim threshold keeps those blocks
(PyTorch's CUDA caching allocator does the same for device memory). The cost: the process keeps its peak
heap. TINYTORCH_KEEP_FREED_MEMORY=0 turns it off.

NumPy asks for transparent huge pages on every array of 4 MiB or more (madvise MADV_HUGEPAGE); where the
kernel defragments memory on such faults (THP defrag "madvise", a common default) a fresh array can stall
for milliseconds. PyTorch's CPU allocator asks for huge pages only when THP_MEM_ALLOC_ENABLE=1, and
tinytorch follows it: NumPy's request is turned off unless that variable is set.

Together, on the 2-core CI machine: W3 at 1 thread 449-461 ms a step, against 488-528 ms with
TINYTORCH_KEEP_FREED_MEMORY=0 THP_MEM_ALLOC_ENABLE=1 (benchmarks/train_step.py --threads 1; docs/benchmarks.md).
"""
from __future__ import annotations

import ctypes
import os
import platform

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 20   # larger arrays still get their own mapping
TRIM_THRESHOLD = 1 << 30     # free memory at the heap top kept before trimming


def follow_torch_huge_page_policy() -> bool:
    """Turn NumPy's huge-page requests off unless THP_MEM_ALLOC_ENABLE=1. Returns whether NumPy still asks."""
    want = os.environ.get("THP_MEM_ALLOC_ENABLE") == "1"
    try:
        from numpy._core import multiarray
    except ImportError:  # NumPy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        return True
    setter(want)
    return want


def keep_freed_memory() -> bool:
    """Apply the policy (glibc only; TINYTORCH_KEEP_FREED_MEMORY=0 opts out). Returns whether it was applied."""
    if os.environ.get("TINYTORCH_KEEP_FREED_MEMORY", "1") == "0" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
            bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False
