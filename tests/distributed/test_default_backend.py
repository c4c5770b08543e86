"""get_default_backend_for_device: 'ring' for cpu (PyTorch says 'gloo', which tinytorch accepts as its alias),
'nccl' for cuda; the answer initialises a real group."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402

import tinytorch as torch  # noqa: E402
import tinytorch.distributed as dist  # noqa: E402


@pytest.mark.parametrize("device, backend", [("cpu", "ring"), ("cuda", "nccl"), ("cuda:1", "nccl"),
                                             (torch.device("cpu"), "ring"), (torch.device("cuda", 0), "nccl")])
def test_device_to_backend_mapping(device, backend):
    assert dist.get_default_backend_for_device(device) == backend
    assert dist.Backend.default_device_backend_map[torch.device(device).type] == backend


def test_invalid_device():
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, .*, meta, .* device type at start of device string: xyz"):
        dist.get_default_backend_for_device("xyz")
    saved = dict(dist.Backend.default_device_backend_map)
    try:
        del dist.Backend.default_device_backend_map["cuda"]
        with pytest.raises(ValueError, match="Default backend not registered for device : cuda"):
            dist.get_default_backend_for_device("cuda")
    finally:
        dist.Backend.default_device_backend_map.update(saved)


def test_gloo_is_the_ring_backend():
    assert dist.Backend("gloo") == dist.Backend("ring") == dist.get_default_backend_for_device("cpu")


def _init_with_default(rank: int, world: int, port: int):
    import tinytorch as torch
    import tinytorch.distributed as dist

    backend = dist.get_default_backend_for_device(torch.device("cpu"))
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    out = (dist.get_backend(), float(t))
    dist.destroy_process_group()
    return out


def test_default_backend_initialises_a_group():
    assert run_ranks(_init_with_default, 2, timeout=60) == [("ring", 3.0), ("ring", 3.0)]
