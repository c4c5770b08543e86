"""Shape ops: views (view, reshape, permute, transpose, expand, squeeze, narrow, ...) that share
memory with their input, and copies (cat, stack, repeat, flip, tril/triu); each beside its derivative."""
from __future__ import annotations

import numpy as np

from .. import _autocast
from .._tensor import Size, Tensor, _view_of, _wrap, _wrap_dim
from . import _cpu
from ._common import attach, needs_grad, record, _grad_enabled


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


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


def _view_result(a: Tensor, data) -> Tensor:
    return _view_of(a, data)


def view(a: Tensor, *shape) -> Tensor:
    """Same memory, new shape; fails (as in PyTorch) when the strides don't allow it."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, Size, int)):
        from .._dtype import to_dtype
        return a.view_dtype(to_dtype(shape[0]))
    x = a._data
    new = _infer(_shape_arg(shape), x.size, x.shape)
    try:
        data = x.view()
        data.shape = new  # raises instead of copying when the strides are incompatible
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one dimension "
                           "spans across two contiguous subspaces). Use .reshape(...) instead.") from None
    out = _view_result(a, data)
    if a._requires_grad and _grad_enabled():
        old = x.shape
        record("ViewBackward0", lambda g: g.reshape(old), out, (a,))
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
    out = _view_result(a, data) if _aliases(data, x) else _wrap(data)
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
    out = _view_result(a, a._data.transpose(axes))
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
    out = _view_result(a, a._data.swapaxes(d0, d1))
    if needs_grad(a):
        record("TransposeBackward0", lambda g: g.transpose(d0, d1), out, (a,))
    return out


def _identity_view(a: Tensor, name: str) -> Tensor:
    out = _view_result(a, a._data.view())
    if needs_grad(a):
        record(name, lambda g: g, out, (a,))
    return out


def t(a: Tensor) -> Tensor:
    """Transpose of a matrix (1-D and 0-D tensors come back as views of themselves)."""
    if a._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a._data.ndim}D")
    if a._data.ndim == 2:
        return transpose(a, 0, 1)
    return _identity_view(a, "TBackward0")


def _T(a: Tensor) -> Tensor:
    return permute(a, tuple(reversed(range(a._data.ndim))))


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
    out = _view_result(a, np.expand_dims(a._data, d))
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
    out = _view_result(a, x.squeeze(axis=axes) if axes else x.view())
    if needs_grad(a):
        old = x.shape
        record("SqueezeBackward0", lambda g: g.reshape(old), out, (a,))
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
    out = _view_result(a, data)
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


def contiguous(a: Tensor, memory_format=None) -> Tensor:
    """The tensor itself when already contiguous, else a contiguous copy."""
    if a._data.flags.c_contiguous:
        return a
    return clone(a)


def clone(a: Tensor, *, memory_format=None) -> Tensor:
    """A copy with its own memory (differentiable)."""
    x = a._data
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
    out = _view_result(a, a._data[idx])
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


def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension."""
    if _autocast.active:
        return _autocast.dispatch("cat", cat, tensors, dim)
    tensors = [t for t in tensors]
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
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


def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors along a new dimension."""
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
        pieces.append(_view_result(a, a._data[(slice(None),) * d + (slice(offset, offset + s),)]))
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
        bounds = [0] + list(sections) + [n]
        sizes = [max(0, b - a_) for a_, b in zip(bounds[:-1], bounds[1:])]
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
    xp = np if type(x) is np.ndarray else x.__array_namespace__()
    out = _wrap(xp.tile(x.reshape(shape), sizes))
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


def tile(a: Tensor, dims) -> Tensor:
    """repeat, with missing leading dims taken as 1."""
    dims = tuple(dims)
    if len(dims) < a._data.ndim:
        dims = (1,) * (a._data.ndim - len(dims)) + dims
    return repeat(a, dims)


def repeat_interleave(a: Tensor, repeats, dim=None) -> Tensor:
    """Repeat each element `repeats` times along dim (flattened when dim is None)."""
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
    out = _view_result(a, x.diagonal(offset, d1, d2))
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
attach(view=view, reshape=reshape, view_as=view_as, reshape_as=reshape_as, flatten=flatten, unflatten=unflatten,
       permute=permute, transpose=transpose, swapaxes=_swapaxes, swapdims=_swapaxes, t=t, movedim=movedim,
       moveaxis=movedim, unsqueeze=unsqueeze, squeeze=squeeze, expand=expand, expand_as=expand_as,
       broadcast_to=broadcast_to, contiguous=contiguous, clone=clone, narrow=narrow, split=split, chunk=chunk,
       tensor_split=tensor_split, unbind=unbind, tril=tril, triu=triu, flip=flip, repeat=repeat, tile=tile,
       repeat_interleave=repeat_interleave, diagonal=diagonal, index_put_slice=_index_put_slice)
Tensor.T = property(_T)
Tensor.mT = property(_mT)
