"""Activation checkpointing composed with fully_shard, as torchtitan applies it (AC first, then FSDP per block
and the root), on real processes over the ring backend: same parameters as one process on the whole batch."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402
from test_fsdp import _init, _model, _reference, _train  # noqa: E402


def _worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointWrapper, apply_activation_checkpointing)
    from tinytorch.distributed.fsdp import fully_shard
    _init(rank, world, port)
    out = {}
    for reshard in (True, False):
        m = _model(torch)
        apply_activation_checkpointing(m, check_fn=lambda mod: type(mod).__name__ == "Block")
        calls = []
        for b in m.blocks:
            assert isinstance(b, CheckpointWrapper)
            b._checkpoint_wrapped_module.register_forward_pre_hook(lambda *a: calls.append(1))
            fully_shard(b, reshard_after_forward=reshard)
        fully_shard(m, reshard_after_forward=reshard)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        _train(torch, m, opt, rank, world)
        out[reshard] = {k: v.full_tensor().numpy() for k, v in m.state_dict().items()}
        out[f"calls_{reshard}"] = len(calls)
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("world", [2])
def test_checkpoint_wrapped_blocks_under_fully_shard_match_one_process(world):
    from test_fsdp import STEPS
    ref = _reference(world)
    results = run_ranks(_worker, world, timeout=120)
    for res in results:
        for reshard in (True, False):
            assert sorted(res[reshard]) == sorted(ref)  # keys without _checkpoint_wrapped_module.
            for k, v in ref.items():
                np.testing.assert_allclose(res[reshard][k], v, rtol=1e-5, atol=1e-6, err_msg=k)
            assert res[f"calls_{reshard}"] == 2 * 3 * STEPS  # each block's forward ran again in backward
