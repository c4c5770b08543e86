"""The Tensor: an array (NumPy on CPU, CuPy on CUDA) plus its place in the autograd graph.

Ops live in tinytorch/_ops/, each with its derivative beside it; every op module attaches its
methods and operators to Tensor when it is imported, so this file holds only what a tensor *is*.
"""
from __future__ import annotations

import atexit
import threading
import warnings
import weakref

import numpy as np

from . import _C
from ._device import device, device_of
from ._dtype import _dtype_by_name, dtype, from_numpy_dtype
from ._meta import MetaArray

_new = object.__new__


class Size(tuple):
    """A tensor's shape: a tuple that prints like PyTorch's torch.Size."""

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self) -> str:
        # PyTorch's spelling: scripts (and their error messages, logs and doctests) read torch.Size([...])
        return f"torch.Size({list(self)})"

    def __getitem__(self, item):
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other))) if isinstance(other, tuple) else NotImplemented

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self)) if isinstance(other, tuple) else NotImplemented


class Tensor:
    """A multi-dimensional array that records the ops applied to it when it requires grad.

    Internals (read by the C++ engine and the op modules):
      _data            numpy.ndarray or cupy.ndarray
      _grad_fn         the Node that produced this tensor (None for leaves)
      _output_nr       which output of _grad_fn this is
      _requires_grad   True for leaves that require grad and for every tensor with a _grad_fn
      _vc              version counter shared with views: None (never modified in place) or [n]
      _base            the tensor this one is a view of, or None
      _views           {id: weakref} of the views of this (root) tensor taken while it had a history, or None:
                       an in-place op that gives this tensor a new history gives them one too
      _grad_acc        the AccumulateGrad node of a leaf (created on first use)
    """

    _grad_fn = None
    _output_nr = 0
    _requires_grad = False
    _vc = None
    _base = None
    _views = None
    _grad = None
    _grad_acc = None
    _backward_hooks = None  # leaf tensor hooks {id: hook}; non-leaf hooks live on the grad_fn
    _post_acc_hooks = None
    _retains_grad = False
    _is_param = False
    _is_inference = False  # set by _mark_inference on tensors made inside inference_mode()
    _placements = None  # a DTensor's layout over its DeviceMesh (distributed/tensor); None for a plain tensor
    __array_priority__ = 1000  # numpy scalars/arrays on the left defer to Tensor's operators

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        from ._torch_function import install
        install(cls)  # a subclass's ops go through its __torch_function__ (_torch_function.py)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """PyTorch's default for subclasses: run func with the protocol off and return its Tensors as cls."""
        from ._torch_function import DisableTorchFunctionSubclass, convert
        if not all(issubclass(cls, t) for t in types):
            return NotImplemented
        with DisableTorchFunctionSubclass():
            ret = func(*args, **(kwargs or {}))
            return convert(ret, cls)

    def __new__(cls, *args, **kwargs) -> "Tensor":
        # Legacy constructor, as PyTorch's: Tensor([1, 2]) copies data as float, Tensor(2, 3) is uninitialized. It is
        # __new__, as there, so that a subclass's __new__ can build through super().__new__(cls, data).
        from ._creation import _legacy_tensor_init
        t = object.__new__(cls)
        _legacy_tensor_init(t, *args, **kwargs)
        return t

    def __init__(self, *args, **kwargs) -> None:
        pass  # built in __new__; a subclass's __init__ may take arguments of its own

    @staticmethod
    def _make_subclass(cls: type, data: "Tensor", require_grad: bool = False, **kwargs) -> "Tensor":
        """A cls instance sharing data's memory, outside the graph (a new leaf requiring grad if asked): how
        subclasses' __new__ wrap an existing tensor, as nn.Parameter does in PyTorch."""
        t = object.__new__(cls)
        t._data = data._data
        t._vc = data._shared_vc()
        if require_grad:
            _set_requires_grad(t, True, "Only Tensors of floating point and complex dtype can require gradients")
        return t

    # ---------------------------------------------------------------- metadata
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape, or the length of one dimension."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def dtype(self) -> dtype:
        return from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> device:
        return device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        d = self._data
        return type(d) is not np.ndarray and type(d) is not MetaArray

    @property
    def is_meta(self) -> bool:
        """Whether this tensor lives on the meta device (shape, dtype and strides, no data)."""
        return type(self._data) is MetaArray

    @property
    def is_cpu(self) -> bool:
        return type(self._data) is np.ndarray

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        return self._data.dtype.itemsize

    def stride(self, dim: int | None = None):
        """Strides in elements, like PyTorch (NumPy counts bytes)."""
        d = self._data
        item = d.dtype.itemsize
        st = tuple(s // item for s in d.strides)
        if d.size == 0 and not any(st):  # NumPy gives a fresh empty array zero strides; PyTorch contiguous ones
            st = _contiguous_strides(d.shape)
        return st if dim is None else st[_wrap_dim(dim, d.ndim)]

    def is_contiguous(self, memory_format=None) -> bool:
        """Row-major (the default), or laid out as memory_format asks (channels_last: N, H, W, C in memory)."""
        if memory_format is None or getattr(memory_format, "_name", None) not in ("channels_last", "channels_last_3d"):
            return bool(self._data.flags.c_contiguous)
        from ._ops.shape import _format_perm, _is_channels_last
        return _is_channels_last(self._data, _format_perm(memory_format, self._data.ndim))

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def is_inference(self) -> bool:
        """Whether this tensor was made inside inference_mode() (a view: whether its base was, as in PyTorch)."""
        base = self._base
        return self._is_inference if base is None else base._is_inference

    def data_ptr(self) -> int:
        d = self._data
        if type(d) is np.ndarray:
            return d.ctypes.data
        return 0 if type(d) is MetaArray else d.data.ptr

    def get_device(self) -> int:
        return -1 if self.is_cpu or type(self._data) is MetaArray else self.device.index

    def type(self, dtype=None):
        """With no argument, PyTorch's type string ('torch.FloatTensor', as scripts compare it); else a cast."""
        if dtype is None:
            name = _LEGACY_TYPE_NAMES.get(self.dtype.name, self.dtype.name)
            where = "cuda." if self.is_cuda else ("meta." if type(self._data) is MetaArray else "")
            return f"torch.{where}{name}"
        if isinstance(dtype, str):
            for k, v in _LEGACY_TYPE_NAMES.items():
                if dtype.endswith(v):
                    return self.to(_dtype_by_name(k))
        return self.to(getattr(dtype, "dtype", dtype))  # a legacy type (torch.DoubleTensor) carries its dtype

    # ---------------------------------------------------------------- autograd state
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        _set_requires_grad(self, flag, "only Tensors of floating point and complex dtype can require gradients")

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Make a leaf start (or stop) recording its ops."""
        return _set_requires_grad(self, requires_grad, "only Tensors of floating point dtype can require gradients")

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad_fn(self):
        return self._grad_fn

    @property
    def grad(self):
        if self._grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute "
                "won't be populated during autograd.backward(). If you indeed want the .grad field to be populated "
                "for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor "
                "by mistake, make sure you access the leaf Tensor instead.", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of {type(value).__name__}")
            if value._data.shape != self._data.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value._data.shape)}' to a tensor "
                                   f"of size '{list(self._data.shape)}'. Please ensure that the gradient and the tensor "
                                   f"are the same size")
            if value._data.dtype != self._data.dtype:
                from ._ops.linalg import _CPP_NAMES
                from ._ops._common import _short
                raise RuntimeError(f"attempting to assign a gradient with dtype '{_CPP_NAMES.get(value.dtype.name)}' to a "
                                   f"tensor with grad_dtype '{_short(self.dtype)}'. The gradient must match the "
                                   f"tensor's grad_dtype (defaults to the tensor's dtype).")
            if value.device != self.device:
                raise RuntimeError(f"attempting to assign a gradient with device type '{value.device.type}' to a "
                                   f"tensor with device type '{self.device.type}'. Please ensure that the gradient "
                                   f"and the tensor are on the same device")
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's memory, outside the graph (and outside its version counter)."""
        t = _wrap(self._data)
        if self._is_inference or (self._base is not None and self._base._is_inference):
            t._is_inference = True  # the same memory: still an inference tensor, as in PyTorch
        return t

    @data.setter
    def data(self, value: "Tensor") -> None:
        self._data = value._data

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        vc = self._vc
        return 0 if vc is None else vc[0]

    def _bump_version(self) -> None:
        """Record an in-place write (saved tensors check this before backward reads them)."""
        vc = self._vc
        if vc is None:
            self._vc = [1]
        else:
            vc[0] += 1

    def detach(self) -> "Tensor":
        """A new leaf sharing memory (and the version counter) with this tensor, outside the graph."""
        t = _new(Tensor)
        t._data = self._data
        t._vc = self._shared_vc()
        if self._is_inference or (self._base is not None and self._base._is_inference):
            t._is_inference = True  # the same memory: still an inference tensor, as in PyTorch
        return t

    def detach_(self) -> "Tensor":
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def _shared_vc(self) -> list:
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        return vc

    def retain_grad(self) -> None:
        """Make backward() fill .grad of this non-leaf tensor too."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None or self._retains_grad:
            return
        import weakref
        ref = weakref.ref(self)  # weak: the node must not keep its own output alive

        def retain(grad):
            t = ref()
            if t is None:
                return
            # A copy: the gradient keeps flowing to the nodes below and must not alias .grad.
            if t._grad is None:
                t._grad = grad.clone() if _C._grad_enabled() else _wrap(grad._data.copy())
            else:
                t._grad = t._grad + grad

        self._grad_fn._hook_dict("retains_grad", 0)[self._output_nr] = retain
        self._retains_grad = True

    def register_hook(self, hook):
        """Call hook(grad) whenever the gradient of this tensor is computed; a returned tensor replaces it."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from .utils.hooks import add_hook
        if self._grad_fn is not None:
            hooks = self._grad_fn._hook_dict("tensor", self._output_nr)
        else:
            if self._backward_hooks is None:
                self._backward_hooks = {}
            hooks = self._backward_hooks
        return add_hook(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call hook(tensor) after backward has accumulated into this leaf's .grad."""
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from .utils.hooks import add_hook
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        return add_hook(self._post_acc_hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Accumulate d(self)/d(leaf) into the .grad of every leaf that requires grad."""
        from .autograd import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    # ---------------------------------------------------------------- conversion
    def item(self):
        if type(self._data) is MetaArray:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.item() if self.is_cpu else self._data.get().item()

    def tolist(self):
        if type(self._data) is MetaArray:
            raise RuntimeError("Tensor.item() cannot be called on meta tensors")
        return _host(self._data).tolist()

    def numpy(self, force: bool = False) -> np.ndarray:
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if type(self._data) is MetaArray:
            raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                            "host memory first.")
        if self.is_cuda:
            if not force:
                raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                                "tensor to host memory first.")
            return self._data.get()
        return self._data

    def is_shared(self) -> bool:
        """Whether the data lies in shared memory (always True on CUDA, as in PyTorch)."""
        from ._shared_memory import block_of
        return self.is_cuda or block_of(self._data) is not None

    def share_memory_(self) -> "Tensor":
        """Move the data into shared memory (tinytorch._shared_memory), which processes forked afterwards share
        and DataLoader workers pass on without copying. Views taken before keep the old memory."""
        if type(self._data) is np.ndarray and not self.is_shared():
            from ._shared_memory import share_array
            self._data = share_array(self._data)
        return self

    def is_pinned(self) -> bool:
        """Whether the data lies in page-locked host memory (from pin_memory())."""
        import sys
        if type(self._data) is not np.ndarray or "cupy" not in sys.modules:
            return False
        base = self._data
        while isinstance(base, np.ndarray):
            base = base.base
        return isinstance(base, sys.modules["cupy"].cuda.PinnedMemoryPointer)

    def pin_memory(self) -> "Tensor":
        """A copy in page-locked host memory (CuPy's pinned allocator), from which a copy to the GPU with
        non_blocking=True runs asynchronously; self when already pinned."""
        from . import accelerator
        if not accelerator.is_available():
            raise RuntimeError("Cannot access accelerator device when none is available.")
        if type(self._data) is not np.ndarray:
            raise RuntimeError(f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")
        if self.is_pinned():
            return self
        import cupyx
        out = cupyx.empty_pinned(self._data.shape, self._data.dtype)
        np.copyto(out, self._data)
        return _wrap(out)

    def __array__(self, dtype=None, copy=None):
        from ._ops._common import called_by_user
        if self._requires_grad and called_by_user():
            # np.asarray(t) is t.numpy(): PyTorch refuses to hand a user a graph's values silently (tinytorch's
            # own ops may read them)
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        a = _host(self._data)
        return a if dtype is None else a.astype(dtype)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if self._requires_grad:
            from ._ops._common import user_stacklevel
            warnings.warn("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
                          "Consider using tensor.detach() first.", UserWarning, stacklevel=user_stacklevel())
        return float(self.item())

    def __int__(self) -> int:
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    __hash__ = object.__hash__

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __repr__(self) -> str:
        from ._tensor_str import tensor_repr
        return tensor_repr(self)

    def __reduce_ex__(self, protocol):
        # Pickling (multiprocessing, deepcopy) keeps data, requires_grad and the Parameter type.
        data = self._data if type(self._data) is MetaArray else _host(self._data)
        return (_rebuild, (type(self), data, str(self.device), self._requires_grad))

    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.")
        if id(self) in memo:
            return memo[id(self)]
        t = _rebuild(type(self), self._data.copy(), None, self._requires_grad)
        if self._grad is not None:
            t._grad = _wrap(self._grad._data.copy())
        memo[id(self)] = t
        return t


_LEGACY_TYPE_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
    "int64": "LongTensor", "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor",
    "uint8": "ByteTensor", "bool": "BoolTensor", "complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor",
}


def _host(a):
    return a if type(a) is np.ndarray else a.get()


def _rebuild(cls, array, dev, requires_grad):
    from ._device import move, to_device
    t = _new(cls)
    t._data = move(array, to_device(dev)) if dev not in (None, "cpu") else array
    if requires_grad:
        t._requires_grad = True
    return t


def _set_requires_grad(self: Tensor, requires_grad: bool, integer_error: str) -> Tensor:
    """requires_grad_() with the integer-dtype error worded as the caller's PyTorch counterpart words it (a
    function, not a method: DTensor dispatches every Tensor method through its sharding rules)."""
    if self._grad_fn is not None:
        if not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().")
        return self
    if requires_grad and self.dtype._category < 2:
        raise RuntimeError(integer_error)
    if requires_grad and self.is_inference() and not _inference_contexts[0]:
        raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
    self._requires_grad = bool(requires_grad)
    return self


def _wrap(data) -> Tensor:
    """A new tensor around an array, outside the graph (the one place tensors are made)."""
    t = _new(Tensor)
    t._data = data
    if _inference_contexts[0]:
        _mark_inference(t)
    return t


# How many inference_mode(True) blocks are open, over all threads (autograd.grad_mode keeps it): while none is,
# making a tensor pays one list read for is_inference(); while one is, the per-thread flag decides.
_inference_contexts = [0]
_inference_thread = threading.local()


def _mark_inference(t: Tensor) -> None:
    """Make t an inference tensor when this thread is inside inference_mode()."""
    if getattr(_inference_thread, "on", False):
        t._is_inference = True


def _view_of(base: Tensor, data) -> Tensor:
    """A new tensor around `data`, which aliases `base`'s memory: it shares base's version counter."""
    t = _new(Tensor)
    t._data = data
    t._vc = base._shared_vc()
    root = t._base = base if base._base is None else base._base
    if root._grad_fn is not None:
        _track_view(root, t)
    return t


def _track_view(root: Tensor, view: Tensor) -> None:
    """Remember a view of a tensor with a history, so that an in-place op giving root a new history can give the
    view one too (PyTorch regenerates a view's grad_fn once its base has changed)."""
    views = root._views
    if views is None:
        views = root._views = {}
    else:
        n = len(views)
        if n >= 16 and not n & (n - 1):  # prune dead views at powers of two: amortised O(1) per view
            for k in [k for k, r in views.items() if r() is None]:
                del views[k]
    views[id(view)] = weakref.ref(view)


def _contiguous_strides(shape: tuple) -> tuple:
    """Row-major strides in elements, a dimension of size 0 counted as 1 (PyTorch's, for empty tensors too)."""
    acc, out = 1, []
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _wrap_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def _accumulate_grad(var: Tensor, grad: Tensor, may_steal: bool = False) -> None:
    """AccumulateGrad's body: add `grad` into var.grad (in place when not building a graph), then
    run the post-accumulate hooks (DDP marks the parameter ready there). The engine passes
    may_steal=True only when it holds the sole reference to `grad` and to its array. A DTensor leaf gets its
    gradient laid out as itself (a pending sum is reduced first), so .grad and the leaf hold matching pieces."""
    wrap = _wrap
    if var._placements is not None:
        from .distributed.tensor._api import _grad_layout
        grad = _grad_layout(var, grad)
        wrap = var._like
    if var._grad is None:
        data = grad._data
        steal = may_steal and data.base is None and data.flags.c_contiguous and data.flags.writeable and \
            data.dtype == var._data.dtype
        if _C._grad_enabled():  # create_graph: .grad must stay differentiable
            var._grad = grad if steal else grad.clone()
        else:
            var._grad = wrap(data if steal else data.astype(var._data.dtype, copy=True, order="C"))
    elif _C._grad_enabled():
        var._grad = var._grad + grad
    else:
        g = var._grad
        g._data += grad._data
        g._bump_version()
    hooks = var._post_acc_hooks
    if hooks:
        for hook in list(hooks.values()):
            hook(var)


def _check_nan(name: str, outputs: tuple) -> None:
    for i, t in enumerate(outputs):
        if isinstance(t, Tensor) and t.dtype.is_floating_point:
            xp = np if t.is_cpu else t._data.__array_namespace__()
            if bool(xp.isnan(t._data).any()):
                raise RuntimeError(f"Function '{name}' returned nan values in its {i}th output.")


def _device_thread_init(index: int) -> None:
    from . import _device
    if _device._cupy is not None:
        _device._cupy.cuda.Device(index).use()


_C._set_engine_helpers(Tensor, _accumulate_grad, _check_nan, _device_thread_init)
# Join the engine's device and pool threads while the interpreter can still run them; registered at
# import, so it runs after atexit handlers registered later (e.g. a process group's teardown).
atexit.register(_C._engine_shutdown)
