"""SyncBatchNorm on 2 real processes (loopback ring backend) under DDP: each rank's batch of B normalised by
statistics over both ranks equals BatchNorm over the whole batch of 2B in one process (outputs, gradients,
parameters and running statistics after a few SGD steps)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed"))
from dist_helpers import run_ranks  # noqa: E402

B = 3
STEPS = 3


def _model(torch):
    nn = torch.nn
    torch.manual_seed(7)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Conv2d(4, 3, 1), nn.BatchNorm2d(3, momentum=None))


def _batch(step: int):
    rng = np.random.default_rng(step)
    return rng.standard_normal((2 * B, 2, 5, 5)), rng.standard_normal((2 * B, 3, 5, 5))


def _state(model) -> dict:
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _reference():
    import tinytorch as torch
    model = _model(torch).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    outs = []
    for step in range(STEPS):
        x, t = _batch(step)
        opt.zero_grad()
        y = model(torch.tensor(x))
        loss = ((y - torch.tensor(t)) ** 2).mean()
        loss.backward()
        outs.append(y.detach().numpy())
        opt.step()
    return _state(model), outs


def _worker(rank: int, world: int, port: int):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(_model(torch).double())
    kinds = [type(m).__name__ for m in model.modules()]
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    outs = []
    for step in range(STEPS):
        x, t = _batch(step)
        sl = slice(rank * B, (rank + 1) * B)
        opt.zero_grad()
        y = ddp(torch.tensor(x[sl]))
        # Each rank's loss is its share of the global mean; DDP averages gradients, hence the world factor.
        loss = ((y - torch.tensor(t[sl])) ** 2).mean()
        loss.backward()
        outs.append(y.detach().numpy())
        opt.step()
    model.eval()
    eval_out = model(torch.tensor(_batch(0)[0][:2])).detach().numpy()
    dist.destroy_process_group()
    return {"state": _state(model), "outs": outs, "kinds": kinds, "eval": eval_out}


def test_sync_batchnorm_over_two_ranks_equals_batchnorm_over_the_whole_batch():
    results = run_ranks(_worker, 2, timeout=120)
    ref_state, ref_outs = _reference()
    assert results[0]["kinds"].count("SyncBatchNorm") == 2 and "BatchNorm2d" not in results[0]["kinds"]
    for rank, res in enumerate(results):
        for step in range(STEPS):
            np.testing.assert_allclose(res["outs"][step], ref_outs[step][rank * B:(rank + 1) * B], atol=1e-10,
                                       err_msg=f"rank {rank} step {step} output")
        for k, v in ref_state.items():
            np.testing.assert_allclose(res["state"][k], v, atol=1e-10, err_msg=f"rank {rank} {k}")
    assert int(results[0]["state"]["1.num_batches_tracked"]) == STEPS
    np.testing.assert_array_equal(results[0]["eval"], results[1]["eval"])
