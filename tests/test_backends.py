"""Backend switches and device-generic calls scripts make first (PyTorch's names, defaults and errors)."""
import pytest

import tinytorch


@pytest.fixture(autouse=True)
def _restore():
    m = tinytorch.backends.cuda.matmul
    saved = (tinytorch.get_float32_matmul_precision(), m.allow_fp16_reduced_precision_reduction,
             m.allow_bf16_reduced_precision_reduction, tinytorch.backends.cudnn.benchmark,
             tinytorch.backends.cudnn.deterministic, tinytorch.backends.cudnn.allow_tf32,
             tinytorch.are_deterministic_algorithms_enabled(), tinytorch.backends.cuda.flash_sdp_enabled())
    yield
    tinytorch.set_float32_matmul_precision(saved[0])
    m.allow_fp16_reduced_precision_reduction, m.allow_bf16_reduced_precision_reduction = saved[1], saved[2]
    c = tinytorch.backends.cudnn
    c.benchmark, c.deterministic, c.allow_tf32 = saved[3], saved[4], saved[5]
    tinytorch.use_deterministic_algorithms(saved[6])
    tinytorch.backends.cuda.enable_flash_sdp(saved[7])


def test_matmul_precision_and_tf32_are_one_setting():
    assert tinytorch.get_float32_matmul_precision() == "highest"
    assert tinytorch.backends.cuda.matmul.allow_tf32 is False
    tinytorch.set_float32_matmul_precision("high")
    assert tinytorch.backends.cuda.matmul.allow_tf32 is True
    tinytorch.backends.cuda.matmul.allow_tf32 = False
    assert tinytorch.get_float32_matmul_precision() == "highest"
    tinytorch.backends.cuda.matmul.allow_tf32 = True
    assert tinytorch.get_float32_matmul_precision() == "high"
    with pytest.warns(UserWarning, match="x is not one of 'highest', 'high', or 'medium'"):
        tinytorch.set_float32_matmul_precision("x")
    assert tinytorch.get_float32_matmul_precision() == "high"


def test_cublas_switches_store_and_unknown_names_raise():
    m = tinytorch.backends.cuda.matmul
    assert m.allow_fp16_reduced_precision_reduction is True and m.allow_bf16_reduced_precision_reduction is True
    m.allow_bf16_reduced_precision_reduction = False
    assert m.allow_bf16_reduced_precision_reduction is False
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        m.foo
    with pytest.raises(AttributeError, match="Unknown attribute foo"):
        m.foo = 1


def test_sdp_cudnn_mps_cpu_switches():
    b = tinytorch.backends
    assert b.cuda.flash_sdp_enabled() and b.cuda.mem_efficient_sdp_enabled() and b.cuda.math_sdp_enabled()
    b.cuda.enable_flash_sdp(False)
    assert not b.cuda.flash_sdp_enabled()
    with b.cuda.sdp_kernel(enable_flash=True, enable_math=False):
        assert b.cuda.flash_sdp_enabled() and not b.cuda.math_sdp_enabled()
    assert not b.cuda.flash_sdp_enabled() and b.cuda.math_sdp_enabled()
    assert (b.cudnn.enabled, b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.allow_tf32) == (True, False, False, True)
    b.cudnn.benchmark = True
    b.cudnn.deterministic = True
    assert b.cudnn.benchmark and b.cudnn.deterministic
    assert b.cudnn.is_available() is False and b.cudnn.version() is None
    assert b.mps.is_available() is False and b.mps.is_built() is False
    assert b.cpu.get_cpu_capability() in ("DEFAULT", "AVX2")
    assert tinytorch.cpu.is_available() and tinytorch.cpu.device_count() == 1


def test_deterministic_algorithms():
    assert not tinytorch.are_deterministic_algorithms_enabled()
    tinytorch.use_deterministic_algorithms(True, warn_only=True)
    assert tinytorch.are_deterministic_algorithms_enabled()
    assert tinytorch.is_deterministic_algorithms_warn_only_enabled()
    assert tinytorch.get_deterministic_debug_mode() == 1
    tinytorch.use_deterministic_algorithms(False)
    assert tinytorch.get_deterministic_debug_mode() == 0
    with pytest.raises(TypeError, match="argument 'mode'"):
        tinytorch.use_deterministic_algorithms(1)


def test_compile_returns_its_argument_and_seeding_repeats():
    model = tinytorch.nn.Linear(2, 2)
    compiled = tinytorch.compile(model)
    # PyTorch's OptimizedModule: the original as _orig_mod, its state_dict keys prefixed, attributes forwarded
    assert type(compiled).__name__ == "OptimizedModule" and compiled._orig_mod is model
    assert list(compiled.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
    assert compiled.weight is model.weight and compiled.in_features == 2
    x = tinytorch.randn(3, 2)
    assert tinytorch.equal(compiled(x), model(x))
    compiled.eval()
    assert not model.training
    fresh = tinytorch.compile(tinytorch.nn.Linear(2, 2))
    fresh.load_state_dict(compiled.state_dict())
    assert tinytorch.equal(fresh(x), model(x))
    assert tinytorch.compile(mode="max-autotune")(model)._orig_mod is model
    assert tinytorch.compile(model, disable=True) is model

    def f(t):
        return t * 2
    assert tinytorch.compile(f) is f and tinytorch.compile()(f) is f
    assert tinytorch.compiler.compile(model)._orig_mod is model and tinytorch.compiler.disable(model) is model
    assert tinytorch.compiler.is_compiling() is False and tinytorch._dynamo.is_compiling() is False
    tinytorch.manual_seed(3)
    a = tinytorch.randn(4)
    tinytorch.cuda.manual_seed_all(3)
    tinytorch.manual_seed(3)
    assert tinytorch.equal(a, tinytorch.randn(4))
    if not tinytorch.cuda.is_available():
        assert tinytorch.cuda.is_bf16_supported() is False
    else:
        tinytorch.cuda.manual_seed_all(11)
        c = tinytorch.randn(4, device="cuda")
        tinytorch.cuda.manual_seed(11)
        assert tinytorch.equal(c, tinytorch.randn(4, device="cuda"))
    from tinytorch import _creation
    tinytorch.cuda.manual_seed_all(11)  # CUDA devices first used after this start from seed 11
    assert _creation._cuda_seed[0] == 11

