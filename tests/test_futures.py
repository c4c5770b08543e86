"""torch.futures: Future (completion, errors, then() chaining, callbacks), collect_all and wait_all, checked
against PyTorch's documented semantics, and (only when torch is installed) against torch.futures itself."""
import logging
import pickle
import threading
import typing

import pytest

import tinytorch
import tinytorch.futures
from tinytorch.futures import Future, collect_all, wait_all


def test_set_result_completes_and_wait_value_return_it():
    f = Future()
    assert not f.done()
    f.set_result([1, 2])
    assert f.done() and f.wait() == [1, 2] and f.value() == [1, 2]


def test_value_before_completion_raises():
    with pytest.raises(RuntimeError, match="before the Future completed"):
        Future().value()


def test_completing_twice_raises():
    f = Future()
    f.set_result(1)
    for again in (lambda: f.set_result(2), lambda: f.set_exception(ValueError("x"))):
        with pytest.raises(RuntimeError, match="Attempting to mark a completed Future as complete again"):
            again()
    assert f.value() == 1


def test_set_exception_is_raised_by_wait_and_value():
    err = ValueError("boom")
    f = Future()
    f.set_exception(err)
    assert f.done()
    for get in (f.wait, f.value):
        with pytest.raises(ValueError, match="boom") as info:
            get()
        assert info.value is err


@pytest.mark.parametrize("bad", ["str", ValueError, KeyboardInterrupt()])
def test_set_exception_needs_an_exception_instance(bad):
    with pytest.raises(AssertionError, match="not an Exception"):
        Future().set_exception(bad)


def test_then_chains_results():
    f = Future()
    g = f.then(lambda fut: fut.value() * 2)
    h = g.then(lambda fut: fut.wait() + 1)
    assert not g.done() and not h.done()
    f.set_result(4)
    assert g.wait() == 8 and h.wait() == 9


def test_then_on_a_completed_future_runs_inline():
    f = Future()
    f.set_result(2)
    ran = []
    g = f.then(lambda fut: ran.append(fut.value()) or "ok")
    assert ran == [2] and g.done() and g.value() == "ok"


def test_then_propagates_the_parents_error_as_runtime_error():
    f = Future()
    g = f.then(lambda fut: fut.wait() + 1)
    f.set_exception(ValueError("boom"))
    with pytest.raises(RuntimeError, match="Got the following error when running the callback: ValueError: boom"):
        g.wait()


def test_then_callback_error_fails_only_the_chained_future():
    f = Future()
    g = f.then(lambda fut: 1 / 0)
    f.set_result(1)
    assert f.value() == 1
    with pytest.raises(RuntimeError, match="ZeroDivisionError: division by zero") as info:
        g.wait()
    assert "At:" in str(info.value) and isinstance(info.value.__cause__, ZeroDivisionError)


def test_then_callback_that_ignores_the_error_succeeds():
    f = Future()
    g = f.then(lambda fut: "handled")
    f.set_exception(ValueError("p"))
    assert g.wait() == "handled"


def test_then_does_not_unwrap_a_returned_future():
    inner = Future()
    f = Future()
    g = f.then(lambda fut: inner)
    f.set_result(0)
    assert g.done() and g.value() is inner


def test_callbacks_run_in_order_added():
    f = Future()
    order = []
    f.add_done_callback(lambda fut: order.append(1))
    f.then(lambda fut: order.append(2))
    f.add_done_callback(lambda fut: order.append(3))
    f.set_result(None)
    assert order == [1, 2, 3]


def test_failing_done_callback_is_logged_not_raised(caplog):
    f = Future()
    f.add_done_callback(lambda fut: 1 / 0)
    with caplog.at_level(logging.ERROR, logger="tinytorch.futures"):
        f.set_result(5)
        f.add_done_callback(lambda fut: {}["missing"])
    assert f.value() == 5
    text = caplog.text
    assert "ZeroDivisionError: division by zero" in text and "KeyError: 'missing'" in text


def test_non_callable_callbacks_are_rejected():
    for add in (Future().then, Future().add_done_callback):
        with pytest.raises(TypeError, match="callable"):
            add(3)


def test_wait_blocks_until_another_thread_sets_the_result():
    f = Future()
    t = threading.Thread(target=lambda: f.set_result(tinytorch.ones(2) * 3))
    t.start()
    assert f.wait(timeout=10).tolist() == [3.0, 3.0]
    t.join(10)
    assert not t.is_alive()


def test_wait_with_timeout_raises_when_not_completed():
    from tinytorch._C._distributed import DistTimeoutError
    with pytest.raises(DistTimeoutError, match="not completed within 0.05s"):
        Future().wait(timeout=0.05)


def test_collect_all_completes_after_every_future():
    a, b = Future(), Future()
    c = collect_all([a, b])
    a.set_result(1)
    assert not c.done()
    b.set_result(2)
    got = c.wait()
    assert got[0] is a and got[1] is b and [f.value() for f in got] == [1, 2]
    assert collect_all([]).wait() == []


def test_collect_all_waits_for_all_then_raises_the_first_error():
    a, b, c = Future(), Future(), Future()
    all_ = collect_all([a, b, c])
    b.set_exception(ValueError("first"))
    assert not all_.done()
    a.set_exception(KeyError("second"))
    c.set_result(3)
    with pytest.raises(ValueError, match="first"):
        all_.wait()


def test_wait_all_returns_values_or_raises():
    a, b = Future(), Future()
    a.set_result(1)
    b.set_result("two")
    assert wait_all((a, b)) == [1, "two"]
    e = Future()
    e.set_exception(ValueError("e1"))
    with pytest.raises(ValueError, match="e1"):
        wait_all([a, e])


def test_collect_all_rejects_non_futures():
    with pytest.raises(TypeError, match="expected a list of torch.futures.Future, got an element of type int"):
        collect_all([Future(), 1])


def test_future_cannot_be_pickled():
    with pytest.raises(RuntimeError, match="Can not pickle torch.futures.Future"):
        pickle.dumps(Future())


def test_future_is_generic_and_checks_devices():
    assert typing.get_args(Future[int]) == (int,)
    with pytest.raises(ValueError, match="Expected devices to have indices, got cuda"):
        Future(devices=["cuda"])
    assert not Future(devices=["cpu", "cuda:0" if tinytorch.accelerator.is_available() else "cpu"]).done()
    if not tinytorch.accelerator.is_available():
        with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
            Future(devices=[0])


def test_then_keeps_the_parents_devices():
    f = Future(devices=["cpu"])
    assert f.then(lambda fut: None)._devices == f._devices


def test_collective_futures_are_torch_futures():
    # DDP hooks return torch.futures.Future(); collectives' Work.get_future() must give the same class.
    from tinytorch.distributed._work import completed_work
    fut = completed_work([tinytorch.ones(1)]).get_future()
    assert isinstance(fut, tinytorch.futures.Future) and isinstance(Future(), tinytorch.distributed.Future)
    assert fut.then(lambda f: f.value()[0].item() + 1).wait() == 2.0


def _script(F, collect, wait):
    """The same sequence run on tinytorch's and torch's futures: what each step returned or raised."""
    out = []

    def step(fn):
        try:
            out.append(("ok", fn()))
        except Exception as e:
            out.append((type(e).__name__, str(e).split("\n")[0]))

    f = F()
    step(f.done)
    g = f.then(lambda x: x.value() + 1)
    f.set_result(1)
    step(g.wait)
    step(lambda: f.set_result(2))
    e = F()
    e.set_exception(ValueError("bad"))
    step(e.wait)
    step(lambda: e.then(lambda x: x.wait()).wait())
    step(lambda: F().set_exception("nope"))
    a, b = F(), F()
    c = collect([a, b])
    a.set_result(3)
    step(c.done)
    b.set_exception(KeyError("k"))
    step(c.done)
    step(c.wait)
    step(lambda: wait([f, g]))
    return out


def test_matches_torch_futures():
    torch = pytest.importorskip("torch")
    ours = _script(Future, collect_all, wait_all)
    theirs = _script(torch.futures.Future, torch.futures.collect_all, torch.futures.wait_all)
    assert ours == theirs
