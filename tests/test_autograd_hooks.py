"""Tensor, node and post-accumulate hooks, their order, handles, and final callbacks."""
import pytest

import tinytorch as torch
from tinytorch import autograd
from tinytorch.autograd.graph import queue_callback


def test_documented_hook_order_for_q_equals_p_times_2():
    order = []
    p = torch.ones(2, requires_grad=True)
    q = p * 2
    q.register_hook(lambda g: order.append("q_tensor_hook"))
    q.grad_fn.register_prehook(lambda gouts: order.append("q_node_prehook"))
    q.grad_fn.register_hook(lambda gins, gouts: order.append("q_node_posthook"))
    p.register_hook(lambda g: order.append("p_tensor_hook"))
    p.register_post_accumulate_grad_hook(lambda t: order.append(("post_acc_hook", t.grad is not None)))
    q.sum().backward()
    assert order == ["q_tensor_hook", "q_node_prehook", "q_node_posthook", "p_tensor_hook", ("post_acc_hook", True)]


def test_hook_order_matches_pytorch():
    real = pytest.importorskip("torch")

    def order(lib):
        seen = []
        p = lib.ones(2, requires_grad=True)
        q = p * 2
        q.retain_grad()
        q.register_hook(lambda g: seen.append("q_tensor_hook"))
        q.grad_fn.register_prehook(lambda gouts: seen.append("q_node_prehook"))
        q.grad_fn.register_hook(lambda gins, gouts: seen.append("q_node_posthook"))
        p.register_hook(lambda g: seen.append("p_tensor_hook"))
        p.register_post_accumulate_grad_hook(lambda t: seen.append("post_acc_hook"))
        q.sum().backward()
        return seen

    assert order(torch) == order(real)


def test_tensor_hook_replaces_gradient_on_nonleaf_and_leaf():
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: g + 1)
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 31.0))


def test_hook_returning_none_keeps_gradient_and_sees_it():
    seen = []
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: seen.append(g.clone()))
    (x * x).sum().backward()
    assert torch.allclose(seen[0], torch.tensor([2.0, 4.0])) and torch.allclose(x.grad, seen[0])


def test_retain_grad_sees_the_hook_modified_gradient():
    x = torch.ones(2, requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.register_hook(lambda g: g * 5)  # registered after retain_grad, still runs before it (PyTorch)
    y.sum().backward()
    assert torch.allclose(y.grad, torch.full((2,), 5.0))


def test_removable_handles():
    calls = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    h1 = x.register_hook(lambda g: calls.append("tensor"))
    h2 = y.grad_fn.register_prehook(lambda g: calls.append("pre"))
    h3 = y.grad_fn.register_hook(lambda gi, go: calls.append("post"))
    h4 = x.register_post_accumulate_grad_hook(lambda t: calls.append("acc"))
    for h in (h1, h2, h3, h4):
        h.remove()
    y.sum().backward()
    assert calls == []
    with x.register_hook(lambda g: calls.append("ctx")):
        (x * 1).sum().backward()
    (x * 1).sum().backward()
    assert calls == ["ctx"]


def test_hooks_need_requires_grad_and_post_acc_needs_leaf():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        torch.ones(1).register_hook(lambda g: g)
    x = torch.ones(1, requires_grad=True)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


def test_node_prehook_and_posthook_replace_gradients():
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.grad_fn.register_prehook(lambda gouts: (gouts[0] * 2,))
    y.grad_fn.register_hook(lambda gins, gouts: (gins[0] + 100,))
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 106.0))


def test_node_posthook_receives_inputs_and_outputs():
    got = []
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.grad_fn.register_hook(lambda gins, gouts: got.append((gins[0].clone(), gouts[0].clone())))
    y.sum().backward()
    (gin, gout), = got
    assert torch.allclose(gin, torch.full((2,), 3.0)) and torch.allclose(gout, torch.ones(2))


def test_tensor_hook_runs_in_grad_capture_path():
    seen = []
    x = torch.ones(2, requires_grad=True)
    h = x * 2
    h.register_hook(lambda g: seen.append("h") or g * 3)
    out = (h * h).sum()
    gh, = autograd.grad(out, h)
    assert seen == ["h"] and torch.allclose(gh, torch.full((2,), 12.0))


def test_post_accumulate_hook_sees_the_accumulated_grad_each_time():
    sums = []
    w = torch.ones(3, requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: sums.append(t.grad.sum().item()))
    (w * 2).sum().backward()
    (w * 2).sum().backward()
    assert sums == [6.0, 12.0]


def test_queue_callback_outside_backward():
    with pytest.raises(RuntimeError, match="^Final callbacks can only be installed during backward pass.$"):
        queue_callback(lambda: None)


def test_callback_queued_from_hook_runs_once_after_every_node():
    events = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2

    def hook(g):
        events.append("hook")
        queue_callback(lambda: events.append(("callback", x.grad is not None)))

    y.register_hook(hook)
    x.register_post_accumulate_grad_hook(lambda t: events.append("accumulated"))
    y.sum().backward()
    assert events == ["hook", "accumulated", ("callback", True)]
    (x * 1).sum().backward()
    assert events.count(("callback", True)) == 1  # not kept for later backward calls


def test_callback_queuing_another_callback_runs_both_in_order():
    events = []
    x = torch.ones(2, requires_grad=True)

    def first():
        events.append("first")
        queue_callback(lambda: events.append("second"))

    x.register_hook(lambda g: queue_callback(first))
    (x * 2).sum().backward()
    assert events == ["first", "second"]


def test_callbacks_do_not_run_when_backward_fails():
    events = []

    class Fail(autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            queue_callback(lambda: events.append("callback"))
            raise RuntimeError("backward failed")

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="backward failed"):
        Fail.apply(x).sum().backward()
    assert events == []


def test_current_node_inside_backward():
    seen = []

    class Probe(autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            seen.append(autograd.graph.current_node().name())
            return g

    x = torch.ones(1, requires_grad=True)
    Probe.apply(x).sum().backward()
    assert seen == ["ProbeBackward"] and autograd.graph.current_node() is None


def test_hook_changing_the_size_is_an_error():
    def myhook(g):
        return torch.ones(3)

    x = torch.ones(2, requires_grad=True)
    x.register_hook(myhook)
    with pytest.raises(RuntimeError, match="hook 'myhook' has changed the size of value"):
        (x * 2).sum().backward()
    y = torch.ones(2, requires_grad=True)
    z = y * 2
    z.grad_fn.register_prehook(lambda g: (torch.ones(3),))
    with pytest.raises(RuntimeError, match="hook '<lambda>' has changed the size of value"):
        z.sum().backward()


def test_node_hook_returning_wrong_count_is_an_error():
    y = torch.ones(2, requires_grad=True)
    z = y * 2
    z.grad_fn.register_prehook(lambda g: (g[0], g[0]))
    with pytest.raises(RuntimeError, match=r"hook '<lambda>' has returned an incorrect number of values "
                                           r"\(got 2, but expected 1\)"):
        z.sum().backward()


def test_hooks_may_remove_themselves_while_running():
    calls = []
    x = torch.ones(2, requires_grad=True)
    y = x * 2
    handles = {}

    def once(g):
        calls.append("tensor")
        handles["t"].remove()

    def once_pre(g):
        calls.append("pre")
        handles["p"].remove()

    handles["t"] = y.register_hook(once)
    y.register_hook(lambda g: calls.append("second tensor hook"))
    handles["p"] = y.grad_fn.register_prehook(once_pre)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert calls == ["tensor", "second tensor hook", "pre", "second tensor hook"]


def test_node_hooks_may_return_lists():
    x = torch.ones(2, requires_grad=True)
    y = x * 3
    y.grad_fn.register_prehook(lambda gouts: [gouts[0] * 2])
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full((2,), 6.0))


def test_register_multi_grad_hook_all_and_any():
    from tinytorch.autograd.graph import register_multi_grad_hook
    a = torch.ones(2, requires_grad=True)
    b = torch.ones(3, requires_grad=True)
    seen_all, seen_any = [], []
    h = register_multi_grad_hook((a, b), lambda grads: seen_all.append(
        [None if g is None else g.sum().item() for g in grads]))
    register_multi_grad_hook((a, b), lambda g: seen_any.append(g.sum().item()), mode="any")
    ((a * 2).sum() + (b * 3).sum()).backward()
    (a * 5).sum().backward()  # b takes no part: its entry is None
    assert seen_all == [[4.0, 9.0], [10.0, None]]
    assert len(seen_any) == 2 and seen_any[1] == 10.0
    h.remove()
    (a * 1).sum().backward()
    assert len(seen_all) == 2 and len(seen_any) == 3
    with pytest.raises(ValueError, match="Expects mode to be one of"):
        register_multi_grad_hook((a,), lambda g: None, mode="some")


def test_error_in_final_callback_reaches_caller_and_engine_recovers():
    x = torch.ones(2, requires_grad=True)

    def failing():
        raise ValueError("callback failed")

    x.register_hook(lambda g: queue_callback(failing))
    with pytest.raises(ValueError, match="callback failed"):
        (x * 2).sum().backward()
    y = torch.ones(2, requires_grad=True)
    (y * 3).sum().backward()
    assert torch.allclose(y.grad, torch.full((2,), 3.0))


def test_hooks_and_retain_grad_on_second_output_of_a_node():
    class Split(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = torch.ones(2, requires_grad=True)
    a, b = Split.apply(x)
    assert b.output_nr == 1
    seen = []
    b.register_hook(lambda g: seen.append("b") or g * 10)
    a.register_hook(lambda g: seen.append("a"))
    b.retain_grad()
    (a.sum() + b.sum()).backward()
    assert sorted(seen) == ["a", "b"]
    assert torch.allclose(b.grad, torch.full((2,), 10.0))
    assert torch.allclose(x.grad, torch.full((2,), 2.0 + 30.0))
