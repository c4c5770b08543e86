"""Launcher test worker: dump the launcher environment to <out_dir>/rank_<RANK>.json; optionally all_reduce."""
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
print(f"hello from rank {os.environ['RANK']}")
print(f"stderr of rank {os.environ['RANK']}", file=sys.stderr)
with open(os.path.join(out_dir, f"rank_{os.environ['RANK']}.json"), "w") as f:
    json.dump(record, f)
