"""The flight-recorder analyzer on dumps built by hand in PyTorch's format (torch/csrc/distributed/c10d/
FlightRecorder.hpp: version 2.10, pg_config ranks as a string, process_group as a (name, desc) tuple); where torch
is importable, PyTorch's own fr_trace reads the same files and must agree."""
import pickle

import pytest

from dist_helpers import pytorch_fr_trace

from tinytorch.distributed.flight_recorder import analysis
from tinytorch.distributed.flight_recorder.fr_trace import main
from tinytorch.distributed.flight_recorder.loader import TraceError, read_dir


def entry(record_id, seq, name="nccl:all_reduce", sizes=((3, 4),), state="completed", pg=("0", "default_pg"),
          p2p_seq=0, out_sizes=None, dtype="Float", frames=()):
    is_p2p = name.split(":")[1].split(" ")[0] in ("send", "recv")
    return {
        "record_id": record_id, "pg_id": 0, "process_group": pg, "collective_seq_id": seq, "p2p_seq_id": p2p_seq,
        "op_id": record_id + 1, "profiling_name": name, "time_created_ns": 1_700_000_000_000_000_000 + record_id,
        "input_sizes": [list(s) for s in sizes], "input_dtypes": [dtype] * len(sizes),
        "output_sizes": [list(s) for s in (out_sizes or sizes)], "output_dtypes": [dtype] * len(out_sizes or sizes),
        "state": state, "time_discovered_started_ns": None if state == "scheduled" else 1,
        "time_discovered_completed_ns": 2 if state == "completed" else None, "retired": state == "completed",
        "timeout_ms": 600000, "is_p2p": is_p2p, "thread_id": "140", "thread_name": "pt_main_thread",
        "frames": [{"name": n, "filename": "train.py", "line": ln} for n, ln in frames],
    }


def dump(entries, world=2, version="2.10", extra_groups=None):
    pg_config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}}
    pg_config.update(extra_groups or {})
    return {"version": version, "comm_lib_version": "2.21.5", "pg_config": pg_config,
            "pg_status": {"0": {"last_enqueued_collective": 3, "last_started_collective": 3,
                                "last_completed_collective": 2}},
            "entries": entries}


def write(tmp_path, dumps, prefix="nccl_trace_rank_"):
    for rank, d in dumps.items():
        with open(tmp_path / f"{prefix}{rank}", "wb") as f:
            pickle.dump(d, f)
    return tmp_path


def run(capsys, *args):
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def missing_rank_dumps():
    stack = [("all_reduce", 2952), ("train_step", 40)]
    return {
        0: dump([entry(0, 1), entry(1, 2), entry(2, 3, state="started", frames=stack)]),
        1: dump([entry(0, 1), entry(1, 2)]),
    }


def test_rank_that_never_joined_is_named_with_op_group_and_sequence_number(tmp_path, capsys):
    d = write(tmp_path, missing_rank_dumps())
    code, out, err = run(capsys, d, "-p", "nccl_trace_rank_")
    assert code == 0 and out == ""  # like PyTorch: the report goes to stderr
    for line in ["Not all ranks joining collective, sequence number: 3", "internal record id: 2",
                 "group info: 0:default_pg", "collective: nccl:all_reduce", "missing ranks: {1}",
                 "input sizes: [[3, 4]]", "world size: 2", "expected ranks: {0, 1}", "collective state: started",
                 "rank 1 never joined nccl:all_reduce sequence number 3 of group 0:default_pg: its last collective "
                 "in this group is nccl:all_reduce, sequence number 2 (completed)",
                 " all_reduce at train.py:2952", " train_step at train.py:40",
                 "rank 0: stuck in state 'started' at nccl:all_reduce, sequence number 3",
                 "rank 1: every op completed, the last: nccl:all_reduce, sequence number 2"]:
        assert line.strip() in [x.strip() for x in err.splitlines()], (line, err)


MISMATCHES = [
    (entry(2, 3, name="nccl:broadcast"),
     "error msg: Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type: 'all_reduce' does "
     "not match found collective type: 'broadcast'"),
    (entry(2, 3, sizes=((3, 5),)),
     "error msg: Culprit rank 1; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[3, 4]]' does not "
     "match found input sizes: '[[3, 5]]'"),
    (entry(2, 3, dtype="Double"),
     "error msg: Culprit rank 1; Error type: COLLECTIVE_DTYPE_MISMATCH, Expected dtypes: '{'Float'}' does not "
     "match found dtypes: '{'Double'}/{'Double'}'"),
]


def mismatch_dumps(rank1):
    return {0: dump([entry(0, 1), entry(1, 2), entry(2, 3)]), 1: dump([entry(0, 1), entry(1, 2), rank1])}


@pytest.mark.parametrize("rank1, expected", MISMATCHES)
def test_mismatch_at_a_sequence_number_is_named(tmp_path, capsys, rank1, expected):
    d = write(tmp_path, mismatch_dumps(rank1))
    code, _, err = run(capsys, d, "-p", "nccl_trace_rank_")
    assert code == 0
    assert "Collective sequence number: 3 has errors" in err
    assert expected in err.splitlines(), err


@pytest.mark.parametrize("case", ["missing"] + [f"mismatch{k}" for k in range(len(MISMATCHES))])
def test_pytorch_fr_trace_reads_the_fixtures_and_agrees(tmp_path, capsys, case):
    pytest.importorskip("torch")
    dumps = missing_rank_dumps() if case == "missing" else mismatch_dumps(MISMATCHES[int(case[-1])][0])
    d = write(tmp_path, dumps)
    _, _, ours = run(capsys, d, "-p", "nccl_trace_rank_")
    theirs = pytorch_fr_trace(d, "-p", "nccl_trace_rank_")
    if case == "missing":
        expected = ["Not all ranks joining collective, sequence number: 3", "missing ranks: {1}",
                    "collective state: started", "group info: 0:default_pg", "internal record id: 2"]
    else:
        culprit = MISMATCHES[int(case[-1])][1].split(", ", 1)[0]  # the culprit and the error type
        expected = ["Collective sequence number: 3 has errors", culprit]
    for text in expected:
        assert text in ours and text in theirs, (text, ours, theirs)


def test_clean_dumps_say_so(tmp_path, capsys):
    d = write(tmp_path, {r: dump([entry(0, 1), entry(1, 2)]) for r in range(2)})
    code, _, err = run(capsys, d, "-p", "nccl_trace_rank_")
    assert code == 0 and err.startswith("No errors found"), err


def test_the_majority_is_taken_as_expected():
    dumps = {r: dump([entry(0, 1, sizes=((7,),) if r == 2 else ((4,),))], world=4) for r in range(4)}
    findings = analysis.analyze(dumps)
    mismatch = [f for f in findings if f.kind == "mismatch"]
    assert len(mismatch) == 1 and mismatch[0].ranks == {2} and mismatch[0].seq == 1
    assert mismatch[0].error_type == analysis.SIZE_OR_SYNTAX_MISMATCH
    assert "  ranks {0, 1, 3} called nccl:all_reduce(input_sizes=[[4]]" in "\n".join(mismatch[0].lines)


def test_all_gather_output_must_be_input_times_group_size():
    bad = entry(0, 1, name="nccl:_all_gather_base", sizes=((4,),), out_sizes=((4,),))
    findings = analysis.analyze({0: dump([bad]), 1: dump([bad])})
    assert [f.error_type for f in findings] == [analysis.SIZE_OR_SYNTAX_MISMATCH]
    assert "Found input numel '4 * pg size 2' does not match output numel '4'" in "\n".join(findings[0].lines)
    good = entry(0, 1, name="nccl:_all_gather_base", sizes=((4,),), out_sizes=((8,),))
    assert analysis.analyze({0: dump([good]), 1: dump([good])}) == []


def test_sends_and_receives_are_paired_per_direction():
    send = entry(0, 0, name="nccl:send 0->1", sizes=((8,),), p2p_seq=1, state="started")
    recv = entry(0, 0, name="nccl:recv 1<-0", sizes=((6,),), p2p_seq=1, state="started")
    findings = analysis.analyze({0: dump([send]), 1: dump([recv])})
    p2p = [f for f in findings if f.kind == "p2p"]
    assert len(p2p) == 1
    assert "Expected input sizes: '[[8]]' (send) does not match found output sizes: '[[6]]' (recv on rank 1)" in \
        "\n".join(p2p[0].lines)
    lonely = analysis.analyze({0: dump([send]), 1: dump([])})
    assert "rank 1 never posted the matching recv" in "\n".join(next(f for f in lonely if f.kind == "p2p").lines)
    ok = entry(0, 0, name="nccl:recv 1<-0", sizes=((8,),), p2p_seq=1)
    assert not [f for f in analysis.analyze({0: dump([send]), 1: dump([ok])}) if f.kind == "p2p"]


def test_subgroups_use_global_ranks_and_a_wrapped_buffer_is_not_a_missing_rank():
    tp = {"1": {"name": "1", "desc": "tp", "ranks": "[1, 3]"}}
    dumps = {}
    for r in range(4):
        entries = [entry(k, k + 1) for k in range(4)]
        if r in (1, 3):
            entries.append(entry(4, 1, pg=("1", "tp")))
        dumps[r] = dump(entries, world=4, extra_groups=tp if r in (1, 3) else None)
    dumps[2]["entries"] = dumps[2]["entries"][2:]  # rank 2's ring buffer wrapped: seq 1 and 2 are gone
    dumps[3]["entries"][-1]["state"] = "started"
    dumps[1]["entries"].pop()  # rank 1 never joined the tp group's first collective
    findings = analysis.analyze(dumps)
    missing = [f for f in findings if f.kind == "missing_ranks"]
    assert [(f.group.label, f.seq, f.ranks) for f in missing] == [("1:tp", 1, {1})]
    assert "world size: 2" in missing[0].lines and "expected ranks: {1, 3}" in missing[0].lines


def test_missing_dump_files_stop_the_analysis_unless_allowed(tmp_path, capsys):
    dumps = missing_rank_dumps()
    dumps[0]["pg_config"]["0"]["ranks"] = "[0, 1, 2]"
    dumps[1]["pg_config"]["0"]["ranks"] = "[0, 1, 2]"
    d = write(tmp_path, dumps)
    code, _, err = run(capsys, d, "-p", "nccl_trace_rank_")
    assert code == 1 and "Missing dump files from ranks {2}" in err
    code, _, err = run(capsys, d, "-p", "nccl_trace_rank_", "--allow-incomplete-ranks")
    assert code == 0 and "missing ranks: {1}" in err and "Missing dump files from ranks {2}" in err


def test_a_frozen_rank_without_a_dump_is_the_suspect():
    # Rank 2 was stopped (SIGSTOP) and could not dump; ranks 0 and 1 both wait in sequence number 2.
    dumps = {r: dump([entry(0, 1), entry(1, 2, state="started")], world=3) for r in (0, 1)}
    findings = analysis.analyze(dumps, allow_incomplete_ranks=True)
    assert [(f.kind, f.seq, f.ranks) for f in findings][:2] == [("missing_dumps", None, {2}), ("undecided", 2, {2})]
    text = "\n".join(findings[1].lines)
    assert "We cannot decide what's wrong with this collective entry because we missed FR dumps from ranks ({2})" \
        in text
    assert "every rank that left a dump issued it (ranks {0, 1}; state started); look at rank 2 first" in text


def test_just_print_entries_side_by_side_with_filters_and_stacks(tmp_path, capsys):
    dumps = missing_rank_dumps()
    dumps[0]["entries"].append(entry(3, 0, name="nccl:send 0->1", sizes=((2,),), p2p_seq=1))
    d = write(tmp_path, dumps)
    code, _, err = run(capsys, d, "-j")  # the prefix is inferred
    assert code == 0
    lines = err.splitlines()
    assert lines[0].split() == ["Rank", "0", "Rank", "1"]
    assert lines[2].split("  ")[0] == "all_reduce(input_sizes=[[3, 4]], state=completed)"
    assert "all_reduce(input_sizes=[[3, 4]], state=started)" in lines[4]
    assert "send(s=0 d=1, input_sizes=[[2]], state=completed)" in lines[5]
    assert "Not all ranks" not in err  # -j prints, it does not analyze
    code, _, err = run(capsys, d, "-j", "--selected-ranks", "1")
    assert err.splitlines()[0].strip() == "Rank 1"
    code, _, err = run(capsys, d, "-j", "--pg-filters", "other_pg")
    assert "all_reduce" not in err
    code, _, err = run(capsys, d, "-j", "--print_stack_trace")
    assert "stack_id=1)" in err and "all_reduce at train.py:2952 <- train_step at train.py:40" in err


def test_bad_arguments_and_files_get_clear_errors(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path, "--selected-ranks", "0")
    assert code == 2 and "Not support selecting ranks without printing entries" in err
    code, _, err = run(capsys, tmp_path / "nowhere")
    assert code == 1 and "does not exist" in err
    d = write(tmp_path, {0: dump([entry(0, 1)]), 1: dump([entry(0, 1)], version="2.9")})
    with pytest.raises(TraceError, match="Rank 1 has different version 2.9 from the given version 2.10"):
        read_dir(str(d), "nccl_trace_rank_")
    (tmp_path / "nccl_trace_rank_2").write_bytes(b"not a pickle")
    with pytest.raises(TraceError, match="nccl_trace_rank_2: not a flight-recorder dump"):
        read_dir(str(d), "nccl_trace_rank_")
    (tmp_path / "other_7").write_bytes(b"")
    with pytest.raises(TraceError, match="Unable to automatically determine the common prefix"):
        read_dir(str(d))
    (tmp_path / "nccl_trace_rank_3.tmp123").write_bytes(b"")  # a dump being written is not a rank's file
    (tmp_path / "nccl_trace_rank_2").unlink()
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(dump([entry(0, 1)])))
    assert sorted(read_dir(str(d), "nccl_trace_rank_")[0]) == [0, 1]


def test_console_script_is_declared():
    with open(__file__.rsplit("/tests/", 1)[0] + "/pyproject.toml") as f:
        assert 'tinytorch-fr-trace = "tinytorch.distributed.flight_recorder.fr_trace:main"' in f.read()
