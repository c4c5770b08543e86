"""tinytorch-bench: collective sweeps (nccl-tests' table), DDP/ZeRO training benchmarks, a scale simulator
and its validation on measured runs, seeded fault trials of the launcher and checkpoints.

    tinytorch-bench collectives --nproc 2 --op all_reduce --min-bytes 1M --max-bytes 16M --json sweep.json
    tinytorch-bench train --nproc 2 --model W3 --strategy ddp
    tinytorch-bench simulate --params 7.5e9 --world 64 --strategy ddp,zero1,zero2,zero3
    tinytorch-bench validate --json validate.json
    tinytorch-bench chaos --trials 50 --seed 0 --json chaos.json

Also `python -m tinytorch.bench ...`; under `tinytorch-run ... -m tinytorch.bench collectives` every launched
rank takes part and rank 0 prints. See docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, List, Optional

SUBCOMMANDS = ("collectives", "train", "simulate", "validate", "chaos")


def build_parser() -> argparse.ArgumentParser:
    """The tinytorch-bench parser with one subparser per subcommand (each module adds its own flags)."""
    import importlib

    p = argparse.ArgumentParser(prog="tinytorch-bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        mod = importlib.import_module(f"{__name__}.{name}")
        sp = sub.add_parser(name, help=mod.__doc__.strip().splitlines()[0], description=mod.__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(sp)
        sp.set_defaults(_main=mod.main, _parser=sp)  # _parser: flag-combination errors print as argparse's
    return p


def main(argv: Optional[List[str]] = None) -> Any:
    """Entry point of the tinytorch-bench console script and of `python -m tinytorch.bench`."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    return args._main(args)


def cli() -> int:
    """The console script's entry: run, then exit 0 (main's return value is for programmatic callers)."""
    main()
    return 0
