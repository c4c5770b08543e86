"""Launcher test worker: dump the launcher environment to <out_dir>/rank_<RANK>.json.

With "allreduce" as an argument it also joins the job's process group through env:// (the agent's
store) and records the all_reduce of (rank + 1) * [1, 2, 3].
"""
import json
import os
import sys

KEYS = ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
        "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
        "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS"]

out_dir = sys.argv[1]
record = {k: os.environ.get(k) for k in KEYS}
record["argv"] = sys.argv[2:]
if "allreduce" in sys.argv[2:]:
    import tinytorch
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method="env://", timeout=60)
    x = tinytorch.tensor([1.0, 2.0, 3.0]) * (int(os.environ["RANK"]) + 1)
    dist.all_reduce(x)
    record["allreduce"] = x.tolist()
    dist.destroy_process_group()
print(f"hello from rank {os.environ['RANK']}")
print(f"stderr of rank {os.environ['RANK']}", file=sys.stderr)
with open(os.path.join(out_dir, f"rank_{os.environ['RANK']}.json"), "w") as f:
    json.dump(record, f)
