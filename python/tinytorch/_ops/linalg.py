"""Matrix products: matmul (1-D to batched N-D, with broadcasting), mm, bmm, outer, dot, einsum."""
from __future__ import annotations

import math

import numpy as np

from .. import _C, _autocast, _threads
from .._tensor import Tensor
from ._common import attach, needs_grad, operands, record, sum_to
from .pointwise import _result, broadcast_error_shapes


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with NumPy's matmul semantics (PyTorch's): vectors are promoted and
    squeezed back, batch dimensions broadcast."""
    if _autocast.active:
        return _autocast.dispatch("matmul", matmul, a, b)
    if not isinstance(b, Tensor):
        raise TypeError(f"matmul(): argument 'other' must be Tensor, not {type(b).__name__}")
    x, y = operands(a, b)
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {x.ndim}D and {y.ndim}D")
    if x.shape[-1] != (y.shape[-2] if y.ndim > 1 else y.shape[0]):
        if x.ndim == 1 and y.ndim == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{x.shape[0]}] and src [{y.shape[0]}] to "
                               f"have the same number of elements, but got {x.shape[0]} and {y.shape[0]} elements "
                               f"respectively")
        if x.ndim == 2 and y.ndim == 1:
            raise RuntimeError(f"size mismatch, got input ({x.shape[0]}), mat ({x.shape[0]}x{x.shape[1]}), "
                               f"vec ({y.shape[0]})")
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_rows(x)}x{x.shape[-1]} and "
                           f"{y.shape[-2] if y.ndim > 1 else y.shape[0]}x{y.shape[-1] if y.ndim > 1 else 1})")
    try:
        if x.dtype.itemsize == 2 and x.dtype.kind not in "iu":
            # float16/bfloat16: float32 accumulation (as PyTorch), and BLAS instead of NumPy's slow 2-byte loop
            out = _result(_matmul(x.astype(np.float32), y.astype(np.float32)).astype(x.dtype))
        else:
            out = _result(_matmul(x, y))
    except ValueError:  # batch dimensions that don't broadcast
        raise broadcast_error_shapes(x.shape[:-2], y.shape[:-2]) from None
    if needs_grad(a, b):
        ra, rb = a._requires_grad, b._requires_grad
        sa, sb = x.shape, y.shape
        da, db = a.dtype, b.dtype

        def matmul_backward(g):
            # Lift vectors to matrices so one formula covers every case, then undo it.
            A = a if a.ndim > 1 else a.unsqueeze(0)
            B = b if b.ndim > 1 else b.unsqueeze(-1)
            G = g
            if b.ndim == 1:  # first: for vector @ vector, g is 0-d and only unsqueeze(-1) is valid on it
                G = G.unsqueeze(-1)
            if a.ndim == 1:
                G = G.unsqueeze(-2)
            ga = gb = None
            if ra:
                ga = G.matmul(B.transpose(-1, -2))
                ga = sum_to(ga, sa) if a.ndim > 1 else sum_to(ga, (1, sa[0])).reshape(sa)
                if ga.dtype is not da:
                    ga = ga.to(da)
            if rb:
                gb = A.transpose(-1, -2).matmul(G)
                gb = sum_to(gb, sb) if b.ndim > 1 else sum_to(gb, (sb[0], 1)).reshape(sb)
                if gb.dtype is not db:
                    gb = gb.to(db)
            return ga, gb
        record("MmBackward0" if x.ndim == 2 and y.ndim == 2 else "MatmulBackward0", matmul_backward, out, (a, b),
               (a, b))
    return out


_SMALL = 1 << 22  # M * N * K of one matrix up to which the register-tiled kernel beats a BLAS call per matrix
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _narrow(M: int, N: int, K: int, x, y) -> bool:
    """Whether a float matrix product is one of linear's tall narrow ones (a whole number of 32-column tiles,
    K 128-1024) that the register-tiled kernel runs faster than BLAS: the forward x @ W.T (the kernel makes W.T
    row-major once) and the input gradient g @ W, both up to N = 512. Measured in nanoGPT's step, alternating
    step by step with BLAS (docs/benchmarks.md, "fifth pass" and "sixth pass"): 2-20% faster each. Weight
    gradients g.T @ x, ragged widths (N = 65) and wider products stay with BLAS: the kernel reads a transposed
    A down its columns, which was 2-9% faster than OpenBLAS on a Zen 4 core but took 1.05-1.8x OpenBLAS's time
    on an Intel (Emerald Rapids) one (the sixth pass)."""
    if N > 512 or N % 32 or not 128 <= K <= 1024 or M < 256:
        return False
    item = x.itemsize
    return x.strides[1] == item and (y.strides[1] == item or y.strides[0] == item)


def _matmul(x, y):
    """np.matmul's product of two arrays on the intra-op pool: float matrices by BLAS, split into one block per
    thread (_C._cpu.gemm), batches of small ones and tall narrow matrices (_narrow) by the register-tiled kernel
    (_C._cpu.bmm); both read strided views (a transpose, attention's heads) in place. Anything else (vectors,
    integers, CuPy) is x @ y."""
    if type(x) is np.ndarray and type(y) is np.ndarray and x.dtype in _FLOATS and y.dtype == x.dtype \
            and x.ndim >= 2 and y.ndim >= 2:
        M, K, N = x.shape[-2], x.shape[-1], y.shape[-1]
        if y.shape[-2] == K and K > 0 and M * N > 0:
            if x.ndim == 2 and y.ndim == 2:  # the common case, without the batch bookkeeping
                if _narrow(M, N, K, x, y):
                    out = np.empty((M, N), x.dtype)
                    try:
                        _C._cpu.bmm(x[None], y[None], out[None])
                        return out
                    except ValueError:  # strides that are not whole elements: BLAS's route copies them
                        pass
                a, b, out, count = x, y, np.empty((M, N), x.dtype), 1
            else:
                batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
                count = math.prod(batch)
                a, b = np.broadcast_to(x, batch + (M, K)), np.broadcast_to(y, batch + (K, N))
                out = np.empty(batch + (M, N), x.dtype)
            if count > 1 and M * N * K <= _SMALL:
                if count * M * N * K >= 1 << 16:
                    _C._cpu.bmm(a, b, out)
                    return out
            elif _threads.blas_on_pool:
                try:
                    _C._cpu.gemm(a, b, out)
                except ValueError:  # a matrix without a unit stride: BLAS needs one
                    _C._cpu.gemm(np.ascontiguousarray(a), np.ascontiguousarray(b), out)
                return out
    return x @ y


def _rows(x):
    return math.prod(x.shape[:-1]) if x.ndim > 1 else 1


def mm(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors."""
    if _autocast.active:
        return _autocast.dispatch("mm", mm, a, b)
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix product of two 3-D tensors (no broadcasting)."""
    if _autocast.active:
        return _autocast.dispatch("bmm", bmm, a, b)
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    sa, sb = a._data.shape, b._data.shape
    if sb[0] != sa[0] or sb[1] != sa[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{sa[0]}, {sa[2]}] but "
                           f"got: [{sb[0]}, {sb[1]}].")
    return matmul(a, b)


def mv(a: Tensor, v: Tensor) -> Tensor:
    """Matrix-vector product."""
    if _autocast.active:
        return _autocast.dispatch("mv", mv, a, v)
    return matmul(a, v)


def dot(a: Tensor, b: Tensor) -> Tensor:
    """Inner product of two 1-D tensors."""
    if _autocast.active:
        return _autocast.dispatch("dot", dot, a, b)
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    return matmul(a, b)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """Outer product of two 1-D tensors."""
    return a.unsqueeze(1) * b.unsqueeze(0)


def addmm(bias: Tensor, a: Tensor, b: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * bias + alpha * (a @ b)."""
    if _autocast.active:
        return _autocast.dispatch("addmm", addmm, bias, a, b, beta=beta, alpha=alpha)
    out = matmul(a, b)
    if alpha != 1:
        out = out * alpha
    return out + (bias if beta == 1 else bias * beta)


def baddbmm(bias: Tensor, a: Tensor, b: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * bias + alpha * (a @ b) for batches."""
    if _autocast.active:
        return _autocast.dispatch("baddbmm", baddbmm, bias, a, b, beta=beta, alpha=alpha)
    return addmm(bias, a, b, beta=beta, alpha=alpha)


def einsum(equation: str, *operands_) -> Tensor:
    """Einstein summation, differentiated through NumPy's einsum with rearranged subscripts."""
    if _autocast.active:
        return _autocast.dispatch("einsum", einsum, equation, *operands_)
    if len(operands_) == 1 and isinstance(operands_[0], (list, tuple)):
        operands_ = tuple(operands_[0])
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs = eq
        letters = "".join(c for c in lhs if c.isalpha())
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    subs = lhs.split(",")
    if len(subs) != len(operands_):
        raise RuntimeError(f"einsum(): {len(subs)} operands were specified in the equation but "
                           f"{len(operands_)} were given")
    if "." in eq:
        subs, rhs = _expand_ellipsis(subs, rhs if "->" in eq else None, operands_)
        lhs = ",".join(subs)
    operands_ = _broadcast_labels(subs, operands_)
    arrays = [t._data for t in operands_]
    if arrays and arrays[0].dtype.itemsize == 2 and arrays[0].dtype.kind in "fV":
        # float16/bfloat16: float32 accumulation, rounded once (NumPy's einsum has no bfloat16 loop)
        out = _result(np.einsum(f"{lhs}->{rhs}", *[a.astype(np.float32) for a in arrays]).astype(arrays[0].dtype))
    else:
        out = _result(np.einsum(f"{lhs}->{rhs}", *arrays))
    if needs_grad(*operands_):
        sizes = {}
        for s, arr in zip(subs, arrays):
            for c, n in zip(s, arr.shape):
                sizes[c] = n

        def einsum_backward(g):
            grads = []
            for i, t in enumerate(operands_):
                if not t._requires_grad:
                    grads.append(None)
                    continue
                others = [operands_[j] for j in range(len(operands_)) if j != i]
                other_subs = [subs[j] for j in range(len(operands_)) if j != i]
                target = subs[i]
                # letters of the input missing from every other operand and the output are broadcast back
                present = set(rhs).union(*[set(s) for s in other_subs])
                missing = [c for c in dict.fromkeys(target) if c not in present]
                tgt = "".join(c for c in dict.fromkeys(target) if c in present)
                res = einsum(",".join([rhs] + other_subs) + "->" + tgt, g, *others)
                if missing or len(set(target)) != len(target):
                    full = [sizes[c] for c in dict.fromkeys(target)]
                    res = res.reshape([sizes[c] if c in present else 1 for c in dict.fromkeys(target)]).expand(full)
                    if len(set(target)) != len(target):
                        raise RuntimeError("einsum backward with repeated subscripts in one operand is not supported")
                grads.append(res)
            return tuple(grads) if len(grads) > 1 else grads[0]
        record("EinsumBackward0", einsum_backward, out, tuple(operands_), tuple(operands_))
    return out


def _expand_ellipsis(subs: list, rhs, operands_) -> tuple:
    """Replace '...' with explicit letters (right-aligned, as broadcasting aligns dimensions)."""
    import string
    used = set("".join(subs) + (rhs or ""))
    free = [c for c in string.ascii_letters if c not in used]
    counts = []
    for s, t in zip(subs, operands_):
        named = len(s.replace("...", ""))
        counts.append(t._data.ndim - named if "..." in s else 0)
        if counts[-1] < 0 or ("..." not in s and named != t._data.ndim):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) does not match the "
                               f"number of dimensions ({t._data.ndim}) for operand {len(counts) - 1}"
                               + ("" if "..." in s else " and no ellipsis was given"))
    n = max(counts)
    ell = "".join(free[:n])
    new_subs = [s.replace("...", ell[n - k:]) for s, k in zip(subs, counts)]
    if rhs is None:  # implicit output: the ellipsis dimensions, then the letters that appear once, sorted
        letters = "".join(s.replace("...", "") for s in subs)
        rhs = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    else:
        rhs = rhs.replace("...", ell)
    return new_subs, rhs


def _broadcast_labels(subs: list, operands_) -> tuple:
    """Expand size-1 dimensions that share a label with a larger one (PyTorch's einsum broadcasts them)."""
    sizes = {}
    for s, t in zip(subs, operands_):
        for c, k in zip(s, t._data.shape):
            if k != 1:
                if sizes.get(c, k) != k:
                    raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes (original->remapped):"
                                       f" subscript {c} has sizes {sizes[c]} and {k}")
                sizes[c] = k
    out = []
    for s, t in zip(subs, operands_):
        target = tuple(sizes.get(c, 1) for c in s)
        out.append(t if t._data.shape == target else t.expand(target))
    return tuple(out)


attach(matmul=matmul, mm=mm, bmm=bmm, mv=mv, dot=dot, outer=outer, addmm=addmm, baddbmm=baddbmm, __matmul__=matmul,
       __rmatmul__=lambda a, b: matmul(b if isinstance(b, Tensor) else _result(np.asarray(b)), a))
