"""The flight-recorder analyzer, PyTorch's `fr_trace` command line:

    python -m tinytorch.distributed.flight_recorder.fr_trace DIR -p PREFIX     (or: tinytorch-fr-trace ...)

reads one dump per rank (<PREFIX><rank>, tinytorch's or PyTorch's) and reports, on stderr as PyTorch does, the
ranks that never joined a collective (with its sequence number, op and group), ranks that called different
collectives or sizes at one sequence number, unmatched sends/receives, and which ranks are stuck in which state.
`-j` prints the entries side by side instead.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Dict, List, Optional, Sequence

from .analysis import Op, analyze, arrange
from .loader import TraceError, read_dir

__all__ = ["main"]

logger = logging.getLogger("tinytorch.flight_recorder")


def build_parser() -> argparse.ArgumentParser:
    """PyTorch's flags (those that mean something without torchft)."""
    p = argparse.ArgumentParser(prog="tinytorch-fr-trace", description=(
        "Analyze flight-recorder dumps (TORCH_FR_DUMP_TEMP_FILE<rank>): who did not join which collective, "
        "mismatched collectives or sizes, who is stuck where."))
    p.add_argument("trace_dir", help="Directory containing one trace file per rank, named with <prefix><rank>.")
    p.add_argument("-p", "--prefix", help=("Common filename prefix to strip such that rank can be extracted. "
                                           "If not specified, will attempt to infer a common prefix."))
    p.add_argument("-j", "--just_print_entries", action="store_true",
                   help="Print every rank's entries side by side instead of analyzing them.")
    p.add_argument("--selected-ranks", default=None, nargs="+", type=int,
                   help="List of ranks we want to show traces for (with -j).")
    p.add_argument("--pg-filters", default=None, nargs="+",
                   help="List of process group names or descriptions whose entries we want to show (with -j).")
    p.add_argument("--allow-incomplete-ranks", action="store_true",
                   help="Analyze even when some ranks of a group left no dump.")
    p.add_argument("-v", "--verbose", action="store_true", help="Show every field of each entry (with -j).")
    p.add_argument("--print_stack_trace", action="store_true",
                   help="With -j, number each distinct Python stack and print the stacks.")
    p.add_argument("--mismatch_cap", type=int, default=10,
                   help="Stop reporting a group's mismatches after this many (default 10).")
    return p


def _table(headers: List[str], rows: List[List[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def print_entries(dumps: Dict[int, Dict[str, Any]], args: argparse.Namespace) -> None:
    """One column per rank, one row per entry (in record order), as PyTorch's -j prints them."""
    trace = arrange(dumps)
    group_of = {(g.name, r): g for (g, r) in trace.ops}
    ranks = [r for r in sorted(dumps) if args.selected_ranks is None or r in args.selected_ranks]
    stacks: Dict[str, int] = {}
    columns = []
    for r in ranks:
        cells = []
        for e in dumps[r].get("entries", []):
            name, desc = (str(x) for x in e["process_group"])
            if args.pg_filters is not None and name not in args.pg_filters and desc not in args.pg_filters:
                cells.append("")
                continue
            cell = Op(e, group_of[(name, r)]).describe(args.verbose)
            if args.print_stack_trace:
                frames = "\n".join(f"{f.get('name')} at {f.get('filename')}:{f.get('line')}"
                                   for f in e.get("frames", []))
                cell = cell[:-1] + f", stack_id={stacks.setdefault(frames, len(stacks))})"
            cells.append(cell)
        columns.append(cells)
    depth = max((len(c) for c in columns), default=0)
    rows = [[c[i] if i < len(c) else "" for c in columns] for i in range(depth)]
    logger.info(_table([f"Rank {r}" for r in ranks], rows))
    if args.print_stack_trace and stacks:
        logger.info(_table(["stack_id", "frame_stack"],
                           [[str(i), f.replace("\n", " <- ")] for f, i in sorted(stacks.items(), key=lambda x: x[1])]))


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Entry point of `tinytorch-fr-trace` and `python -m tinytorch.distributed.flight_recorder.fr_trace`."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.selected_ranks is not None and not args.just_print_entries:
        parser.error("Not support selecting ranks without printing entries (add -j)")
    if args.pg_filters is not None and not args.just_print_entries:
        parser.error("Not support selecting pg filters without printing entries (add -j)")
    if args.mismatch_cap < 1:
        parser.error(f"--mismatch_cap must be at least 1, got {args.mismatch_cap}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        dumps, _ = read_dir(args.trace_dir, args.prefix)
        if args.just_print_entries:
            print_entries(dumps, args)
            return
        findings = analyze(dumps, args.allow_incomplete_ranks, args.mismatch_cap)
        for f in findings:
            logger.info("\n".join(f.lines))
        if not any(f.kind in ("missing_ranks", "mismatch", "p2p", "undecided") for f in findings):
            logger.info(f"No errors found: every collective was joined by every rank of its group, with matching "
                        f"ops and sizes ({len(dumps)} ranks).")
    except TraceError as e:
        parser.exit(1, f"{parser.prog}: error: {e}\n")
    finally:
        logger.removeHandler(handler)

if __name__ == "__main__":
    main()
