"""PyTorch's autograd errors, word for word, and the engine staying usable after each."""
import re

import pytest

import tinytorch as torch
from tinytorch import autograd


def _still_works():
    x = torch.ones(2, requires_grad=True)
    (x * 4).sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 4.0))


def test_inplace_modification_of_saved_input():
    w = torch.ones(2, requires_grad=True)
    x = torch.ones(2)
    loss = (w * x).sum()
    x.add_(1.0)
    with pytest.raises(RuntimeError) as info:
        loss.backward()
    assert str(info.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.FloatTensor [2]] is at version 1; expected version 0 instead. Hint: enable anomaly detection")
    _still_works()


def test_inplace_modification_of_saved_output_names_the_op():
    a = torch.ones(2, requires_grad=True)
    b = a.exp()
    loss = b.sum()
    with torch.no_grad():
        b.mul_(2.0)
    with pytest.raises(RuntimeError, match=re.escape(
            "[torch.FloatTensor [2]], which is output 0 of Exp, is at version 1; expected version 0 instead.")):
        loss.backward()
    _still_works()


def test_inplace_modification_of_saved_nonleaf_names_its_current_producer():
    a = torch.ones(3, requires_grad=True)
    b = a * 1
    loss = (b * b).sum()
    b.add_(1.0)  # rebases b onto an AddBackward node
    with pytest.raises(RuntimeError, match=re.escape(
            "[torch.FloatTensor [3]], which is output 0 of Add, is at version 1; expected version 0 instead.")):
        loss.backward()


def test_inplace_error_matches_pytorch_text():
    real = pytest.importorskip("torch")

    def message(lib):
        w = lib.ones(2, requires_grad=True)
        x = lib.ones(2)
        loss = (w * x).sum()
        x.add_(1.0)
        with pytest.raises(RuntimeError) as info:
            loss.backward()
        return str(info.value).split(" Hint:")[0].replace("tinytorch.", "torch.")

    assert message(torch) == message(real)


def test_backward_twice_without_retain_graph():
    x = torch.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=re.escape(
            "Trying to backward through the graph a second time (or directly access saved tensors after they "
            "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
            "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
            "or if you need to access saved tensors after calling backward.")):
        y.backward()
    _still_works()


def test_grad_twice_without_retain_graph():
    x = torch.ones(2, requires_grad=True)
    y = (x.sigmoid()).sum()
    autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        autograd.grad(y, x)


def test_nonscalar_without_gradient():
    x = torch.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="^grad can be implicitly created only for scalar outputs$"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="^grad can be implicitly created only for scalar outputs$"):
        autograd.grad(x * 2, x)
    _still_works()


def test_backward_on_tensor_without_graph():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does not have a grad_fn"):
        torch.ones(2).sum().backward()


def test_exception_in_node_reaches_caller_with_node_name():
    class Boom(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise KeyError("exploded in backward")

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(KeyError, match="exploded in backward") as info:
        (Boom.apply(x) * 2).sum().backward()
    assert any("BoomBackward" in note for note in getattr(info.value, "__notes__", []))
    assert x.grad is None
    _still_works()


def test_first_error_wins_and_later_nodes_do_not_run():
    ran = []

    class Fail(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("first")

    x = torch.ones(2, requires_grad=True)
    x.register_hook(lambda g: ran.append("leaf hook"))
    with pytest.raises(ValueError, match="first"):
        Fail.apply(x).sum().backward()
    assert ran == []


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_detect_anomaly_names_the_nan_node_with_forward_traceback():
    x = torch.tensor([0.0, 1.0], requires_grad=True)

    def make_nan(t):
        return (t * 0).sqrt()  # sqrt'(0) = inf, times the incoming 0 -> nan

    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        ctx = autograd.detect_anomaly()
    with ctx:
        y = make_nan(x)
        loss = (y * 0).sum()
        with pytest.raises(RuntimeError, match=re.escape(
                "Function 'SqrtBackward0' returned nan values in its 0th output.")) as info:
            loss.backward()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "SqrtBackward0" in notes
    assert "Traceback of forward call that caused the error" in notes and "make_nan" in notes
    assert not autograd.anomaly_mode.is_anomaly_enabled()
    _still_works()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_without_anomaly_mode_nan_passes_silently():
    x = torch.tensor([0.0], requires_grad=True)
    ((x * 0).sqrt() * 0).sum().backward()
    assert x.grad.isnan().all()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_set_detect_anomaly_check_nan_false_skips_the_check():
    x = torch.tensor([0.0], requires_grad=True)
    with autograd.set_detect_anomaly(True, check_nan=False):
        assert autograd.anomaly_mode.is_anomaly_enabled()
        ((x * 0).sqrt() * 0).sum().backward()
    assert not autograd.anomaly_mode.is_anomaly_enabled()


def test_leaf_inplace_errors():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation."):
        x.add_(1.0)


def test_increment_version_makes_hidden_writes_visible():
    w = torch.ones(2, requires_grad=True)
    x = torch.ones(2)
    loss = (w * x).sum()
    x.numpy()[:] = 5.0  # a write autograd cannot see...
    autograd.graph.increment_version(x)  # ...until the writer says so
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        loss.backward()


def test_gradient_count_mismatch():
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="^got 2 tensors and 1 gradients$"):
        autograd.backward([x * 2, x * 3], [torch.ones(2)])
