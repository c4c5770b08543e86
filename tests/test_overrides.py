"""tinytorch.overrides: has_torch_function*, handle_torch_function's dispatch order and errors, is_tensor_like,
and the function tables."""
import warnings

import pytest

import tinytorch
import tinytorch.overrides as overrides
from tinytorch import nn


class Logged:
    """A tensor-like type that records the calls handed to it."""

    calls = []

    def __init__(self, value):
        self.value = value

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append((cls.__name__, func, types))
        return ("handled by", cls.__name__)


class LoggedChild(Logged):
    calls = []


class Declines:
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return NotImplemented


class TensorWithTF(tinytorch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return "tensor subclass override"


def my_sum(x, y=None):
    """A library function that honours __torch_function__ the way torch.* functions do."""
    if overrides.has_torch_function_variadic(x, y):
        return overrides.handle_torch_function(my_sum, (x, y), x, y=y)
    return x + (0 if y is None else y)


def test_has_torch_function_plain_values():
    t = tinytorch.ones(2)
    assert not overrides.has_torch_function((t, 1, 2.0, None, "s"))
    assert not overrides.has_torch_function_unary(t)
    assert not overrides.has_torch_function_unary(nn.Parameter(tinytorch.ones(1)))
    assert not overrides.has_torch_function_variadic(t, 3)
    assert not overrides.has_torch_function(())
    with pytest.raises(TypeError, match="expected a sequence"):
        overrides.has_torch_function(3)


def test_has_torch_function_overriding_values():
    assert overrides.has_torch_function((tinytorch.ones(1), Logged(1)))
    assert overrides.has_torch_function_unary(Logged(1))
    assert overrides.has_torch_function_variadic(1, Declines())

    class PlainSubclass(tinytorch.Tensor):
        pass

    assert overrides.has_torch_function_unary(TensorWithTF([1.0, 2.0]))
    assert overrides.has_torch_function_unary(PlainSubclass([1.0, 2.0]))  # inherits Tensor.__torch_function__, as in PyTorch


def test_handle_torch_function_calls_override_with_protocol_arguments():
    Logged.calls.clear()
    assert my_sum(Logged(1), 2) == ("handled by", "Logged")
    name, func, types = Logged.calls[0]
    assert func is my_sum and types == (Logged,)
    assert my_sum(1, 2) == 3


def test_handle_torch_function_passes_args_and_kwargs():
    received = {}

    class Spy:
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            received.update(args=args, kwargs=kwargs)
            return "ok"

    s = Spy()
    assert overrides.handle_torch_function(my_sum, (s,), s, 5, y=7) == "ok"
    assert received == {"args": (s, 5), "kwargs": {"y": 7}}


def test_subclass_goes_first_then_left_to_right():
    Logged.calls.clear()
    LoggedChild.calls.clear()
    # the subclass is tried before its base even when it comes later
    result = overrides.handle_torch_function(my_sum, (Logged(1), LoggedChild(2)), Logged(1), LoggedChild(2))
    assert result == ("handled by", "LoggedChild")
    assert LoggedChild.calls[0][2] == (LoggedChild, Logged) and not Logged.calls
    # unrelated types: left to right, and NotImplemented passes the call on
    assert overrides.handle_torch_function(my_sum, (Declines(), Logged(1)), 1) == ("handled by", "Logged")
    assert Logged.calls[0][2] == (Declines, Logged)


def test_all_decline_raises_type_error():
    with pytest.raises(TypeError, match="no implementation found for '.*my_sum' on types that implement "
                                        "__torch_function__: \\[<class '.*Declines'>\\]"):
        my_sum(Declines(), 1)


def test_plain_method_override_warns():
    class Plain:
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return "plain"

    with pytest.warns(DeprecationWarning, match="as a plain method is deprecated"):
        assert overrides.handle_torch_function(my_sum, (Plain(),), 1) == "plain"


def test_one_call_per_type():
    Logged.calls.clear()
    overrides.handle_torch_function(my_sum, (Logged(1), Logged(2)), 1)
    assert len(Logged.calls) == 1 and Logged.calls[0][2] == (Logged,)


def test_wrap_torch_function():
    @overrides.wrap_torch_function(lambda a, b=None: (a, b))
    def combine(a, b=None):
        return "eager"

    assert combine(1, 2) == "eager"
    Logged.calls.clear()
    assert combine(Logged(1)) == ("handled by", "Logged")
    assert Logged.calls[0][1] is combine


def test_is_tensor_like():
    assert overrides.is_tensor_like(tinytorch.ones(1))
    assert overrides.is_tensor_like(nn.Parameter(tinytorch.ones(1)))
    assert overrides.is_tensor_like(Logged(1)) and overrides.is_tensor_like(Logged)
    assert not overrides.is_tensor_like(3) and not overrides.is_tensor_like([tinytorch.ones(1)])


def test_function_tables():
    ignored = overrides.get_ignored_functions()
    assert tinytorch.zeros in ignored and tinytorch.tensor in ignored and tinytorch.add not in ignored
    table = overrides.get_overridable_functions()
    assert tinytorch.add in table[tinytorch] and tinytorch.zeros not in table[tinytorch]
    assert tinytorch.nn.functional.relu in table[tinytorch.nn.functional]
    assert overrides.resolve_name(tinytorch.add) == "torch.add"
    assert overrides.resolve_name(tinytorch.Tensor.add) == "torch.Tensor.add"
    assert overrides.resolve_name(tinytorch.nn.functional.relu) == "torch.nn.functional.relu"
    assert overrides.resolve_name(len) is None
    assert overrides.is_tensor_method_or_property(tinytorch.Tensor.add)
    assert not overrides.is_tensor_method_or_property(tinytorch.add)
    dummies = overrides.get_testing_overrides()
    assert dummies[tinytorch.add](1, 2) == -1
    with overrides.enable_reentrant_dispatch():
        pass


def test_parity_with_torch_dispatch_order():
    torch = pytest.importorskip("torch")

    def order(mod):
        seen = []

        def make(name, base=object):
            def tf(cls, func, types, args=(), kwargs=None):
                seen.append((cls.__name__, tuple(t.__name__ for t in types)))
                return NotImplemented
            return type(name, (base,), {"__torch_function__": classmethod(tf)})

        a_cls = make("A")
        b_cls = make("B")
        c_cls = make("C", a_cls)
        with pytest.raises(TypeError):
            mod.overrides.handle_torch_function(my_sum, (a_cls(), b_cls(), c_cls(), a_cls()), 1)
        return seen

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert order(tinytorch) == order(torch)
    for value in (1, 2.5, None, "s", (1,)):
        assert overrides.has_torch_function_unary(value) == torch.overrides.has_torch_function_unary(value)
