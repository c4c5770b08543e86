"""Datasets, samplers, DataLoader batching/collation and DistributedSampler coverage (incl. real processes)."""
import json
import os
import socket
import subprocess
import sys
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import tinytorch
from tinytorch.utils.data import (BatchSampler, DataLoader, Dataset, DistributedSampler, IterableDataset,
                                  RandomSampler, SequentialSampler, Subset, TensorDataset, default_collate,
                                  random_split)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": float(i), "y": i * i, "name": f"s{i}", "v": np.full(2, i, dtype=np.float32)}


def test_tensor_dataset_and_sequential_loader():
    x = tinytorch.arange(10, dtype=tinytorch.float32).reshape(5, 2)
    y = tinytorch.tensor([0, 1, 0, 1, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 5 and ds[2][0].tolist() == [4.0, 5.0] and int(ds[2][1]) == 0
    dl = DataLoader(ds, batch_size=2)
    assert len(dl) == 3
    batches = list(dl)
    assert [type(b) for b in batches] == [list] * 3  # tuples collate to lists, as in PyTorch
    assert batches[0][0].tolist() == [[0.0, 1.0], [2.0, 3.0]] and batches[0][1].tolist() == [0, 1]
    assert batches[2][0].shape == (1, 2)
    dl = DataLoader(ds, batch_size=2, drop_last=True)
    assert len(dl) == 2 and len(list(dl)) == 2
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, tinytorch.zeros(3))


def test_default_collate_types():
    batch = default_collate([Squares(3)[i] for i in range(3)])
    assert batch["x"].dtype is tinytorch.float64 and batch["x"].tolist() == [0.0, 1.0, 2.0]
    assert batch["y"].dtype is tinytorch.int64 and batch["y"].tolist() == [0, 1, 4]
    assert batch["name"] == ["s0", "s1", "s2"]
    assert batch["v"].shape == (3, 2) and batch["v"].dtype is tinytorch.float32
    assert default_collate([True, False]).dtype is tinytorch.bool
    Point = namedtuple("Point", "a b")
    p = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(p, Point) and p.a.tolist() == [1, 3] and p.b.tolist() == [2.0, 4.0]
    lists = default_collate([[1, 2], [3, 4]])
    assert isinstance(lists, list) and [t.tolist() for t in lists] == [[1, 3], [2, 4]]
    od = default_collate([OrderedDict(a=1), OrderedDict(a=2)])
    assert isinstance(od, OrderedDict) and od["a"].tolist() == [1, 2]
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
        default_collate([object(), object()])


def test_shuffle_with_generator_is_a_deterministic_permutation():
    ds = TensorDataset(tinytorch.arange(20))

    def order(seed):
        g = tinytorch.Generator().manual_seed(seed)
        return [int(v) for b in DataLoader(ds, batch_size=3, shuffle=True, generator=g) for v in b[0]]
    a, b, c = order(1), order(1), order(2)
    assert sorted(a) == list(range(20)) and a == b and a != c and a != list(range(20))
    # Without a generator the order follows the global seed.
    tinytorch.manual_seed(7)
    first = [int(v) for b in DataLoader(ds, batch_size=20, shuffle=True) for v in b[0]]
    tinytorch.manual_seed(7)
    again = [int(v) for b in DataLoader(ds, batch_size=20, shuffle=True) for v in b[0]]
    assert first == again
    # Consecutive epochs of one loader differ.
    dl = DataLoader(ds, batch_size=20, shuffle=True)
    assert [int(v) for v in next(iter(dl))[0]] != [int(v) for v in next(iter(dl))[0]]


def test_samplers_batch_sampler_and_custom_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    rs = RandomSampler(range(6), generator=tinytorch.Generator().manual_seed(0))
    assert sorted(rs) == list(range(6)) and len(rs) == 6
    rr = RandomSampler(range(3), replacement=True, num_samples=50)
    draws = list(rr)
    assert len(draws) == 50 and set(draws) <= {0, 1, 2}
    assert list(BatchSampler(range(7), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, drop_last=False)) == 3
    ds = TensorDataset(tinytorch.arange(6))
    dl = DataLoader(ds, batch_size=2, sampler=[5, 4, 3, 2, 1, 0])
    assert [b[0].tolist() for b in dl] == [[5, 4], [3, 2], [1, 0]]
    dl = DataLoader(ds, batch_sampler=[[0, 5], [1]])
    assert [b[0].tolist() for b in dl] == [[0, 5], [1]] and len(dl) == 2
    dl = DataLoader(ds, batch_size=None)
    assert [int(x[0]) for x in dl] == list(range(6)) and len(dl) == 6
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        DataLoader(ds, sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive with batch_size, shuffle"):
        DataLoader(ds, batch_size=2, batch_sampler=[[0]])
    with pytest.raises(ValueError, match="batch_size=None option disables auto-batching"):
        DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, num_workers=-1)


def test_collate_fn_in_process_and_in_workers():
    for workers in (0, 2):
        dl = DataLoader(Squares(5), batch_size=2, num_workers=workers, collate_fn=lambda items: [it["y"] for it in items])
        assert list(dl) == [[0, 1], [4, 9], [16]]


def test_iterable_dataset_batches():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Stream(), shuffle=True)


def test_subset_and_random_split():
    ds = TensorDataset(tinytorch.arange(10))
    a, b = random_split(ds, [0.7, 0.3], generator=tinytorch.Generator().manual_seed(3))
    assert len(a) == 7 and len(b) == 3
    assert sorted([int(a[i][0]) for i in range(7)] + [int(b[i][0]) for i in range(3)]) == list(range(10))
    assert int(Subset(ds, [4, 2])[1][0]) == 2


# ------------------------------------------------------------------ DistributedSampler

@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False), (2, 4, False)])
def test_distributed_sampler_covers_every_sample_once(n, replicas, drop_last):
    ds = list(range(n))
    parts = [list(DistributedSampler(ds, num_replicas=replicas, rank=r, shuffle=True, seed=5, drop_last=drop_last))
             for r in range(replicas)]
    lengths = {len(p) for p in parts}
    assert len(lengths) == 1  # equal share on every rank
    flat = [i for p in parts for i in p]
    if drop_last:
        assert len(flat) == len(set(flat)) == (n // replicas) * replicas  # the tail is dropped, no repeats
    else:
        assert set(flat) == set(range(n))  # every sample at least once
        expected_len = -(-n // replicas)
        assert lengths == {expected_len}
        # Padding repeats only as many samples as needed to even out the ranks.
        assert len(flat) - n == expected_len * replicas - n


def test_distributed_sampler_padding_is_pytorch_order():
    # Unshuffled: indices 0..9, padded with 0, 1 to 12, then strided by rank (PyTorch's layout).
    parts = [list(DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False)) for r in range(4)]
    assert parts == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]


def test_distributed_sampler_set_epoch():
    def order(epoch, seed=0):
        s = DistributedSampler(range(50), num_replicas=2, rank=1, seed=seed)
        s.set_epoch(epoch)
        return list(s)
    assert order(0) == order(0) and order(1) == order(1)
    assert order(0) != order(1) and order(0, seed=1) != order(0)
    # Same epoch on both ranks: together they still cover everything once.
    both = []
    for r in range(2):
        s = DistributedSampler(range(50), num_replicas=2, rank=r)
        s.set_epoch(3)
        both += list(s)
    assert sorted(both) == list(range(50))
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)


def test_distributed_sampler_with_loader():
    ds = TensorDataset(tinytorch.arange(12))
    seen = []
    for r in range(3):
        sampler = DistributedSampler(ds, num_replicas=3, rank=r, seed=1)
        dl = DataLoader(ds, batch_size=2, sampler=sampler)
        assert len(dl) == 2
        seen += [int(v) for b in dl for v in b[0]]
    assert sorted(seen) == list(range(12))


_WORKER = r"""
import json, sys
import tinytorch.distributed as dist
from tinytorch.utils.data import DistributedSampler
rank, port = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=60)
s = DistributedSampler(range(11), seed=4)
s.set_epoch(2)
print(json.dumps({"rank": s.rank, "replicas": s.num_replicas, "indices": list(s)}))
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_distributed_sampler_reads_rank_and_world_from_process_group():
    port = _free_port()
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(r), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for r in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["rank"] for o in outs] == [0, 1] and all(o["replicas"] == 2 for o in outs)
    expected = [None, None]
    for r in range(2):
        s = DistributedSampler(range(11), num_replicas=2, rank=r, seed=4)
        s.set_epoch(2)
        expected[r] = list(s)
    assert [o["indices"] for o in outs] == expected
    assert set(outs[0]["indices"] + outs[1]["indices"]) == set(range(11))


def test_distributed_sampler_without_group_raises():
    import tinytorch.distributed as dist
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="not been initialized"):
        DistributedSampler(range(4))


def test_tensor_dataset_batches_equal_rowwise_collation():
    x = tinytorch.randn(23, 3, 2)
    y = tinytorch.randint(0, 5, (23,))
    ds = TensorDataset(x, y)

    def batches(**kw):
        return list(DataLoader(ds, batch_size=4, shuffle=True, generator=tinytorch.Generator().manual_seed(9), **kw))
    fast = batches()
    rowwise = batches(collate_fn=lambda items: default_collate(items))
    assert len(fast) == len(rowwise) == 6
    for f, r in zip(fast, rowwise):
        assert type(f) is list and len(f) == 2
        for a, b in zip(f, r):
            assert a.dtype is b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.numpy(), b.numpy())
