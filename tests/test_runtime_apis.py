"""What everyday scripts reach around the tensor API: torch.random.fork_rng, nn.DataParallel (one device),
torch.autograd.profiler, nn.modules.utils, torch.cuda's streams/events/seeding (their errors without a GPU),
NumPy scalars combining as Python numbers, integer scalars wrapping into narrow dtypes, and cross entropy's
ignored rows. PyTorch's figures beside ours when it is importable."""
import importlib.util
import math

import numpy as np
import pytest

import tinytorch as torch

F = torch.nn.functional
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def test_fork_rng_restores_the_cpu_generator():
    torch.manual_seed(3)
    with torch.random.fork_rng():
        inside = torch.rand(3)
        torch.rand(5)
    after = torch.rand(3)
    assert torch.equal(inside, after)
    with torch.random.fork_rng(enabled=False):
        torch.rand(3)
    assert not torch.equal(torch.rand(3), after)
    assert torch.random.initial_seed() == 3 and torch.random.default_generator is torch.default_generator
    with pytest.raises(RuntimeError, match="torch has no module of xla"):
        with torch.random.fork_rng(device_type="xla"):
            pass


def test_data_parallel_wraps_and_runs_the_module():
    lin = torch.nn.Linear(3, 2)
    dp = torch.nn.DataParallel(lin)
    assert dp.module is lin and list(dp.state_dict()) == ["module.weight", "module.bias"]
    x = torch.randn(4, 3, requires_grad=True)
    y = dp(x)
    assert torch.equal(y, lin(x))
    y.sum().backward()
    assert lin.weight.grad is not None and x.grad.shape == (4, 3)
    assert torch.equal(torch.nn.parallel.data_parallel(lin, x), lin(x))
    plain = torch.nn.Linear(3, 2)
    plain.load_state_dict({k[len("module."):]: v for k, v in dp.state_dict().items()})
    assert torch.equal(plain(x), y)


def test_autograd_profiler_records_ops_and_user_spans():
    x = torch.ones(3, requires_grad=True)
    with torch.autograd.profiler.profile() as prof:
        with torch.autograd.profiler.record_function("my_block"):
            (x * 2).sum().backward()
    names = [row[0] for row in prof.key_averages()]
    assert "my_block" in names and "MulBackward0" in names
    assert "my_block" in prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
    with torch.autograd.profiler.profile(enabled=False) as off:
        (x * 2).sum()
    assert list(off.key_averages()) == []


def test_nn_modules_utils_tuple_parsers():
    from tinytorch.nn.modules.utils import _pair, _quadruple, _reverse_repeat_tuple, _single, _triple
    assert _pair(3) == (3, 3) and _pair((1, 2)) == (1, 2) and _single(4) == (4,) and _triple(1) == (1, 1, 1)
    assert _quadruple(0) == (0, 0, 0, 0) and _reverse_repeat_tuple((1, 2), 2) == (2, 2, 1, 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU behaviour")
def test_cuda_runtime_calls_without_a_gpu():
    c = torch.cuda
    assert c.get_rng_state_all() == [] and c.seed() is None and c.seed_all() is None
    assert c.max_memory_reserved() == 0 and "allocated" in c.memory_summary()
    for call, name in ((c.initial_seed, "initial_seed"), (lambda: c.Event(enable_timing=True), "Event"),
                       (c.Stream, "Stream"), (c.current_stream, "current_stream"), (c.mem_get_info, "mem_get_info"),
                       (lambda: c.device(0).__enter__(), "device")):
        with pytest.raises(RuntimeError, match=f"^torch.cuda.{name}: CUDA is not available"):
            call()
    with c.device(None), c.stream(None):  # no device, no stream: no change, no error
        pass


@needs_gpu
def test_cuda_events_time_work_on_a_stream():
    s = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(s):
        start.record(s)
        y = torch.randn(512, 512, device="cuda") @ torch.randn(512, 512, device="cuda")
        end.record(s)
    end.synchronize()
    assert start.elapsed_time(end) >= 0 and y.shape == (512, 512)
    assert torch.cuda.current_stream() != s and torch.cuda.initial_seed() >= 0
    free, total = torch.cuda.mem_get_info()
    assert 0 < free <= total


def test_numpy_scalars_combine_as_python_numbers():
    # np.sqrt(d_k), np.log(10000.0) are NumPy float64 scalars: PyTorch treats them as Python numbers, so a
    # float32 (or integer) tensor does not become float64
    assert (torch.arange(4) * np.float64(0.5)).dtype is torch.float32
    assert (torch.arange(4) / np.sqrt(4)).dtype is torch.float32
    assert (torch.tensor(1.0) + np.float64(0.5)).dtype is torch.float32
    assert torch.ones(2).add(torch.ones(2), alpha=np.float64(2)).dtype is torch.float32
    assert torch.ones(2).sub(torch.ones(2), alpha=np.float32(2)).tolist() == [-1.0, -1.0]
    assert (torch.ones(2, dtype=torch.int32) * np.int64(3)).dtype is torch.int32
    assert (np.float32(2) * torch.arange(2)).dtype is torch.float32
    assert (torch.ones(2, dtype=torch.float16) * np.float64(3)).dtype is torch.float16
    pe = torch.exp(torch.arange(0, 8, 2) * (-np.log(10000.0) / 8))
    assert pe.dtype is torch.float32 and torch.nn.Linear(4, 2)(pe[None]).shape == (1, 2)


def test_integer_scalars_wrap_into_narrow_dtypes():
    assert (torch.ones(2, dtype=torch.uint8) + 300).tolist() == [45, 45]
    assert (torch.ones(2, dtype=torch.int8) * 200).tolist() == [-56, -56]
    assert (torch.ones(2, dtype=torch.int16) + 70000).tolist() == [4465, 4465]
    assert (torch.ones(2, dtype=torch.uint8) + (-1)).tolist() == [0, 0]
    assert (torch.ones(2, dtype=torch.uint8) + np.int64(300)).dtype is torch.uint8


def test_cross_entropy_ignored_rows_count_for_nothing_even_with_nan_logits():
    for bad in (-math.inf, math.nan):
        x = torch.tensor([[1.0, 2.0, 3.0], [bad] * 3], requires_grad=True)
        t = torch.tensor([0, -100])
        want = -math.log(math.exp(1) / (math.exp(1) + math.exp(2) + math.exp(3)))
        for kw in ({}, {"reduction": "sum"}, {"weight": torch.tensor([1.0, 2.0, 3.0])}):
            assert F.cross_entropy(x, t, **kw).item() == pytest.approx(want, rel=1e-6)
        assert F.cross_entropy(x, t, reduction="none").tolist()[1] == 0.0
        assert math.isfinite(F.cross_entropy(x, t, label_smoothing=0.1).item())


@needs_torch
def test_numpy_scalar_and_wrap_dtypes_match_pytorch():
    import torch as pt
    for lib_a, lib_b in ((torch, pt),):
        for f in (lambda L: L.arange(4) * np.float64(0.5), lambda L: L.tensor(1.0) + np.float64(0.5),
                  lambda L: L.ones(2, dtype=L.uint8) + 300, lambda L: L.ones(2).add(L.ones(2), alpha=np.float64(2)),
                  lambda L: L.where(L.tensor([True, False]), L.arange(2), np.float64(0.5))):
            a, b = f(lib_a), f(lib_b)
            assert str(a.dtype) == str(b.dtype) and a.tolist() == b.tolist()


def test_a_numpy_array_or_number_where_a_tensor_goes_is_a_type_error():
    a = np.ones((2, 3), np.float32)
    cases = [(lambda: torch.nn.Linear(3, 2)(a), "linear(): argument 'input' (position 1) must be Tensor, not numpy.ndarray"),
             (lambda: torch.exp(1.0), "exp(): argument 'input' (position 1) must be Tensor, not float"),
             (lambda: torch.stack([a, a]), "expected Tensor as element 0 in argument 0, but got numpy.ndarray"),
             (lambda: torch.cat([torch.ones(2, 3), a]), "expected Tensor as element 1 in argument 0, but got numpy.ndarray"),
             (lambda: torch.nn.Conv2d(3, 2, 1)(np.ones((1, 3, 2, 2), np.float32)),
              "Conv2d(): argument 'input' (position 1) must be Tensor, not numpy.ndarray")]
    for call, msg in cases:
        with pytest.raises(TypeError) as info:
            call()
        assert str(info.value) == msg


def test_legacy_variable_and_bce_and_cosine_edges():
    # BCELoss at a saturated sigmoid (p exactly 0 or 1) and cosine similarity of a zero vector: finite
    # gradients, as PyTorch's
    x = torch.tensor([30.0, -30.0, 0.5], requires_grad=True)
    loss = torch.nn.BCELoss()(torch.sigmoid(x), torch.tensor([1.0, 0.0, 1.0]))
    loss.backward()
    assert math.isfinite(loss.item()) and all(math.isfinite(v) for v in x.grad.tolist())
    p = torch.tensor([1.0, 0.0], requires_grad=True)
    F.binary_cross_entropy(p, torch.tensor([0.0, 1.0])).backward()
    assert p.grad.tolist() == pytest.approx([5e11, -5e11], rel=1e-3)
    a = torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]], requires_grad=True)
    F.cosine_similarity(a, torch.tensor([[1.0, 2.0, 3.0], [0.0, 1.0, 0.0]])).sum().backward()
    assert all(math.isfinite(v) for row in a.grad.tolist() for v in row)
    assert torch.autograd.gradcheck(lambda u, v: F.binary_cross_entropy(u, v),
                                    (torch.tensor([0.2, 0.7], dtype=torch.float64, requires_grad=True),
                                     torch.tensor([0.1, 0.9], dtype=torch.float64, requires_grad=True)))


def test_foreach_ops_apply_per_tensor_in_place_and_out_of_place():
    def make():
        return [torch.tensor([0.5, 1.5, 2.0]), torch.tensor([0.7, 0.9])]
    ts = make()
    torch._foreach_mul_(ts, 2.0)
    assert ts[0].tolist() == [1.0, 3.0, 4.0] and ts[1].tolist() == pytest.approx([1.4, 1.8])
    ema, new = make(), [torch.ones(3), torch.ones(2)]
    torch._foreach_lerp_(ema, new, 0.5)  # timm's ModelEmaV3
    assert ema[1].tolist() == pytest.approx([0.85, 0.95])
    out = torch._foreach_add(make(), [1.0, 2.0])
    assert out[0].tolist() == [1.5, 2.5, 3.0] and out[1].tolist() == pytest.approx([2.7, 2.9])
    ts = make()
    torch._foreach_addcmul_(ts, make(), make(), value=2.0)
    assert ts[0].tolist() == pytest.approx([1.0, 6.0, 10.0])
    ts = make()
    torch._foreach_maximum_(ts, 1.0)
    assert ts[0].tolist() == [1.0, 1.5, 2.0]
    assert [n.item() for n in torch._foreach_norm([torch.tensor([3.0, 4.0])])] == [5.0]
    torch._foreach_zero_(ts)
    assert all(t.sum().item() == 0 for t in ts)
    with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors, got 2 and 3"):
        torch._foreach_add(make(), [1.0, 2.0, 3.0])


@needs_torch
def test_foreach_ops_match_pytorch():
    import torch as pt
    data = [np.array([0.5, 1.5, 2.0], np.float32), np.array([0.7, 0.9], np.float32)]
    for name, args in (("_foreach_sqrt", ()), ("_foreach_add_", (1.0,)), ("_foreach_div", ([2.0, 3.0],)),
                       ("_foreach_clamp_min_", (0.8,)), ("_foreach_pow", (2.0,)), ("_foreach_neg_", ())):
        res = []
        for lib in (torch, pt):
            ts = [lib.from_numpy(d.copy()) for d in data]
            r = getattr(lib, name)(ts, *args)
            res.append([t.tolist() for t in (ts if r is None else r)])
        assert all(a == pytest.approx(b) for a, b in zip(*res))


def test_hub_downloads_once_into_its_cache_and_checks_the_hash(tmp_path):
    m = torch.nn.Linear(2, 2)
    src = tmp_path / "weights-abcd.pt"
    torch.save(m.state_dict(), str(src))
    torch.hub.set_dir(str(tmp_path / "hub"))
    try:
        sd = torch.hub.load_state_dict_from_url(src.as_uri())
        assert torch.equal(sd["weight"], m.weight)
        assert sorted(p.name for p in (tmp_path / "hub" / "checkpoints").iterdir()) == ["weights-abcd.pt"]
        assert torch.equal(torch.utils.model_zoo.load_url(src.as_uri())["bias"], m.bias)
        with pytest.raises(RuntimeError, match='invalid hash value \\(expected "ffff"'):
            torch.hub.load_state_dict_from_url(src.as_uri(), file_name="other-ffff.pt", check_hash=True)
        assert not (tmp_path / "hub" / "checkpoints" / "other-ffff.pt").exists()  # nothing half-written stays
        with pytest.raises(NotImplementedError, match="hubconf.py"):
            torch.hub.load("pytorch/vision", "resnet18")
    finally:
        torch.hub._hub_dir[0] = None


def test_module_file_helpers_import_from_pytorchs_places():
    from tinytorch.nn.common_types import _size_2_t  # noqa: F401
    from tinytorch.nn.modules.utils import consume_prefix_in_state_dict_if_present
    sd = torch.nn.DataParallel(torch.nn.Linear(2, 2)).state_dict()
    consume_prefix_in_state_dict_if_present(sd, "module.")
    assert list(sd) == ["weight", "bias"]
    assert torch.functional.einsum("i,i->", torch.ones(2), torch.ones(2)).item() == 2.0
    torch._assert(torch.tensor(True), "fine")
    with pytest.raises(AssertionError, match="^shape mismatch$"):
        torch._assert(1 == 2, "shape mismatch")
    t = torch.nn.init._no_grad_trunc_normal_(torch.empty(1000), 0.0, 1.0, -0.5, 0.5)
    assert t.min().item() >= -0.5 and t.max().item() <= 0.5
    a = torch.tensor([3.0, 1.0, 2.0])
    o = torch.empty(3)
    assert torch.cumsum(a, 0, out=o) is o and o.tolist() == [3.0, 4.0, 6.0]
    v, i = torch.empty(3), torch.empty(3, dtype=torch.int64)
    r = torch.sort(a, out=(v, i))
    assert r.values is v and v.tolist() == [1.0, 2.0, 3.0] and i.tolist() == [1, 2, 0]


def test_pytorch_errors_and_warnings_for_common_slips(tmp_path):
    t = torch.ones(2, 2)
    assert (t @ np.ones((2, 2), np.float32)).tolist() == [[2.0, 2.0], [2.0, 2.0]]  # an array operand, as PyTorch
    assert (t ** np.array([2.0, 3.0], np.float32)).dtype is torch.float32
    with pytest.raises(RuntimeError, match="^masked_fill_ only supports boolean masks, but got mask with dtype long int$"):
        t.masked_fill(torch.ones(2, 2, dtype=torch.int64), 0.0)
    with pytest.raises(NotImplementedError, match=r"Only 3D, 4D and 5D input Tensors supported \(got 2D\)"):
        F.interpolate(t, scale_factor=2)
    with pytest.raises(IndexError, match="^invalid index of a 0-dim tensor. Use `tensor.item\\(\\)`"):
        torch.tensor(1.0)[0]
    with pytest.raises(RuntimeError, match="^Parent directory .*missing does not exist.$"):
        torch.save(t, str(tmp_path / "missing" / "x.pt"))
    with pytest.warns(UserWarning, match="To copy construct from a tensor, it is recommended to use"):
        torch.tensor(t)
    with pytest.warns(UserWarning, match="Converting a tensor with requires_grad=True to a scalar"):
        float(torch.ones(1, requires_grad=True))
    with pytest.raises(ValueError, match="^only one element tensors can be converted to Python scalars$"):
        int(torch.ones(2))
    with pytest.raises(IndexError, match=r"^argmax\(\): Expected reduction dim to be specified"):
        torch.tensor([]).argmax()
    with pytest.raises(RuntimeError, match="^mixed dtype \\(CPU\\): all inputs must share same datatype.$"):
        torch.nn.LayerNorm(2)(torch.ones(3, 2, dtype=torch.float64))
    assert torch.nn.LayerNorm(2)(torch.ones(3, 2).bfloat16()).dtype is torch.bfloat16  # half inputs, float32 params
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="^Can't call numpy\\(\\) on Tensor that requires grad"):
        np.asarray(x)
    a = torch.arange(5.0)
    with pytest.raises(RuntimeError, match="^unsupported operation: some elements of the input tensor and the written-to"):
        a[1:].copy_(a[:-1])
    a[::2][:2].copy_(a[1::2])  # interleaved, not overlapping: fine
    with torch.inference_mode():
        inf = torch.ones(2)
    with pytest.raises(RuntimeError, match="^Setting requires_grad=True on inference tensor outside InferenceMode"):
        inf.requires_grad_()


def test_device_types_without_a_backend_name_devices_but_hold_no_tensors():
    """PyTorch's device types all make device objects; tensors on one tinytorch has no backend for are refused
    with a build-without-it error (xpu: AssertionError, others: RuntimeError); unknown types list the valid ones."""
    assert str(torch.device("mps:0")) == "mps:0" and torch.device("xla", 1).index == 1
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda, ipu, xpu, .* device type at start of device "
                                           "string: foo"):
        torch.device("foo")
    x = torch.ones(2)
    for make in (lambda: torch.zeros(1, device="mps"), lambda: x.to("mps"), lambda: torch.randn(2, device="hpu"),
                 lambda: torch.tensor([1.0], device="mps"), lambda: torch.nn.Linear(2, 2).to("mps")):
        with pytest.raises(RuntimeError, match="not linked with support for (mps|hpu) devices"):
            make()
    with pytest.raises(AssertionError, match="Torch not compiled with XPU enabled"):
        x.to(torch.device("xpu"))


def test_xpu_and_mps_modules_answer_as_a_build_without_them():
    """Device-picking code runs: torch.xpu / torch.mps report nothing available, accept seeds, and what needs a
    device raises PyTorch's errors."""
    pick = "xpu" if torch.xpu.is_available() else "mps" if torch.mps.is_available() else "cpu"
    assert pick == "cpu" and torch.xpu.device_count() == 0 and torch.mps.device_count() == 0
    assert torch.xpu.manual_seed_all(0) is None and torch.mps.manual_seed(0) is None
    assert torch.xpu.memory_allocated() == 0 and not torch.xpu.is_initialized()
    with pytest.raises(AssertionError, match="Torch not compiled with XPU enabled"):
        torch.xpu.synchronize()
    with pytest.raises(RuntimeError, match=r"Cannot execute deviceSynchronize\(\) without MPS backend."):
        torch.mps.synchronize()


def test_skip_init_builds_without_initialising():
    """nn.utils.skip_init: the module is built on meta (nothing initialised) and given empty memory on the device
    asked for; a module without a device argument is refused with PyTorch's message."""
    lin = torch.nn.utils.skip_init(torch.nn.Linear, 3, 2, bias=False)
    assert type(lin) is torch.nn.Linear and lin.weight.shape == (2, 3) and lin.bias is None
    assert lin.weight.device == torch.device("cpu") and lin.weight.requires_grad
    lin.weight.data.fill_(1.0)
    assert torch.equal(lin(torch.ones(1, 3)), torch.full((1, 2), 3.0))
    with pytest.raises(RuntimeError, match="Module must support a 'device' arg to skip initialization"):
        torch.nn.utils.skip_init(torch.nn.ReLU)


def test_convert_conv_weight_memory_format_reaches_nested_convolutions():
    m = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 2, 2)),
                            torch.nn.Linear(2, 2))
    before = m[0].weight.detach().clone()
    assert torch.nn.utils.convert_conv2d_weight_memory_format(m, torch.channels_last) is m
    for conv in (m[0], m[1][0]):
        assert conv.weight.is_contiguous(memory_format=torch.channels_last)
        assert isinstance(conv.weight, torch.nn.Parameter) and conv.weight.requires_grad
    assert torch.equal(m[0].weight, before)
    c3 = torch.nn.utils.convert_conv3d_weight_memory_format(torch.nn.Conv3d(2, 2, 1), torch.channels_last_3d)
    assert c3.weight.is_contiguous(memory_format=torch.channels_last_3d)


def test_nll_loss2d_is_the_deprecated_name_of_nll_loss():
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        loss = torch.nn.NLLLoss2d(ignore_index=1)
    x, t = torch.randn(2, 3, 4, 4).log_softmax(1), torch.randint(0, 3, (2, 4, 4))
    assert torch.equal(loss(x, t), F.nll_loss(x, t, ignore_index=1))


def test_as_subclass_aliases_memory_and_stays_in_the_graph():
    class Tagged(torch.Tensor):
        pass
    x = torch.randn(3, requires_grad=True)
    y = x.as_subclass(Tagged)
    assert type(y) is Tagged and y.data_ptr() == x.data_ptr() and type(y.grad_fn).__name__ == "AliasBackward0"
    (y * 3).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 3.0))
    plain = torch.ones(2)
    z = plain.as_subclass(Tagged)
    plain.add_(1)  # the same memory
    assert type(z) is Tagged and not z.requires_grad and torch.equal(z, torch.full((2,), 2.0))
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        x.as_subclass(int)


def test_tensor_moves_to_devices_without_a_backend_and_record_stream_on_cpu_are_refused():
    with pytest.raises(AssertionError, match="Torch not compiled with XPU enabled"):
        torch.ones(1).xpu()
    with pytest.raises(RuntimeError, match="not linked with support for ipu devices"):
        torch.ones(1).ipu()
    with pytest.raises(RuntimeError, match="record_stream expects a CUDA tensor"):
        torch.ones(1).record_stream(None)


def test_svd_and_pca_lowrank_give_the_leading_triplets():
    """The q largest singular values and their vectors (batched); pca centres the columns first. Against NumPy's
    SVD, and the factors rebuild the best rank-q approximation."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 7, 5))
    U, S, V = torch.svd_lowrank(torch.tensor(a), q=3)
    assert U.shape == (2, 7, 3) and S.shape == (2, 3) and V.shape == (2, 5, 3)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(S.numpy(), s[:, :3], rtol=1e-12)
    np.testing.assert_allclose((U * S[:, None, :]) @ V.mT, (u[..., :3] * s[:, None, :3]) @ vh[:, :3], atol=1e-12)
    c = a[0] - a[0].mean(0)
    U, S, V = torch.pca_lowrank(torch.tensor(a[0]))
    assert S.shape == (5,)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(c, compute_uv=False), rtol=1e-12)
    with pytest.raises(ValueError, match="not greater than min"):
        torch.svd_lowrank(torch.tensor(a[0]), q=6)
    x = torch.tensor(a[0], requires_grad=True)
    torch.svd_lowrank(x, q=2)[1].sum().backward()  # gradients of the kept singular values: u_i v_i^T
    np.testing.assert_allclose(x.grad.numpy(), u[0, :, :2] @ vh[0, :2], atol=1e-10)


def test_functional_has_nn_grad_and_the_torch_function_helpers():
    assert F.grad is torch.nn.grad and F.has_torch_function_unary(torch.ones(1)) is False
    assert F.handle_torch_function is torch.overrides.handle_torch_function


def test_compiler_and_backend_settings_scripts_write_are_kept():
    """torch._inductor.config / torch._dynamo.config / backends.opt_einsum: what tuning scripts set is stored and
    read back (tinytorch.compile is eager, so nothing else changes)."""
    cfg = torch._inductor.config
    old = cfg.coordinate_descent_tuning
    try:
        cfg.coordinate_descent_tuning = True
        cfg.triton.unique_kernel_names = True
        assert torch._inductor.config.coordinate_descent_tuning and cfg.triton.unique_kernel_names
    finally:
        cfg.coordinate_descent_tuning, cfg.triton.unique_kernel_names = old, False
    assert torch.backends.opt_einsum.enabled and torch.backends.opt_einsum.strategy == "auto"
    assert torch.backends.opt_einsum.is_available() == (importlib.util.find_spec("opt_einsum") is not None)
    if not torch.cuda.is_available():
        assert torch.cuda.get_arch_list() == []
    with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):
        assert torch.utils.checkpoint._debug_enabled is True
    assert torch.utils.checkpoint._debug_enabled is None


def test_deterministic_mode_fills_uninitialized_memory():
    """With use_deterministic_algorithms(True), empty() is filled as PyTorch fills it (NaN, the integer maximum,
    True), unless utils.deterministic.fill_uninitialized_memory is False."""
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.isnan(torch.empty(3)).all() and torch.isnan(torch.empty_like(torch.ones(2, 2))).all()
        assert torch.empty(2, dtype=torch.int16).tolist() == [32767, 32767]
        assert torch.empty(2, dtype=torch.bool).all()
        torch.utils.deterministic.fill_uninitialized_memory = False
        torch.empty(3)  # not filled: nothing to check but that it still works
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = True
        torch.use_deterministic_algorithms(False)


def test_assert_allclose_is_the_deprecated_assert_close():
    with pytest.warns(FutureWarning, match="assert_allclose\\(\\)` is deprecated"):
        torch.testing.assert_allclose(torch.tensor([1.0, float("nan")]), [1.0, float("nan")])
    with pytest.warns(FutureWarning), pytest.raises(AssertionError, match="not close"):
        torch.testing.assert_allclose(torch.tensor([1.0]), [1.1])
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match="Both 'rtol' and 'atol'"):
        torch.testing.assert_allclose(torch.tensor([1.0]), [1.0], rtol=1e-3)
