"""A rank as ``srun`` starts it (SLURM_* only, no RANK/WORLD_SIZE): join env://, all_reduce, dump the result."""
import json
import os
import sys

import tinytorch
import tinytorch.distributed as dist

out_dir = sys.argv[1]
assert "RANK" not in os.environ and "WORLD_SIZE" not in os.environ, "the test must not set RANK/WORLD_SIZE"
dist.init_process_group("ring", init_method="env://", timeout=60)
rank = dist.get_rank()
x = tinytorch.tensor([1.0, 2.0, 3.0]) * (rank + 1)
dist.all_reduce(x)
record = {"rank": rank, "world_size": dist.get_world_size(), "allreduce": x.tolist(),
          "env": {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}}
dist.destroy_process_group()
with open(os.path.join(out_dir, f"rank_{rank}.json"), "w") as f:
    json.dump(record, f)
