"""Launcher test worker: record its pid (and a child's pid), then sleep until signalled.

With "trap" as the second argument it exits with status 7 on SIGTERM or SIGINT (a graceful shutdown).
"""
import os
import signal
import subprocess
import sys
import time

out_dir = sys.argv[1]
if sys.argv[2:] == ["trap"]:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: os._exit(7))
rank = os.environ["RANK"]
# A grandchild in the worker's process group: it must die with the group too.
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
tmp = os.path.join(out_dir, f".pids_{rank}")
with open(tmp, "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(tmp, os.path.join(out_dir, f"pids_{rank}"))
time.sleep(60)
