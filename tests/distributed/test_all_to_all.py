"""all_to_all_single and all_to_all on real processes (pairwise exchange over the ring backend's send/recv)."""
import numpy as np
import pytest

from dist_helpers import run_ranks


def _a2a_worker(rank, world, port):
    import tinytorch
    import tinytorch.distributed as dist

    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=20)
    out = {}
    # Equal splits: row block p of rank r holds 100 * r + p.
    x = np.repeat(100.0 * rank + np.arange(world), 3).reshape(world * 3, 1).astype(np.float32) * np.ones((1, 2), np.float32)
    y = np.zeros_like(x)
    dist.all_to_all_single(y, x)
    out["equal"] = y[:, 0].tolist()
    # Uneven splits: rank r sends r + p + 1 rows to rank p, each row valued 10 * r + p.
    ins = [rank + p + 1 for p in range(world)]
    outs = [p + rank + 1 for p in range(world)]
    xi = np.concatenate([np.full(ins[p], 10 * rank + p, np.int64) for p in range(world)])
    yi = np.zeros(sum(outs), np.int64)
    w = dist.all_to_all_single(tinytorch.from_numpy(yi), tinytorch.from_numpy(xi), outs, ins, async_op=True)
    w.wait()
    out["uneven"] = yi.tolist()
    # List form, bfloat16.
    import ml_dtypes

    inl = [np.full(4, rank * world + p, ml_dtypes.bfloat16) for p in range(world)]
    outl = [np.zeros(4, ml_dtypes.bfloat16) for _ in range(world)]
    dist.all_to_all(outl, inl)
    out["list"] = [float(o[0]) for o in outl]
    try:
        dist.all_to_all_single(np.zeros(world + 1, np.float32), np.zeros(world + 1, np.float32))
    except ValueError as e:
        out["error"] = str(e)
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("world", [2, 3])
def test_all_to_all(world):
    res = run_ranks(_a2a_worker, world, timeout=60)
    for r, out in enumerate(res):
        assert out["equal"] == [100.0 * p + r for p in range(world) for _ in range(3)]
        assert out["uneven"] == [10 * p + r for p in range(world) for _ in range(p + r + 1)]
        assert out["list"] == [float(p * world + r) for p in range(world)]
        assert "divisible by the world size" in out["error"]
