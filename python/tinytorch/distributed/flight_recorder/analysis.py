"""Match the ranks' flight-recorder entries by process group and sequence number, and say what went wrong: ranks that
never joined a collective, ranks that called different collectives, sizes or dtypes at one sequence number, sends
without their receive, and which ranks are stuck in which state."""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .loader import TraceError

P2P = {"send", "recv"}
# Ops whose input (output) sizes may differ between ranks; PyTorch's matcher makes the same exceptions.
_UNEVEN_INPUT = {"all_to_all", "all_to_all_single", "all_to_all_v_single", "scatter"}
_UNEVEN_OUTPUT = {"all_to_all", "all_to_all_single", "all_to_all_v_single", "gather"}
_GATHERS = {"all_gather", "_all_gather_base", "all_gather_into_tensor_coalesced"}
_SCATTERS = {"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced"}

COLLECTIVE_TYPE_MISMATCH = "COLLECTIVE_TYPE_MISMATCH"
SIZE_OR_SYNTAX_MISMATCH = "SIZE_OR_SYNTAX_MISMATCH"
COLLECTIVE_DTYPE_MISMATCH = "COLLECTIVE_DTYPE_MISMATCH"


@dataclass(frozen=True)
class Group:
    """A process group as the dumps' pg_config describe it (ranks are global ranks)."""

    name: str
    desc: str
    ranks: Tuple[int, ...]

    @property
    def label(self) -> str:
        """PyTorch's 'group info': name:desc (just the name when there is no description)."""
        return self.name if self.desc == "undefined" else f"{self.name}:{self.desc}"


class Op:
    """One entry, parsed: backend:type [meta], with a send's or recv's peers as global ranks."""

    def __init__(self, entry: Dict[str, Any], group: Group) -> None:
        self.entry = entry
        self.name = str(entry["profiling_name"])
        backend, sep, rest = self.name.partition(":")
        if not sep or not rest:
            raise TraceError(f"profiling_name {self.name!r} is not of the form 'backend:op'")
        self.backend = backend
        parts = rest.split(" ")
        self.type = parts[0]
        self.is_p2p = bool(entry.get("is_p2p", self.type in P2P))
        self.src = self.dst = -1
        if self.type in P2P and len(parts) == 2:
            arrow = "->" if self.type == "send" else "<-"
            a, b = (int(x) for x in parts[1].split(arrow))
            src, dst = (a, b) if self.type == "send" else (b, a)
            self.src, self.dst = _global(group, src), _global(group, dst)
        self.seq = int(entry["collective_seq_id"])
        self.state = str(entry["state"])
        self.input_sizes = entry.get("input_sizes", [])
        self.output_sizes = entry.get("output_sizes", [])
        self.input_dtypes = entry.get("input_dtypes", [])
        self.output_dtypes = entry.get("output_dtypes", [])

    def describe(self, verbose: bool = False) -> str:
        """PyTorch's cell text: type(s=S d=D, input_sizes=..., state=...)."""
        parts = [f"s={self.src} d={self.dst}"] if self.type in P2P else []
        parts.append(f"input_sizes={self.input_sizes}")
        if verbose:
            e = self.entry
            parts += [f"output_sizes={self.output_sizes}", f"input_dtypes={self.input_dtypes}",
                      f"output_dtypes={self.output_dtypes}", f"collective_seq_id={self.seq}",
                      f"p2p_seq_id={e.get('p2p_seq_id')}", f"record_id={e.get('record_id')}",
                      f"timestamp_created={e.get('time_created_ns')}", f"pg={e['process_group']}"]
        parts.append(f"state={self.state}")
        return f"{self.type}({', '.join(parts)})"

    def where(self) -> str:
        """`ring:all_reduce, sequence number 6` (a send/recv: its peers and p2p sequence number)."""
        if self.is_p2p:
            return f"{self.name}, p2p sequence number {self.entry.get('p2p_seq_id')}"
        return f"{self.name}, sequence number {self.seq}"


def _global(group: Group, group_rank: int) -> int:
    return group.ranks[group_rank] if 0 <= group_rank < len(group.ranks) else group_rank


def _parse_ranks(ranks: Any) -> Tuple[int, ...]:
    if isinstance(ranks, str):
        ranks = ast.literal_eval(ranks) if ranks.strip() else []
    return tuple(int(r) for r in ranks)


def _numel(sizes: Sequence[Sequence[int]]) -> int:
    return sum(math.prod(s) for s in sizes)


@dataclass
class Finding:
    """One thing the analyzer has to say, as the lines it prints."""

    kind: str  # "missing_ranks" | "mismatch" | "p2p" | "undecided" | "missing_dumps" | "state"
    group: Optional[Group]
    lines: List[str]
    seq: Optional[int] = None
    ranks: Set[int] = field(default_factory=set)  # the ranks it is about: missing, culprits, stuck
    error_type: Optional[str] = None


@dataclass
class Trace:
    """The dumps, arranged: each group's entries per rank, in record order."""

    dumps: Dict[int, Dict[str, Any]]
    groups: List[Group]
    ops: Dict[Tuple[Group, int], List[Op]]  # (group, rank) -> that rank's ops in the group

    def group_ops(self, g: Group, rank: int) -> List[Op]:
        return self.ops.get((g, rank), [])


def arrange(dumps: Dict[int, Dict[str, Any]]) -> Trace:
    """Sort every rank's entries into its groups (a group: the name and global ranks in pg_config)."""
    by_rank: Dict[int, Dict[str, Group]] = {}
    groups: Dict[Tuple[str, Tuple[int, ...]], Group] = {}
    for rank, d in dumps.items():
        named: Dict[str, Group] = {}
        for name, cfg in d.get("pg_config", {}).items():
            ranks = _parse_ranks(cfg.get("ranks", []))
            key = (str(name), ranks)
            if key not in groups:
                groups[key] = Group(str(name), str(cfg.get("desc", "undefined")), ranks)
            named[str(name)] = groups[key]
        by_rank[rank] = named
    ops: Dict[Tuple[Group, int], List[Op]] = {}
    for rank, d in dumps.items():
        for e in d.get("entries", []):
            pg_name, pg_desc = (str(x) for x in e["process_group"])
            g = by_rank[rank].get(pg_name)
            if g is None:  # not in this rank's pg_config: known only by name
                g = groups.setdefault((pg_name, ()), Group(pg_name, pg_desc, ()))
            ops.setdefault((g, rank), []).append(Op(e, g))
    used = {g for g, _ in ops}
    ordered = sorted((g for g in groups.values() if g in used or g.ranks),
                     key=lambda g: (int(g.name) if g.name.isdigit() else 1 << 30, g.name, g.ranks))
    return Trace(dumps, ordered, ops)


def _members(trace: Trace, g: Group) -> List[int]:
    """Ranks of `g` whose dumps we have (every rank that recorded an op in it, when pg_config lacks it)."""
    ranks = g.ranks or tuple(sorted(r for (gg, r) in trace.ops if gg == g))
    return [r for r in ranks if r in trace.dumps]


def _fmt_ranks(ranks: Sequence[int]) -> str:
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks {" + ", ".join(map(str, ranks)) + "}"


def _frames(op: Op) -> List[str]:
    return [f" {f.get('name')} at {f.get('filename')}:{f.get('line')}" for f in op.entry.get("frames", [])]


def _header(title: str, g: Group, op: Op) -> List[str]:
    return [title,
            f"internal record id: {op.entry.get('record_id')}",
            f"group info: {g.label}",
            f"collective: {op.name}"]


def _details(op: Op, expected: Sequence[int]) -> List[str]:
    return [f"input sizes: {op.input_sizes}",
            f"output sizes: {op.output_sizes}",
            f"world size: {len(expected)}",
            f"expected ranks: {set(expected)}",
            f"collective state: {op.state}"]


def _last_words(trace: Trace, g: Group, rank: int) -> str:
    """What a rank that never joined did last: its last op in the group, and its last op anywhere if elsewhere."""
    mine = [op for op in trace.group_ops(g, rank) if not op.is_p2p]
    text = (f"its last collective in this group is {mine[-1].where()} ({mine[-1].state})" if mine
            else "it recorded no collective in this group")
    entries = trace.dumps[rank].get("entries", [])
    if entries and (not mine or entries[-1] is not mine[-1].entry):
        last = entries[-1]
        text += (f"; its last recorded op is {last['profiling_name']} in group {last['process_group'][0]}, "
                 f"sequence number {last['collective_seq_id']} ({last['state']})")
    return text


def _signature(op: Op) -> Tuple[Any, ...]:
    return (op.type, repr(op.input_sizes), repr(op.output_sizes), repr(sorted(set(op.input_dtypes))),
            repr(sorted(set(op.output_dtypes))))


def _compare(expected: Op, found: Op, pg_size: int) -> Optional[Tuple[str, str]]:
    """(error type, message) when `found` does not match `expected` (PyTorch's matching rules), else None."""
    if expected.type != found.type:
        return COLLECTIVE_TYPE_MISMATCH, (f"Expected collective type: '{expected.type}' does not match found "
                                          f"collective type: '{found.type}'")
    if expected.type not in _UNEVEN_INPUT and expected.input_sizes != found.input_sizes:
        return SIZE_OR_SYNTAX_MISMATCH, (f"Expected input sizes: '{expected.input_sizes}' does not match found "
                                         f"input sizes: '{found.input_sizes}'")
    if expected.type not in _UNEVEN_OUTPUT and expected.output_sizes != found.output_sizes:
        return SIZE_OR_SYNTAX_MISMATCH, (f"Expected output sizes: '{expected.output_sizes}' does not match found "
                                         f"output sizes: '{found.output_sizes}'")
    if set(expected.input_dtypes) != set(found.input_dtypes) or set(expected.output_dtypes) != set(found.output_dtypes):
        return COLLECTIVE_DTYPE_MISMATCH, (f"Expected dtypes: '{set(expected.input_dtypes)}' does not match found "
                                           f"dtypes: '{set(found.input_dtypes)}/{set(found.output_dtypes)}'")
    return _syntax(found, pg_size)


def _syntax(op: Op, pg_size: int) -> Optional[Tuple[str, str]]:
    """An op that cannot be right on its own: an all-gather whose output is not input x group size, ..."""
    if op.type in _GATHERS and op.input_sizes and _numel(op.output_sizes) != _numel(op.input_sizes) * pg_size:
        return SIZE_OR_SYNTAX_MISMATCH, (f"Found input numel '{_numel(op.input_sizes)} * pg size {pg_size}' does "
                                         f"not match output numel '{_numel(op.output_sizes)}'")
    if op.type in _SCATTERS and op.output_sizes and _numel(op.input_sizes) != _numel(op.output_sizes) * pg_size:
        return SIZE_OR_SYNTAX_MISMATCH, (f"Found input numel '{_numel(op.input_sizes)}' does not match output "
                                         f"numel '{_numel(op.output_sizes)} * pg size {pg_size}'")
    return None


def _check_collectives(trace: Trace, g: Group, mismatch_cap: int) -> List[Finding]:
    members = _members(trace, g)
    expected_ranks = list(g.ranks) or members
    colls: Dict[int, Dict[int, Op]] = {}
    for r in members:
        colls[r] = {}
        for op in trace.group_ops(g, r):
            if not op.is_p2p:
                colls[r].setdefault(op.seq, op)  # a coalesced group's first op stands for it
    findings: List[Finding] = []
    mismatches = 0
    open_missing: Optional[Finding] = None
    no_dump = {r for r in g.ranks if r not in trace.dumps}
    undecided_told = False
    for seq in sorted(set().union(*(c.keys() for c in colls.values())) if colls else []):
        present = {r: c[seq] for r, c in colls.items() if seq in c}
        # A rank whose buffer wrapped past `seq` says nothing about it; one that never got there is missing.
        missing = {r for r, c in colls.items() if seq not in c and not (c and min(c) > seq)}
        ref = present[min(present)]
        if missing:
            if open_missing is not None and open_missing.ranks == missing:
                open_missing.lines.append(f"{_fmt_ranks(missing)} also missing from sequence number {seq} "
                                          f"({ref.name})")
            else:
                lines = _header(f"Not all ranks joining collective, sequence number: {seq}", g, ref)
                lines.append(f"missing ranks: {missing}")
                lines += _details(ref, expected_ranks)
                for r in sorted(missing):
                    lines.append(f"rank {r} never joined {ref.name} sequence number {seq} of group {g.label}: "
                                 f"{_last_words(trace, g, r)}")
                lines += ["collective stack trace: "] + _frames(ref)
                open_missing = Finding("missing_ranks", g, lines, seq, set(missing))
                findings.append(open_missing)
        else:
            open_missing = None
            if no_dump and not undecided_told and any(op.state != "completed" for op in present.values()):
                # Everyone we can see joined and it did not finish: the ranks we cannot see are the suspects.
                undecided_told = True
                lines = _header(f"Collective sequence number: {seq} did not complete", g, ref) + [
                    f"We cannot decide what's wrong with this collective entry because we missed FR dumps from "
                    f"ranks ({no_dump}) so we don't have enough information. If you want to debug further use -j "
                    "to dump all raw trace",
                    f"every rank that left a dump issued it ({_fmt_ranks(present)}; state "
                    f"{', '.join(sorted({op.state for op in present.values()}))}); look at {_fmt_ranks(no_dump)} "
                    "first (killed, frozen, or never got there)"]
                findings.append(Finding("undecided", g, lines, seq, set(no_dump)))
        if mismatches >= mismatch_cap:
            continue
        # The signature most ranks share is taken as the expected one (ties: the lowest rank's).
        by_sig: Dict[Tuple[Any, ...], List[int]] = {}
        for r, op in sorted(present.items()):
            by_sig.setdefault(_signature(op), []).append(r)
        expected_sig = max(by_sig, key=lambda s: (len(by_sig[s]), -min(by_sig[s])))
        expected = present[by_sig[expected_sig][0]]
        errors = []
        for r, op in sorted(present.items()):
            n = len(expected_ranks)
            err = _compare(expected, op, n) if _signature(op) != expected_sig else _syntax(op, n)
            if err:
                errors.append((r, err))
        if not errors:
            continue
        mismatches += 1
        lines = _header(f"Collective sequence number: {seq} has errors", g, expected)
        lines += _details(expected, expected_ranks)
        lines.append("error msg: " + ", ".join(f"Culprit rank {r}; Error type: {t}, {m}" for r, (t, m) in errors))
        for sig, ranks in by_sig.items():
            op = present[ranks[0]]
            lines.append(f"  {_fmt_ranks(ranks)} called {op.name}(input_sizes={op.input_sizes}, output_sizes="
                         f"{op.output_sizes}, dtypes={sorted(set(op.input_dtypes))}, state={op.state})")
        lines += ["collective stack trace: "] + _frames(expected)
        types = {t for _, (t, _) in errors}
        findings.append(Finding("mismatch", g, lines, seq, {r for r, _ in errors},
                                COLLECTIVE_TYPE_MISMATCH if COLLECTIVE_TYPE_MISMATCH in types else types.pop()))
        if mismatches == mismatch_cap:
            findings.append(Finding("mismatch", g, [f"Too many mismatches for process_group {g.label}: "
                                                    f"{mismatches} aborting"]))
    return findings


def _check_p2p(trace: Trace, g: Group) -> List[Finding]:
    """The k-th send from s to d must meet the k-th recv on d from s, with the same sizes."""
    members = set(_members(trace, g))
    sends: Dict[Tuple[int, int], List[Op]] = {}
    recvs: Dict[Tuple[int, int], List[Op]] = {}
    for r in members:
        for op in trace.group_ops(g, r):
            if op.type == "send":
                sends.setdefault((op.src, op.dst), []).append(op)
            elif op.type == "recv":
                recvs.setdefault((op.src, op.dst), []).append(op)
    findings = []
    for pair in sorted(set(sends) | set(recvs)):
        src, dst = pair
        if src not in members or dst not in members:
            continue
        if any(trace.dumps[r]["entries"] and trace.dumps[r]["entries"][0].get("record_id", 0) != 0 for r in pair):
            continue  # a wrapped buffer lost early sends or recvs: counting them would pair the wrong ones
        s, rv = sends.get(pair, []), recvs.get(pair, [])
        for k in range(max(len(s), len(rv))):
            if k >= len(rv):
                op, lonely, other = s[k], src, dst
                text = f"rank {dst} never posted the matching recv"
            elif k >= len(s):
                op, lonely, other = rv[k], dst, src
                text = f"rank {src} never posted the matching send"
            elif s[k].input_sizes != rv[k].output_sizes:
                op, lonely, other = s[k], src, dst
                text = (f"Expected input sizes: '{s[k].input_sizes}' (send) does not match found output sizes: "
                        f"'{rv[k].output_sizes}' (recv on rank {dst})")
            else:
                continue
            findings.append(Finding("p2p", g, [
                f"Point-to-point op #{k + 1} from rank {src} to rank {dst} in group {g.label} has errors",
                f"{op.name} on rank {lonely}: {op.describe()}",
                f"error msg: {text}",
            ] + ["stack trace: "] + _frames(op), None, {other}))
            break
    return findings


def _states(trace: Trace, g: Group) -> Optional[Finding]:
    """Where each rank of the group is: its oldest op not completed (stuck), or its last op when all completed."""
    where: Dict[str, List[int]] = {}
    stuck: Set[int] = set()
    for r in _members(trace, g):
        ops = trace.group_ops(g, r)
        if not ops:
            where.setdefault("no op recorded in this group", []).append(r)
            continue
        pending = next((op for op in ops if op.state != "completed"), None)
        if pending is not None:
            stuck.add(r)
            where.setdefault(f"stuck in state '{pending.state}' at {pending.where()}", []).append(r)
        else:
            where.setdefault(f"every op completed, the last: {ops[-1].where()}", []).append(r)
    if not stuck:
        return None
    lines = [f"Ranks of group {g.label} {list(g.ranks) or sorted(r for v in where.values() for r in v)}:"]
    lines += [f"  {_fmt_ranks(ranks)}: {text}" for text, ranks in sorted(where.items(), key=lambda kv: kv[1])]
    return Finding("state", g, lines, None, stuck)


def analyze(dumps: Dict[int, Dict[str, Any]], allow_incomplete_ranks: bool = False,
            mismatch_cap: int = 10) -> List[Finding]:
    """Every finding, group by group: missing ranks and mismatches by sequence number, unmatched sends/recvs,
    then where each rank is stuck. Dumps missing for some members of a group raise unless allowed."""
    trace = arrange(dumps)
    expected = {r for g in trace.groups for r in g.ranks}
    absent = expected - set(dumps)
    findings: List[Finding] = []
    if absent:
        if not allow_incomplete_ranks:
            raise TraceError(f"Missing dump files from ranks {absent} (pass --allow-incomplete-ranks to analyze "
                             "the others)")
        findings.append(Finding("missing_dumps", None, [
            f"Missing dump files from ranks {absent}: what they did cannot be told; the checks below use the "
            "other ranks only"], None, absent))
    for g in trace.groups:
        findings += _check_collectives(trace, g, mismatch_cap)
        findings += _check_p2p(trace, g)
    for g in trace.groups:
        state = _states(trace, g)
        if state is not None:
            findings.append(state)
    return findings
