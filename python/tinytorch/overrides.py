"""torch.overrides: the `__torch_function__` protocol's helpers.

tinytorch's ops hand instances of Tensor subclasses to their class's `__torch_function__` (_torch_function.py:
methods through wrappers on the subclass, torch.*/F.* through _dispatch); these helpers also serve functions that
dispatch their own arguments, as PyTorch's Python-level functions do:

    def f(x):
        if has_torch_function_unary(x):
            return handle_torch_function(f, (x,), x)
        ...

has_torch_function* is True for an argument that has a `__torch_function__` attribute and is not a plain Tensor,
Parameter or builtin scalar; handle_torch_function calls the overriding types' `__torch_function__(func, types,
args, kwargs)` in PyTorch's order (subclasses before their bases, otherwise left to right) until one returns
something other than NotImplemented.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

__all__ = ["get_ignored_functions", "get_overridable_functions", "get_testing_overrides", "handle_torch_function",
           "has_torch_function", "resolve_name", "is_tensor_like", "is_tensor_method_or_property",
           "wrap_torch_function", "enable_reentrant_dispatch", "has_torch_function_unary",
           "has_torch_function_variadic"]

_BASIC_TYPES = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), slice)


def _plain_tensor_types() -> Tuple[type, ...]:
    from ._tensor import Tensor
    from .nn.parameter import Parameter
    return Tensor, Parameter


def _overrides(obj: Any) -> bool:
    """Whether obj takes part in __torch_function__ dispatch: a Tensor subclass instance unless its class opts out
    (Parameter, DTensor), or any other object with a __torch_function__."""
    t = type(obj)
    if t in _BASIC_TYPES or t in _plain_tensor_types():
        return False
    from ._tensor import Tensor
    from ._torch_function import takes_part
    if isinstance(obj, Tensor):
        return takes_part(t)
    return hasattr(obj, "__torch_function__")


def has_torch_function(relevant_args: Iterable[Any]) -> bool:
    """True when some element of relevant_args defines __torch_function__ (plain Tensors do not)."""
    try:
        items = list(relevant_args)
    except TypeError:
        raise TypeError("expected a sequence") from None
    return any(_overrides(a) for a in items)


def has_torch_function_unary(obj: Any) -> bool:
    """has_torch_function((obj,)), for the common one-argument case."""
    return _overrides(obj)


def has_torch_function_variadic(*args: Any) -> bool:
    """has_torch_function(args), with the arguments passed directly."""
    return any(_overrides(a) for a in args)


def _get_overloaded_args(relevant_args: Iterable[Any],
                         get_type_fn: Optional[Callable[[Any], type]] = None) -> List[Any]:
    """The arguments whose types define __torch_function__, one per type, in calling order: a subclass goes before
    its base class, other types keep their left-to-right order (NEP-18's rule, as PyTorch)."""
    from ._tensor import Tensor as tensor_cls
    from ._torch_function import takes_part
    get_type = type if get_type_fn is None else get_type_fn
    plain = _plain_tensor_types()
    seen: Set[type] = set()
    ordered: List[Any] = []
    for arg in relevant_args:
        t = get_type(arg)
        if t in seen or t in plain or not hasattr(t, "__torch_function__") or (issubclass(t, tensor_cls) and
                                                                             not takes_part(t)):
            continue
        seen.add(t)
        index = len(ordered)
        for i, earlier in enumerate(ordered):
            if issubclass(t, get_type(earlier)):
                index = i
                break
        ordered.insert(index, arg)
    return ordered


def handle_torch_function(public_api: Callable, relevant_args: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
    """Call the __torch_function__ overrides of relevant_args for public_api(*args, **kwargs); the first result
    other than NotImplemented is returned. TypeError if every override returns NotImplemented."""
    overloaded = _get_overloaded_args(relevant_args)
    types = tuple(type(a) for a in overloaded)
    for arg in overloaded:
        method = arg.__torch_function__
        if getattr(method, "__self__", None) is arg:
            warnings.warn("Defining your `__torch_function__ as a plain method is deprecated and will be an error in "
                          "future, please define it as a classmethod.", DeprecationWarning, stacklevel=2)
        result = method(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    name = f"{getattr(public_api, '__module__', '')}.{getattr(public_api, '__name__', public_api)}"
    raise TypeError(f"no implementation found for '{name}' on types that implement __torch_function__: "
                    f"{[type(a) for a in overloaded]}")


def wrap_torch_function(dispatcher: Callable) -> Callable[[Callable], Callable]:
    """Decorator: the function hands calls whose dispatcher(*args, **kwargs) arguments override to
    handle_torch_function, and runs itself otherwise."""
    def inner(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            relevant = dispatcher(*args, **kwargs)
            if has_torch_function(relevant):
                return handle_torch_function(wrapped, relevant, *args, **kwargs)
            return func(*args, **kwargs)
        return wrapped
    return inner


def is_tensor_like(inp: Any) -> bool:
    """True for a Tensor (or subclass) and for any object with a __torch_function__ attribute."""
    from ._tensor import Tensor
    return isinstance(inp, Tensor) or hasattr(inp, "__torch_function__")


# ---------------------------------------------------------------- the function tables

# torch.* functions PyTorch does not let __torch_function__ override (factories, global switches, type queries):
# the tinytorch functions of these names make up get_ignored_functions().
_IGNORED_NAMES = (
    "arange", "as_tensor", "empty", "empty_like", "empty_strided", "eye", "from_numpy", "full", "full_like",
    "linspace", "logspace", "ones", "ones_like", "rand", "rand_like", "randint", "randint_like", "randn",
    "randn_like", "randperm", "range", "scalar_tensor", "tensor", "tril_indices", "triu_indices", "zeros",
    "zeros_like", "hamming_window", "hann_window", "blackman_window", "bartlett_window", "kaiser_window",
    "frombuffer", "asarray", "can_cast", "compile", "get_default_dtype", "set_default_dtype", "get_default_device",
    "set_default_device", "get_num_threads", "set_num_threads", "is_tensor", "is_storage", "is_grad_enabled",
    "is_inference_mode_enabled", "manual_seed", "seed", "initial_seed", "promote_types", "result_type", "load",
    "save", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled", "set_printoptions",
    "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "typename", "is_floating_point", "is_complex", "numel",
)


@functools.lru_cache(maxsize=None)
def _tables() -> Tuple[Dict[Any, List[Callable]], Dict[Callable, str], frozenset]:
    import tinytorch
    from . import fft, linalg, special
    from ._tensor import Tensor
    from .nn import functional
    ignored = frozenset(getattr(tinytorch, n) for n in _IGNORED_NAMES if callable(getattr(tinytorch, n, None)))
    overridable: Dict[Any, List[Callable]] = {}
    names: Dict[Callable, str] = {}
    for namespace, prefix in ((tinytorch, "torch"), (functional, "torch.nn.functional"), (linalg, "torch.linalg"),
                              (fft, "torch.fft"), (special, "torch.special")):
        fns = []
        for name in sorted(dir(namespace)):
            obj = getattr(namespace, name)
            if (name.startswith("_") or isinstance(obj, type) or inspect.ismodule(obj) or not callable(obj)
                    or obj in ignored):
                continue
            fns.append(obj)
            names.setdefault(obj, f"{prefix}.{name}")
        overridable[namespace] = fns
    methods = []
    for name, attr in vars(Tensor).items():
        if name.startswith("__") and name not in ("__add__", "__mul__", "__sub__", "__truediv__", "__matmul__",
                                                  "__getitem__", "__setitem__", "__neg__", "__pow__"):
            continue
        if isinstance(attr, property):
            attr = attr.__get__
        elif not callable(attr):
            continue
        methods.append(attr)
        names.setdefault(attr, f"torch.Tensor.{name}")
    overridable[Tensor] = methods
    return overridable, names, ignored


def get_ignored_functions() -> Set[Callable]:
    """The torch.* functions that __torch_function__ cannot override (tensor factories, global settings)."""
    return set(_tables()[2])


def get_overridable_functions() -> Dict[Any, List[Callable]]:
    """The functions __torch_function__ may override, by namespace (torch, torch.nn.functional, torch.linalg,
    torch.fft, torch.special, and Tensor for its methods and property getters)."""
    return {ns: list(fns) for ns, fns in _tables()[0].items()}


def get_testing_overrides() -> Dict[Callable, Callable]:
    """A dummy override (returning -1) for each overridable function, for tests of __torch_function__ handling."""
    def dummy(*args: Any, **kwargs: Any) -> int:
        return -1
    return {fn: dummy for fns in _tables()[0].values() for fn in fns}


def resolve_name(f: Callable) -> Optional[str]:
    """The public name of an overridable function ('torch.add', 'torch.Tensor.add'), or None for other callables."""
    return _tables()[1].get(f)


def is_tensor_method_or_property(func: Callable) -> bool:
    """True for a Tensor method, or the getter of a Tensor property (what __torch_function__ receives for them)."""
    from ._tensor import Tensor
    return func in _tables()[0][Tensor] or getattr(func, "__name__", None) == "__get__"


@contextlib.contextmanager
def enable_reentrant_dispatch() -> Iterator[None]:
    """Lets __torch_dispatch__ code re-enter the dispatcher (PyTorch); tinytorch has no dispatcher: a no-op."""
    yield
