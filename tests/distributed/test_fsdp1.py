"""FullyShardedDataParallel (FSDP1's wrapper over fully_shard) on real processes: every sharding strategy and
auto-wrap policy kind trains to the same parameters as one process with the whole batch."""
import functools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402
from test_fsdp import STEPS, _init, _model, _reference, _train  # noqa: E402


def _fsdp1_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.device_mesh import init_device_mesh
    from tinytorch.distributed.fsdp import FSDPModule, FullyShardedDataParallel as FSDP, ShardingStrategy
    from tinytorch.distributed.fsdp.wrap import (ModuleWrapPolicy, lambda_auto_wrap_policy,
                                                 size_based_auto_wrap_policy, transformer_auto_wrap_policy)
    _init(rank, world, port)
    mesh = init_device_mesh("cpu", (world,))
    hybrid = init_device_mesh("cpu", (1, world))  # (replicate, shard)
    # _model defines its Block class on each call: the policies take the class of the model they wrap
    runs = {
        "full_shard": lambda block: dict(device_mesh=mesh, use_orig_params=True),
        "shard_grad_op_module_policy": lambda block: dict(sharding_strategy=ShardingStrategy.SHARD_GRAD_OP,
                                                          auto_wrap_policy=ModuleWrapPolicy({block})),
        "transformer_policy": lambda block: dict(auto_wrap_policy=functools.partial(
            transformer_auto_wrap_policy, transformer_layer_cls={block})),
        "size_policy": lambda block: dict(auto_wrap_policy=functools.partial(size_based_auto_wrap_policy,
                                                                             min_num_params=50)),
        "lambda_policy": lambda block: dict(auto_wrap_policy=functools.partial(
            lambda_auto_wrap_policy, lambda_fn=lambda m: isinstance(m, torch.nn.Linear))),
        "no_shard": lambda block: dict(sharding_strategy=ShardingStrategy.NO_SHARD),
        "hybrid_shard": lambda block: dict(sharding_strategy=ShardingStrategy.HYBRID_SHARD, device_mesh=hybrid,
                                           auto_wrap_policy=ModuleWrapPolicy({block})),
    }
    out = {}
    for name, make_kwargs in runs.items():
        m = _model(torch)
        kwargs = make_kwargs(type(m.blocks[0]))
        names = [n for n, _ in m.named_parameters()]
        sharded = FSDP(m, **kwargs)
        assert sharded.module is m and isinstance(m, FSDPModule)
        assert [n for n, _ in sharded.named_parameters()] == names  # FSDP1 strips its wrapper's prefix
        assert list(sharded.state_dict()) == list(m.state_dict())
        assert repr(sharded).startswith("FullyShardedDataParallel(\n  (_fsdp_wrapped_module): FSDPNet(")
        wrapped = sorted(n for n, sub in m.named_modules() if isinstance(sub, FSDPModule) and n)
        opt = torch.optim.AdamW(sharded.parameters(), lr=1e-2, foreach=True)
        _train(torch, sharded, opt, rank, world)
        if name == "full_shard":  # a state dict of the wrapper loads back into it, also from inside a parent
            sd = sharded.state_dict()
            sharded.load_state_dict(sd)
            parent = torch.nn.Sequential(sharded)
            assert list(parent.state_dict()) == ["0." + k for k in sd]
            parent.load_state_dict(parent.state_dict())
        if name == "no_shard":  # every rank holds every row
            assert all(p.to_local().shape == p.shape for p in sharded.parameters())
        out[name] = ({k: v.full_tensor().numpy() for k, v in sharded.state_dict().items()}, wrapped)
    # sync_module_states: rank 0's values win
    m = _model(torch)
    with torch.no_grad():
        m.inp.weight.fill_(float(rank))
    FSDP(m, sync_module_states=True)
    out["synced"] = float(m.inp.weight.full_tensor().abs().sum())
    errors = []
    for kwargs in (dict(device_mesh=init_device_mesh("cpu", (1, world))), dict(param_init_fn=lambda m: None),
                   dict(process_group=dist.group.WORLD, device_mesh=mesh)):
        try:
            FSDP(_model(torch), **kwargs)
        except (ValueError, NotImplementedError) as e:
            errors.append(str(e))
    out["errors"] = errors
    return out


def test_fsdp1_strategies_and_wrap_policies_match_one_process():
    world = 2
    ref = _reference(world)
    results = run_ranks(_fsdp1_worker, world, timeout=200)
    expect_wrapped = {"full_shard": [], "shard_grad_op_module_policy": ["blocks.0", "blocks.1", "blocks.2"],
                      "transformer_policy": ["blocks.0", "blocks.1", "blocks.2"],
                      # a block holds 54 parameters (its fc 42, under 50); the ModuleList is never wrapped
                      "size_policy": ["blocks.0", "blocks.1", "blocks.2"],
                      "lambda_policy": ["blocks.0.fc", "blocks.1.fc", "blocks.2.fc", "inp", "out"],
                      "no_shard": [], "hybrid_shard": ["blocks.0", "blocks.1", "blocks.2"]}
    for out in results:
        for name, want in expect_wrapped.items():
            params, wrapped = out[name]
            assert wrapped == want, (name, wrapped)
            assert list(params) == list(ref)
            for k in ref:
                np.testing.assert_allclose(params[k], ref[k], rtol=2e-5, atol=2e-6, err_msg=f"{name}: {k}")
        assert out["synced"] == 0.0
        assert "needs a 1-d device_mesh, got a 2-d one" in out["errors"][0]
        assert "param_init_fn is not supported" in out["errors"][1]
        assert "Cannot pass both process_group and device_mesh" in out["errors"][2]
    assert STEPS > 1
