"""What the benchmark scripts share: timing a call by its median, and writing a result as JSON (the writer
is tinytorch.bench's, so every benchmark and tinytorch-bench write JSON alike)."""
import statistics
import time
from typing import Callable

from tinytorch.bench._common import write_json  # noqa: F401 - re-exported for the scripts


def median_ms(fn: Callable[[], object], reps: int) -> float:
    """Median wall time of fn() over reps calls after one warm-up call, in ms."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def libraries(threads: int) -> dict:
    """{'tinytorch': module, 'torch': module (when importable)}, each set to `threads` intra-op threads."""
    import tinytorch
    libs = {"tinytorch": tinytorch}
    try:
        import torch
        libs["torch"] = torch
    except ImportError:
        pass
    for lib in libs.values():
        lib.set_num_threads(threads)
    return libs
