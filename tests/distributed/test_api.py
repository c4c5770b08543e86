"""Single-process checks of the Python API: world size 1 semantics, argument validation, init errors."""
import numpy as np
import pytest

import tinytorch
import tinytorch.distributed as dist


@pytest.fixture
def world1():
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=10)
    dist.init_process_group("ring", store=store, rank=0, world_size=1, timeout=10)
    yield store
    dist.destroy_process_group()


def test_not_initialized_errors():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(np.ones(2, np.float32))
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()


def test_init_errors(monkeypatch):
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        dist.init_process_group("ring", init_method="env://", rank=0, world_size=1)
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("mpi", init_method="env://", rank=0, world_size=1)
    with pytest.raises(ValueError, match="out of range"):
        dist.init_process_group("ring", init_method="tcp://127.0.0.1:1", rank=3, world_size=2)
    with pytest.raises(ValueError, match="tcp://host:port"):
        dist.init_process_group("ring", init_method="tcp://nohost", rank=0, world_size=1)
    assert not dist.is_initialized()


def test_double_init_rejected(world1):
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group("ring", store=world1, rank=0, world_size=1)


def test_world_size_one_semantics(world1):
    assert dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.get_backend() == "ring"
    t = tinytorch.from_numpy(np.array([1.0, 2.0, 3.0], np.float32))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert np.array_equal(t._data, [1, 2, 3])
    out = np.zeros(3, np.float32)
    dist.all_gather_into_tensor(out, np.arange(3, dtype=np.float32))
    assert np.array_equal(out, [0, 1, 2])
    rs = np.zeros(4, np.int64)
    dist.reduce_scatter_tensor(rs, np.arange(4, dtype=np.int64))
    assert np.array_equal(rs, [0, 1, 2, 3])
    b = np.ones(2, np.float64)
    dist.broadcast(b, src=0)
    dist.reduce(b, dst=0)
    lst = [np.zeros(2, np.float64)]
    dist.all_gather(lst, np.array([5.0, 6.0]))
    assert np.array_equal(lst[0], [5, 6])
    dist.barrier()
    w = dist.all_reduce(np.ones(0, np.float32), async_op=True)
    assert w.wait() and w.is_completed() and w.exception() is None
    assert w.get_future().wait(timeout=5) is not None
    objs = [None]
    dist.all_gather_object(objs, {"a": 1})
    assert objs == [{"a": 1}]


def test_argument_validation(world1):
    with pytest.raises(ValueError, match="contiguous"):
        dist.all_reduce(np.ones((4, 4), np.float32)[:, 0])
    with pytest.raises(TypeError, match="bool is not supported"):
        dist.all_reduce(np.ones(3, bool))
    with pytest.raises(TypeError, match="AVG needs a floating-point"):
        dist.all_reduce(np.ones(3, np.int32), op=dist.ReduceOp.AVG)
    with pytest.raises(ValueError, match="must have input.numel"):
        dist.all_gather_into_tensor(np.zeros(5, np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="must have output.numel"):
        dist.reduce_scatter_tensor(np.zeros(2, np.float32), np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="differs from input dtype"):
        dist.all_gather_into_tensor(np.zeros(2, np.float64), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="tensor_list has 2 tensors"):
        dist.all_gather([np.zeros(1), np.zeros(1)], np.zeros(1))
    with pytest.raises(ValueError, match="not a member"):
        dist.broadcast(np.zeros(1), src=3)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(2, np.float32)
        ro.flags.writeable = False
        dist.all_reduce(ro)
    with pytest.raises(TypeError, match="expected a tinytorch Tensor or an ndarray"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="src is required"):
        dist.recv(np.zeros(1))
    with pytest.raises(ValueError, match="outside the world"):
        dist.new_group([0, 5])


def test_destroyed_group_rejects_calls():
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=10)
    dist.init_process_group("ring", store=store, rank=0, world_size=1)
    g = dist.group.WORLD
    dist.destroy_process_group()
    with pytest.raises(dist.DistError, match="destroyed"):
        g._backend.allreduce(0, 0, 2, 0, None, False)
