"""Launcher test worker: rank CRASH_RANK raises on the first attempt ("once") or on every attempt ("always")."""
import os
import sys

from tinytorch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    mode, crash_rank, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if rank == crash_rank and (mode == "always" or attempt == 0):
        raise ValueError(f"boom on rank {rank} attempt {attempt}")
    with open(os.path.join(out_dir, f"ok_rank_{rank}_attempt_{attempt}"), "w") as f:
        f.write(os.environ["TORCHELASTIC_RESTART_COUNT"])


if __name__ == "__main__":
    main()
