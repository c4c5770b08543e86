"""argparse `type=` functions every tinytorch-bench subcommand shares, so bad input stops at the command line
with argparse's own message (exit 2, the usage line, "argument --world: expected a positive integer, got '0'")
instead of rows of nonsense or a traceback. A new subcommand uses them the same way:

    p.add_argument("--trials", type=positive_int, default=10)
    p.add_argument("--max-bytes", type=byte_size, default="256M")

Flag combinations (checked after parsing) go through `usage_error(args, message)`, which prints the same way.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable, List, NoReturn, Sequence

from ._common import parse_size


def _number(text: str, cast: Callable[[str], Any], ok: Callable[[Any], bool], expected: str) -> Any:
    try:
        value = cast(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def _float(text: str) -> float:
    x = float(text)
    if x != x or x in (float("inf"), float("-inf")):  # NaN and infinities are no count or size
        raise ValueError(text)
    return x


def positive_int(text: str) -> int:
    """An integer >= 1 (a rank count, a size in elements, a number of steps)."""
    return _number(text, int, lambda v: v >= 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (warm-up steps, restarts)."""
    return _number(text, int, lambda v: v >= 0, "a non-negative integer")


def int_at_least(lo: int) -> Callable[[str], int]:
    """A type for integers >= lo (e.g. a step factor of at least 2)."""
    def parse(text: str) -> int:
        return _number(text, int, lambda v: v >= lo, f"an integer >= {lo}")

    parse.__name__ = f"int_at_least_{lo}"
    return parse


def positive_float(text: str) -> float:
    """A finite number > 0 (a parameter count such as 7.5e9, seconds, megabytes)."""
    return _number(text, _float, lambda v: v > 0, "a positive number")


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (a timeout that may be zero)."""
    return _number(text, _float, lambda v: v >= 0, "a non-negative number")


def byte_size(text: str) -> int:
    """A positive size in bytes: 4096, 64K, 256M, 1G (nccl-tests' -b/-e syntax, binary units)."""
    try:
        n = parse_size(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a size in bytes such as 4096, 64K, 256M or 1G, got {text!r}")
    return n


def list_of(item: Callable[[str], Any], what: str) -> Callable[[str], List[Any]]:
    """A type for comma-separated lists ('8,64,512') whose items each pass `item`; `what` names the items
    ('positive integers') in the message."""
    def parse(text: str) -> List[Any]:
        parts = [x.strip() for x in str(text).split(",")]
        if not any(parts):
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}, got {text!r}")
        out = []
        for x in parts:
            try:
                out.append(item(x))
            except argparse.ArgumentTypeError:
                where = f" in {text!r}" if len(parts) > 1 else ""
                raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}, got {x!r}{where}") \
                    from None
        return out

    parse.__name__ = f"list of {what}"
    return parse


def choice_list(choices: Sequence[str], everything: str = "") -> Callable[[str], List[str]]:
    """A type for comma-separated choices ('ddp,zero3'); `everything` (e.g. 'all') stands for all of them."""
    def parse(text: str) -> List[str]:
        if everything and str(text).strip() == everything:
            return list(choices)
        items = [x.strip() for x in str(text).split(",") if x.strip()]
        bad = [x for x in items if x not in choices]
        if bad or not items:
            extra = f" or {everything!r}" if everything else ""
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(choices)}{extra}, "
                                             f"got {text!r}")
        return items

    parse.__name__ = "choice list"
    return parse


def existing_file(text: str) -> str:
    """The path of a file that exists (an input such as a trace or a collectives sweep)."""
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"expected an existing file, got {text!r}")
    return text


def usage_error(args: argparse.Namespace, message: str) -> NoReturn:
    """Report a bad combination of flags as argparse reports a bad flag: the subcommand's usage line, the
    message, exit status 2 (tinytorch.bench.build_parser puts each subparser on its namespace)."""
    args._parser.error(message)
