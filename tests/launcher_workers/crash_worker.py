"""Launcher test worker: rank CRASH_RANK raises on the first attempt ("once") or on every attempt ("always").

Usage: crash_worker.py once|always CRASH_RANK OUT_DIR [allreduce]. With "allreduce", the surviving ranks
all_reduce their rank + 1 over the ring backend and write the sum.
"""
import os
import sys

from tinytorch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    mode, crash_rank, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if rank == crash_rank and (mode == "always" or attempt == 0):
        raise ValueError(f"boom on rank {rank} attempt {attempt}")
    result = os.environ["TORCHELASTIC_RESTART_COUNT"]
    if sys.argv[4:] == ["allreduce"]:
        import numpy as np

        import tinytorch.distributed as dist

        dist.init_process_group("ring", init_method="env://", timeout=60)
        x = np.array([rank + 1], dtype=np.int64)
        dist.all_reduce(x)
        dist.destroy_process_group()
        result += f" {int(x[0])}"
    with open(os.path.join(out_dir, f"ok_rank_{rank}_attempt_{attempt}"), "w") as f:
        f.write(result)


if __name__ == "__main__":
    main()
