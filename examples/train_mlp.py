"""A two-layer MLP fitting a noisy sine wave with plain tensors and manual SGD: the smallest end-to-end
run of tinytorch's tensors and C++ autograd engine (`python examples/train_mlp.py`)."""
import math

import tinytorch as torch


def main(steps: int = 300, lr: float = 0.05) -> None:
    torch.manual_seed(0)
    x = torch.linspace(-math.pi, math.pi, 256).reshape(-1, 1)
    y = x.sin() + 0.05 * torch.randn(256, 1)
    w1 = (torch.randn(1, 64) * 0.5).requires_grad_()
    b1 = torch.zeros(64, requires_grad=True)
    w2 = (torch.randn(64, 1) * 0.1).requires_grad_()
    b2 = torch.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]
    for step in range(steps + 1):
        pred = (x @ w1 + b1).tanh() @ w2 + b2
        loss = ((pred - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
        if step % 50 == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
