"""Bad input at every tinytorch-bench command line stops with argparse's message: exit status 2, the
subcommand's usage line, the flag and what it expects; never rows of nonsense or a traceback."""
import json
import os
import subprocess
import sys

import pytest

from tinytorch.bench import main
from tinytorch.bench._cli import byte_size, choice_list, int_at_least, list_of, positive_float, positive_int

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _error(argv, capsys):
    """Run tinytorch-bench with argv; it must exit 2 with the usage line; returns stderr."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: tinytorch-bench {argv[0]} "), err
    assert "Traceback" not in err
    return err


SIM = ["simulate", "--params", "1e9"]
LAYOUT = ["simulate", "--model", "gpt3-175b", "--world", "1024"]

FLAG_CASES = [
    # simulate
    (["simulate", "--params", "-5"], "argument --params: expected a positive number, got '-5'"),
    (["simulate", "--params", "nan"], "argument --params: expected a positive number, got 'nan'"),
    (SIM + ["--world", "0"], "argument --world: expected a comma-separated list of positive integers, got '0'"),
    (SIM + ["--world", "8,x"], "argument --world: expected a comma-separated list of positive integers, got 'x' "
                               "in '8,x'"),
    (SIM + ["--world", ""], "argument --world: expected a comma-separated list of positive integers, got ''"),
    (SIM + ["--gpus-per-node", "0"], "argument --gpus-per-node: expected a positive integer, got '0'"),
    (SIM + ["--bucket-mb", "0"], "argument --bucket-mb: expected a positive number, got '0'"),
    (SIM + ["--first-bucket-mb", "-1"], "argument --first-bucket-mb: expected a positive number, got '-1'"),
    (SIM + ["--strategy", "ddp,zero9"], "argument --strategy: expected a comma-separated list of ddp, zero1, "
                                        "zero2, zero3, got 'ddp,zero9'"),
    (SIM + ["--hardware", "tpu-v9"], "argument --hardware: expected h100, a100, this-machine or a hardware JSON "
                                     "file, got 'tpu-v9'"),
    (SIM + ["--collectives", "no/such.json"], "argument --collectives: expected an existing file, got "
                                              "'no/such.json'"),
    (["simulate", "--profile", "no/such.json"], "argument --profile: expected an existing file"),
    (SIM + ["--precision", "fp8"], "argument --precision: invalid choice: 'fp8'"),
    (SIM + ["--seq", "0"], "argument --seq: expected a positive integer, got '0'"),
    (SIM + ["--micro-batch", "1.5"], "argument --micro-batch: expected a positive integer, got '1.5'"),
    (SIM + ["--layers", "-2"], "argument --layers: expected a positive integer, got '-2'"),
    (["simulate", "--model", "gpt-9"], "argument --model: invalid choice: 'gpt-9'"),
    (LAYOUT + ["--tp", "0"], "argument --tp: expected a positive integer, got '0'"),
    (LAYOUT + ["--pp", "-1"], "argument --pp: expected a positive integer, got '-1'"),
    (LAYOUT + ["--vpp", "0"], "argument --vpp: expected a positive integer, got '0'"),
    (LAYOUT + ["--schedule", "zb"], "argument --schedule: invalid choice: 'zb'"),
    (LAYOUT + ["--global-batch", "0"], "argument --global-batch: expected a positive integer, got '0'"),
    (LAYOUT + ["--recompute", "some"], "argument --recompute: invalid choice: 'some'"),
    (LAYOUT + ["--search", "--top", "0"], "argument --top: expected a positive integer, got '0'"),
    # collectives
    (["collectives", "--nproc", "0"], "argument --nproc: expected a positive integer, got '0'"),
    (["collectives", "--min-bytes", "1Q"], "argument --min-bytes/-b: expected a size in bytes such as 4096, 64K, "
                                           "256M or 1G, got '1Q'"),
    (["collectives", "-e", "0"], "argument --max-bytes/-e: expected a size in bytes"),
    (["collectives", "--step-factor", "1"], "argument --step-factor/-f: expected an integer >= 2, got '1'"),
    (["collectives", "--iters", "0"], "argument --iters/-n: expected a positive integer, got '0'"),
    (["collectives", "--warmup", "-1"], "argument --warmup/-w: expected a non-negative integer, got '-1'"),
    (["collectives", "--dtype", "float8"], "argument --dtype/-d: invalid choice: 'float8'"),
    (["collectives", "--op", "all_gatherx"], "argument --op: expected a comma-separated list of all_reduce, "
                                             "all_gather, reduce_scatter, broadcast, all_to_all or 'all', got "
                                             "'all_gatherx'"),
    (["collectives", "--backend", "gloo"], "argument --backend: invalid choice: 'gloo'"),
    (["collectives", "--timeout", "0"], "argument --timeout: expected a positive number, got '0'"),
    # train
    (["train", "--nproc", "0"], "argument --nproc: expected a positive integer, got '0'"),
    (["train", "--model", "W9"], "argument --model: invalid choice: 'W9'"),
    (["train", "--strategy", "zero4"], "argument --strategy: expected a comma-separated list of none, ddp, zero1, "
                                       "zero2, zero3, tp, pp, got 'zero4'"),
    (["train", "--microbatches", "0"], "argument --microbatches: expected a positive integer, got '0'"),
    (["train", "--steps", "0"], "argument --steps: expected a positive integer, got '0'"),
    (["train", "--warmup", "-1"], "argument --warmup: expected a non-negative integer, got '-1'"),
    (["train", "--batch", "0"], "argument --batch: expected a positive integer, got '0'"),
    (["train", "--seq", "x"], "argument --seq: expected a positive integer, got 'x'"),
    (["train", "--bucket-mb", "-25"], "argument --bucket-mb: expected a positive number, got '-25'"),
    (["train", "--threads", "0"], "argument --threads: expected a positive integer, got '0'"),
    (["train", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["train", "--timeout", "inf"], "argument --timeout: expected a positive number, got 'inf'"),
    # validate
    (["validate", "--sizes", "1M,1Q"], "argument --sizes: expected a comma-separated list of sizes such as 256K "
                                       "or 16M, got '1Q' in '1M,1Q'"),
    (["validate", "--iters", "0"], "argument --iters: expected a positive integer, got '0'"),
    (["validate", "--cases", "tp,zero9"], "argument --cases: expected a comma-separated list of ddp, zero2, zero3, "
                                          "tp, pp, got 'tp,zero9'"),
    (["validate", "--worlds", "3,1"], "argument --worlds: expected a comma-separated list of integers >= 2, got "
                                      "'1' in '3,1'"),
    (["validate", "--steps", "0"], "argument --steps: expected a positive integer, got '0'"),
    (["validate", "--warmup", "-3"], "argument --warmup: expected a non-negative integer, got '-3'"),
    (["validate", "--repeats", "0"], "argument --repeats: expected a positive integer, got '0'"),
    (["validate", "--sweep-repeats", "0"], "argument --sweep-repeats: expected a positive integer, got '0'"),
    (["validate", "--tolerance", "0"], "argument --tolerance: expected a positive number, got '0'"),
    # chaos
    (["chaos", "--trials", "0"], "argument --trials: expected a positive integer, got '0'"),
    (["chaos", "--faults", "kill-worker,meteor"], "argument --faults: expected a comma-separated list of "
                                                  "kill-worker, kill-node, kill-in-save, stop-worker"),
    (["chaos", "--nproc-per-node", "0"], "argument --nproc-per-node: expected a positive integer, got '0'"),
    (["chaos", "--max-restarts", "-1"], "argument --max-restarts: expected a non-negative integer, got '-1'"),
    (["chaos", "--timeout", "0"], "argument --timeout: expected a positive number, got '0'"),
    (["chaos", "--step-time", "-0.1"], "argument --step-time: expected a non-negative number, got '-0.1'"),
]


@pytest.mark.parametrize("argv, message", FLAG_CASES, ids=[" ".join(a) for a, _ in FLAG_CASES])
def test_each_flag_rejects_bad_values(argv, message, capsys):
    assert f"tinytorch-bench {argv[0]}: error: {message}" in _error(argv, capsys)


COMBINATION_CASES = [
    (["simulate"], "one of the arguments --params --model --profile is required"),
    (["simulate", "--params", "1e9", "--model", "gpt-13b"], "argument --model: not allowed with argument --params"),
    (SIM + ["--tp", "2"], "3-D layouts (--tp, --pp"),
    (["simulate", "--model", "gpt-13b", "--layers", "8", "--pp", "2"], "argument --layers: the DDP/ZeRO model's"),
    (SIM + ["--hardware", "this-machine"], "argument --hardware: this-machine needs --collectives"),
    (["simulate", "--model", "gpt3-175b", "--world", "1000", "--tp", "8", "--pp", "16"],
     "argument --world: 1000 is not a multiple of --tp x --pp = 8 x 16"),
    (["simulate", "--model", "gpt3-175b", "--world", "960", "--tp", "5", "--pp", "4"],
     "--tp 5 must divide gpt3-175b's 96 attention heads and hidden size 12288"),
    (LAYOUT + ["--tp", "8", "--pp", "128"], "--pp 128 x --vpp 1 must divide gpt3-175b's 96 layers"),
    (LAYOUT + ["--tp", "8", "--pp", "16", "--vpp", "2", "--schedule", "1f1b"],
     "--schedule interleaved and --vpp > 1 go together"),
    (LAYOUT + ["--tp", "8", "--pp", "16", "--global-batch", "100"],
     "--global-batch 100 must be a multiple of --micro-batch x dp = 1 x 8"),
    (LAYOUT + ["--tp", "8", "--pp", "16", "--global-batch", "64"],
     "--schedule 1f1b needs at least --pp 16 microbatches per pipeline, got global batch / (micro-batch x dp) = 8"),
    (LAYOUT + ["--tp", "8", "--pp", "16", "--vpp", "2", "--global-batch", "160"],
     "--schedule interleaved needs the microbatches per pipeline (20) to be a multiple of --pp 16"),
    (["simulate", "--model", "gpt-13b", "--world", "64", "--search"], "argument --search: needs --global-batch"),
    (LAYOUT[:-1] + ["7", "--search"], "argument --world: no layout of gpt3-175b runs on 7 GPUs with global batch "
                                      "1536"),
    (["collectives", "--min-bytes", "1M", "--max-bytes", "1K"], "argument --max-bytes: must be at least "
                                                                "--min-bytes (1M), got 1K"),
    (["train", "--steps", "2", "--warmup", "2"], "argument --warmup: must be less than --steps (2), got 2"),
    (["train", "--model", "W2", "--strategy", "tp"], "argument --strategy: tp splits a GPT's blocks: use --model W3 "
                                                     "or a GPT preset, not W2"),
    (["train", "--strategy", "pp", "--trace", "t.json"], "argument --trace: records one rank's whole step for "
                                                          "simulate --profile; pp splits the step over the ranks"),
    (["train", "--strategy", "tp", "--nproc", "3"], "argument --strategy: tp over 3 ranks needs W3's 4 heads "
                                                    "divisible by 3"),
    (["train", "--strategy", "pp", "--nproc", "3"], "argument --strategy: pp over 3 ranks needs W3's 4 blocks "
                                                    "divisible by 3"),
    (["train", "--strategy", "ddp,pp", "--microbatches", "1"], "argument --microbatches: Schedule1F1B over 2 "
                                                               "stages needs at least 2 microbatches that divide "
                                                               "--batch 16, got 1"),
    (["train", "--strategy", "pp", "--batch", "6", "--microbatches", "4"], "argument --microbatches: Schedule1F1B "
                                                                           "over 2 stages needs at least 2 "
                                                                           "microbatches that divide --batch 6, got 4"),
    (["validate", "--steps", "3", "--warmup", "3"], "argument --warmup: must be less than --steps (3), got 3"),
    (["chaos", "--steps", "8", "--ckpt-every", "5"], "--steps 8 with --ckpt-every 5 takes fewer than two "
                                                     "checkpoints"),
]


@pytest.mark.parametrize("argv, message", COMBINATION_CASES, ids=[" ".join(a) for a, _ in COMBINATION_CASES])
def test_flag_combinations_are_checked_before_anything_runs(argv, message, capsys):
    err = _error(argv, capsys)
    assert f"tinytorch-bench {argv[0]}: error: " in err and message in err


def test_unreadable_input_files_are_named(tmp_path, capsys):
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": []}))
    assert "argument --profile: cannot read" in _error(["simulate", "--profile", str(trace)], capsys)
    trace.write_text("{not json")
    assert "argument --profile: cannot read" in _error(["simulate", "--profile", str(trace)], capsys)
    hw = tmp_path / "hw.json"
    hw.write_text("{}")
    assert "argument --hardware: cannot read" in _error(SIM + ["--hardware", str(hw)], capsys)
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"rows": [{"op": "all_reduce", "world": 2, "bytes": 1024, "time_us": 5.0}]}))
    err = _error(SIM + ["--hardware", "this-machine", "--collectives", str(sweep)], capsys)
    assert "argument --collectives: cannot read" in err and "at least two sizes" in err


@pytest.mark.parametrize("argv, message", [
    (["simulate", "--params", "-5"], "argument --params: expected a positive number, got '-5'"),
    (["simulate", "--params", "1e9", "--world", "0"], "argument --world: expected a comma-separated list"),
    (["collectives", "--nproc", "0"], "argument --nproc: expected a positive integer, got '0'"),
    (["collectives", "--min-bytes", "1Q"], "argument --min-bytes/-b: expected a size in bytes"),
])
def test_the_console_command_exits_2_with_usage(argv, message):
    res = subprocess.run([sys.executable, "-m", "tinytorch.bench", *argv], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith(f"usage: tinytorch-bench {argv[0]}") and message in res.stderr
    assert "Traceback" not in res.stderr


def test_shared_types_accept_what_they_promise():
    assert positive_int(" 8 ") == 8 and positive_float("7.5e9") == 7.5e9
    assert byte_size("64K") == 65536 and byte_size("1.5K") == 1536
    assert int_at_least(2)("2") == 2
    assert list_of(positive_int, "positive integers")("8, 64,512") == [8, 64, 512]
    assert choice_list(["a", "b"], everything="all")("all") == ["a", "b"]
    assert choice_list(["a", "b"])("b,a") == ["b", "a"]
    args = main.__globals__["build_parser"]().parse_args(["collectives", "-b", "1M", "-e", "4M", "--op", "all"])
    assert args.min_bytes == 1 << 20 and args.max_bytes == 4 << 20 and len(args.op) == 5
