"""First engine checks: chains, diamonds and deep graphs through the real C++ engine."""
import tinytorch as torch


def test_chain_gradient_matches_closed_form():
    x = torch.ones(4, requires_grad=True)
    y = x
    for _ in range(10):
        y = y * 1.5 + 0.5
    y.sum().backward()
    assert torch.allclose(x.grad, torch.full((4,), 1.5 ** 10))


def test_diamond_sums_both_paths():
    x = torch.tensor([2.0, 3.0], requires_grad=True)
    a = x * 3
    y = (a * a + a).sum()
    y.backward()
    assert torch.allclose(x.grad, 2 * 9 * x.detach() + 3)


def test_graph_deeper_than_recursion_limit_runs_and_frees():
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(50_000):
        y = y + 1.0
    y.sum().backward()
    assert torch.allclose(x.grad, torch.ones(2))
    del y  # freeing a 50k-node chain must not overflow the C++ stack
