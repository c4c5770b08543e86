"""DTensor on real processes (ring backend): redistribute between every pair of layouts on 1-d and 2x2 meshes
(uneven pieces included) against the pieces cut from the whole tensor, gradcheck of redistribute /
from_local / full_tensor round trips in float64, from_local's grad_placements and run_check, _StridedShard, and
DeviceMesh slicing and flattening."""
from __future__ import annotations

import itertools

import numpy as np

from dist_helpers import run_ranks


def _init(rank, world, port, timeout=60):
    import tinytorch.distributed as dist
    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timeout)


def _expected_piece(full: np.ndarray, placements, mesh_shape, coord):
    """The piece a rank at `coord` holds: mesh dims cut the tensor in order (torch.chunk pieces)."""
    piece = full
    for d, p in enumerate(placements):
        if p.is_shard():
            n = mesh_shape[d]
            size = piece.shape[p.dim]
            step = -(-size // n)
            start = min(coord[d] * step, size)
            piece = np.take(piece, range(start, min(start + step, size)), axis=p.dim)
    return piece


def _layouts(mesh_ndim):
    from tinytorch.distributed.tensor import Partial, Replicate, Shard
    one = [Shard(0), Shard(1), Replicate(), Partial()]
    srcs = list(itertools.product(one, repeat=mesh_ndim))
    dsts = list(itertools.product(one[:3], repeat=mesh_ndim))
    return srcs, dsts


def _redistribute_worker(rank, world, port, mesh_shape, shape, gradcheck_pairs):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.autograd import gradcheck
    from tinytorch.distributed.tensor import DTensor, Replicate, distribute_tensor
    from tinytorch.distributed.tensor._api import _redistribute
    _init(rank, world, port)
    mesh = dist.init_device_mesh("cpu", mesh_shape)
    full = torch.tensor(np.arange(np.prod(shape), dtype=np.float64).reshape(shape))
    rep = tuple(Replicate() for _ in mesh_shape)
    srcs, dsts = _layouts(len(mesh_shape))
    pieces = {}
    for src, dst in itertools.product(srcs, dsts):
        d = _redistribute(distribute_tensor(full, mesh, rep), src)  # R -> src: a cut or a share of the value
        out = d.redistribute(mesh, dst)
        pieces[(str(src), str(dst))] = (out.to_local().numpy().copy(), out.full_tensor().numpy(),
                                        tuple(out.shape), tuple(map(str, out.placements)))
    checked = 0
    g = np.random.default_rng(0)
    for src, dst in [p for i, p in enumerate(itertools.product(srcs, dsts)) if i % gradcheck_pairs == 0]:
        weights = torch.tensor(g.standard_normal(shape))

        def f(x, src=src, dst=dst):
            d = _redistribute(DTensor.from_local(x, mesh, rep), src) * 1.5
            return d.redistribute(mesh, dst).full_tensor() * weights
        x = torch.tensor(g.standard_normal(shape), requires_grad=True)
        assert gradcheck(f, (x,), eps=1e-6, atol=1e-7)
        checked += 1
    dist.destroy_process_group()
    return pieces, checked, mesh.get_coordinate()


def _check_pieces(res, mesh_shape, shape):
    full = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    srcs, dsts = _layouts(len(mesh_shape))
    for pieces, checked, coord in res:
        assert checked > 0
        for src, dst in itertools.product(srcs, dsts):
            local, whole, gshape, placements = pieces[(str(src), str(dst))]
            np.testing.assert_allclose(local, _expected_piece(full, dst, mesh_shape, coord), err_msg=f"{src}->{dst}")
            np.testing.assert_allclose(whole, full, err_msg=f"{src}->{dst}")
            assert gshape == shape and placements == tuple(map(str, dst))


def test_redistribute_every_pair_1d_uneven_with_gradcheck():
    res = run_ranks(_redistribute_worker, 2, (2,), (5, 3), 1, timeout=180)
    _check_pieces(res, (2,), (5, 3))


def test_redistribute_every_pair_2x2_mesh_with_gradcheck():
    res = run_ranks(_redistribute_worker, 4, (2, 2), (5, 6), 16, timeout=300)
    _check_pieces(res, (2, 2), (5, 6))


def _api_worker(rank, world, port):
    import tinytorch as torch
    import tinytorch.distributed as dist
    from tinytorch.distributed.device_mesh import _mesh_resources
    from tinytorch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from tinytorch.distributed.tensor.placement_types import _StridedShard
    _init(rank, world, port)
    mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    out = {}
    # DeviceMesh: slices, coordinates, groups, flattening, the current mesh
    dp, tp = mesh["dp"], mesh["tp"]
    out["mesh"] = (dp._ranks.tolist(), tp._ranks.tolist(), mesh.get_coordinate(), mesh.get_local_rank("tp"),
                   mesh.size(1), mesh["dp", "tp"] is mesh, dist.get_process_group_ranks(mesh.get_group("dp")))
    try:
        mesh["tp", "dp"]
        out["reordered"] = None
    except KeyError as e:
        out["reordered"] = str(e)
    flat = mesh._flatten()
    buf = torch.tensor([float(rank)])
    dist.all_reduce(buf, group=flat.get_group())
    out["flat"] = (flat._ranks.tolist(), flat.mesh_dim_names, mesh["dp_tp"] is flat, buf.item())
    with tp:
        out["current"] = _mesh_resources.get_current_mesh() is tp
    # from_local: the gradient of each local piece, default and with grad_placements
    local = torch.full((2, 3), float(rank), dtype=torch.float64, requires_grad=True)
    d = DTensor.from_local(local, tp, [Shard(0)])
    w = torch.tensor(np.arange(12.0).reshape(4, 3))
    (d.full_tensor() * w).sum().backward()
    out["from_local_grad"] = local.grad.numpy().copy()
    leaf = distribute_tensor(torch.zeros(3, dtype=torch.float64), tp, [Replicate()])
    leaf.requires_grad_(True)
    (leaf.to_local(grad_placements=[Partial()]) * (rank + 1)).sum().backward()
    out["to_local_partial_grad"] = (leaf.grad.to_local().numpy().copy(), str(leaf.grad.placements))
    # run_check broadcasts a replicated piece from the first rank of its mesh dim
    r = DTensor.from_local(torch.full((2,), float(rank)), tp, [Replicate()], run_check=True)
    out["run_check"] = r.to_local().numpy().copy()
    try:
        DTensor.from_local(torch.ones(2, dtype=torch.float64 if rank == 0 else torch.float32), mesh,
                           [Replicate(), Replicate()], run_check=True)
        out["run_check_mismatch"] = None
    except ValueError as e:
        out["run_check_mismatch"] = str(e)
    # _StridedShard: TP cut first (tp), then FSDP (dp) inside each TP piece
    full = torch.arange(8, dtype=torch.float64).reshape(8, 1)
    s = distribute_tensor(full, mesh, [_StridedShard(0, split_factor=2), Shard(0)])
    out["strided"] = (s.to_local().numpy().ravel().tolist(), s.full_tensor().numpy().ravel().tolist(),
                      s.redistribute(mesh, [Replicate(), Shard(0)]).to_local().numpy().ravel().tolist())
    # uneven Shard(i) -> Shard(j) on the tp dim is an all-to-all; pending max/avg reduce with their op
    x = torch.tensor(np.arange(35.0).reshape(5, 7))
    a2a = distribute_tensor(x, tp, [Shard(0)]).redistribute(tp, [Shard(1)])
    out["a2a"] = a2a.to_local().numpy().copy()
    pm = DTensor.from_local(torch.tensor([float(rank), -float(rank)]), mesh, [Partial("max"), Partial("max")])
    pa = DTensor.from_local(torch.tensor([float(rank)]), mesh, [Partial("avg"), Replicate()])
    out["partials"] = (pm.full_tensor().numpy().tolist(), pa.full_tensor().numpy().tolist())
    # factories make only this rank's piece
    import tinytorch.distributed.tensor as dt
    f = dt.full((5, 4), 7.0, device_mesh=mesh, placements=[Shard(0), Shard(1)])
    o = dt.ones(5, 4, device_mesh=tp, placements=[Shard(0)], requires_grad=True)
    out["factories"] = (tuple(f.to_local().shape), f.full_tensor().numpy().tolist() == [[7.0] * 4] * 5,
                        tuple(o.to_local().shape), o.requires_grad, o.full_tensor().sum().item(),
                        tuple(dt.randn(4, 6, device_mesh=tp, placements=[Shard(1)]).to_local().shape))
    dist.destroy_process_group()
    return out


def test_dtensor_api_device_mesh_and_strided_shard():
    res = run_ranks(_api_worker, 4, timeout=180)
    for rank, o in enumerate(res):
        coord = (rank // 2, rank % 2)
        dp_ranks, tp_ranks, c, tp_rank, size1, same, group = o["mesh"]
        assert dp_ranks == [coord[1], coord[1] + 2] and tp_ranks == [2 * coord[0], 2 * coord[0] + 1]
        assert c == coord and tp_rank == coord[1] and size1 == 2 and same and group == dp_ranks
        assert "ascending order" in o["reordered"]
        assert o["flat"] == ([0, 1, 2, 3], ("dp_tp",), True, 6.0)
        assert o["current"]
        w = np.arange(12.0).reshape(4, 3)
        np.testing.assert_array_equal(o["from_local_grad"], w[2 * coord[1]:2 * coord[1] + 2])
        grad, placements = o["to_local_partial_grad"]
        np.testing.assert_array_equal(grad, [4.0 * coord[0] + 3] * 3)  # the tp pair's terms rank + 1, summed
        assert placements == "(Replicate(),)"
        np.testing.assert_array_equal(o["run_check"], [2.0 * coord[0]] * 2)
        assert "rank 0" in o["run_check_mismatch"] or "rank 1" in o["run_check_mismatch"]
        local, whole, regathered = o["strided"]
        assert local == [[0, 1], [4, 5], [2, 3], [6, 7]][rank]  # row blocks 0, 2, 1, 3 as PyTorch lays them out
        assert whole == list(range(8)) and regathered == [[0, 1, 2, 3], [4, 5, 6, 7]][coord[1]]
        x = np.arange(35.0).reshape(5, 7)
        np.testing.assert_array_equal(o["a2a"], x[:, 4 * coord[1]:4 * coord[1] + 4])
        assert o["partials"] == ([3.0, 0.0], [1.0 + coord[1] * 1.0])
        rows = (3, 2)[coord[0]]  # 5 rows cut in torch.chunk pieces of 3 and 2
        assert o["factories"] == ((rows, 2), True, ((3, 2)[coord[1]], 4), True, 20.0, (4, 3))
