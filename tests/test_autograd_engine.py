"""The C++ engine itself: scheduling, accumulation, threads, device-thread routing and shutdown.

Device threads are exercised on CPU-only machines by recording nodes with `_C._record(..., device=0)`:
the engine routes them to the cuda:0 worker thread whatever their arrays are.
"""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tinytorch as torch
from tinytorch import _C, autograd
from tinytorch.autograd.graph import queue_callback


def _device_scale(x, k, device=0, fail=False, threads=None):
    """y = x * k whose backward node is routed to `device`'s engine thread."""
    y = x.detach() * k

    def backward(g):
        if threads is not None:
            threads.append(threading.get_ident())
        if fail:
            raise ValueError("failure on the device thread")
        return g * k

    _C._record("DeviceScaleBackward", backward, y, (x,), None, device)
    return y


def test_diamond_and_shared_subgraph():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    shared = x * x  # used by three consumers
    out = (shared * 2 + shared.exp() + shared).sum()
    out.backward()
    expected = (2 + np.exp(np.array([1.0, 4.0])) + 1) * 2 * np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_each_node_runs_once_after_all_its_inputs_arrived():
    runs = []
    x = torch.ones(2, requires_grad=True)
    a = x * 2
    a.grad_fn.register_prehook(lambda g: runs.append(g[0].clone()))
    b = a * 3
    c = a * 4
    (b + c).sum().backward()
    assert len(runs) == 1 and torch.allclose(runs[0], torch.full((2,), 7.0))


def test_later_created_nodes_run_first():
    order = []
    x = torch.ones(1, requires_grad=True)
    a = x * 1
    b = x * 2
    a.grad_fn.register_prehook(lambda g: order.append("a"))
    b.grad_fn.register_prehook(lambda g: order.append("b"))
    (a + b).sum().backward()
    assert order == ["b", "a"]


def test_gradient_accumulates_across_calls_in_place():
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    first = x.grad
    (x * 3).sum().backward()
    assert x.grad is first and torch.allclose(x.grad, torch.full((3,), 5.0))


def test_gradient_shared_by_two_leaves_is_not_aliased():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    (a + b).sum().backward()  # AddBackward hands one tensor to both inputs
    a.grad.add_(10.0)
    assert torch.allclose(b.grad, torch.ones(2))
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())


def test_stolen_gradient_is_not_shared_with_user_tensor():
    seed = torch.ones(3)
    x = torch.ones(3, requires_grad=True)
    x.backward(seed)  # the seed itself reaches AccumulateGrad
    x.grad.add_(1.0)
    assert torch.equal(seed, torch.ones(3))


def test_unused_leaf_gets_no_grad_and_leaf_without_requires_grad_untouched():
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(2, requires_grad=True)
    c = torch.ones(2)
    (a * c).sum().backward()
    assert b.grad is None and c.grad is None


def test_grad_restricted_to_needed_part_of_graph():
    ran = []
    x = torch.ones(2, requires_grad=True)
    y = torch.ones(2, requires_grad=True)
    a = x * 2
    b = y * 3
    b.grad_fn.register_prehook(lambda g: ran.append("b"))
    gx, = autograd.grad((a + b).sum(), x)
    assert ran == [] and torch.allclose(gx, torch.full((2,), 2.0))


def test_two_python_threads_backward_at_once():
    results, errors = {}, []
    barrier = threading.Barrier(4)

    def work(i):
        try:
            x = torch.full((5,), float(i), requires_grad=True)
            barrier.wait()
            y = x
            for _ in range(500):
                y = y * 1.0 + 0.0
            (y * y).sum().backward()
            results[i] = x.grad.numpy().copy()
        except Exception as e:  # surfaced below: pytest does not see thread exceptions
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(1, 5):
        np.testing.assert_allclose(results[i], np.full(5, 2.0 * i))


def test_backward_inside_backward_reentrant():
    class Inner(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            with torch.enable_grad():
                leaf = x.detach().requires_grad_()
                (leaf * leaf).sum().backward()  # a whole backward inside this node
            return g * leaf.grad

    x = torch.tensor([1.0, 3.0], requires_grad=True)
    Inner.apply(x).sum().backward()
    assert torch.allclose(x.grad, torch.tensor([2.0, 6.0]))


def test_device_routed_nodes_mixed_graph():
    threads = []
    x = torch.ones(3, requires_grad=True)
    a = x * 2
    b = _device_scale(a, 3.0, threads=threads)
    c = b * 5 + a
    callbacks = []
    b.register_hook(lambda g: queue_callback(lambda: callbacks.append(threading.get_ident())))
    c.sum().backward()
    assert torch.allclose(x.grad, torch.full((3,), 32.0))  # (3*5 + 1) * 2
    assert threads and threads[0] != threading.get_ident()  # ran on the device thread
    assert callbacks == [threading.get_ident()]  # final callbacks run on the caller


def test_device_chain_alternating_with_cpu():
    x = torch.ones(2, requires_grad=True)
    y = x
    for i in range(50):
        y = _device_scale(y, 1.1) if i % 2 == 0 else y * 1.1
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(2, 1.1 ** 50), rtol=1e-4)


def test_error_on_device_thread_reaches_caller_and_engine_recovers():
    x = torch.ones(3, requires_grad=True)
    y = _device_scale(x * 2, 3.0, fail=True)
    with pytest.raises(ValueError, match="failure on the device thread") as info:
        y.sum().backward()
    assert any("DeviceScaleBackward" in n for n in getattr(info.value, "__notes__", []))
    test_device_routed_nodes_mixed_graph()


def test_device_root_node():
    x = torch.ones(2, requires_grad=True)
    y = _device_scale(x, 4.0)
    y.backward(torch.ones(2))
    assert torch.allclose(x.grad, torch.full((2,), 4.0))


def test_threads_backward_through_device_nodes_at_once():
    errors, results = [], {}

    def work(i):
        try:
            x = torch.full((2,), float(i), requires_grad=True)
            y = x
            for _ in range(30):
                y = _device_scale(y * 1.0, 1.0)
            (y * y).sum().backward()
            results[i] = x.grad.numpy().copy()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for i in range(1, 4):
        np.testing.assert_allclose(results[i], np.full(2, 2.0 * i))


def test_create_graph_through_device_node():
    x = torch.tensor([2.0], requires_grad=True)
    y = _device_scale(x * x, 3.0)  # 3 x^2
    g, = autograd.grad(y.sum(), x, create_graph=True)
    g2, = autograd.grad(g.sum(), x)
    assert abs(g.item() - 12.0) < 1e-6 and abs(g2.item() - 6.0) < 1e-6


_SHUTDOWN_SCRIPT = textwrap.dedent("""
    import atexit, os, threading, time

    def native_threads():  # threads Python does not know about (BLAS pools, engine threads)
        return len(os.listdir("/proc/self/task")) - threading.active_count()

    def report():  # registered before tinytorch's handler, so it runs after the engine shut down
        # A joined thread's /proc entry goes away shortly after pthread_join returns (the kernel reaps the
        # task after waking the joiner), so give a loaded machine a moment before counting.
        deadline = time.monotonic() + 2.0
        while native_threads() > baseline and time.monotonic() < deadline:
            time.sleep(0.01)
        print("ENGINE_THREADS_LEFT", native_threads() - baseline, flush=True)

    atexit.register(report)
    import tinytorch as torch
    from tinytorch import _C
    baseline = native_threads()

    x = torch.ones(2, requires_grad=True)
    y = x.detach() * 2
    _C._record("DevBackward", lambda g: g * 2, y, (x,), None, 0)
    z = y * 3
    z.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]

    from tinytorch.utils.checkpoint import checkpoint
    f = lambda h: h * 2.0
    for _ in range(70):  # past the reentrant depth limit: starts a pool thread
        f = (lambda inner: (lambda h: checkpoint(inner, h, use_reentrant=True) * 1.0))(f)
    w = torch.ones(2, requires_grad=True)
    f(w).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0]
    print("THREADS_BEFORE_EXIT", native_threads() - baseline, flush=True)
""")


def test_engine_threads_joined_at_interpreter_exit():
    proc = subprocess.run([sys.executable, "-c", _SHUTDOWN_SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "THREADS_BEFORE_EXIT 2" in proc.stdout  # a device thread and a pool thread were running
    assert "ENGINE_THREADS_LEFT 0" in proc.stdout, proc.stdout  # and both were joined by the atexit handler


def test_engine_shutdown_is_idempotent_in_subprocess():
    script = "import tinytorch, tinytorch._C as C\nC._engine_shutdown()\nC._engine_shutdown()\nprint('ok')"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_repeated_device_backwards_with_callbacks_release_safely():
    # The device thread may hold the last reference to a finished GraphTask (with its callbacks);
    # it must drop it under the GIL. Many short calls make that window likely to be hit.
    done = []
    for i in range(300):
        x = torch.ones(2, requires_grad=True)
        y = _device_scale(x * 1.0, 2.0)
        y.register_hook(lambda g: queue_callback(lambda: done.append(1)))
        y.sum().backward()
        assert torch.allclose(x.grad, torch.full((2,), 2.0))
    assert len(done) == 300


_FORK_SCRIPT = textwrap.dedent("""
    import os, sys
    import tinytorch as torch
    from tinytorch import _C
    from tinytorch.utils.checkpoint import checkpoint

    def device_backward():
        x = torch.ones(2, requires_grad=True)
        y = x.detach() * 2
        _C._record("DevBackward", lambda g: g * 2, y, (x,), None, 0)
        (y * 3).sum().backward()
        return x.grad.tolist()

    def deep_checkpoint():
        f = lambda h: h * 2.0
        for _ in range(70):  # past the reentrant depth limit: a pool thread
            f = (lambda inner: (lambda h: checkpoint(inner, h, use_reentrant=True) * 1.0))(f)
        x = torch.ones(2, requires_grad=True)
        f(x).sum().backward()
        return x.grad.tolist()

    assert device_backward() == [6.0, 6.0] and deep_checkpoint() == [2.0, 2.0]
    pid = os.fork()
    if pid == 0:
        ok = device_backward() == [6.0, 6.0] and deep_checkpoint() == [2.0, 2.0]
        ok = ok and deep_checkpoint() == [2.0, 2.0]
        sys.exit(0 if ok else 3)  # a normal exit: atexit joins the child's own engine threads
    _, status = os.waitpid(pid, 0)
    print("CHILD", os.waitstatus_to_exitcode(status), flush=True)
    print("PARENT", device_backward(), deep_checkpoint(), flush=True)
""")


def test_engine_works_in_forked_child_after_threads_started():
    proc = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "CHILD 0" in proc.stdout, proc.stdout + proc.stderr
    assert "PARENT [6.0, 6.0] [2.0, 2.0]" in proc.stdout


def test_set_multithreading_enabled_runs_device_nodes_on_caller():
    threads = []
    x = torch.ones(2, requires_grad=True)
    with autograd.set_multithreading_enabled(False):
        assert not autograd.is_multithreading_enabled()
        y = _device_scale(x * 1.0, 3.0, threads=threads)
        y.sum().backward()
    assert autograd.is_multithreading_enabled()
    assert threads == [threading.get_ident()] and torch.allclose(x.grad, torch.full((2,), 3.0))
    y = _device_scale(x * 1.0, 3.0, threads=threads)
    y.sum().backward()
    assert threads[1] != threading.get_ident()


def test_legacy_variable():
    t = torch.ones(2)
    v = autograd.Variable(t, requires_grad=True)
    # a new leaf over t's memory, as PyTorch's: t itself is left alone
    assert v is not t and v.requires_grad and not t.requires_grad and v.is_leaf and isinstance(t, autograd.Variable)
    assert v.data_ptr() == t.data_ptr()
    y = torch.ones(2, requires_grad=True) * 2
    w = autograd.Variable(y)
    assert w.grad_fn is None and not w.requires_grad and y.grad_fn is not None
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        autograd.Variable(torch.ones(2, dtype=torch.int64), requires_grad=True)
