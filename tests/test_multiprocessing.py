"""torch.multiprocessing: the re-exported standard API, spawn/start_processes and their failures, and tensors
crossing processes through shared memory. Real processes throughout (two at a time, small payloads); every
wait has a timeout so that a failure cannot hang the suite."""
import inspect
import multiprocessing
import os
import signal
import time
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import tinytorch
import tinytorch.multiprocessing as mp

TIMEOUT = 20.0


def _join(context, timeout=TIMEOUT):
    """Join a ProcessContext within `timeout` seconds (raising its failure), failing the test otherwise."""
    deadline = time.monotonic() + timeout
    while not context.join(timeout=max(0.0, deadline - time.monotonic())):
        if time.monotonic() >= deadline:
            for p in context.processes:
                p.kill()
            pytest.fail(f"processes {context.pids()} still running after {timeout}s")


def _finish(process, timeout=TIMEOUT):
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join(5)
        pytest.fail(f"process {process.pid} still running after {timeout}s")
    return process.exitcode


# ------------------------------------------------------------------ children (top level: spawn pickles them)

def _put_index(i, q, base):
    q.put(base + i * 10)


def _raise_on_one(i):
    if i == 1:
        raise ValueError(f"child {i} failed on purpose")
    time.sleep(60)  # stopped by the parent once process 1 failed


def _exit_3_on_one(i):
    if i == 1:
        os._exit(3)
    time.sleep(60)


def _kill_self(i):
    os.kill(os.getpid(), signal.SIGKILL)


def _sleep(i, seconds):
    time.sleep(seconds)


def _send_tensors(q, done):
    w = tinytorch.nn.Parameter(tinytorch.tensor([[1.5, -2.0]], dtype=tinytorch.float64)).share_memory_()
    base = tinytorch.arange(12, dtype=tinytorch.int64).reshape(3, 4).share_memory_()
    grad = tinytorch.arange(6, dtype=tinytorch.float32).reshape(2, 3).share_memory_().requires_grad_()
    q.put({"grad": grad, "int": base, "view": base.t(), "param": w,  # shared: sent as their memory
           "bool": tinytorch.tensor([True, False]), "empty": tinytorch.zeros(0, 2),  # not shared: by value
           "scalar": tinytorch.tensor(7.25, dtype=tinytorch.float64)})
    done.wait(TIMEOUT)  # the receiver maps the shared memory while this process is alive


def _put_and_exit(q):
    q.put(tinytorch.ones(2, 3, dtype=tinytorch.float64) * 2)


def _echo_sum(inq, outq, done):
    t = inq.get(timeout=TIMEOUT)
    outq.put((t.dtype, tuple(t.shape), t.requires_grad, t.is_shared(), float(t.sum().item())))
    t.mul_(2)  # seen by the sender: the received tensor is the sender's memory
    outq.put("written")
    done.wait(TIMEOUT)


def _train_step(model, x, lr):
    opt = tinytorch.optim.SGD(model.parameters(), lr=lr)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()


def _hogwild_half(i, w):
    # Each process writes its own half in place: no lock is needed for the result to be exact.
    w.data[i * 2:(i + 1) * 2] += i + 1


# ------------------------------------------------------------------ the module

def test_reexports_the_standard_module():
    for name in multiprocessing.__all__:
        assert hasattr(mp, name) and name in mp.__all__, name
    assert mp.Process is multiprocessing.Process and mp.get_context is multiprocessing.get_context
    assert mp.cpu_count() == multiprocessing.cpu_count() and mp.current_process().name == "MainProcess"
    assert {"spawn", "fork"} <= set(mp.get_all_start_methods())
    assert mp.get_context("spawn").get_start_method() == "spawn"


def test_sharing_strategies():
    assert mp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    assert mp.get_sharing_strategy() == "file_descriptor"
    with pytest.raises(AssertionError, match="invalid sharing strategy 'shm', expected one of"):
        mp.set_sharing_strategy("shm")
    mp.set_sharing_strategy("file_system")
    try:
        assert mp.get_sharing_strategy() == "file_system"
    finally:
        mp.set_sharing_strategy("file_descriptor")


# ------------------------------------------------------------------ spawn / start_processes

def test_spawn_runs_fn_with_its_index_and_args():
    q = mp.get_context("spawn").SimpleQueue()
    ctx = mp.spawn(_put_index, args=(q, 5), nprocs=2, join=False)
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.processes) == 2
    assert ctx.pids() == [p.pid for p in ctx.processes] and len(ctx.sentinels) == 2
    _join(ctx)
    assert sorted([q.get(), q.get()]) == [5, 15]
    assert all(p.exitcode == 0 for p in ctx.processes) and ctx.join() is True


def test_spawn_always_spawns_and_warns_about_other_start_methods():
    with pytest.warns(FutureWarning, match="This method only supports start_method=spawn \\(got: fork\\)"):
        ctx = mp.spawn(_sleep, args=(0,), nprocs=1, join=False, start_method="fork")
    _join(ctx)
    assert ctx.processes[0].exitcode == 0


def test_join_with_timeout_reports_processes_still_running():
    ctx = mp.start_processes(_sleep, args=(1.5,), nprocs=2, join=False, start_method="fork")
    assert ctx.join(timeout=0.05) is False
    _join(ctx)
    assert ctx.join(timeout=0) is True


def test_child_exception_raises_process_raised_exception():
    ctx = mp.spawn(_raise_on_one, nprocs=2, join=False)
    start = time.monotonic()
    with pytest.raises(mp.ProcessRaisedException) as info:
        _join(ctx)
    e = info.value
    assert str(e).startswith("\n\n-- Process 1 terminated with the following error:\nTraceback (most recent call last)")
    assert "ValueError: child 1 failed on purpose" in str(e) and "_raise_on_one" in str(e)
    assert e.error_index == 1 and e.error_pid == ctx.pids()[1] and isinstance(e, mp.ProcessException)
    # The other process was stopped rather than left to sleep its minute.
    assert not ctx.processes[0].is_alive() and time.monotonic() - start < TIMEOUT
    assert not os.path.exists(ctx.error_files[1])


def test_child_exit_code_raises_process_exited_exception():
    ctx = mp.spawn(_exit_3_on_one, nprocs=2, join=False)
    with pytest.raises(mp.ProcessExitedException, match="^process 1 terminated with exit code 3$") as info:
        _join(ctx)
    e = info.value
    assert (e.exit_code, e.signal_name, e.error_index, e.error_pid) == (3, None, 1, ctx.pids()[1])
    assert not ctx.processes[0].is_alive()


def test_child_killed_by_a_signal():
    ctx = mp.start_processes(_kill_self, nprocs=1, join=False, start_method="fork")
    with pytest.raises(mp.ProcessExitedException, match="^process 0 terminated with signal SIGKILL$") as info:
        _join(ctx)
    assert info.value.exit_code == -signal.SIGKILL and info.value.signal_name == "SIGKILL"


def test_process_exceptions_pickle():
    raised = ForkingPickler.loads(ForkingPickler.dumps(mp.ProcessRaisedException("msg", 1, 42)))
    assert (type(raised), raised.msg, raised.error_index, raised.error_pid) == (mp.ProcessRaisedException, "msg", 1, 42)
    exited = ForkingPickler.loads(ForkingPickler.dumps(mp.ProcessExitedException("m", 0, 7, -9, "SIGKILL")))
    assert (exited.exit_code, exited.signal_name, exited.error_pid) == (-9, "SIGKILL", 7)


def test_spawn_context_is_the_deprecated_name():
    with pytest.warns(UserWarning, match="SpawnContext is renamed to ProcessContext"):
        ctx = mp.SpawnContext([], [])
    assert isinstance(ctx, mp.ProcessContext) and ctx.join() is True


# ------------------------------------------------------------------ tensors across processes

def test_shared_tensor_is_sent_as_its_shared_memory():
    t = tinytorch.tensor([1.0, 2.0, 3.0]).share_memory_()
    r = ForkingPickler.loads(ForkingPickler.dumps(t))
    assert r.is_shared() and r.tolist() == [1.0, 2.0, 3.0]
    r.add_(1)
    assert t.tolist() == [2.0, 3.0, 4.0]


def test_view_of_a_shared_tensor_keeps_its_place_in_the_memory():
    t = tinytorch.arange(12, dtype=tinytorch.float64).reshape(3, 4).share_memory_()
    v = t[1:, ::2]
    r = ForkingPickler.loads(ForkingPickler.dumps(v))
    assert r.shape == (2, 2) and r.tolist() == [[4.0, 6.0], [8.0, 10.0]]
    r.fill_(-1)
    expected = np.arange(12.0).reshape(3, 4)
    expected[1:, ::2] = -1
    np.testing.assert_array_equal(t.numpy(), expected)


def test_tensor_not_in_shared_memory_is_sent_by_value():
    base = tinytorch.zeros(4)
    view = base[1:3]
    r = ForkingPickler.loads(ForkingPickler.dumps(base))
    assert not base.is_shared() and not r.is_shared() and r.tolist() == [0.0] * 4
    view.fill_(5)  # the sender's views still alias it; the copy sent is apart
    assert base.tolist() == [0.0, 5.0, 5.0, 0.0] and r.tolist() == [0.0] * 4


def test_non_leaf_tensor_requiring_grad_is_refused():
    y = tinytorch.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(y)
    assert ForkingPickler.loads(ForkingPickler.dumps(y.detach())).tolist() == [2.0, 2.0]


def test_file_system_strategy_keeps_no_descriptor():
    from tinytorch._shared_memory import block_of
    t = tinytorch.ones(3).share_memory_()
    mp.set_sharing_strategy("file_system")
    try:
        r = ForkingPickler.loads(ForkingPickler.dumps(t))
    finally:
        mp.set_sharing_strategy("file_descriptor")
    assert r.tolist() == [1.0] * 3 and block_of(r._data).fd == -1
    # Sent on, it goes by value (it has no descriptor to pass).
    again = ForkingPickler.loads(ForkingPickler.dumps(r))
    again.fill_(4)
    assert t.tolist() == [1.0] * 3 and again.tolist() == [4.0] * 3 and not again.is_shared()


def test_tensors_through_a_queue_keep_values_dtype_shape_and_requires_grad():
    ctx = mp.get_context("spawn")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_send_tensors, args=(q, done))
    p.start()
    try:
        got = q.get(timeout=TIMEOUT)
    finally:
        done.set()
    assert _finish(p) == 0
    g = got["grad"]
    assert g.dtype == tinytorch.float32 and g.shape == (2, 3) and g.requires_grad and g.is_leaf
    np.testing.assert_array_equal(g.detach().numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert got["int"].dtype == tinytorch.int64 and got["int"].tolist() == np.arange(12).reshape(3, 4).tolist()
    assert got["view"].shape == (4, 3) and got["view"].tolist() == np.arange(12).reshape(3, 4).T.tolist()
    assert got["bool"].dtype == tinytorch.bool and got["bool"].tolist() == [True, False]
    w = got["param"]
    assert type(w) is tinytorch.nn.Parameter and w.requires_grad and w.dtype == tinytorch.float64
    assert w.tolist() == [[1.5, -2.0]]
    assert got["empty"].shape == (0, 2) and got["scalar"].item() == 7.25 and got["scalar"].dim() == 0
    assert all(got[k].is_shared() for k in ("grad", "int", "view", "param"))
    assert not any(got[k].is_shared() for k in ("bool", "empty", "scalar"))


def test_result_put_by_a_process_that_then_exits_arrives():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_put_and_exit, args=(q,))
    p.start()
    assert _finish(p) == 0
    t = q.get(timeout=TIMEOUT)
    assert t.dtype == tinytorch.float64 and t.tolist() == [[2.0] * 3] * 2


def test_tensor_sent_to_a_child_is_shared_with_it():
    ctx = mp.get_context("spawn")
    inq, outq, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_echo_sum, args=(inq, outq, done))
    p.start()
    t = tinytorch.tensor([[1.0, 2.0], [3.0, 4.5]], dtype=tinytorch.float64).share_memory_()
    inq.put(t)
    try:
        dtype, shape, requires_grad, shared, total = outq.get(timeout=TIMEOUT)
        assert outq.get(timeout=TIMEOUT) == "written"
    finally:
        done.set()
    assert _finish(p) == 0
    assert (dtype, shape, requires_grad, shared, total) == (tinytorch.float64, (2, 2), False, True, 10.5)
    assert t.tolist() == [[2.0, 4.0], [6.0, 9.0]]


def test_shared_model_trained_in_a_spawned_child_is_seen_by_the_parent():
    model = tinytorch.nn.Linear(3, 2, dtype=tinytorch.float64)
    for param in model.parameters():
        param.share_memory_()
    w0, b0 = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
    x = tinytorch.tensor([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]], dtype=tinytorch.float64)
    lr = 0.1
    p = mp.get_context("spawn").Process(target=_train_step, args=(model, x, lr))
    p.start()
    assert _finish(p) == 0
    # d(sum(x W^T + b))/dW = ones(out, 1) * x.sum(0); /db = batch size.
    xs = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]]).sum(0)
    np.testing.assert_allclose(model.weight.detach().numpy(), w0 - lr * np.tile(xs, (2, 1)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.bias.detach().numpy(), b0 - lr * 2.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_hogwild_processes_update_one_shared_tensor(start_method):
    w = tinytorch.zeros(4).share_memory_()
    ctx = mp.start_processes(_hogwild_half, args=(w,), nprocs=2, join=False, start_method=start_method)
    _join(ctx)
    assert w.tolist() == [1.0, 1.0, 2.0, 2.0]


def _double(t):
    return t * 2


def test_pool_maps_tensors():
    xs = [tinytorch.tensor([float(i), -1.0]) for i in range(4)]
    with mp.get_context("spawn").Pool(2) as pool:
        out = pool.map_async(_double, xs).get(timeout=TIMEOUT)
    assert [o.tolist() for o in out] == [[2.0 * i, -2.0] for i in range(4)]


def test_matches_torch_multiprocessing_api():
    torch = pytest.importorskip("torch")
    import torch.multiprocessing as tmp
    assert set(mp.__all__) == set(tmp.__all__)
    assert mp.get_all_sharing_strategies() == tmp.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == tmp.get_sharing_strategy()
    for name in ("spawn", "start_processes", "ProcessContext", "ProcessRaisedException", "ProcessExitedException"):
        ours, theirs = getattr(mp, name), getattr(tmp, name)
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
    assert str(tmp.ProcessExitedException("m", 1, 2, 3)) == str(mp.ProcessExitedException("m", 1, 2, 3))
