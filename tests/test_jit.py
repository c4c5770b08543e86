"""tinytorch.jit: scripted and traced modules and functions run eagerly and keep the ScriptModule surface (training,
state_dict, save/load); markers are identities; fork/wait; isinstance on TorchScript types."""
import copy
import io
import typing
import warnings
import zipfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest

import tinytorch
import tinytorch.jit
from tinytorch import nn

# script/trace/save/load warn as PyTorch 2.x does (checked once, at the end)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(tinytorch.relu(self.bn(self.fc1(x))))

    @tinytorch.jit.ignore
    def debug_name(self) -> str:
        return "net"


def scale(x, k: float = 2.0):
    return x * k


@tinytorch.jit.script
def scripted_add_one(x):
    return x + 1


def _inputs():
    return tinytorch.tensor(np.random.default_rng(0).standard_normal((5, 4)), dtype=tinytorch.float32)


def test_script_module_types_and_sharing():
    m = Net()
    sm = tinytorch.jit.script(m)
    assert isinstance(sm, tinytorch.jit.ScriptModule) and isinstance(sm, tinytorch.jit.RecursiveScriptModule)
    assert isinstance(sm, nn.Module) and isinstance(sm, Net)
    assert type(sm).__name__ == "RecursiveScriptModule" and sm.original_name == "Net"
    assert isinstance(sm.fc1, tinytorch.jit.RecursiveScriptModule) and isinstance(sm.fc1, nn.Linear)
    # parameters are shared with the original, the training flag is not
    assert sm.fc1.weight is m.fc1.weight
    m.eval()
    assert sm.training and sm.bn.training
    assert [n for n, _ in sm.named_parameters()] == [n for n, _ in m.named_parameters()]
    assert list(sm.state_dict()) == list(m.state_dict())
    assert sm.debug_name() == "net"
    assert tinytorch.jit.script(sm) is sm


def test_script_module_matches_eager_and_repr():
    m = Net().eval()
    sm = tinytorch.jit.script(m)
    x = _inputs()
    np.testing.assert_array_equal(sm(x).detach().numpy(), m(x).detach().numpy())
    assert repr(sm) == ("RecursiveScriptModule(\n  original_name=Net\n"
                        "  (fc1): RecursiveScriptModule(original_name=Linear)\n"
                        "  (bn): RecursiveScriptModule(original_name=BatchNorm1d)\n"
                        "  (fc2): RecursiveScriptModule(original_name=Linear)\n)")
    assert sm.code.startswith("def forward(self, x):")
    with pytest.raises(NotImplementedError, match="builds no TorchScript graph"):
        sm.graph


def test_scripted_module_trains():
    sm = tinytorch.jit.script(Net())
    opt = tinytorch.optim.SGD(sm.parameters(), lr=0.1)
    x, target = _inputs(), tinytorch.tensor([0, 1, 0, 1, 1])
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(sm(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.8
    assert sm.bn.num_batches_tracked.item() == 20


def test_save_load_round_trip(tmp_path):
    sm = tinytorch.jit.script(Net()).eval()
    path = tmp_path / "net.pt"
    tinytorch.jit.save(sm, path, _extra_files={"meta.txt": "hello"})
    extra = {"meta.txt": ""}
    loaded = tinytorch.jit.load(path, _extra_files=extra)
    assert extra["meta.txt"] == b"hello"
    assert isinstance(loaded, tinytorch.jit.ScriptModule) and isinstance(loaded, Net) and not loaded.training
    x = _inputs()
    np.testing.assert_array_equal(loaded(x).detach().numpy(), sm(x).detach().numpy())
    for a, b in zip(loaded.state_dict().values(), sm.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    buf = io.BytesIO()
    sm.save(buf)
    buf.seek(0)
    assert isinstance(tinytorch.jit.load(buf), tinytorch.jit.RecursiveScriptModule)


def test_save_load_traced_module_and_function(tmp_path):
    traced = tinytorch.jit.trace(Net().eval(), _inputs())
    buf = io.BytesIO()
    tinytorch.jit.save(traced, buf)
    buf.seek(0)
    loaded = tinytorch.jit.load(buf)
    assert type(loaded).__name__ == "TopLevelTracedModule" and isinstance(loaded.fc1, tinytorch.jit.TracedModule)
    np.testing.assert_array_equal(loaded(_inputs()).detach().numpy(), traced(_inputs()).detach().numpy())
    buf = io.BytesIO()
    tinytorch.jit.save(scripted_add_one, buf)
    buf.seek(0)
    fn = tinytorch.jit.load(buf)
    assert isinstance(fn, tinytorch.jit.ScriptFunction) and fn(tinytorch.tensor(1.0)).item() == 2.0


def test_deepcopy_scripted_module():
    sm = tinytorch.jit.script(Net())
    clone = copy.deepcopy(sm)
    assert isinstance(clone, tinytorch.jit.RecursiveScriptModule) and isinstance(clone, Net)
    assert clone.fc1.weight is not sm.fc1.weight
    np.testing.assert_array_equal(clone.fc1.weight.detach().numpy(), sm.fc1.weight.detach().numpy())


def test_load_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        tinytorch.jit.load(tmp_path / "missing.pt")
    plain = tmp_path / "plain.pt"
    tinytorch.save(Net().state_dict(), plain)
    with pytest.raises(RuntimeError, match="not written by torch.jit.save"):
        tinytorch.jit.load(plain)
    archive = tmp_path / "ts.pt"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("ts/constants.pkl", b"")
        z.writestr("ts/code/__torch__.py", b"")
    with pytest.raises(RuntimeError, match="TorchScript archive written by PyTorch"):
        tinytorch.jit.load(archive)
    with pytest.raises(AttributeError, match="expects a ScriptModule or ScriptFunction"):
        tinytorch.jit.save(Net(), io.BytesIO())


def test_script_function():
    f = tinytorch.jit.script(scale)
    assert isinstance(f, tinytorch.jit.ScriptFunction)
    assert f.name == "scale" and f.qualified_name == "__torch__.scale" and f.__name__ == "scale"
    assert f(tinytorch.tensor([1.0, 2.0]), k=3.0).tolist() == [3.0, 6.0]
    assert f.code.startswith("def scale(x, k: float = 2.0):")
    with pytest.raises(NotImplementedError):
        f.graph
    assert isinstance(scripted_add_one, tinytorch.jit.ScriptFunction)


def test_script_rejects_module_class_and_returns_plain_classes():
    with pytest.raises(RuntimeError, match="cannot be compiled since it inherits from nn.Module"):
        tinytorch.jit.script(nn.Linear)

    class Pair:
        pass

    assert tinytorch.jit.script(Pair) is Pair
    with pytest.raises(TypeError):
        tinytorch.jit.script(3)


def test_trace_module_and_function():
    m = Net().eval()
    x = _inputs()
    traced = tinytorch.jit.trace(m, x)
    assert isinstance(traced, tinytorch.jit.TopLevelTracedModule) and isinstance(traced, tinytorch.jit.ScriptModule)
    assert repr(traced).startswith("Net(\n  original_name=Net\n  (fc1): Linear(original_name=Linear)")
    np.testing.assert_array_equal(traced(x).detach().numpy(), m(x).detach().numpy())
    calls = []

    def f(a, b):
        calls.append(1)
        return a * b

    tf = tinytorch.jit.trace(f, (tinytorch.tensor(2.0), tinytorch.tensor(3.0)))
    assert calls == [1]  # tracing runs the function once
    assert isinstance(tf, tinytorch.jit.ScriptFunction)
    assert tf(tinytorch.tensor(4.0), tinytorch.tensor(5.0)).item() == 20
    tk = tinytorch.jit.trace(f, example_kwarg_inputs={"a": tinytorch.tensor(1.0), "b": tinytorch.tensor(1.0)})
    assert tk(tinytorch.tensor(2.0), tinytorch.tensor(2.0)).item() == 4.0


def test_trace_runs_the_example_so_bad_inputs_fail():
    with pytest.raises(RuntimeError):
        tinytorch.jit.trace(Net(), tinytorch.ones(3, 5))


def test_trace_module_methods():
    class Two(nn.Module):
        def forward(self, x):
            return x + 1

        def double(self, x):
            return x * 2

    traced = tinytorch.jit.trace_module(Two(), {"forward": tinytorch.ones(2), "double": (tinytorch.ones(2),)})
    assert traced.double(tinytorch.ones(2)).tolist() == [2.0, 2.0]


def test_trace_of_scripted_module_warns_and_returns_it():
    sm = tinytorch.jit.script(Net())
    with pytest.warns(UserWarning, match="already a ScriptModule"):
        assert tinytorch.jit.trace(sm, _inputs()) is sm


def test_scripting_and_tracing_flags_and_markers():
    assert tinytorch.jit.is_scripting() is False and tinytorch.jit.is_tracing() is False

    def f():
        return 1

    assert tinytorch.jit.ignore(f) is f and tinytorch.jit.ignore(drop=True)(f) is f
    assert tinytorch.jit.unused(f) is f and tinytorch.jit.export(f) is f
    assert tinytorch.jit.script_method(f) is f and tinytorch.jit.script_if_tracing(f) is f
    prop = property(lambda self: 1)
    assert tinytorch.jit.unused(prop) is prop
    with pytest.raises(RuntimeError, match="must be a bool or a function"):
        tinytorch.jit.ignore("yes")

    @tinytorch.jit.interface
    class Iface:
        def forward(self, x):
            pass

    assert isinstance(Iface, type)
    assert tinytorch.jit.annotate(List[int], []) == []
    assert tinytorch.jit.Final is typing.Final
    assert tinytorch.jit._unwrap_optional(3) == 3


def test_final_attribute_in_module():
    class WithFinal(nn.Module):
        fused: tinytorch.jit.Final[bool]

        def __init__(self) -> None:
            super().__init__()
            self.fused = True

        def forward(self, x):
            return x if self.fused else -x

    assert tinytorch.jit.script(WithFinal())(tinytorch.ones(1)).item() == 1.0


def test_legacy_script_module_subclass_and_attribute():
    class Legacy(tinytorch.jit.ScriptModule):
        def __init__(self) -> None:
            super().__init__()
            self.count = tinytorch.jit.Attribute(3, int)
            self.lin = nn.Linear(2, 2)

        @tinytorch.jit.script_method
        def forward(self, x):
            return self.lin(x) * self.count

    m = Legacy()
    assert m.count == 3 and isinstance(m, tinytorch.jit.ScriptModule)
    assert m(tinytorch.ones(1, 2)).shape == (1, 2)
    assert tinytorch.jit.script(m) is m


def test_fork_wait():
    fut = tinytorch.jit.fork(scale, tinytorch.tensor([1.0]), k=5.0)
    assert isinstance(fut, tinytorch.jit.Future) and fut.done()
    assert tinytorch.jit.wait(fut).tolist() == [5.0]

    def boom():
        raise ValueError("inner failure")

    bad = tinytorch.jit.fork(boom)
    with pytest.raises(ValueError, match="inner failure"):
        tinytorch.jit.wait(bad)


def test_isinstance_on_torchscript_types():
    jit_isinstance = tinytorch.jit.isinstance
    assert jit_isinstance([1, 2], List[int]) and not jit_isinstance([1, "a"], List[int])
    assert jit_isinstance({"a": tinytorch.ones(1)}, Dict[str, tinytorch.Tensor])
    assert jit_isinstance((1, "a"), Tuple[int, str]) and not jit_isinstance((1,), Tuple[int, str])
    assert jit_isinstance(None, Optional[int]) and jit_isinstance(3, Optional[int])
    assert jit_isinstance([1], list[int])
    with pytest.raises(RuntimeError, match="without a contained type"):
        jit_isinstance([1], list)


def test_freeze_and_optimize_for_inference():
    sm = tinytorch.jit.script(Net())
    with pytest.raises(RuntimeError, match="only implemented for modules in eval mode"):
        tinytorch.jit.freeze(sm)
    assert tinytorch.jit.freeze(sm.eval()) is sm
    with pytest.raises(RuntimeError, match="expects a ScriptModule"):
        tinytorch.jit.freeze(Net().eval())
    train_mode = tinytorch.jit.script(Net())
    assert tinytorch.jit.optimize_for_inference(train_mode) is train_mode and not train_mode.training


def test_fuser_switches():
    with tinytorch.jit.fuser("fuser1"), tinytorch.jit.optimized_execution(False):
        pass
    with pytest.raises(Exception, match="unrecognized fuser option"):
        with tinytorch.jit.fuser("fuser9"):
            pass
    previous = tinytorch.jit.set_fusion_strategy([("DYNAMIC", 3)])
    assert tinytorch.jit.set_fusion_strategy(previous) == [("DYNAMIC", 3)]
    tinytorch.jit.enable_onednn_fusion(True)
    assert tinytorch.jit.onednn_fusion_enabled()
    tinytorch.jit.enable_onednn_fusion(False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tinytorch.jit.strict_fusion():
            pass
    assert any("Only works in script mode" in str(w.message) for w in caught)


def test_repr_parity_with_torch():
    torch = pytest.importorskip("torch")

    def build(lib):
        class M(lib.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.l = lib.nn.Linear(2, 2)
                self.seq = lib.nn.Sequential(lib.nn.ReLU())

            def forward(self, x):
                return self.seq(self.l(x))
        return M()

    assert repr(tinytorch.jit.script(build(tinytorch))) == repr(torch.jit.script(build(torch)))
    x_t = torch.ones(1, 2)
    assert repr(tinytorch.jit.trace(build(tinytorch), tinytorch.ones(1, 2))) == \
        repr(torch.jit.trace(build(torch), x_t))


def test_script_and_trace_warn_deprecation_as_pytorch():
    with pytest.warns(DeprecationWarning, match="`torch.jit.script` is deprecated"):
        tinytorch.jit.script(scale)
    with pytest.warns(DeprecationWarning, match="`torch.jit.trace` is deprecated"):
        tinytorch.jit.trace(scale, tinytorch.ones(1))
