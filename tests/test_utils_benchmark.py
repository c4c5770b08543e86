"""tinytorch.utils.benchmark: Timer measures real time (checked on sleeps, never on tinytorch's speed), sets and
restores the thread count, and Measurement / Compare compute and print what PyTorch's do."""
import inspect
import time

import numpy as np
import pytest

import tinytorch
import tinytorch.utils.benchmark as benchmark
from tinytorch.utils.benchmark import Compare, Measurement, TaskSpec, Timer

SLEEP = 0.004


def test_timeit_measures_a_sleep():
    m = Timer("time.sleep(s)", setup="import time", globals={"s": SLEEP}).timeit(number=10)
    assert isinstance(m, Measurement) and m.number_per_run == 10 and len(m.raw_times) == 1
    # sleep never returns early; the upper bound only guards against a broken clock or loop count
    assert SLEEP <= m.mean < SLEEP * 10
    assert m.median == m.mean and m.iqr == 0.0 and m.times == [m.raw_times[0] / 10]


def test_blocked_autorange_runs_for_min_run_time():
    calls = []
    start = time.perf_counter()
    m = Timer("time.sleep(0.002)", setup="import time").blocked_autorange(
        callback=lambda number, t: calls.append((number, t)), min_run_time=0.05)
    assert time.perf_counter() - start >= 0.05
    assert sum(m.raw_times) >= 0.05 and len(m.raw_times) == len(calls)
    assert all(n == m.number_per_run for n, _ in calls) and [t for _, t in calls] == m.raw_times
    assert 0.002 <= m.median < 0.02


def test_adaptive_autorange_stops_by_max_run_time():
    m = Timer("time.sleep(0.001)", setup="import time").adaptive_autorange(threshold=0.0, min_run_time=0.01,
                                                                            max_run_time=0.1)
    # threshold 0 can never be met, so max_run_time ends the loop
    assert 0.1 < sum(m.raw_times) < 0.1 + 4 * max(m.raw_times)
    assert 0.001 <= m.median < 0.01


def test_num_threads_set_during_measurement_and_restored():
    prior = tinytorch.get_num_threads()
    seen = []
    Timer("seen.append(torch.get_num_threads())", globals={"seen": seen}, num_threads=1).timeit(number=3)
    assert set(seen) == {1} and tinytorch.get_num_threads() == prior
    with benchmark.set_torch_threads(1):
        assert tinytorch.get_num_threads() == 1
    assert tinytorch.get_num_threads() == prior


def test_globals_setup_and_torch_predefined():
    out = {}
    Timer("out['y'] = torch.ones(2) + x", setup="x = 1.0", globals={"out": out}).timeit(number=2)
    assert out["y"].tolist() == [2.0, 2.0]


def test_timer_argument_errors():
    with pytest.raises(ValueError, match="only a `str` stmt is supported"):
        Timer(lambda: None)
    with pytest.raises(ValueError, match="Python statements only"):
        Timer("pass", language="cpp")
    with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
        Timer("pass", global_setup="#include <x>")
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        Timer().repeat()
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        Timer().autorange()


def test_task_spec_text_and_dedent():
    t = Timer("""
        x = 1
        y = 2
    """, setup="import os", label="L", sub_label="S", description="D", num_threads=2)
    spec = t.timeit(number=1).task_spec
    assert spec.stmt == "x = 1\ny = 2" and spec.num_threads == 2
    assert spec.title == "L: S" and spec.setup_str() == "setup: import os"
    assert TaskSpec("a\nb", "pass", sub_label="s").title == "stmt: (s)\n  a\n  b"


def test_measurement_statistics_against_numpy():
    raw = [4e-6, 1e-6, 3e-6, 2e-6, 100e-6]  # per run of 2 statements
    m = Measurement(2, raw, TaskSpec("x + 1", "pass", label="add", description="small"))
    per = np.asarray(raw, dtype=np.float64) / 2
    assert m.times == list(per)
    assert m.median == pytest.approx(np.median(per), rel=1e-12)
    assert m.mean == pytest.approx(per.mean(), rel=1e-12)
    assert m.iqr == pytest.approx(np.percentile(per, 75) - np.percentile(per, 25), rel=1e-12)
    assert m.has_warnings and not m.meets_confidence(0.1)
    assert m.label == "add" and m.description == "small" and m.num_threads == 1 and m.title == "add"
    assert m.significant_figures == 1
    # identical runs: the confidence interval is the 25 ns floor, 1 ms / 25 ns = 10^4.6 -> capped at 4 figures
    steady = Measurement(1, [1e-3] * 20, TaskSpec("s", "pass"))
    assert steady.significant_figures == 4 and not steady.has_warnings


def test_measurement_repr():
    m = Measurement(10, [1.0e-5, 1.1e-5, 1.2e-5, 1.3e-5, 1.5e-5],
                    TaskSpec("x+1", "import os", label="ops", sub_label="n=1", description="add"))
    lines = repr(m).splitlines()
    assert lines[0].startswith("<tinytorch.utils.benchmark.utils.common.Measurement object at 0x")
    assert lines[1:] == ["ops: n=1", "add", "setup: import os", "  Median: 1.20 us", "  IQR:    0.20 us (1.10 to 1.30)",
                         "  5 measurements, 10 runs per measurement, 1 thread",
                         "  WARNING: Interquartile range is 16.7% of the median measurement.",
                         "           This could indicate system fluctuation."]
    single = Measurement(20, [0.04], TaskSpec("time.sleep(0.002)", "pass", num_threads=2))
    assert repr(single).splitlines()[1:] == ["time.sleep(0.002)", "  2.00 ms", "  1 measurement, 20 runs , 2 threads"]
    noisy = Measurement(1, [1.0, 2.0, 3.0, 4.0], TaskSpec("s", "pass"))
    assert repr(noisy).splitlines()[-2:] == ["  WARNING: Interquartile range is 60.0% of the median measurement.",
                                             "           This suggests significant environmental influence."]


def test_merge_groups_replicates():
    spec_a, spec_b = TaskSpec("a", "pass"), TaskSpec("b", "pass")
    merged = Measurement.merge([Measurement(2, [2.0], spec_a), Measurement(1, [3.0], spec_b),
                                Measurement(4, [4.0, 8.0], spec_a)])
    assert [m.task_spec for m in merged] == [spec_a, spec_b]
    assert merged[0].number_per_run == 1 and merged[0].raw_times == [1.0, 1.0, 2.0]


def _table_measurements():
    ms = []
    for threads in (1, 4):
        for sub in ("n=1", "n=100"):
            for desc, base in (("add", 1e-6), ("mul", 2.5e-6)):
                t = base * (1 if sub == "n=1" else 30) / threads
                ms.append(Measurement(10, [t * 10 * (1 + 0.01 * i) for i in range(7)],
                                      TaskSpec("x+1", "pass", label="ops", sub_label=sub, description=desc,
                                               num_threads=threads)))
    ms.append(Measurement(10, [3e-4 * (1 + 0.3 * i) for i in range(7)],
                          TaskSpec("x+1", "pass", label="ops", sub_label="n=1", description="div")))
    return ms


def test_compare_table():
    text = str(Compare(_table_measurements()))
    assert text == ("[-------------------- ops --------------------]\n"
                    "             |    add    |    mul    |    div  \n"
                    "1 threads: ------------------------------------\n"
                    "      n=1    |   1030.0  |   2575.0  |  57000.0\n"
                    "      n=100  |  30900.0  |  77250.0  |         \n"
                    "4 threads: ------------------------------------\n"
                    "      n=1    |    257.5  |    643.8  |         \n"
                    "      n=100  |   7725.0  |  19312.5  |         \n"
                    "\nTimes are in nanoseconds (ns).\n")
    c = Compare(_table_measurements())
    c.trim_significant_figures()
    c.highlight_warnings()
    lines = str(c).splitlines()
    assert lines[3] == "      n=1    |   1000  |   3000  |  60000 (! 47%)"
    assert lines[-1] == "(! XX%) Measurement has high variance, where XX is the IQR / median * 100."
    with pytest.raises(ValueError, match="Expected an instance of `Measurement`"):
        Compare([1.0])


def test_unit_helpers():
    assert benchmark.select_unit(3.3e-5) == ("us", 1e-6) and benchmark.select_unit(2.0) == ("s", 1)
    assert benchmark.select_unit(5e-9) == ("ns", 1e-9) and benchmark.select_unit(0.5) == ("ms", 1e-3)
    assert benchmark.unit_to_english("ms") == "millisecond"
    assert benchmark.trim_sigfig(3.14159, 2) == pytest.approx(3.1)
    assert benchmark.ordered_unique([3, 1, 3, 2, 1]) == [3, 1, 2]


# ---------------------------------------------------------------- parity with PyTorch

def test_parity_with_torch_measurement_and_compare():
    torch = pytest.importorskip("torch")
    from torch.utils.benchmark.utils.common import Measurement as TM, TaskSpec as TS

    def build(measurement, spec):
        out = []
        for m in _table_measurements():
            s = m.task_spec
            out.append(measurement(m.number_per_run, list(m.raw_times),
                                   spec(s.stmt, s.setup, label=s.label, sub_label=s.sub_label,
                                        description=s.description, num_threads=s.num_threads)))
        return out

    mine, theirs = build(Measurement, TaskSpec), build(TM, TS)
    for a, b in zip(mine, theirs):
        assert (a.median, a.mean, a.iqr) == pytest.approx((b.median, b.mean, b.iqr), rel=1e-12)
        assert a.times == b.times and a.number_per_run == b.number_per_run
        assert (a.significant_figures, a.has_warnings, a.title) == (b.significant_figures, b.has_warnings, b.title)
        assert repr(a).splitlines()[1:] == repr(b).splitlines()[1:]
    for configure in (lambda c: None, lambda c: (c.trim_significant_figures(), c.highlight_warnings()),
                      lambda c: c.colorize(), lambda c: c.colorize(rowwise=True)):
        ours, ref = Compare(mine), torch.utils.benchmark.Compare(theirs)
        configure(ours)
        configure(ref)
        assert str(ours) == str(ref)


def test_parity_with_torch_signatures():
    torch = pytest.importorskip("torch")
    ref = torch.utils.benchmark.Timer
    for name in ("__init__", "timeit", "blocked_autorange", "adaptive_autorange"):
        ours = inspect.signature(getattr(Timer, name)).parameters
        theirs = inspect.signature(getattr(ref, name)).parameters
        assert list(ours) == list(theirs)
        for p in ours:
            if p not in ("timer", "language"):
                assert ours[p].default == theirs[p].default and ours[p].kind == theirs[p].kind
