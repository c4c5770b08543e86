"""Launcher test worker: rank STOP_RANK stops (sleeps) before its STOP_AT-th all-reduce; the others time out.

Usage: hang_worker.py STOP_RANK STOP_AT TIMEOUT_S. With the flight recorder on (the default), every rank leaves
a dump at TORCH_FR_DUMP_TEMP_FILE<rank>.
"""
import os
import sys
import time

import numpy as np

import tinytorch.distributed as dist


def main() -> None:
    stop_rank, stop_at, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    dist.init_process_group("ring", init_method="env://", timeout=timeout)
    x = np.ones((3, 4), np.float32)
    for i in range(1, stop_at + 2):
        if i == stop_at and dist.get_rank() == stop_rank:
            time.sleep(10 * timeout)  # stuck in its own compute or I/O; the launcher stops it
        dist.all_reduce(x)
    dist.destroy_process_group()
    print(f"rank {os.environ['RANK']} finished", flush=True)


if __name__ == "__main__":
    main()
