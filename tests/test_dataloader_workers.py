"""DataLoader with worker processes: real processes throughout (fork, and spawn where noted), PyTorch's
semantics and messages, shared-memory batches, and no process left behind."""
import gc
import os
import pickle
import random
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import tinytorch
from tinytorch.profiler import profile
from tinytorch.utils.data import (BatchSampler, DataLoader, Dataset, DistributedSampler, IterableDataset,
                                  SequentialSampler, default_collate, get_worker_info)
from tinytorch.utils.data._utils.worker import _generate_state


def _gone(pid: int) -> bool:
    """The process no longer runs (reaped, or a zombie waiting for a parent that is not ours)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(_gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return all(_gone(p) for p in pids)


class Items(Dataset):
    """Item i: its index, who loaded it, a sample from each random generator, and a small array."""

    def __init__(self, n: int = 24) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        info = get_worker_info()
        return {"i": i, "worker": -1 if info is None else info.id, "pid": os.getpid(),
                "x": np.full((2, 3), i, dtype=np.float32), "name": f"item{i}"}


def _flat(batches, key):
    return [v for b in batches for v in b[key].tolist()]


# ------------------------------------------------------------------ batches and order

@pytest.mark.filterwarnings("ignore:This DataLoader will create 3 worker processes")  # 3 workers on 2 cores
def test_same_batches_and_order_as_in_process():
    def run(**kw):
        g = tinytorch.Generator().manual_seed(11)
        return list(DataLoader(Items(), batch_size=5, shuffle=True, generator=g, **kw))
    ref = run()
    for kw in ({"num_workers": 2}, {"num_workers": 2, "prefetch_factor": 1}, {"num_workers": 3, "prefetch_factor": 4}):
        got = run(**kw)
        assert len(got) == len(ref) == 5
        for a, b in zip(got, ref):
            assert a["i"].tolist() == b["i"].tolist() and a["name"] == b["name"]
            np.testing.assert_array_equal(a["x"].numpy(), b["x"].numpy())
        assert set(_flat(got, "worker")) == set(range(kw["num_workers"])) and set(_flat(ref, "worker")) == {-1}
    assert sorted(_flat(ref, "i")) == list(range(24)) and _flat(ref, "i") != list(range(24))


def test_batch_size_none_drop_last_batch_sampler_and_collate_fn_through_workers():
    def both(**kw):
        return [list(DataLoader(Items(10), num_workers=w, **kw)) for w in (0, 2)]
    ref, got = both(batch_size=None)
    assert [d["i"] for d in got] == [d["i"] for d in ref] == list(range(10))
    assert all(isinstance(d["x"], tinytorch.Tensor) and d["x"].shape == (2, 3) for d in got)
    ref, got = both(batch_size=4, drop_last=True)
    assert [b["i"].tolist() for b in got] == [b["i"].tolist() for b in ref] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    ref, got = both(batch_sampler=[[9, 0], [3], [1, 2, 5]])
    assert [b["i"].tolist() for b in got] == [b["i"].tolist() for b in ref] == [[9, 0], [3], [1, 2, 5]]
    ref, got = both(batch_size=3, collate_fn=_names)
    assert got == ref == [["item0", "item1", "item2"], ["item3", "item4", "item5"], ["item6", "item7", "item8"],
                          ["item9"]]


def _names(items):
    return [it["name"] for it in items]


def test_spawn_context_gives_the_same_batches():
    g = tinytorch.Generator().manual_seed(5)
    ref = list(DataLoader(Items(12), batch_size=4, shuffle=True, generator=g))
    g = tinytorch.Generator().manual_seed(5)
    dl = DataLoader(Items(12), batch_size=4, shuffle=True, generator=g, num_workers=2, multiprocessing_context="spawn")
    got = list(dl)
    assert [b["i"].tolist() for b in got] == [b["i"].tolist() for b in ref]
    assert all(p != os.getpid() for p in _flat(got, "pid"))


class SlowFirst(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        if i == 0:
            time.sleep(1.0)
        return i


def test_in_order_false_returns_batches_as_they_are_ready():
    in_order = [b.tolist() for b in DataLoader(SlowFirst(), batch_size=2, num_workers=2)]
    assert in_order == [[0, 1], [2, 3], [4, 5], [6, 7]]
    as_ready = [b.tolist() for b in DataLoader(SlowFirst(), batch_size=2, num_workers=2, in_order=False)]
    assert sorted(as_ready) == in_order and as_ready[0] != [0, 1]  # worker 1's batches overtake the slow one


# ------------------------------------------------------------------ worker info, seeds, worker_init_fn

class Seeds(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> dict:
        info = get_worker_info()
        return {"id": info.id, "num_workers": info.num_workers, "seed": info.seed,
                "dataset_is_copy": type(info.dataset) is Seeds, "random": random.random(),
                "numpy": float(np.random.rand()), "tinytorch": float(tinytorch.rand(1).item())}


def _first_item_per_worker(generator_seed: int, workers: int = 2) -> dict:
    g = tinytorch.Generator().manual_seed(generator_seed)
    out = {}
    for item in DataLoader(Seeds(), batch_size=None, num_workers=workers, generator=g):
        out.setdefault(item["id"], item)
    return out


def test_get_worker_info_and_per_worker_seeds():
    assert get_worker_info() is None  # main process
    a, b, other = _first_item_per_worker(1), _first_item_per_worker(1), _first_item_per_worker(2)
    assert sorted(a) == [0, 1] and all(v["num_workers"] == 2 and v["dataset_is_copy"] for v in a.values())
    base = a[0]["seed"]
    assert a[1]["seed"] == base + 1  # base_seed + id
    # The loader's generator decides base_seed: same generator seed, same draws in every worker.
    assert a == b and other[0]["seed"] != base
    for key in ("random", "numpy", "tinytorch"):
        assert a[0][key] != a[1][key]  # no two workers share a stream
    # Python's random and tinytorch are seeded with base_seed + id, NumPy with PyTorch's derived state.
    assert a[1]["random"] == random.Random(base + 1).random()
    assert a[1]["numpy"] == np.random.RandomState(_generate_state(base, 1)).rand()
    assert a[1]["tinytorch"] == tinytorch.rand(1, generator=tinytorch.Generator().manual_seed(base + 1)).item()


def test_generate_state_matches_pytorch_values():
    # Values of torch.utils.data._utils.worker._generate_state (PyTorch 2.x).
    assert _generate_state(0, 0) == [2968811710, 3677149159, 745650761, 2884920346]
    assert _generate_state(2 ** 63 - 1, 3) == [1885505632, 4179896284, 1438801625, 814051130]
    torch_worker = pytest.importorskip("torch.utils.data._utils.worker")
    for base in (0, 7, 123456789123456789, 2 ** 63 - 1):
        for wid in range(3):
            assert _generate_state(base, wid) == torch_worker._generate_state(base, wid)


_INIT_CALLS = []


def _record_init(worker_id: int) -> None:
    _INIT_CALLS.append((worker_id, os.getpid()))


class InitCalls(Dataset):
    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> list:
        return list(_INIT_CALLS)


def test_worker_init_fn_runs_once_in_each_worker_before_loading():
    for ctx in (None, "spawn"):
        seen = {}
        dl = DataLoader(InitCalls(), batch_size=None, num_workers=2, worker_init_fn=_record_init,
                        multiprocessing_context=ctx)
        for calls in dl:
            assert len(calls) == 1  # once per worker, before its first item, in that worker
            wid, pid = calls[0]
            seen[wid] = pid
        assert sorted(seen) == [0, 1] and os.getpid() not in seen.values()
    assert _INIT_CALLS == []  # never in the main process


# ------------------------------------------------------------------ IterableDataset

class Stream(IterableDataset):
    """0..n-1, split between workers by get_worker_info() when shard=True."""

    def __init__(self, n: int, shard: bool = True) -> None:
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


def test_iterable_dataset_sharded_by_worker_info():
    batches = [b.tolist() for b in DataLoader(Stream(23), batch_size=4, num_workers=2)]
    assert sorted(v for b in batches for v in b) == list(range(23))
    assert all(len({v % 2 for v in b}) == 1 for b in batches)  # each batch from one worker's shard
    # Worker 0's shard is longer: the loader goes on after worker 1's StopIteration.
    assert list(DataLoader(Stream(5), batch_size=None, num_workers=2)) == [0, 1, 2, 3, 4]
    # Without sharding, every worker iterates its own full copy (PyTorch's documented pitfall).
    copies = [v for b in DataLoader(Stream(6, shard=False), batch_size=3, num_workers=2) for v in b.tolist()]
    assert sorted(copies) == sorted(list(range(6)) * 2)
    drop = [b.tolist() for b in DataLoader(Stream(10), batch_size=4, num_workers=2, drop_last=True)]
    assert sorted(drop) == [[0, 2, 4, 6], [1, 3, 5, 7]]


class ClaimsThree(Stream):
    def __len__(self) -> int:
        return 3


def test_iterable_dataset_longer_than_its_len_warns():
    dl = DataLoader(ClaimsThree(5, shard=False), batch_size=None, num_workers=1)
    assert len(dl) == 3
    with pytest.warns(UserWarning, match=r"Length of IterableDataset .* was reported to be 3\(when accessing "
                                         r"len\(dataloader\)\), but [45] samples have been fetched"):
        assert list(dl) == [0, 1, 2, 3, 4]


class Gradients(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> tinytorch.Tensor:
        x = tinytorch.full((3,), float(i), requires_grad=True)
        (x * x).sum().backward()
        return x.grad


def test_autograd_runs_in_workers_forked_after_a_backward():
    # The engine's fork handlers give a forked worker a consistent engine (fresh threads on demand).
    x = tinytorch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    assert [b.tolist() for b in DataLoader(Gradients(), batch_size=None, num_workers=2)] == [
        [2.0 * i] * 3 for i in range(4)]


# ------------------------------------------------------------------ errors

class FailsAt(Dataset):
    def __init__(self, bad: int, exc: BaseException) -> None:
        self.bad, self.exc = bad, exc

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        if i == self.bad:
            raise self.exc
        return i


class TwoArgError(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def test_worker_exception_reraised_with_type_worker_id_and_traceback():
    # Batch 1 ([2, 3]) goes to worker 1.
    dl = DataLoader(FailsAt(3, ValueError("item 3 is corrupt")), batch_size=2, num_workers=2)
    with pytest.raises(ValueError) as e:
        list(dl)
    msg = str(e.value)
    assert msg.startswith("Caught ValueError in DataLoader worker process 1.\nOriginal Traceback (most recent call "
                          "last):\n")
    assert "raise self.exc" in msg and msg.rstrip().endswith("ValueError: item 3 is corrupt")
    with pytest.raises(KeyError) as e:
        list(DataLoader(FailsAt(0, KeyError("missing")), batch_size=2, num_workers=1))
    assert "Caught KeyError in DataLoader worker process 0." in str(e.value)
    with pytest.raises(RuntimeError, match="Caught TwoArgError in DataLoader worker process 0"):
        list(DataLoader(FailsAt(1, TwoArgError(1, 2)), batch_size=2, num_workers=1))


def _failing_init(worker_id: int) -> None:
    raise OSError(f"cannot open shard for worker {worker_id}")


def test_worker_init_fn_error_and_unsendable_batch():
    with pytest.raises(OSError, match="Caught OSError in DataLoader worker process 0"):
        list(DataLoader(Items(4), batch_size=2, num_workers=1, worker_init_fn=_failing_init))
    with pytest.raises(Exception, match="Caught (PicklingError|AttributeError) in DataLoader worker process 0"):
        list(DataLoader(Items(4), batch_size=2, num_workers=1, collate_fn=lambda items: lambda: None))
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor which requires_grad"):
        list(DataLoader(Items(4), batch_size=2, num_workers=1,
                        collate_fn=lambda items: tinytorch.ones(2, requires_grad=True) * 2))


class DiesAt(Dataset):
    def __init__(self, bad: int, how: str) -> None:
        self.bad, self.how = bad, how

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> int:
        if i == self.bad:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return i


def test_killed_worker_raises_within_seconds():
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^DataLoader worker \(pid \d+\) is killed by signal: Killed\."):
        list(DataLoader(DiesAt(5, "kill"), batch_size=2, num_workers=2))
    assert time.monotonic() - t0 < 5
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid \d+\) exited unexpectedly with exit code 3"):
        list(DataLoader(DiesAt(5, "exit"), batch_size=2, num_workers=2))


def test_killed_worker_detected_off_the_main_thread():
    # No SIGCHLD handler runs for a loader driven from another thread: the periodic liveness check reports it.
    errors = []

    def consume():
        try:
            list(DataLoader(DiesAt(3, "kill"), batch_size=2, num_workers=1))
        except RuntimeError as e:
            errors.append(str(e))
    t = threading.Thread(target=consume)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive() and len(errors) == 1
    assert "is killed by signal: Killed." in errors[0]


class Sleeps(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        time.sleep(0.6)
        return i


def test_timeout():
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^DataLoader timed out after 0\.2 seconds$"):
        next(iter(DataLoader(Sleeps(), batch_size=2, num_workers=1, timeout=0.2)))
    assert time.monotonic() - t0 < 5
    assert [b.tolist() for b in DataLoader(Sleeps(), batch_size=2, num_workers=2, timeout=10)] == [[0, 1], [2, 3]]
    with pytest.raises(AssertionError, match="requires timeout == 0"):
        iter(DataLoader(Sleeps(), timeout=1))


def test_argument_errors_match_pytorch():
    ds = Items(4)
    cases = [
        (dict(num_workers=-1), ValueError, "num_workers option should be non-negative; use num_workers=0 to disable "
                                           "multiprocessing."),
        (dict(timeout=-1), ValueError, "timeout option should be non-negative"),
        (dict(prefetch_factor=2), ValueError, "prefetch_factor option could only be specified in multiprocessing."),
        (dict(num_workers=1, prefetch_factor=-1), ValueError, "prefetch_factor option should be non-negative"),
        (dict(persistent_workers=True), ValueError, "persistent_workers option needs num_workers > 0"),
        (dict(multiprocessing_context="fork"), ValueError, "multiprocessing_context can only be used with "
                                                           "multi-process loading (num_workers > 0), but got "
                                                           "num_workers=0"),
        (dict(num_workers=1, multiprocessing_context="threads"), ValueError, "multiprocessing_context option should "
                                                                             "specify a valid start method in"),
        (dict(num_workers=1, multiprocessing_context=3), TypeError, "multiprocessing_context option should be a "
                                                                    "valid context object or a string"),
    ]
    torch_data = None
    try:
        import torch.utils.data as torch_data
    except ImportError:
        pass
    for kwargs, exc, msg in cases:
        with pytest.raises(exc) as e:
            DataLoader(ds, **kwargs)
        assert str(e.value).startswith(msg), str(e.value)
        if torch_data is not None:
            with pytest.raises(exc) as te:
                torch_data.DataLoader(ds, **kwargs)
            assert str(te.value).startswith(msg), str(te.value)
    dl = DataLoader(ds, num_workers=1)
    assert dl.prefetch_factor == 2 and dl.multiprocessing_context is None
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        dl.batch_size = 3
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        DataLoader(ds, num_workers=(len(os.sched_getaffinity(0)) + 1))
    assert any("This DataLoader will create" in str(x.message) for x in w)


# ------------------------------------------------------------------ worker lifetime

def test_persistent_workers_keep_their_processes():
    def epochs(persistent: bool, n: int = 3):
        dl = DataLoader(Items(8), batch_size=2, num_workers=2, persistent_workers=persistent)
        return [set(_flat(list(dl), "pid")) for _ in range(n)], dl
    pids, dl = epochs(True)
    assert len(pids[0]) == 2 and pids[0] == pids[1] == pids[2]
    assert not any(_gone(p) for p in pids[0])
    del dl
    gc.collect()
    assert _wait_gone(pids[0], 10)
    pids, _ = epochs(False)
    assert all(len(p) == 2 for p in pids) and not (pids[0] & pids[1]) and not (pids[1] & pids[2])


def test_persistent_workers_after_an_epoch_cut_short():
    dl = DataLoader(Stream(9), batch_size=2, num_workers=2, persistent_workers=True)
    it = iter(dl)
    next(it)
    # The next epoch starts over, in the same processes, and loses nothing.
    assert sorted(v for b in dl for v in b.tolist()) == list(range(9))
    assert sorted(v for b in dl for v in b.tolist()) == list(range(9))
    g = tinytorch.Generator().manual_seed(4)
    ref = [b["i"].tolist() for b in DataLoader(Items(12), batch_size=3, shuffle=True, generator=g)]
    g = tinytorch.Generator().manual_seed(4)
    dl = DataLoader(Items(12), batch_size=3, shuffle=True, generator=g, num_workers=2, persistent_workers=True)
    first = next(iter(dl))["i"].tolist()
    assert first == ref[0]
    assert len([b for b in dl]) == 4


def _pids_of(loader_iter) -> list:
    return [w.pid for w in loader_iter._workers]


def test_no_worker_outlives_its_iterator():
    # Exhausted.
    it = iter(DataLoader(Items(6), batch_size=2, num_workers=2))
    pids = _pids_of(it)
    list(it)
    assert all(_gone(p) for p in pids)
    # Deleted mid-epoch.
    it = iter(DataLoader(Items(40), batch_size=2, num_workers=2))
    next(it)
    pids = _pids_of(it)
    del it
    assert _wait_gone(pids, 10)
    # After an exception in a worker (the iterator is freed with the traceback).
    it = iter(DataLoader(FailsAt(2, ValueError("x")), batch_size=2, num_workers=2))
    pids = _pids_of(it)
    with pytest.raises(ValueError):
        list(it)
    del it
    gc.collect()
    assert _wait_gone(pids, 10)
    # Freed by the garbage collector, in a reference cycle: its workers still get their final message.
    it = iter(DataLoader(Items(40), batch_size=2, num_workers=2))
    next(it)
    it.cycle = it
    pids = _pids_of(it)
    del it
    t0 = time.monotonic()
    gc.collect()
    assert _wait_gone(pids, 10) and time.monotonic() - t0 < 4  # they exited, rather than being terminated


_ORPHAN_SCRIPT = r"""
import os, sys, time
from tinytorch.utils.data import DataLoader, Dataset

class D(Dataset):
    def __len__(self):
        return 100
    def __getitem__(self, i):
        return os.getpid()

dl = DataLoader(D(), batch_size=1, num_workers=2, persistent_workers=True)
it = iter(dl)
next(it)
print(" ".join(str(w.pid) for w in it._workers), flush=True)
time.sleep(120)
"""


def test_workers_exit_when_the_main_process_is_killed():
    p = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    pids = []
    try:
        line = p.stdout.readline()
        pids = [int(x) for x in line.split()]
        assert len(pids) == 2 and not any(_gone(q) for q in pids), (line, p.poll())
        p.kill()
        p.wait(timeout=10)
        # Each worker notices its parent is gone within MP_STATUS_CHECK_INTERVAL.
        assert _wait_gone(pids, 20), [open(f"/proc/{q}/stat").read() for q in pids if not _gone(q)]
    finally:
        p.kill()
        p.wait(timeout=10)
        for q in pids:  # only if the assertion above failed: leave no orphan behind
            if not _gone(q):
                os.kill(q, signal.SIGKILL)
        err = p.stderr.read()
        p.stdout.close()
        p.stderr.close()
    assert "Traceback" not in err, err


# ------------------------------------------------------------------ shared memory

def _memfd_mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if "memfd:tinytorch" in line)


class Images(Dataset):
    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> tinytorch.Tensor:
        return tinytorch.full((3, 224, 224), float(i))


def _collate_and_report(items):
    batch = default_collate(items)
    return {"x": batch, "stacked_into_shared_memory": batch.is_shared(), "labels": tinytorch.arange(len(items))}


def test_batches_cross_in_shared_memory_and_are_freed_with_the_tensor():
    before = _memfd_mappings()
    it = iter(DataLoader(Images(), batch_size=16, num_workers=1, collate_fn=_collate_and_report))
    batch = next(it)
    x = batch["x"]
    assert x.shape == (16, 3, 224, 224) and x.dtype is tinytorch.float32 and x.is_shared()
    assert batch["stacked_into_shared_memory"]  # the worker's stack was the only copy of the pixels
    assert batch["labels"].is_shared() and batch["labels"].tolist() == list(range(16))
    assert x[5].eq(5.0).all().item() and x[15, 2, 223, 223].item() == 15.0
    del it
    gc.collect()
    assert _memfd_mappings() > before  # the received batch maps the worker's memory
    del batch, x
    gc.collect()
    assert _memfd_mappings() == before  # ... until its tensors are freed


class Ramps(Dataset):
    def __len__(self) -> int:
        return 120

    def __getitem__(self, i: int) -> tinytorch.Tensor:
        return tinytorch.full((1000,), float(i))


def _memfd_inode(t: tinytorch.Tensor) -> str:
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            if lo <= t.data_ptr() < hi:
                assert "memfd:tinytorch" in line
                return line.split()[4]
    raise AssertionError("tensor memory not mapped")


def test_memory_of_freed_batches_is_reused_and_held_batches_stay_intact():
    kept, inodes = [], []
    for k, b in enumerate(DataLoader(Ramps(), batch_size=4, num_workers=1)):
        inodes.append(_memfd_inode(b))
        if k % 10 == 0:
            kept.append((k, b))
        del b
    assert len(inodes) == 30 and len(set(inodes)) < 15  # the worker stacked most batches into given-back blocks
    for k, b in kept:  # never into a block this process still holds
        assert b.tolist() == [[float(4 * k + j)] * 1000 for j in range(4)]


def _write_from_child(t, value) -> None:
    t.fill_(value)


def test_spawn_with_unpicklable_arguments_fails_cleanly():
    from tinytorch.utils.data.dataloader import _WorkerPool
    before = set(_WorkerPool.running)
    dl = DataLoader(Items(4), batch_size=2, num_workers=2, multiprocessing_context="spawn",
                    collate_fn=lambda items: items)
    with pytest.warns(UserWarning, match="Got pickle error when attempting to start a worker Process"):
        with pytest.raises((AttributeError, TypeError, pickle.PicklingError)):
            iter(dl)
    assert _WorkerPool.running <= before  # nothing was left starting or running


def test_share_memory_is_shared_with_forked_processes():
    import multiprocessing as mp
    t = tinytorch.zeros(4)
    assert not t.is_shared()
    assert t.share_memory_() is t and t.is_shared() and t[1:].is_shared()
    p = mp.get_context("fork").Process(target=_write_from_child, args=(t, 7.0))
    p.start()
    p.join(30)
    assert p.exitcode == 0 and t.tolist() == [7.0] * 4


# ------------------------------------------------------------------ samplers, pinning, profiler

def test_distributed_sampler_with_workers_sees_only_its_rank():
    ds = Items(21)
    seen = []
    for rank in range(3):
        sampler = DistributedSampler(ds, num_replicas=3, rank=rank, seed=2)
        got = _flat(DataLoader(ds, batch_size=2, sampler=sampler, num_workers=2), "i")
        assert got == list(sampler)  # this rank's indices, in its order, loaded by its own workers
        seen += got
    assert sorted(seen) == list(range(21))


@pytest.mark.skipif(tinytorch.accelerator.is_available(), reason="checks the CPU-only behaviour")
def test_pin_memory_without_accelerator_warns_and_loads_normally():
    for workers in (0, 2):
        with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found"):
            batches = list(DataLoader(Items(6), batch_size=3, num_workers=workers, pin_memory=True))
        assert [b["i"].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5]]
        assert not batches[0]["x"].is_pinned()
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
        tinytorch.ones(2).pin_memory()


@pytest.mark.skipif(not tinytorch.accelerator.is_available(), reason="needs a GPU")
def test_pin_memory_thread_pins_worker_batches_on_cuda():
    batches = list(DataLoader(Items(6), batch_size=3, num_workers=2, pin_memory=True))
    x = batches[0]["x"]
    assert x.is_pinned() and batches[0]["i"].is_pinned()
    y = x.to("cuda", non_blocking=True)
    tinytorch.cuda.synchronize()
    assert y.cpu().tolist() == x.tolist()


def test_profiler_shows_the_loader_span():
    dl = DataLoader(Items(8), batch_size=4, num_workers=1)
    with profile() as prof:
        for b in dl:
            (tinytorch.ones(3, requires_grad=True) * 2).sum().backward()
    names = [e.name for e in prof.events()]
    assert names.count("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__") == 3  # 2 batches + the end
    with profile() as prof:
        list(DataLoader(Items(4), batch_size=4))
    assert "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" in [e.name for e in prof.events()]


def test_sequential_batch_sampler_indices_reach_workers_unchanged():
    sampler = BatchSampler(SequentialSampler(range(10)), 3, drop_last=False)
    dl = DataLoader(Items(10), batch_sampler=sampler, num_workers=2)
    assert [b["i"].tolist() for b in dl] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


def test_train_gpt_loads_through_workers_and_its_trace_shows_it(tmp_path):
    import json
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, os.path.join(root, "examples", "train_gpt.py"), "--workers", "2", "--trace-step", "3",
           "--steps", "4", "--eval-every", "100", "--width", "32", "--layers", "1", "--context", "16",
           "--batch-size", "4", "--max-bytes", "50000", "--eval-batches", "1", "--sample-bytes", "4",
           "--out", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "done: 4 steps" in out.stdout
    with open(tmp_path / "trace.json") as f:
        spans = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    loading = [e for e in spans if e["name"] == "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"]
    compute = [e for e in spans if e["cat"] in ("forward", "backward")]
    assert len(loading) == 1 and compute and loading[0]["ts"] <= min(e["ts"] for e in compute)
