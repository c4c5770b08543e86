"""What the benchmark scripts share: timing a call by its median, and writing a result as JSON."""
import json
import os
import statistics
import time
from typing import Any, Callable


def median_ms(fn: Callable[[], object], reps: int) -> float:
    """Median wall time of fn() over reps calls after one warm-up call, in ms."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def write_json(path: str, results: Any) -> None:
    """Write results to path (creating its folder) and say where."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {path}")
