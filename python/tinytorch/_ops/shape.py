"""Shape ops: views (view, reshape, permute, transpose, expand, squeeze, narrow, ...) that share
memory with their input, and copies (cat, stack, repeat, flip, tril/triu); each beside its derivative."""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from .. import _autocast
from .._dtype import int64
from .._meta import MetaArray
from .._tensor import Size, Tensor, _view_of, _wrap, _wrap_dim
from . import _cpu
from ._common import attach, needs_grad, record, _grad_enabled
from .indexing import _inplace
from .pointwise import _write_out
from ._common import user_stacklevel as _user_stacklevel


def _short_name(a: Tensor) -> str:
    from ._common import _short
    return _short(a._data.dtype)


def _view_dtype(a: Tensor, dtype) -> Tensor:
    """The same memory read as another dtype (x.view(torch.int32)); the last dimension scales by the ratio of the
    element sizes. Outside the graph, as in PyTorch."""
    from ._common import _short
    x = a._data
    want = np.dtype(dtype.np)
    old, new = x.itemsize, want.itemsize
    if old != new:
        how = f"to view {_short(x.dtype)} as {_short(want)} (different element sizes)"
        if x.ndim == 0:
            raise RuntimeError(f"self.dim() cannot be 0 {how}")
        if x.strides[-1] != old and x.shape[-1] != 1:
            raise RuntimeError(f"self.stride(-1) must be 1 {how}, but got {x.strides[-1] // old}")
        if new > old and x.shape[-1] % (new // old):
            raise RuntimeError(f"self.size(-1) must be divisible by {new // old} {how}, but got {x.shape[-1]}")
    t = _view_of(a, x.view(want))
    t._base = None  # not a view autograd follows: an in-place op on it does not rewrite a's history
    return t


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = tuple(shape[0])
    for s in shape:
        if type(s) is not int:  # NumPy integers, 0-d tensors, SymInt-likes: int() each
            return tuple(int(s) for s in shape)
    return shape if type(shape) is tuple else tuple(shape)  # the common case: ints already


def _infer(shape: tuple, numel: int, old: tuple) -> tuple:
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in shape:
        rest = 1
        for s in shape:
            if s != -1:
                rest *= s
        if rest == 0 and numel == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                               "unspecified dimension size -1 can be any value and is ambiguous")
        if rest == 0 or numel % rest:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // rest if s == -1 else s for s in shape)
    n = 1
    for s in shape:
        n *= s
    if n != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _aliases(data, x) -> bool:
    # reshape returns a view when it can: the result then shares the input's version counter.
    return data.base is x or (data.base is not None and data.base is x.base)


def view(a: Tensor, *shape) -> Tensor:
    """Same memory, new shape; fails (as in PyTorch) when the strides don't allow it."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, Size, int)):
        from .._dtype import to_dtype
        return _view_dtype(a, to_dtype(shape[0]))
    x = a._data
    new = _infer(_shape_arg(shape), x.size, x.shape)
    try:
        data = x.view()
        data.shape = new  # raises instead of copying when the strides are incompatible
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one dimension "
                           "spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    out = _view_of(a, data)
    if a._requires_grad and _grad_enabled():
        old = x.shape
        record("ViewBackward0", lambda g: g.reshape(old), out, (a,))
    return out


def as_subclass(a: Tensor, cls) -> Tensor:
    """The same memory as an instance of cls (a Tensor subclass, whose __init__ is not called), still in the
    graph: its gradient flows to a unchanged (AliasBackward0)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is not possible. "
                        "Make sure your class inherits from Tensor.")
    out = _view_of(a, a._data.view())
    out.__class__ = cls
    if a._requires_grad and _grad_enabled():
        record("AliasBackward0", lambda g: g, out, (a,))
    return out


def _reshaped(x, shape: tuple):
    """x.reshape(shape); a copy that reshape must make of a large strided array (attention's heads merged back)
    is made by the pool."""
    if type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE and not x.flags.c_contiguous:
        try:
            return x.reshape(shape, copy=False)  # a view when the strides allow it
        except TypeError:  # NumPy < 2.1 has no copy argument
            pass
        except ValueError:
            c = _cpu.copy(x)
            if c is not None:
                return c.reshape(shape)
    return x.reshape(shape)


def reshape(a: Tensor, *args, shape=None) -> Tensor:
    """New shape; a view when possible, else a copy (reshape(2, 3), reshape((2, 3)) or reshape(shape=...))."""
    x = a._data
    new = _infer(_shape_arg(args if shape is None else (shape,)), x.size, x.shape)
    data = _reshaped(x, new)
    out = _view_of(a, data) if _aliases(data, x) else _wrap(data)
    if a._requires_grad and _grad_enabled():
        old = x.shape
        record("ViewBackward0" if out._base is not None else "UnsafeViewBackward0", lambda g: g.reshape(old), out, (a,))
    return out


def view_as(a: Tensor, other: Tensor) -> Tensor:
    """view(other.shape)."""
    return view(a, other.shape)


def reshape_as(a: Tensor, other: Tensor) -> Tensor:
    """reshape(other.shape)."""
    return reshape(a, other.shape)


def flatten(a: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start_dim..end_dim into one."""
    nd = a._data.ndim
    if nd == 0:
        return reshape(a, 1)
    s, e = _wrap_dim(start_dim, nd), _wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = a._data.shape
    return reshape(a, shape[:s] + (-1,) + shape[e + 1:]) if shape[s:e + 1] else a


def unflatten(a: Tensor, dim: int, sizes) -> Tensor:
    """Split dimension dim into `sizes`."""
    d = _wrap_dim(dim, a._data.ndim)
    shape = a._data.shape
    return reshape(a, shape[:d] + tuple(sizes) + shape[d + 1:])


def permute(a: Tensor, *args, dims=None) -> Tensor:
    """Reorder dimensions (a view): permute(2, 0, 1), permute((2, 0, 1)) or permute(dims=...)."""
    dims = _shape_arg(args if dims is None else (dims,))
    nd = a._data.ndim
    if len(dims) != nd:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                           f"of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal to "
                           f"len(dims) = {len(dims)}")
    axes = tuple(_wrap_dim(d, nd) for d in dims)
    if len(set(axes)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    out = _view_of(a, a._data.transpose(axes))
    if needs_grad(a):
        inverse = tuple(np.argsort(axes))
        record("PermuteBackward0", lambda g: g.permute(inverse), out, (a,))
    return out


def transpose(a: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dimensions (a view)."""
    nd = a._data.ndim
    d0, d1 = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
    if nd == 0:  # dims 0/-1 only (checked above): an identity view that stays in the graph
        return _identity_view(a, "TransposeBackward0")
    out = _view_of(a, a._data.swapaxes(d0, d1))
    if needs_grad(a):
        record("TransposeBackward0", lambda g: g.transpose(d0, d1), out, (a,))
    return out


def _identity_view(a: Tensor, name: str) -> Tensor:
    out = _view_of(a, a._data.view())
    if needs_grad(a):
        record(name, lambda g: g, out, (a,))
    return out


def t(a: Tensor) -> Tensor:
    """Transpose of a matrix (1-D and 0-D tensors come back as views of themselves)."""
    if a._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a._data.ndim}D")
    if a._data.ndim == 2:
        out = _view_of(a, a._data.swapaxes(0, 1))
        if needs_grad(a):
            record("TBackward0", lambda g: g.t(), out, (a,))
        return out
    return _identity_view(a, "TBackward0")


def _T(a: Tensor) -> Tensor:
    nd = a._data.ndim
    if nd != 2:
        import warnings
        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity in these cases." if nd == 0
                      else "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated "
                      "and it will throw an error in a future release. Consider `x.mT` to transpose batches of "
                      "matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a "
                      "tensor.", UserWarning, stacklevel=_user_stacklevel())
    return permute(a, tuple(reversed(range(nd))))


def _mT(a: Tensor) -> Tensor:
    if a._data.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(a, -2, -1)


def movedim(a: Tensor, source, destination) -> Tensor:
    """Move dims from `source` to `destination` (a view)."""
    nd = a._data.ndim
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src = [_wrap_dim(s, nd) for s in src]
    dst = [_wrap_dim(d, nd) for d in dst]
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(a, order)


def unsqueeze(a: Tensor, dim: int) -> Tensor:
    """Insert a dimension of size 1 (a view)."""
    d = _wrap_dim(dim, a._data.ndim + 1)
    out = _view_of(a, np.expand_dims(a._data, d))
    if needs_grad(a):
        record("UnsqueezeBackward0", lambda g: g.squeeze(d), out, (a,))
    return out


def squeeze(a: Tensor, dim=None) -> Tensor:
    """Remove dimensions of size 1 (only those in dim, when given)."""
    x = a._data
    if dim is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        axes = tuple(sorted({_wrap_dim(d, x.ndim) for d in dims if x.ndim and x.shape[_wrap_dim(d, x.ndim)] == 1}))
    out = _view_of(a, x.squeeze(axis=axes) if axes else x.view())
    if needs_grad(a):
        old = x.shape
        # PyTorch's overloads: squeeze(), squeeze(dim), squeeze(dims)
        node = "SqueezeBackward0" if dim is None else "SqueezeBackward1" if isinstance(dim, int) else "SqueezeBackward2"
        record(node, lambda g: g.reshape(old), out, (a,))
    return out


def expand(a: Tensor, *sizes) -> Tensor:
    """Broadcast to a larger shape without copying (-1 keeps a dimension)."""
    sizes = _shape_arg(sizes)
    x = a._data
    if len(sizes) < x.ndim:
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(x.shape)}}}, size={list(sizes)}): the number of sizes "
                           f"provided ({len(sizes)}) must be greater or equal to the number of dimensions in the "
                           f"tensor ({x.ndim})")
    lead = len(sizes) - x.ndim
    for i in range(lead):
        if sizes[i] < 0:
            raise RuntimeError(f"The expanded size of the tensor ({sizes[i]}) isn't allowed in a leading, "
                               f"non-existing dimension {i}")
    target = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    for i in range(x.ndim):
        if x.shape[i] != 1 and x.shape[i] != target[i + lead]:
            raise RuntimeError(f"The expanded size of the tensor ({target[i + lead]}) must match the existing size "
                               f"({x.shape[i]}) at non-singleton dimension {i + lead}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(x.shape)}")
    if target == x.shape:
        data = x.view()
    else:
        data = np.broadcast_to(x, target) if type(x) is np.ndarray else x.__array_namespace__().broadcast_to(x, target)
    out = _view_of(a, data)
    if needs_grad(a):
        old = x.shape
        record("ExpandBackward0", lambda g: g.sum_to_size(old), out, (a,))
    return out


def expand_as(a: Tensor, other: Tensor) -> Tensor:
    """expand(other.shape)."""
    return expand(a, other.shape)


def broadcast_to(a: Tensor, shape) -> Tensor:
    """expand to `shape`."""
    return expand(a, tuple(shape))


def broadcast_tensors(*tensors):
    """Expand every tensor to the common broadcast shape."""
    shape = np.broadcast_shapes(*(t._data.shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


_CHANNELS_LAST = {"channels_last": (4, (0, 2, 3, 1)), "channels_last_3d": (5, (0, 2, 3, 4, 1))}


def _format_perm(memory_format, ndim: int):
    """The axis order a channels-last memory format stores (N, spatial..., C), or None for row-major."""
    name = getattr(memory_format, "_name", None)
    if name not in _CHANNELS_LAST:
        return None
    rank, perm = _CHANNELS_LAST[name]
    if ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {name} format")
    return perm


def _is_channels_last(x, perm) -> bool:
    """Whether x's strides are those of its axes stored in `perm` order (size-1 axes ignored, as PyTorch)."""
    expected = x.itemsize
    for d in reversed(perm):
        if x.shape[d] != 1:
            if x.strides[d] != expected:
                return False
            expected *= x.shape[d]
    return True


def _laid_out(x, perm):
    """A copy of x whose memory holds its axes in `perm` order (channels last), with x's shape. Always a copy:
    (ascontiguousarray would hand back x's own memory when x is already channels last, and clone would alias.)"""
    xp = np if type(x) is np.ndarray else x.__array_namespace__()
    return xp.array(x.transpose(perm), order="C", copy=True).transpose(np.argsort(perm))


def contiguous(a: Tensor, memory_format=None) -> Tensor:
    """The tensor itself when already laid out as asked (row-major, or channels last), else a copy that is."""
    x = a._data
    perm = _format_perm(memory_format, x.ndim) if memory_format is not None else None
    if (x.flags.c_contiguous if perm is None else _is_channels_last(x, perm)):
        return a
    return _clone(a, perm)


def clone(a: Tensor, *, memory_format=None) -> Tensor:
    """A copy with its own memory (differentiable); channels-last tensors stay channels last unless
    memory_format asks otherwise (PyTorch's preserve_format)."""
    x = a._data
    name = getattr(memory_format, "_name", "preserve_format")
    perm = _format_perm(memory_format, x.ndim) if name in _CHANNELS_LAST else None
    if name == "preserve_format" and x.ndim in (4, 5) and not x.flags.c_contiguous and type(x) is not MetaArray:
        cl = _CHANNELS_LAST["channels_last" if x.ndim == 4 else "channels_last_3d"][1]
        perm = cl if _is_channels_last(x, cl) else None
    return _clone(a, perm)


def _clone(a: Tensor, perm) -> Tensor:
    """A copy of a, row-major or (perm) channels last."""
    x = a._data
    if perm is not None and type(x) is not MetaArray:
        r = _laid_out(x, perm)
    else:
        r = _cpu.copy(x) if type(x) is np.ndarray and x.size >= _cpu.MIN_SIZE else None
        if r is None:
            xp = np if type(x) is np.ndarray else x.__array_namespace__()
            r = xp.array(x, copy=True, order="C")
    out = _wrap(r)
    if needs_grad(a):
        record("CloneBackward0", lambda g: g, out, (a,))
    return out


def narrow(a: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A view of `length` elements from `start` along dim."""
    d = _wrap_dim(dim, a._data.ndim)
    if isinstance(start, Tensor):
        start = int(start.item())
    size = a._data.shape[d]
    if start < 0:
        start += size
    if not (0 <= start and start + length <= size):
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    idx = (slice(None),) * d + (slice(start, start + length),)
    out = _view_of(a, a._data[idx])
    if needs_grad(a):
        shape, dt = a._data.shape, a.dtype

        def narrow_backward(g):
            if not _grad_enabled():
                xp = np if type(g._data) is np.ndarray else g._data.__array_namespace__()
                data = xp.zeros(shape, g._data.dtype)
                data[idx] = g._data
                return _wrap(data)
            from .._creation import zeros
            return zeros(*shape, dtype=dt, device=g.device).index_put_slice(idx, g)
        record("NarrowBackward0", narrow_backward, out, (a,))
    return out


def _index_put_slice(base: Tensor, idx, value: Tensor) -> Tensor:
    """A copy of `base` with base[idx] = value, differentiable in both (the backward of slicing)."""
    data = base._data.copy()
    data[idx] = value._data
    out = _wrap(data)
    if needs_grad(base, value):
        rb, rv = base._requires_grad, value._requires_grad

        def put_backward(g):
            gb = None
            if rb:
                gb = g.clone() if not _grad_enabled() else g * 1
                gb._data[idx] = 0
            return gb, (g[idx] if rv else None)
        record("SliceScatterBackward0", put_backward, out, (base, value))
    return out


def _cat_out_dtype(res, out) -> None:
    """cat's (and stack's) out= dtype rule: torch.can_cast, with cat's own error."""
    if res._category > out._category:
        from ._common import _short
        raise TypeError(f"torch.cat(): input types can't be cast to the desired output type {_short(out)}")


def cat(tensors, dim: int = 0, *, out=None) -> Tensor:
    """Join tensors along an existing dimension."""
    if out is not None:
        return _write_out("cat", cat(tensors, dim), out, _cat_out_dtype)
    if _autocast.active:
        return _autocast.dispatch("cat", cat, tensors, dim)
    tensors = [t for t in tensors]
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    # PyTorch skips 1-D empty tensors (legacy behaviour users rely on).
    parts = [t for t in tensors if not (t._data.ndim == 1 and t._data.shape[0] == 0)] or tensors[:1]
    nd = parts[0]._data.ndim
    if nd == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    d = _wrap_dim(dim, nd)
    ref = parts[0]._data.shape
    for i, t in enumerate(parts):
        s = t._data.shape
        if len(s) != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and {len(s)}")
        for k in range(nd):
            if k != d and s[k] != ref[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size {ref[k]} but "
                                   f"got size {s[k]} for tensor number {i} in the list.")
    from .._dtype import result_type
    dt = result_type(*parts).np
    xp = np if type(parts[0]._data) is np.ndarray else parts[0]._data.__array_namespace__()
    arrays = [t._data.astype(dt, copy=False) for t in parts]
    joined = _cpu.concatenate(arrays, d) if xp is np else None
    out = _wrap(joined if joined is not None else xp.concatenate(arrays, axis=d))
    if needs_grad(*parts):
        sizes = [t._data.shape[d] for t in parts]
        dtypes = [t.dtype for t in parts]
        needs = [t._requires_grad for t in parts]

        def cat_backward(g):
            grads, offset = [], 0
            for size, dtp, need in zip(sizes, dtypes, needs):
                piece = g.narrow(d, offset, size) if need else None
                if piece is not None and piece.dtype is not dtp:
                    piece = piece.to(dtp)
                grads.append(piece)
                offset += size
            return tuple(grads) if len(grads) > 1 else grads[0]
        record("CatBackward0", cat_backward, out, tuple(parts))
    return out


concat = cat
concatenate = cat


def stack(tensors, dim: int = 0, *, out=None) -> Tensor:
    """Join tensors along a new dimension."""
    if out is not None:
        return _write_out("stack", stack(tensors, dim), out, _cat_out_dtype)
    if _autocast.active:
        return _autocast.dispatch("stack", stack, tensors, dim)
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0]._data.shape
    for i, t in enumerate(tensors):
        if t._data.shape != shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 and "
                               f"{list(t._data.shape)} at entry {i}")
    d = _wrap_dim(dim, len(shape) + 1)
    first = tensors[0]._data
    if type(first) is np.ndarray and all(type(t._data) is np.ndarray and t._data.dtype == first.dtype
                                         for t in tensors):
        # one np.stack and one node (a data loader's collate stacks dozens of samples per batch)
        out = _wrap(np.stack([t._data for t in tensors], d))
        if needs_grad(*tensors):
            needs = [t._requires_grad for t in tensors]

            def stack_backward(g):
                grads = tuple(select(g, d, i) if need else None for i, need in enumerate(needs))
                return grads if len(grads) > 1 else grads[0]
            record("StackBackward0", stack_backward, out, tuple(tensors))
        return out
    return cat([unsqueeze(t, d) for t in tensors], d)


def hstack(tensors) -> Tensor:
    """Concatenate along dim 1 (dim 0 for 1-D tensors)."""
    tensors = list(tensors)
    return cat(tensors, 0 if tensors[0]._data.ndim == 1 else 1)


def vstack(tensors) -> Tensor:
    """Concatenate as rows (1-D tensors become rows)."""
    return cat([t if t._data.ndim > 1 else t.reshape(1, -1) for t in tensors], 0)


def split(a: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of consecutive pieces: equal pieces of a given size, or pieces of the listed sizes."""
    d = _wrap_dim(dim, a._data.ndim)
    n = a._data.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0 and n > 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [size] * (n // size) + ([n % size] if n % size else []) if size else [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {d}), but got split_sizes={sizes}")
    pieces, offset = [], 0
    for s in sizes:
        pieces.append(_view_of(a, a._data[(slice(None),) * d + (slice(offset, offset + s),)]))
        offset += s
    out = tuple(pieces)
    if needs_grad(a):
        # One node for all pieces (PyTorch's SplitWithSizesBackward0): its backward joins the pieces'
        # gradients in one concatenation, zeros for pieces that got none. It keeps the pieces' shapes, not the
        # pieces: a piece holds this node, so holding the pieces would be a cycle through the engine, which
        # Python's collector cannot see (every split's input would leak), and saved-tensor hooks would pack the
        # very tuple split returns.
        shapes = [p._data.shape for p in pieces]

        def split_backward(*grads):
            if _grad_enabled():
                from .._creation import zeros
                parts = [g if g is not None else zeros(*shape, dtype=a.dtype, device=a.device)
                         for g, shape in zip(grads, shapes)]
                return cat(parts, d)
            joined = _joined_in_place(grads, a._data, d)
            if joined is not None:
                return _wrap(joined)
            xp = np if type(a._data) is np.ndarray else a._data.__array_namespace__()
            arrays = [g._data if g is not None else xp.zeros(shape, a._data.dtype) for g, shape in zip(grads, shapes)]
            joined = _cpu.concatenate(arrays, d) if xp is np else None
            return _wrap(joined if joined is not None else xp.concatenate(arrays, axis=d))
        record("SplitWithSizesBackward0" if not isinstance(split_size_or_sections, int) else "SplitBackward0",
               split_backward, out, (a,))
    return out


def empty_pieces_like(arrays: tuple):
    """Uninitialised arrays with the shapes and strides of `arrays`, inside one fresh buffer laid out as
    theirs, when they are disjoint pieces that tile one C-contiguous NumPy array exactly (split's outputs, as
    attention's q, k and v cut from one projection); None otherwise. Gradients written there reach split's
    backward already joined, so it skips the concatenation (_joined_in_place)."""
    root = arrays[0].base
    if type(root) is not np.ndarray or not root.flags.c_contiguous or \
            any(type(x) is not np.ndarray or x.base is not root or x.dtype != root.dtype for x in arrays) or \
            sum(x.size for x in arrays) != root.size or \
            any(np.shares_memory(x, y) for i, x in enumerate(arrays) for y in arrays[i + 1:]):
        return None
    buf, start = np.empty_like(root), root.__array_interface__["data"][0]
    return tuple(np.ndarray(x.shape, x.dtype, buffer=buf, offset=x.__array_interface__["data"][0] - start,
                            strides=x.strides) for x in arrays)


def _joined_in_place(grads: tuple, a, d: int):
    """The pieces' gradients as one array shaped like `a`, without a copy, when they already lie in one buffer
    exactly where split's pieces lie in `a` (see empty_pieces_like); None otherwise."""
    if type(a) is not np.ndarray or any(g is None or type(g._data) is not np.ndarray for g in grads):
        return None
    first = grads[0]._data
    root = first.base
    if type(root) is not np.ndarray or first.dtype != a.dtype or first.strides != a.strides or \
            any(g._data.base is not root for g in grads):
        return None
    start = root.__array_interface__["data"][0]
    try:
        whole = np.ndarray(a.shape, a.dtype, buffer=root, offset=first.__array_interface__["data"][0] - start,
                           strides=a.strides)
    except (TypeError, ValueError):  # outside the buffer, or a buffer that is not contiguous
        return None
    offset = 0
    for g in grads:
        piece = whole[(slice(None),) * d + (slice(offset, offset + g._data.shape[d]),)]
        offset += g._data.shape[d]
        if piece.shape != g._data.shape or piece.strides != g._data.strides or \
                piece.__array_interface__["data"][0] != g._data.__array_interface__["data"][0]:
            return None
    return whole if offset == a.shape[d] else None


def chunk(a: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into `chunks` pieces of equal size (the last may be smaller)."""
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    n = a._data.shape[_wrap_dim(dim, a._data.ndim)]
    size = -(-n // chunks) if n else 1
    return split(a, size, dim)


def tensor_split(a: Tensor, sections, dim: int = 0) -> tuple:
    """Split into `sections` near-equal pieces, or at the given indices."""
    d = _wrap_dim(dim, a._data.ndim)
    n = a._data.shape[d]
    if isinstance(sections, int):
        q, r = divmod(n, sections)
        sizes = [q + 1] * r + [q] * (sections - r)
    else:
        # indices as Python slice bounds: negative ones count from the end, the rest are clipped to [0, n]
        bounds = [0] + [min(max(i + n if i < 0 else i, 0), n) for i in sections] + [n]
        if any(hi < lo for lo, hi in zip(bounds[:-1], bounds[1:])):  # decreasing indices: pieces may overlap
            return tuple(a[(slice(None),) * d + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:]))
        sizes = [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])]
    return split(a, sizes, d)


def unbind(a: Tensor, dim: int = 0) -> tuple:
    """The slices along dim, with that dim removed."""
    d = _wrap_dim(dim, a._data.ndim)
    return tuple(squeeze(p, d) for p in split(a, 1, d))


def _triangle(a: Tensor, diagonal: int, upper: bool) -> Tensor:
    x = a._data
    if x.ndim < 2:
        raise RuntimeError(f"{'triu' if upper else 'tril'}: input tensor must have at least 2 dimensions")
    xp = np if type(x) is np.ndarray else x.__array_namespace__()
    out = _wrap(xp.triu(x, diagonal) if upper else xp.tril(x, diagonal))
    if needs_grad(a):
        record("TriuBackward0" if upper else "TrilBackward0", lambda g: _triangle(g, diagonal, upper), out, (a,))
    return out


def tril(a: Tensor, diagonal: int = 0) -> Tensor:
    """Lower triangle (elements on and below the diagonal-th diagonal)."""
    return _triangle(a, diagonal, False)


def triu(a: Tensor, diagonal: int = 0) -> Tensor:
    """Upper triangle."""
    return _triangle(a, diagonal, True)


def flip(a: Tensor, *args, dims=None) -> Tensor:
    """Reverse the order of elements along dims (a copy, as in PyTorch): flip(0, 2), flip((0, 2)) or flip(dims=...)."""
    dims = _shape_arg(args) if dims is None else ((dims,) if isinstance(dims, int) else tuple(dims))
    axes = tuple(_wrap_dim(d, a._data.ndim) for d in dims)
    xp = np if type(a._data) is np.ndarray else a._data.__array_namespace__()
    out = _wrap(xp.flip(a._data, axis=axes).copy())
    if needs_grad(a):
        record("FlipBackward0", lambda g: g.flip(axes), out, (a,))
    return out


def repeat(a: Tensor, *sizes) -> Tensor:
    """Tile the tensor `sizes` times along each dimension."""
    sizes = _shape_arg(sizes)
    x = a._data
    if len(sizes) < x.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    shape = (1,) * (len(sizes) - x.ndim) + x.shape
    out_shape = tuple(r * s for r, s in zip(sizes, shape))
    negative = [d for d in out_shape if d < 0]
    if negative:
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative[0]}: {list(out_shape)}")
    sizes = tuple(max(r, 0) for r in sizes)  # a negative count of an empty dim: empty, as in PyTorch
    if type(x) is np.ndarray:
        # one copy of x broadcast to (r0, s0, r1, s1, ...), the result's layout, where np.tile copies once per dim
        inter = tuple(v for r, s in zip(sizes, shape) for v in (r, s))
        src = x.reshape(tuple(v for s in shape for v in (1, s)))
        res = np.empty(inter, x.dtype)
        if _cpu.copy(np.broadcast_to(src, inter), res) is None:
            res[...] = src
        out = _wrap(res.reshape(out_shape))
    else:
        out = _wrap(x.__array_namespace__().tile(x.reshape(shape), sizes))
    if needs_grad(a):
        old = x.shape

        def repeat_backward(g):
            # Each output block is a copy: sum the blocks back into the input's shape.
            inter = []
            for r, s in zip(sizes, shape):
                inter += [r, s]
            return g.reshape(tuple(inter)).sum(dim=tuple(range(0, 2 * len(sizes), 2))).reshape(old)
        record("RepeatBackward0", repeat_backward, out, (a,))
    return out


def tile(a: Tensor, *dims) -> Tensor:
    """repeat, with missing leading dims taken as 1 (dims as a sequence or loose ints, as x.tile(2) takes them)."""
    dims = _shape_arg(dims)
    if len(dims) < a._data.ndim:
        dims = (1,) * (a._data.ndim - len(dims)) + dims
    return repeat(a, dims)


def repeat_interleave(a: Tensor, repeats=None, dim=None, *, output_size=None) -> Tensor:
    """Repeat each element `repeats` times along dim (flattened when dim is None); with only a tensor of counts,
    each index i repeated counts[i] times."""
    if repeats is None:
        counts = a._data
        if counts.dtype.kind not in "iu":
            raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for \'{_short_name(a)}\'')
        if counts.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if (counts < 0).any():
            raise RuntimeError("repeats can not be negative")
        return _wrap(np.repeat(np.arange(counts.shape[0]), counts))
    if dim is None:
        a, dim = a.reshape(-1), 0
    d = _wrap_dim(dim, a._data.ndim)
    if isinstance(repeats, Tensor):
        repeats = repeats.tolist()
    n = a._data.shape[d]
    reps = [repeats] * n if isinstance(repeats, int) else list(repeats)
    from .._creation import tensor
    idx = tensor(np.repeat(np.arange(n), reps), device=a.device)
    return a.index_select(d, idx)


def diagonal(a: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims (dim1, dim2), as a view whose last dimension runs along it."""
    x = a._data
    d1, d2 = _wrap_dim(dim1, x.ndim), _wrap_dim(dim2, x.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    v = x.diagonal(offset, d1, d2)
    if type(x) is np.ndarray and x.flags.writeable:
        v.flags.writeable = True  # NumPy hands diagonals out read-only; PyTorch's is a view one may write through
    out = _view_of(a, v)
    if needs_grad(a):
        shape = x.shape
        record("DiagonalBackward0", lambda g: _diagonal_scatter(g, shape, offset, d1, d2), out, (a,))
    return out


def _diagonal_scatter(g: Tensor, shape: tuple, offset: int, d1: int, d2: int) -> Tensor:
    """Zeros of `shape` with g written on the diagonal: diagonal's backward (its own backward is diagonal)."""
    xp = np if type(g._data) is np.ndarray else g._data.__array_namespace__()
    z = xp.zeros(shape, dtype=g._data.dtype)
    n = g._data.shape[-1] if g._data.ndim else 0
    rows = xp.arange(n) + (0 if offset >= 0 else -offset)
    cols = xp.arange(n) + (offset if offset >= 0 else 0)
    xp.moveaxis(z, (d1, d2), (-2, -1))[..., rows, cols] = g._data  # numpy's diagonal() views are read-only
    out = _wrap(z)
    if needs_grad(g):
        record("DiagonalBackwardBackward0", lambda gg: diagonal(gg, offset, d1, d2), out, (g,))
    return out


def _swapaxes(a: Tensor, a0: int, a1: int) -> Tensor:
    return transpose(a, a0, a1)


def ravel(a: Tensor) -> Tensor:
    """The elements as a 1-D tensor (a view when possible)."""
    return reshape(a, -1)


def select(a: Tensor, dim: int, index: int) -> Tensor:
    """The slice at `index` along dim, with that dim removed (a view)."""
    d = _wrap_dim(dim, a._data.ndim)
    size = a._data.shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(a._data.shape)} at "
                         f"dimension {d}")
    return squeeze(narrow(a, d, index % size, 1), d)


def roll(a: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements cyclically along dims (of the flattened tensor when dims is None)."""
    if dims is None:
        return roll(reshape(a, -1), shifts, 0).reshape(a._data.shape)
    shifts_t = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims_t = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts_t) != len(dims_t):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts_t)}, dims:{len(dims_t)}")
    axes = tuple(_wrap_dim(d, a._data.ndim) for d in dims_t)
    xp = np if type(a._data) is np.ndarray else a._data.__array_namespace__()
    out = _wrap(xp.roll(a._data, shifts_t, axes))
    if needs_grad(a):
        back = tuple(-s for s in shifts_t)
        record("RollBackward0", lambda g: roll(g, back, axes), out, (a,))
    return out


def trace(a: Tensor) -> Tensor:
    """Sum of the main diagonal of a matrix."""
    if a._data.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " + str(a._data.ndim))
    return diagonal(a).sum()


def diag(a: Tensor, diagonal_: int = 0) -> Tensor:
    """A vector's diagonal matrix, or a matrix's diagonal (as a copy, like PyTorch)."""
    if a._data.ndim == 1:
        n = a._data.shape[0] + abs(diagonal_)
        return _diagonal_scatter(a, (n, n), diagonal_, 0, 1)
    if a._data.ndim == 2:
        return clone(diagonal(a, diagonal_))
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + str(a._data.ndim) + "D")


def _tril_(a: Tensor, diagonal_: int = 0) -> Tensor:
    from ._common import inplace_unary
    return inplace_unary(a, lambda s: tril(s, diagonal_))


def _triu_(a: Tensor, diagonal_: int = 0) -> Tensor:
    from ._common import inplace_unary
    return inplace_unary(a, lambda s: triu(s, diagonal_))


attach(ravel=ravel, select=select, roll=roll, trace=trace, diag=diag, tril_=_tril_, triu_=_triu_)
attach(as_subclass=as_subclass, view=view, reshape=reshape, view_as=view_as, reshape_as=reshape_as, flatten=flatten, unflatten=unflatten,
       permute=permute, transpose=transpose, swapaxes=_swapaxes, swapdims=_swapaxes, t=t, movedim=movedim,
       moveaxis=movedim, unsqueeze=unsqueeze, squeeze=squeeze, expand=expand, expand_as=expand_as,
       broadcast_to=broadcast_to, contiguous=contiguous, clone=clone, narrow=narrow, split=split, chunk=chunk,
       tensor_split=tensor_split, unbind=unbind, tril=tril, triu=triu, flip=flip, repeat=repeat, tile=tile,
       repeat_interleave=repeat_interleave, diagonal=diagonal, index_put_slice=_index_put_slice)
Tensor.T = property(_T)
Tensor.mT = property(_mT)


# ------------------------------------------------------------------ grids, blocks and combinations

def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids of 0-D/1-D tensors (expanded views): 'ij' indexes matrix-style, 'xy' swaps the first
    two dims (Cartesian); no indexing means 'ij' with PyTorch's warning."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=_user_stacklevel())
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t_ in tensors:
        if t_._data.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t_}")
        if t_.dtype is not tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if t_.device != tensors[0].device:
            raise RuntimeError("meshgrid expects all tensors to have the same device")
    n = len(tensors)
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        order[0], order[1] = 1, 0
    shape = [0] * n
    for i, t_ in enumerate(tensors):
        shape[order[i]] = t_._data.size
    return tuple(expand(reshape(t_, [-1 if k == order[i] else 1 for k in range(n)]), shape)
                 for i, t_ in enumerate(tensors))


def block_diag(*tensors) -> Tensor:
    """A block-diagonal matrix of the inputs (0-D and 1-D ones count as one row), in their promoted dtype."""
    from .._creation import zeros
    from .._dtype import result_type
    if not tensors:
        return zeros(1, 0)
    mats = []
    for i, t_ in enumerate(tensors):
        if t_._data.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t_._data.ndim} dimensions")
        mats.append(t_ if t_._data.ndim == 2 else reshape(t_, 1, t_._data.size))
    dt = result_type(*mats)
    width = sum(m._data.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        h, w = m._data.shape
        rows.append(cat([zeros(h, left, dtype=dt, device=m.device), m,
                         zeros(h, width - left - w, dtype=dt, device=m.device)], 1))
        left += w
    return cat(rows, 0)


def cartesian_prod(*tensors) -> Tensor:
    """Every combination of one element from each 1-D tensor, as the rows of an (N, len(tensors)) tensor
    (a single tensor comes back as it is)."""
    for t_ in tensors:
        if t_._data.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t_._data.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([reshape(g, -1) for g in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-r combinations of a 1-D tensor's elements (Python's itertools order), one per row."""
    if input._data.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input._data.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    from .._creation import empty, tensor
    if r == 0:
        return empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input._data.shape[0]), r)), dtype=np.int64).reshape(-1)
    return reshape(input.index_select(0, tensor(idx, device=input.device)), -1, r)


def _triangle_indices(name: str, row: int, col: int, offset: int, dtype, device, upper: bool) -> Tensor:
    from .._creation import tensor
    from .._dtype import int32, to_dtype
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    dt = to_dtype(dtype)
    if dt is not int64 and dt is not int32:
        from ._common import _short
        raise NotImplementedError(f"\"{name}\" not implemented for '{_short(dt)}'")
    rows, cols = (np.triu_indices if upper else np.tril_indices)(row, offset, col)
    return tensor(np.stack([rows, cols]).reshape(2, -1), dtype=dt, device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=int64, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the lower triangle of a row x col matrix, row by row."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, False)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=int64, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the upper triangle of a row x col matrix, row by row."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, True)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A tensor whose (dim1, dim2) diagonals at `offset` hold input's last dim (zeros elsewhere)."""
    nd = input._data.ndim + 1
    d1, d2 = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input._data.shape[-1] + abs(offset)
    shape = list(input._data.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    return _diagonal_scatter(input, tuple(shape), offset, d1, d2)


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A square matrix with the flattened input on its offset-th diagonal."""
    return diag(reshape(input, -1), offset)


# ------------------------------------------------------------------ picking, rotating and flipping

def take(input: Tensor, index: Tensor) -> Tensor:
    """input's elements, as if it were 1-D, at `index` (negative indices count from the end); index's shape."""
    if not isinstance(index, Tensor):
        raise TypeError(f"take(): argument 'index' (position 2) must be Tensor, not {type(index).__name__}")
    if index.dtype is not int64:
        from ._common import _short
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {_short(index.dtype)}")
    n = input._data.size
    idx = index._data
    if idx.size:
        if n == 0:
            raise IndexError("take(): tried to take from an empty tensor")
        lo, hi = int(idx.min()), int(idx.max())
        if hi >= n or lo < -n:
            raise IndexError(f"out of range: tried to access index {hi if hi >= n else lo} on a tensor of {n} "
                             "elements.")
    wrapped = _wrap((idx + (idx < 0) * n).reshape(-1))
    return reshape(reshape(input, -1).index_select(0, wrapped), idx.shape)


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """Rotate by 90 degrees k times, from dims[0] towards dims[1]."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    nd = input._data.ndim
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    if dims[0] == dims[1] or (dims[0] - dims[1]) % nd == 0:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    d0, d1 = _wrap_dim(dims[0], nd), _wrap_dim(dims[1], nd)
    k %= 4
    if k == 1:
        return transpose(flip(input, d1), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, d0), d0, d1)
    return clone(input)


def fliplr(input: Tensor) -> Tensor:
    """Reverse the columns (dim 1)."""
    if input._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, 1)


def flipud(input: Tensor) -> Tensor:
    """Reverse the rows (dim 0)."""
    if input._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, 0)


# ------------------------------------------------------------------ at least n dims; stacking and splitting

def _atleast(name: str, tensors: tuple, lift):
    """PyTorch's return rule: one tensor in, one tensor out; several tensors or a list/tuple in, a tuple out."""
    def one(t_):
        if not isinstance(t_, Tensor):
            raise TypeError(f"{name}() received an invalid combination of arguments - got ({type(t_).__name__})")
        return lift(t_)
    if len(tensors) == 1:
        if isinstance(tensors[0], (list, tuple)):
            return tuple(one(t_) for t_ in tensors[0])
        return one(tensors[0])
    return tuple(one(t_) for t_ in tensors)


def atleast_1d(*tensors):
    """Tensors with at least one dimension (0-D ones become shape (1,); others come back as they are)."""
    return _atleast("atleast_1d", tensors, lambda t_: reshape(t_, 1) if t_._data.ndim == 0 else t_)


def atleast_2d(*tensors):
    """Tensors with at least two dimensions (0-D: (1, 1); 1-D (n,): (1, n))."""
    return _atleast("atleast_2d", tensors,
                    lambda t_: reshape(t_, 1, 1) if t_._data.ndim == 0 else unsqueeze(t_, 0) if t_._data.ndim == 1
                    else t_)


def atleast_3d(*tensors):
    """Tensors with at least three dimensions (0-D: (1, 1, 1); (n,): (1, n, 1); (m, n): (m, n, 1))."""
    def lift(t_):
        nd = t_._data.ndim
        if nd == 0:
            return reshape(t_, 1, 1, 1)
        if nd == 1:
            return unsqueeze(unsqueeze(t_, 0), -1)
        return unsqueeze(t_, -1) if nd == 2 else t_
    return _atleast("atleast_3d", tensors, lift)


def broadcast_shapes(*shapes) -> Size:
    """The shape that tensors of these shapes broadcast to (ints count as 1-D shapes), without making tensors."""
    sizes = []
    for s in shapes:
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            s = (int(s),)
        elif isinstance(s, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in s):
            s = tuple(int(d) for d in s)
        else:
            raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {s}")
        if any(d < 0 for d in s):
            raise ValueError("Attempting to broadcast a dimension with negative length!")
        sizes.append(s)
    result = [1] * max((len(s) for s in sizes), default=0)
    for i, s in enumerate(sizes):
        for k in range(-1, -len(s) - 1, -1):
            if s[k] == 1 or s[k] == result[k]:
                continue
            if result[k] != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {s[k]} at {k}! Mismatching "
                                   f"argument at index {i} had {s}; but expected shape should be broadcastable to "
                                   f"{result}")
            result[k] = s[k]
    return Size(result)


def _split_along(name: str, input: Tensor, sections, dim: int, min_dims: int) -> tuple:
    nd = input._data.ndim
    if nd < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor with "
                           f"{nd} dimensions!")
    if isinstance(sections, int):
        size = input._data.shape[dim]
        if sections == 0 or size % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                               f"{size} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 1 (dim 0 for a 1-D tensor); a number of sections must divide the size evenly."""
    return _split_along("hsplit", input, indices_or_sections, 0 if input._data.ndim == 1 else 1, 1)


def vsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 0 of a tensor of at least 2 dims; sections must divide the size evenly."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 2 of a tensor of at least 3 dims; sections must divide the size evenly."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


def dstack(tensors) -> Tensor:
    """Concatenate depthwise (dim 2), after atleast_3d."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("dstack expects a non-empty TensorList")
    return cat(atleast_3d(tensors), 2)


def column_stack(tensors) -> Tensor:
    """Concatenate as columns: 0-D and 1-D tensors become (n, 1) columns, the others join along dim 1."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("column_stack expects a non-empty TensorList")
    return cat([reshape(t_, t_._data.size, 1) if t_._data.ndim <= 1 else t_ for t_ in tensors], 1)


row_stack = vstack
moveaxis = movedim
swapaxes = transpose
swapdims = transpose


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (a view for real tensors)."""
    if input._data.ndim < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input._data.ndim}-D tensor.")
    return transpose(input, -2, -1).conj()


# ------------------------------------------------------------------ differences, Vandermonde, strided storage

def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The n-th forward difference along dim, after joining prepend and append (bool tensors: XOR)."""
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _wrap_dim(dim, nd)
    parts = []
    for name, extra in (("prepend", prepend), ("input", input), ("append", append)):
        if extra is None:
            continue
        if not isinstance(extra, Tensor):
            raise TypeError(f"diff(): argument '{name}' must be Tensor, not {type(extra).__name__}")
        if extra._data.ndim != nd:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        for k in range(nd):
            if k != d and extra._data.shape[k] != input._data.shape[k]:
                raise RuntimeError("diff expects the shape of tensor to prepend or append to match that of input "
                                   f"except along the differencing dimension; input.size({k}) = "
                                   f"{input._data.shape[k]}, but got tensor.size({k}) = {extra._data.shape[k]}")
        parts.append(extra)
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        size = x._data.shape[d]
        if size == 0:
            break
        hi, lo = narrow(x, d, 1, size - 1), narrow(x, d, 0, size - 1)
        x = hi.logical_xor(lo) if x._data.dtype == np.bool_ else hi - lo
    return x


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of a 1-D tensor: columns x^(N-1) .. x^0 (x^0 .. x^(N-1) when increasing);
    integer and bool inputs give int64, as PyTorch promotes them with long."""
    from .._creation import ones
    from .._dtype import promote_types
    if x._data.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._data.shape[0]
    if N is None:
        N = n
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    dt = promote_types(x.dtype, int64)
    x = x.to(dt)
    first = ones(n, min(N, 1), dtype=dt, device=x.device)
    if N <= 1:
        return first
    # a running product, as PyTorch computes it: exact gradients at x = 0, where pow's would be 0 * inf
    out = cat([first, expand(unsqueeze(x, 1), n, N - 1)], 1).cumprod(1)
    return out if increasing else flip(out, 1)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor laid out with the given strides (in elements): stride() reports them."""
    from .._device import cuda_context, to_device, xp_for
    from .._dtype import get_default_dtype, to_dtype
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    dt = to_dtype(dtype) if dtype is not None else get_default_dtype()
    dev = to_device(device)
    xp = xp_for(dev)
    count = 0 if 0 in size else 1 + sum((s - 1) * st for s, st in zip(size, stride))
    item = np.dtype(dt.np).itemsize
    with cuda_context(dev):
        data = xp.lib.stride_tricks.as_strided(xp.empty(count, dt.np), size, tuple(st * item for st in stride))
    out = _wrap(data)
    if requires_grad:
        out.requires_grad_(True)
    return out


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """narrow, as a copy with its own memory."""
    return clone(narrow(input, dim, start, length))


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Scale each slice along dim whose p-norm exceeds maxnorm down to norm maxnorm (PyTorch's 1e-7 guard)."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    nd = input._data.ndim
    if nd <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {nd} dimensions")
    d = _wrap_dim(dim, nd)
    from .pointwise import where
    norms = input.norm(p, tuple(k for k in range(nd) if k != d), True)
    return input * where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


def _renorm_(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    from ._common import inplace_unary
    return inplace_unary(input, renorm, p, dim, maxnorm)


# ------------------------------------------------------------------ scatter_reduce

_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_array(x, d: int, idx, v, reduce: str, include_self: bool):
    """x with v reduced into it at idx along d (index and src of one shape)."""
    from .indexing import _add_at, _along_key, _mul_at_cupy, _xp
    if type(x) is MetaArray:
        return x.copy()
    xp = _xp(x)
    shape = x.shape
    if x.ndim == 0:
        x, idx, v = x.reshape(1), idx.reshape(-1), v.reshape(-1)
    out = x.copy()
    key = _along_key(idx, d)
    if not include_self:
        out[key] = _reduction_identity(out.dtype, reduce)
    if reduce in ("sum", "mean"):
        _add_at(out, key, v)
    elif type(out) is np.ndarray:
        {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}[reduce].at(out, key, v)
    elif reduce == "prod":
        _mul_at_cupy(out, key, v)
    else:
        import cupyx
        (cupyx.scatter_max if reduce == "amax" else cupyx.scatter_min)(out, key, v)
    if reduce == "mean":
        count = xp.full(out.shape, 1 if include_self else 0, dtype=np.int64)
        _add_at(count, key, 1)
        count = xp.maximum(count, 1)
        out = out // count if out.dtype.kind in "iu" else out / count.astype(out.dtype)
    return out.reshape(shape)


def _reduction_identity(dtype, reduce: str):
    """The value a scattered-to slot starts from when include_self=False."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "b":
        return reduce == "amin"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    return -np.inf if reduce == "amax" else np.inf


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """A copy of input with src's elements reduced ('sum', 'prod', 'mean', 'amax', 'amin') into the slots index
    names along dim (for dim=0: out[index[i][j]][j] op= src[i][j]); include_self=False leaves input's values out
    of the slots that receive any."""
    from .indexing import _check_gather_shapes, _check_range, _on_device_of
    if reduce not in _SCATTER_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if not isinstance(index, Tensor) or index._data.dtype.kind not in "iu":
        raise RuntimeError("scatter_reduce(): Expected dtype int32/int64 for index")
    if src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    data = input._data
    if reduce == "mean" and data.dtype == np.bool_:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    d = _wrap_dim(dim, data.ndim)
    if index.dtype is not int64:
        index = index.to(int64)
    idx = _on_device_of(index._data, data)
    _check_gather_shapes("scatter_reduce", data, idx, d, src._data)
    _check_range(idx, data.shape[d] if data.ndim else 1, d)
    if src._data.shape != idx.shape:  # only src's leading block, index's shape, takes part (a view: its gradient pads)
        src = src[tuple(slice(0, k) for k in idx.shape)]
    out = _wrap(_scatter_reduce_array(data, d, idx, src._data, reduce, include_self))
    if needs_grad(input, src):
        from ._common import alias, saved_output
        ri, rs = input._requires_grad, src._requires_grad
        out_alias = alias(out)

        def scatter_reduce_backward(g):
            result = saved_output(out_alias, lambda: scatter_reduce(input, d, index, src, reduce,
                                                                    include_self=include_self))
            gi, gs = _scatter_reduce_grads(g, input, d, index, src, reduce, include_self, result)
            if not include_self:
                gi = gi.scatter(d, index, 0.0)
            return (gi if ri else None), (gs if rs else None)
        record("ScatterReduceBackward0", scatter_reduce_backward, out, (input, src), (input, src, out_alias))
    return out


def _scatter_reduce_grads(g: Tensor, input: Tensor, d: int, index: Tensor, src: Tensor, reduce: str,
                          include_self: bool, result: Tensor) -> tuple:
    """PyTorch's scatter_reduce_backward in tensor ops (so it differentiates again): the gradients of input and
    src before the include_self=False masking."""
    from .._creation import ones_like, zeros_like
    from .pointwise import where
    if reduce == "sum":
        return g, g.gather(d, index)
    if reduce == "mean":
        count = (ones_like(g) if include_self else zeros_like(g)).scatter_add(d, index, ones_like(src))
        count = count.masked_fill(count == 0, 1)
        return g / count, g.gather(d, index) / count.gather(d, index)
    if reduce == "prod":
        # products without the element itself, also where it is 0 (dividing the result by it would give 0/0)
        masked_self = input.masked_fill(input == 0, 1)
        gi = g * scatter_reduce(masked_self, d, index, src, reduce, include_self=include_self) / masked_self
        src_zero = src == 0
        zeros_in_slot = zeros_like(input).scatter_add(d, index, src_zero.to(input.dtype)).gather(d, index)
        single_zero = src_zero.logical_and(zeros_in_slot == 1)
        without_zero = scatter_reduce(input, d, index, src.masked_fill(single_zero, 1), reduce,
                                      include_self=include_self)
        gs = where(single_zero, (g * without_zero).gather(d, index),
                   (g * result).gather(d, index) / src.masked_fill(src_zero, 1))
        return gi, gs
    # amax / amin: the gradient is shared evenly among the elements equal to the extremum
    value = result.gather(d, index)
    self_is = (input == result).to(g.dtype)
    src_is = (src == value).to(g.dtype)
    shared = g / self_is.scatter_add(d, index, src_is)
    return self_is * shared, src_is * shared.gather(d, index)


attach(diag_embed=diag_embed, diagflat=diagflat, take=take, rot90=rot90, fliplr=fliplr, flipud=flipud,
       hsplit=hsplit, vsplit=vsplit, dsplit=dsplit, adjoint=adjoint, diff=diff, narrow_copy=narrow_copy,
       renorm=renorm, renorm_=_renorm_, scatter_reduce=scatter_reduce, scatter_reduce_=_inplace(scatter_reduce))
