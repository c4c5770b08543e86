"""NCCL backend: the run-time loader everywhere; real collectives (world size 1) where CUDA + CuPy exist."""
import numpy as np
import pytest

import tinytorch
import tinytorch.distributed as dist
from tinytorch.distributed import _nccl

HAS_GPU = tinytorch.cuda.is_available()


def _nccl_loadable():
    try:
        return _nccl.load_nccl()
    except dist.DistError as e:
        return e


def test_loader_loads_or_names_the_wheel_to_install():
    res = _nccl_loadable()
    if isinstance(res, Exception):
        msg = str(res)
        assert "libnccl.so.2" in msg
        assert "pip install nvidia-nccl-cu12" in msg and "nvidia-nccl-cu13" in msg
        assert dist.is_nccl_available() is False
    else:
        path, version = res
        assert path and version > 0
        assert dist.is_nccl_available() is True


def test_nccl_group_without_library_or_gpu_fails_clearly():
    if HAS_GPU and not isinstance(_nccl_loadable(), Exception):
        pytest.skip("NCCL and a GPU are present: covered by the GPU tests below")
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=5)
    with pytest.raises(dist.DistError, match=r"pip install nvidia-nccl-cu12|needs a CUDA GPU|CUDA driver|CuPy"):
        dist.init_process_group("nccl", store=store, rank=0, world_size=1, timeout=5)
    assert not dist.is_initialized()


def test_default_backend_is_ring_without_cuda():
    if HAS_GPU:
        pytest.skip("a GPU is present: the default backend is nccl")
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=5)
    dist.init_process_group(store=store, rank=0, world_size=1)
    try:
        assert dist.get_backend() == "ring"
    finally:
        dist.destroy_process_group()


gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU with CuPy (absent hardware)")


@pytest.fixture
def nccl_group():
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=30)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1, timeout=30)
    yield
    dist.destroy_process_group()


@gpu
def test_nccl_world_size_one_collectives(nccl_group):
    import cupy

    assert dist.get_backend() == "nccl"
    for dtype in (cupy.float16, cupy.float32, cupy.float64, cupy.int32, cupy.int64):
        x = cupy.arange(1001, dtype=dtype)
        t = tinytorch.from_numpy(np.arange(1001).astype(dtype)).to("cuda") if dtype == cupy.float32 else x
        dist.all_reduce(t)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        cupy.cuda.get_current_stream().synchronize()
        assert cupy.array_equal(x, cupy.arange(1001, dtype=dtype))
    out = cupy.zeros(8, cupy.float32)
    dist.all_gather_into_tensor(out, cupy.arange(8, dtype=cupy.float32))
    rs = cupy.zeros(8, cupy.float32)
    dist.reduce_scatter_tensor(rs, cupy.ones(8, cupy.float32))
    b = cupy.full(5, 3.0, cupy.float32)
    dist.broadcast(b, src=0)
    dist.barrier()
    assert cupy.array_equal(out, cupy.arange(8, dtype=cupy.float32)) and bool((rs == 1).all())
    assert bool((b == 3).all())
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        dist.all_reduce(np.ones(3, np.float32))


@gpu
def test_nccl_async_work_and_future(nccl_group):
    import cupy

    x = cupy.ones(1 << 20, cupy.float32)
    w = dist.all_reduce(x, async_op=True)
    fut = w.then(lambda f: "done")
    w.wait()  # the current stream waits; the host does not
    cupy.cuda.get_current_stream().synchronize()
    assert fut.wait(timeout=30) == "done"
    assert w.is_completed() and w.exception() is None
