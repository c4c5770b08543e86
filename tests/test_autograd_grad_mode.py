"""no_grad / enable_grad / set_grad_enabled / inference_mode: context managers, decorators, per thread."""
import threading

import tinytorch as torch
from tinytorch import autograd


def _records() -> bool:
    return (torch.ones(1, requires_grad=True) * 2).requires_grad


def test_context_managers_nest_and_restore():
    assert torch.is_grad_enabled() and _records()
    with torch.no_grad():
        assert not torch.is_grad_enabled() and not _records()
        with torch.enable_grad():
            assert torch.is_grad_enabled() and _records()
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    with torch.set_grad_enabled(False):
        assert not _records()
        with torch.set_grad_enabled(True):
            assert _records()
    assert torch.is_grad_enabled()
    with torch.inference_mode():
        assert not _records() and torch.is_inference_mode_enabled()
        with torch.inference_mode(False):
            assert _records() and not torch.is_inference_mode_enabled()
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def test_modes_restore_after_exception():
    try:
        with torch.no_grad():
            raise ValueError
    except ValueError:
        pass
    assert torch.is_grad_enabled()


def test_set_grad_enabled_as_a_call():
    torch.set_grad_enabled(False)
    try:
        assert not torch.is_grad_enabled() and not _records()
    finally:
        torch.set_grad_enabled(True)
    assert torch.is_grad_enabled()


def test_decorators():
    @torch.no_grad()
    def off():
        return _records(), torch.is_grad_enabled()

    @torch.enable_grad()
    def on():
        return _records()

    @torch.set_grad_enabled(False)
    def off2():
        return _records()

    @torch.inference_mode()
    def inf():
        return _records(), torch.is_inference_mode_enabled()

    assert torch.is_grad_enabled()  # decorating with set_grad_enabled(False) must not switch grad off now
    assert off() == (False, False)
    assert off2() is False
    assert inf() == (False, True)
    with torch.no_grad():
        assert on() is True
    assert torch.is_grad_enabled()
    assert off.__name__ == "off"


def test_no_grad_class_decorator_without_call():
    @torch.no_grad
    def off():
        return torch.is_grad_enabled()

    assert off() is False and torch.is_grad_enabled()


def test_grad_mode_is_thread_local():
    barrier = threading.Barrier(2)
    seen = {}

    def worker(name, mode):
        with torch.set_grad_enabled(mode):
            barrier.wait()  # both threads are inside their blocks at once
            seen[name] = (torch.is_grad_enabled(), _records())
            barrier.wait()

    a = threading.Thread(target=worker, args=("off", False))
    b = threading.Thread(target=worker, args=("on", True))
    a.start(), b.start()
    a.join(), b.join()
    assert seen == {"off": (False, False), "on": (True, True)}
    with torch.no_grad():
        result = []
        t = threading.Thread(target=lambda: result.append(torch.is_grad_enabled()))
        t.start()
        t.join()
        assert result == [True]  # a new thread starts with grad on


def test_backward_runs_formulas_without_grad_unless_create_graph():
    modes = []

    class Probe(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            modes.append(torch.is_grad_enabled())
            return g

    x = torch.ones(1, requires_grad=True)
    Probe.apply(x).sum().backward()
    Probe.apply(x).sum().backward(create_graph=True)
    loss = Probe.apply(x).sum()
    with torch.no_grad():
        loss.backward(create_graph=True)  # the engine sets the mode from create_graph, not from the caller
    assert modes == [False, True, True]
    assert torch.is_grad_enabled()


def test_no_grad_outputs_are_leaves_without_history():
    x = torch.ones(1, requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf


def test_decorated_generator_holds_mode_only_while_running():
    @torch.no_grad()
    def gen():
        for _ in range(2):
            yield torch.is_grad_enabled()

    it = gen()
    assert next(it) is False
    assert torch.is_grad_enabled()  # between yields the caller's mode is back
    assert list(it) == [False]


def test_bare_inference_mode_decorator():
    @torch.inference_mode
    def f():
        return torch.is_grad_enabled(), torch.is_inference_mode_enabled()

    assert f() == (False, True) and torch.is_grad_enabled()
