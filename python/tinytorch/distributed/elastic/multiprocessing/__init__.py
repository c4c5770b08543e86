"""Worker processes of an elastic agent: start, log capture, stop, and error files."""
from .api import Std, WorkerProcess, parse_std, start_worker_process, stop_processes

__all__ = ["Std", "WorkerProcess", "parse_std", "start_worker_process", "stop_processes"]
