"""Tensor subclasses and __torch_function__: ops on a subclass instance (methods, operators, torch.*, F.*) go
through its class's __torch_function__; Tensor's default returns results as the subclass and keeps the graph;
Parameter and Buffer opt out; DisableTorchFunctionSubclass turns the protocol off. Beside PyTorch when importable."""
import importlib.util

import pytest

import tinytorch as torch

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")


def _ops(lib, x):
    """Results of everyday ops on x, by name (their types are what the protocol decides)."""
    F = lib.nn.functional
    v, i = x.topk(1)
    return {"add": x + 1, "radd": 1 + x, "mul_tensor": x * lib.ones(2), "sum": x.sum(), "exp": lib.exp(x),
            "getitem": x[0], "view": x.view(2), "cat": lib.cat([x, x]), "stack": lib.stack([x, x]),
            "relu": F.relu(x), "split0": x.split(1)[0], "topk_values": v, "topk_indices": i, "detach": x.detach(),
            "clone": x.clone(), "matmul": x @ lib.ones(2, 2), "eq": x == x, "where": lib.where(x > 0, x, x)}


def test_results_come_back_as_the_subclass_and_stay_in_the_graph():
    class Tagged(torch.Tensor):
        pass
    x = torch.ones(2, requires_grad=True).as_subclass(Tagged)
    for name, r in _ops(torch, x).items():
        assert type(r) is Tagged, name
    y = x * 3
    assert type(y.grad_fn).__name__ == "AliasBackward0"
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "MulBackward0"
    leaf = torch.ones(2, requires_grad=True)
    (leaf.as_subclass(Tagged) * 3).sum().backward()
    assert torch.equal(leaf.grad, torch.full((2,), 3.0))
    assert type(x.size()) is torch.Size and type(x.tolist()) is list and x.dim() == 1
    assert repr(x).startswith("Tagged(")


def test_an_override_sees_every_op_with_its_types():
    class Logged(torch.Tensor):
        calls = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.calls.append((func.__name__, types))
            return super().__torch_function__(func, types, args, kwargs or {})

    y = torch.ones(2).as_subclass(Logged)
    z = torch.nn.functional.gelu(y * 2 + torch.sin(y))
    assert type(z) is Logged
    assert [c[0] for c in Logged.calls] == ["mul", "sin", "add", "gelu"] and all(c[1] == (Logged,)
                                                                              for c in Logged.calls)
    Logged.calls.clear()
    assert type(torch.ones(2) + y) is Logged and Logged.calls  # a plain tensor on the left: the subclass's __radd__


def test_overrides_can_answer_and_disable_the_protocol():
    class Answers(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return "answered"

    class Plain(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

    a = torch.ones(2).as_subclass(Answers)
    assert a + 1 == "answered" and torch.exp(a) == "answered" and a.sum() == "answered"
    p = torch.ones(2).as_subclass(Plain)
    assert type(p + 1) is torch.Tensor and type(torch.exp(p)) is torch.Tensor


def test_parameters_and_buffers_give_plain_tensors():
    p = torch.nn.Parameter(torch.ones(2))
    b = torch.nn.Buffer(torch.ones(2))
    for r in (p * 2, p.detach(), torch.exp(p), b + 1, torch.cat([b, b])):
        assert type(r) is torch.Tensor
    assert not torch.overrides.has_torch_function_unary(p) and not torch.overrides.has_torch_function_unary(b)


@needs_torch
def test_result_types_match_pytorch():
    import torch as pt

    def types(lib):
        class Tagged(lib.Tensor):
            pass
        return {k: type(v).__name__ for k, v in _ops(lib, lib.ones(2).as_subclass(Tagged)).items()}
    assert types(torch) == types(pt)


def test_subclasses_build_through_new_and_make_subclass():
    """PyTorch's two ways to build a subclass instance: super().__new__(cls, data) (the legacy constructor lives in
    Tensor.__new__) and Tensor._make_subclass(cls, data, requires_grad), a new leaf sharing data's memory."""
    class FromData(torch.Tensor):
        @staticmethod
        def __new__(cls, x, *args, **kwargs):
            return super().__new__(cls, x, *args, **kwargs)

    class Wrapped(torch.Tensor):
        def __new__(cls, data, flag=False):
            t = torch.Tensor._make_subclass(cls, data, data.requires_grad)
            t.flag = flag
            return t

        def __init__(self, data, flag=False):  # its own arguments: Tensor.__init__ takes none of them
            super().__init__()

    a = FromData([1.0, 2.0])
    assert type(a) is FromData and a.tolist() == [1.0, 2.0] and a.dtype == torch.float32
    base = torch.ones(2, requires_grad=True)
    w = Wrapped(base, flag=True)
    assert type(w) is Wrapped and w.flag and w.requires_grad and w.is_leaf and w.data_ptr() == base.data_ptr()
    assert type(w * 2) is Wrapped and not hasattr(w * 2, "flag")  # as_subclass makes a new instance
    assert torch.Tensor().shape == (0,) and torch.Tensor(2, 3).shape == (2, 3)
