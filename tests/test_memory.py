"""tinytorch keeps freed large arrays in the process (glibc mallopt), so a training loop does not
page-fault its arrays in again every step; TINYTORCH_KEEP_FREED_MEMORY=0 turns it off."""
import os
import platform
import subprocess
import sys

import pytest

PROBE = """
import resource, numpy as np, tinytorch
def faults_of_a_64mb_array():
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.ones(16 << 20, np.float32)  # 64 MiB, every page touched
    del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
faults_of_a_64mb_array()
print(faults_of_a_64mb_array())
"""


def _second_allocation_faults(keep: str) -> int:
    env = dict(os.environ, TINYTORCH_KEEP_FREED_MEMORY=keep)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the policy is set through glibc's mallopt")
def test_freed_arrays_are_reused_without_page_faults():
    kept, fresh = _second_allocation_faults("1"), _second_allocation_faults("0")
    assert kept <= 8, kept      # the freed block is reused in place
    # glibc's default: a fresh mapping, faulted in again (at least one fault per 2 MiB huge page)
    assert fresh >= (64 << 20) // (2 << 20), fresh


HUGE_PAGE_PROBE = """
import tinytorch
try:
    from numpy._core import multiarray
except ImportError:
    from numpy.core import multiarray
print(multiarray._set_madvise_hugepage(True))  # returns the setting tinytorch left
"""


@pytest.mark.parametrize("thp, numpy_asks", [(None, "False"), ("1", "True")])
def test_numpy_asks_for_huge_pages_only_when_torch_would(thp, numpy_asks):
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if thp is not None:
        env["THP_MEM_ALLOC_ENABLE"] = thp
    out = subprocess.run([sys.executable, "-c", HUGE_PAGE_PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == numpy_asks
