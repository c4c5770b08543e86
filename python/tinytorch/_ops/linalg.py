"""Matrix products: matmul (1-D to batched N-D, with broadcasting), mm, bmm, outer, dot, einsum, and the products
built on them (tensordot, kron, cross, inner, vdot, addmv, addr, addbmm, chain_matmul, matrix_power)."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _C, _autocast, _threads
from .._dtype import promote_types
from .._meta import MetaArray
from .._tensor import Tensor, _wrap_dim
from ._common import _short, attach, needs_grad, operands, record, sum_to
from .indexing import _inplace
from .pointwise import _ctype_dtype, _result, _same_dtype_out, _write_out, broadcast_error_shapes
from ._common import user_stacklevel as _user_stacklevel


# out= dtype rule of matmul's vector . vector case (ATen's dot); the others (mm, bmm, mv) use _ctype_dtype
_dot_out_dtype = _same_dtype_out("result dtype {out} does not match input dtype {res}")


def matmul(a: Tensor, b: Tensor, *, out=None) -> Tensor:
    """Matrix product with NumPy's matmul semantics (PyTorch's): vectors are promoted and
    squeezed back, batch dimensions broadcast."""
    if out is not None:
        vectors = isinstance(b, Tensor) and a._data.ndim == 1 and b._data.ndim == 1
        return _write_out("matmul", matmul(a, b), out, _dot_out_dtype if vectors else _ctype_dtype)
    if _autocast.active:
        return _autocast.dispatch("matmul", matmul, a, b)
    if isinstance(b, np.ndarray):  # t @ array: the array as a tensor, as PyTorch's __matmul__ takes it
        from .._creation import tensor
        b = tensor(b, device=a.device)
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
    if a.dtype is not b.dtype:
        _dtype_mismatch(a, b)
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
            if ra:  # G B^H and A^H G: the conjugates matter for complex operands
                Bh = B.transpose(-1, -2)
                ga = G.matmul(Bh.conj() if Bh.is_complex() else Bh)
                ga = sum_to(ga, sa) if a.ndim > 1 else sum_to(ga, (1, sa[0])).reshape(sa)
                if ga.dtype is not da:
                    ga = ga.to(da)
            if rb:
                Ah = A.transpose(-1, -2)
                gb = (Ah.conj() if Ah.is_complex() else Ah).matmul(G)
                gb = sum_to(gb, sb) if b.ndim > 1 else sum_to(gb, (sb[0], 1)).reshape(sb)
                if gb.dtype is not db:
                    gb = gb.to(db)
            return ga, gb
        record("MmBackward0" if x.ndim == 2 and y.ndim == 2 else "MatmulBackward0", matmul_backward, out, (a, b),
               (a, b))
    return out


_SMALL = 1 << 22  # M * N * K of one matrix up to which the register-tiled kernel beats OpenBLAS called per matrix
# MKL's calls beat the kernel from here (0.58-0.87 of its time on W3's attention products and larger, 1 and 2
# threads; mixed around 64x32x64): docs/benchmarks.md, "eleventh pass"
_SMALL_MKL = 1 << 17
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _narrow(M: int, N: int, K: int, x, y) -> bool:
    """Whether a float matrix product is one of linear's tall narrow ones (a whole number of 32-column tiles,
    K 128-1024) that the register-tiled kernel runs faster than BLAS: the forward x @ W.T (the kernel makes W.T
    row-major once) and the input gradient g @ W, both up to N = 512. Measured in nanoGPT's step, alternating
    step by step with BLAS (docs/benchmarks.md, "fifth pass" and "sixth pass"): 2-20% faster each. Weight
    gradients g.T @ x, ragged widths (N = 65) and wider products stay with BLAS: the kernel reads a transposed
    A down its columns, which was 2-9% faster than OpenBLAS on a Zen 4 core but took 1.05-1.8x OpenBLAS's time
    on an Intel (Emerald Rapids) one (the sixth pass). With MKL as the BLAS every one of them goes to MKL: it
    took 0.74-0.85 of the kernel's time on each of them in nanoGPT's step (docs/benchmarks.md, "tenth pass")."""
    if N > 512 or N % 32 or not 128 <= K <= 1024 or M < 256 or _threads.blas == "mkl":
        return False
    item = x.itemsize
    return x.strides[1] == item and (y.strides[1] == item or y.strides[0] == item)


# ATen's C++ names of the dtypes, as its mm kernel's dtype check prints them
_CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
              "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>"}


def _dtype_mismatch(x: Tensor, y: Tensor) -> None:
    """Refuse operands of two dtypes, as PyTorch's products do (no promotion), with the message of the kernel
    that each matmul case reaches: dot, addmv, bmm or mm."""
    a, b = x.dtype, y.dtype
    if x.ndim == 1 and y.ndim == 1:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {_short(a)} and {_short(b)}")
    if y.ndim == 1:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {_short(promote_types(a, b))}, "
                           f"{_short(a)}, and {_short(b)}")
    if x.ndim >= 3 and y.ndim >= 3:
        raise RuntimeError(f"expected scalar type {_short(a)} but found {_short(b)}")
    raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_CPP_NAMES.get(a.name, a.name)} != "
                       f"{_CPP_NAMES.get(b.name, b.name)}")


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
            if count > 1 and M * N * K <= (_SMALL_MKL if _threads.blas == "mkl" else _SMALL):
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


def mm(a: Tensor, b: Tensor, *, out=None) -> Tensor:
    """Matrix product of two 2-D tensors."""
    if out is not None:
        return _write_out("mm", mm(a, b), out, _ctype_dtype)
    if _autocast.active:
        return _autocast.dispatch("mm", mm, a, b)
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    return matmul(a, b)


def bmm(a: Tensor, b: Tensor, *, out=None) -> Tensor:
    """Batched matrix product of two 3-D tensors (no broadcasting)."""
    if out is not None:
        return _write_out("bmm", bmm(a, b), out, _ctype_dtype)
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
    if isinstance(bias, Tensor) and isinstance(b, Tensor) and bias.dtype is not b.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {_short(bias.dtype)} and "
                           f"{_short(b.dtype)}")
    out = matmul(a, b)
    if alpha != 1:
        out = out * alpha
    return out + (bias if beta == 1 else bias * beta)


def baddbmm(bias: Tensor, a: Tensor, b: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * bias + alpha * (a @ b) for batches."""
    if _autocast.active:
        return _autocast.dispatch("baddbmm", baddbmm, bias, a, b, beta=beta, alpha=alpha)
    return addmm(bias, a, b, beta=beta, alpha=alpha)


def _sublist_equation(args: tuple) -> tuple:
    """einsum(op0, [0, 1], op1, [1, 2], [0, 2]): the equation and operands of the sublist form (0-25 name
    a-z, 26-51 A-Z, Ellipsis '...')."""
    def letters(sub) -> str:
        out = []
        for k in sub:
            if k is Ellipsis:
                out.append("...")
            elif isinstance(k, int) and 0 <= k < 52:
                out.append(chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26))
            else:
                raise RuntimeError(f"einsum(): expected subscript to be within the range [0, 52) but got {k}")
        return "".join(out)
    ops, subs, i = [], [], 0
    while i + 1 < len(args) and isinstance(args[i], Tensor):
        ops.append(args[i])
        subs.append(letters(args[i + 1]))
        i += 2
    eq = ",".join(subs)
    return (eq + "->" + letters(args[i]) if i < len(args) else eq), ops  # a trailing output sublist


def einsum(equation: str, *operands_) -> Tensor:
    """Einstein summation, differentiated through NumPy's einsum with rearranged subscripts."""
    if isinstance(equation, Tensor):
        equation, ops = _sublist_equation((equation,) + operands_)
        return einsum(equation, *ops)
    if _autocast.active:
        return _autocast.dispatch("einsum", einsum, equation, *operands_)
    if len(operands_) == 1 and isinstance(operands_[0], (list, tuple)):
        operands_ = tuple(operands_[0])
    for o in operands_[1:]:  # no promotion, as PyTorch's (its products' check)
        if isinstance(o, Tensor) and isinstance(operands_[0], Tensor) and o.dtype is not operands_[0].dtype:
            raise RuntimeError(f"expected scalar type {_short(operands_[0].dtype)} but found {_short(o.dtype)}")
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
    else:
        for k, (s, t) in enumerate(zip(subs, operands_)):
            if len(s) != t._data.ndim:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(s)}) does not match "
                                   f"the number of dimensions ({t._data.ndim}) for operand {k} and no ellipsis "
                                   f"was given")
    for k, c in enumerate(rhs):
        if c in rhs[:k]:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
        if all(c not in s for s in subs):
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                               f"operand")
    operands_ = _broadcast_labels(subs, operands_)
    arrays = [t._data for t in operands_]
    out = _result(_einsum_arrays(subs, rhs, arrays))
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


def _einsum_arrays(subs: list, rhs: str, arrays: list):
    """np.einsum's result: one matrix product on the intra-op pool for two operands with a letter to contract
    (a batched matmul, a bilinear form), NumPy's pairwise (BLAS) order for three or more, np.einsum itself for the
    rest (one operand, outer and elementwise products, repeated letters)."""
    if arrays and arrays[0].dtype.itemsize == 2 and arrays[0].dtype.kind in "fV":
        # float16/bfloat16: float32 accumulation, rounded once (NumPy's einsum has no bfloat16 loop)
        return _einsum_arrays(subs, rhs, [a.astype(np.float32) for a in arrays]).astype(arrays[0].dtype)
    if len(arrays) == 2:
        r = _contract_pair(subs[0], arrays[0], subs[1], arrays[1], rhs)
        if r is not None:
            return r
    return np.einsum(f"{','.join(subs)}->{rhs}", *arrays, optimize=len(arrays) > 2)


def _contract_pair(sa: str, x, sb: str, y, rhs: str):
    """einsum(f"{sa},{sb}->{rhs}", x, y) (a valid equation) as one product (batch, left, contracted) @ (batch,
    contracted, right) of the transposed, flattened operands, or None where that does not apply: a letter repeated
    within an operand, nothing to contract, operands of two dtypes or devices."""
    if len(set(sa)) != len(sa) or len(set(sb)) != len(sb) or x.dtype != y.dtype or type(x) is not type(y) or \
            type(x) is MetaArray:
        return None
    contracted = [c for c in sa if c in sb and c not in rhs]
    if not contracted:
        return None
    x, sa = _sum_out(x, sa, sb + rhs)
    y, sb = _sum_out(y, sb, sa + rhs)
    size = dict(zip(sa, x.shape))
    size.update(zip(sb, y.shape))
    batch = [c for c in rhs if c in sa and c in sb]
    left = [c for c in rhs if c in sa and c not in sb]
    right = [c for c in rhs if c in sb and c not in sa]
    B, L, K, R = (math.prod(size[c] for c in group) for group in (batch, left, contracted, right))
    xm = x.transpose([sa.index(c) for c in batch + left + contracted]).reshape(B, L, K)
    ym = y.transpose([sb.index(c) for c in batch + contracted + right]).reshape(B, K, R)
    r = _matmul(xm[0], ym[0]) if B == 1 else _matmul(xm, ym)  # one matrix: gemm without the batch bookkeeping
    order = batch + left + right
    r = r.reshape([size[c] for c in order])
    if order == list(rhs):
        return r
    return r.transpose([order.index(c) for c in rhs]).copy()  # contiguous, as np.einsum and PyTorch return it


def _sum_out(x, subs: str, keep: str) -> tuple:
    """x summed over the letters of subs that are not in keep (an index that appears nowhere else), and the
    subscripts left."""
    axes = tuple(i for i, c in enumerate(subs) if c not in keep)
    if not axes:
        return x, subs
    return x.sum(axis=axes), "".join(c for c in subs if c in keep)


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


# ------------------------------------------------------------------ contractions and products built on matmul

def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Contract a's dims with b's: the last `dims` of a with the first `dims` of b, or the listed pairs
    ([dims of a], [dims of b]); one matrix product of the permuted, flattened operands."""
    if isinstance(dims, Tensor):
        dims = dims.item() if dims.ndim == 0 else dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = dims
        for name, pos, ds in (("dims_self", 3, dims_a), ("dims_other", 4, dims_b)):
            if not isinstance(ds, (list, tuple)):
                raise TypeError(f"tensordot(): argument '{name}' (position {pos}) must be tuple of ints, not "
                                f"{type(ds).__name__}")
        dims_a, dims_b = list(dims_a), list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    ca = [_wrap_dim(d, a.ndim) for d in dims_a]
    cb = [_wrap_dim(d, b.ndim) for d in dims_b]
    for i, j, di, dj in zip(ca, cb, dims_a, dims_b):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {di} "
                               f"and second has size {b.shape[j]} in dim {dj}")
    free_a = [k for k in range(a.ndim) if k not in ca]
    free_b = [k for k in range(b.ndim) if k not in cb]
    size = math.prod(a.shape[k] for k in ca)
    left = a.permute(free_a + ca).reshape(math.prod(a.shape[k] for k in free_a), size)
    right = b.permute(cb + free_b).reshape(size, math.prod(b.shape[k] for k in free_b))
    return matmul(left, right).reshape([a.shape[k] for k in free_a] + [b.shape[k] for k in free_b])


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product: block (i, j, ...) is a[i, j, ...] * b (the shorter shape is padded with 1s)."""
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    x = a.reshape([n for s in sa for n in (s, 1)])
    y = b.reshape([n for s in sb for n in (1, s)])
    return (x * y).reshape([p * q for p, q in zip(sa, sb)])


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along dim (other dims broadcast); dim=None takes input's first dim of
    size 3, with PyTorch's deprecation warning."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=_user_stacklevel())
        dim = next((k for k, s in enumerate(input.shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    d = _wrap_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and "
                           f"{other.shape[d]}")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"expected scalar type {_short(input.dtype)} but found {_short(other.dtype)}")
    # component i is a[i+1] b[i+2] - a[i+2] b[i+1] (indices mod 3): rolled copies line those up
    return input.roll(-1, d) * other.roll(-2, d) - input.roll(-2, d) * other.roll(-1, d)


def inner(a: Tensor, b: Tensor) -> Tensor:
    """Sum of products over the last dims (a scalar operand multiplies); shape a.shape[:-1] + b.shape[:-1]."""
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(a.shape)} and {list(b.shape)}")
    return tensordot(a, b, ([-1], [-1]))


def vdot(a: Tensor, b: Tensor) -> Tensor:
    """dot(conj(a), b) of two 1-D tensors of one dtype."""
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {_short(a.dtype)} and "
                           f"{_short(b.dtype)}")
    return dot(a.conj(), b)


def _scaled_sum(input: Tensor, product: Tensor, beta, alpha) -> Tensor:
    """beta * input + alpha * product, with input broadcast to product's shape; beta = 0 ignores input, nan and
    inf included, as PyTorch documents."""
    input = input.expand(product.shape)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        dt = promote_types(input.dtype, product.dtype)
        return product if product.dtype is dt else product.to(dt)
    return product + (input if beta == 1 else input * beta)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * (mat @ vec)."""
    if mat.ndim != 2 or vec.ndim != 1 or input.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    n = input.shape[0] if input.ndim else 1
    if mat.shape[1] != vec.shape[0] or n not in (1, mat.shape[0]):
        raise RuntimeError(f"size mismatch, got input ({n}), mat ({mat.shape[0]}x{mat.shape[1]}), vec "
                           f"({vec.shape[0]})")
    if not input.dtype is mat.dtype is vec.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {_short(input.dtype)}, "
                           f"{_short(mat.dtype)}, and {_short(vec.dtype)}")
    return _scaled_sum(input, matmul(mat, vec), beta, alpha)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * outer(vec1, vec2)."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """beta * input + alpha * sum_i batch1[i] @ batch2[i], as one (n, b*m) @ (b*m, p) product."""
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if t.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    (b, n, m), (b2, m2, p) = batch1.shape, batch2.shape
    if b != b2:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {b} and {b2}")
    if m != m2:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({n}x{m} and {m2}x{p})")
    product = matmul(batch1.permute(1, 0, 2).reshape(n, b * m), batch2.reshape(b * m, p))
    return _scaled_sum(input, product, beta, alpha)


def chain_matmul(*matrices) -> Tensor:
    """The product of 2-D tensors, left to right (deprecated in PyTorch for torch.linalg.multi_dot)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=_user_stacklevel())
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    first = matrices[0]
    for i, m in enumerate(matrices[1:], 1):
        if m.dtype is not first.dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_short(first.dtype).lower()} and tensor {i} {_short(m.dtype).lower()}")
        if matrices[i - 1].shape[1] != m.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i - 1} and {i} with shapes {list(matrices[i - 1].shape)} and "
                               f"{list(m.shape)} cannot be multiplied")
    out = first
    for m in matrices[1:]:
        out = matmul(out, m)
    return out


def matrix_power(input: Tensor, n: int) -> Tensor:
    """The n-th power of (batches of) square matrices by repeated squaring; n = 0 gives identities, n < 0
    powers the inverse (torch.linalg.inv)."""
    if input.ndim < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 dimensions.")
    if input.shape[-1] != input.shape[-2]:
        raise RuntimeError(f"linalg.matrix_power: A must be batches of square matrices, but they are "
                           f"{input.shape[-2]} by {input.shape[-1]} matrices")
    if n < 0:
        from ..linalg import inv
        input, n = inv(input), -n
    if n == 0:  # identities that still depend on the input, with a zero gradient (PyTorch's CopyBackwards)
        from .._creation import eye
        out = eye(input.shape[-1], dtype=input.dtype, device=input.device).expand(input.shape).clone()
        if needs_grad(input):
            record("CopyBackwards", lambda g: g * 0, out, (input,))
        return out
    result, square = None, input
    while True:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if not n:
            return result if result is not input else input.clone()
        square = matmul(square, square)


attach(kron=kron, cross=cross, inner=inner, vdot=vdot, addmv=addmv, addmv_=_inplace(addmv), addr=addr,
       addr_=_inplace(addr), addbmm=addbmm, addbmm_=_inplace(addbmm), matrix_power=matrix_power)
