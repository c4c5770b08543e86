"""Grids, blocks, splits, differences, scatter_reduce and the products built on matmul (tensordot, kron, cross,
addmv, matrix_power, ...): values against NumPy float64 references, gradcheck/gradgradcheck in float64,
PyTorch's errors, and PyTorch's own values, dtypes, shapes and gradients when it is importable."""
import importlib.util
import itertools

import numpy as np
import pytest

import tinytorch
from tinytorch.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((2, 3, 4))


def _t(a, grad=False):
    return tinytorch.tensor(np.asarray(a), requires_grad=grad)


def _close(t, ref, rtol=1e-12):
    assert t.shape == np.shape(ref), (t.shape, np.shape(ref))
    np.testing.assert_allclose(t.numpy(), ref, rtol=rtol, atol=1e-12)


def _g(*shape, seed=1):
    """A float64 leaf of distinct values, for gradcheck."""
    return tinytorch.tensor(np.random.default_rng(seed).uniform(0.5, 1.5, shape) *
                            np.where(np.random.default_rng(seed + 1).random(shape) < 0.5, -1, 1), requires_grad=True)


# ------------------------------------------------------------------ grids, blocks, combinations

def test_meshgrid_ij_and_xy_match_numpy_and_are_views():
    x, y, z = np.arange(3.), np.arange(2.) + 10, np.arange(4.) - 5
    for indexing in ("ij", "xy"):
        got = tinytorch.meshgrid(_t(x), _t(y), _t(z), indexing=indexing)
        for g, want in zip(got, np.meshgrid(x, y, z, indexing=indexing)):
            _close(g, want)
    gx, gy = tinytorch.meshgrid([_t(x), _t(y)], indexing="xy")  # a list works too
    assert gx.shape == (2, 3) and gx._base is not None  # an expanded view, not a copy
    gx, gy = tinytorch.meshgrid(_t(np.array(7.)), _t(y), indexing="ij")  # 0-D counts as one element
    assert gx.shape == gy.shape == (1, 2)
    (only,) = tinytorch.meshgrid(_t(x), indexing="xy")  # one tensor: nothing to swap
    _close(only, x)


def test_meshgrid_without_indexing_warns_and_uses_ij():
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        gx, _ = tinytorch.meshgrid(_t(np.arange(3.)), _t(np.arange(2.)))
    assert gx.shape == (3, 2)


def test_meshgrid_errors():
    with pytest.raises(RuntimeError, match='indexing must be one of "xy" or "ij", but received: foo'):
        tinytorch.meshgrid(_t(np.ones(2)), indexing="foo")
    with pytest.raises(RuntimeError, match="meshgrid expects a non-empty TensorList"):
        tinytorch.meshgrid(indexing="ij")
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor in the tensor list"):
        tinytorch.meshgrid(_t(np.ones((2, 2))), indexing="ij")
    with pytest.raises(RuntimeError, match="same dtype"):
        tinytorch.meshgrid(_t(np.ones(2)), _t(np.ones(2, np.int64)), indexing="ij")


def test_block_diag_places_blocks_and_promotes():
    a, b, c = np.array(2), np.array([3., 4.]), np.arange(6, dtype=np.int32).reshape(2, 3)
    got = tinytorch.block_diag(_t(a), _t(b), _t(c))
    want = np.zeros((4, 6))
    want[0, 0], want[1, 1:3], want[2:, 3:] = a, b, c
    _close(got, want)
    assert got.dtype == tinytorch.float64
    assert tinytorch.block_diag(_t(c), _t(c)).dtype == tinytorch.int32
    empty = tinytorch.block_diag()
    assert empty.shape == (1, 0) and empty.dtype == tinytorch.float32
    assert tinytorch.block_diag(_t(np.ones((0, 2))), _t(np.ones((2, 0)))).shape == (2, 2)
    with pytest.raises(RuntimeError, match="Input 1 has 3 dimensions"):
        tinytorch.block_diag(_t(a), _t(np.ones((1, 1, 1))))


def test_cartesian_prod_and_combinations_follow_itertools():
    x, y = np.array([1., 2., 3.]), np.array([4., 5.])
    _close(tinytorch.cartesian_prod(_t(x), _t(y)), np.array(list(itertools.product(x, y))))
    single = _t(x)
    assert tinytorch.cartesian_prod(single) is single
    v = np.array([1., 2., 3., 4.])
    for r in (1, 2, 3):
        _close(tinytorch.combinations(_t(v), r), np.array(list(itertools.combinations(v, r))))
        _close(tinytorch.combinations(_t(v), r, with_replacement=True),
               np.array(list(itertools.combinations_with_replacement(v, r))))
    assert tinytorch.combinations(_t(v), 0).shape == (0,)
    assert tinytorch.combinations(_t(v), 5).shape == (0, 5)
    ints = tinytorch.combinations(_t(np.array([3, 1, 2])))
    assert ints.dtype == tinytorch.int64 and ints.tolist() == [[3, 1], [3, 2], [1, 2]]
    with pytest.raises(RuntimeError, match=r"Expect a 1D vector, but got shape \[2, 2\]"):
        tinytorch.cartesian_prod(_t(np.ones((2, 2))))
    with pytest.raises(RuntimeError, match="Expect a non-negative number, but got -1"):
        tinytorch.combinations(_t(v), -1)
    with pytest.raises(RuntimeError, match="meshgrid expects a non-empty TensorList"):
        tinytorch.cartesian_prod()


def test_tril_and_triu_indices_match_numpy():
    for row, col, off in ((4, 3, 0), (3, 5, 1), (4, 4, -2), (0, 3, 0), (3, 0, 0), (2, 2, 5)):
        lo = tinytorch.tril_indices(row, col, off)
        hi = tinytorch.triu_indices(row, col, off, dtype=tinytorch.int32)
        assert lo.dtype == tinytorch.int64 and hi.dtype == tinytorch.int32
        np.testing.assert_array_equal(lo.numpy(), np.array(np.tril_indices(row, off, col)).reshape(2, -1))
        np.testing.assert_array_equal(hi.numpy(), np.array(np.triu_indices(row, off, col)).reshape(2, -1))
    with pytest.raises(RuntimeError, match="row must be non-negative, got-1"):
        tinytorch.tril_indices(-1, 3)
    with pytest.raises(RuntimeError, match="col must be non-negative"):
        tinytorch.triu_indices(3, -2)
    with pytest.raises(NotImplementedError, match="not implemented for 'Float'"):
        tinytorch.tril_indices(3, 3, dtype=tinytorch.float32)


def test_diag_embed_and_diagflat():
    for offset, d1, d2 in ((0, -2, -1), (1, 0, 2), (-2, 2, 0), (2, 1, 0)):
        out = tinytorch.diag_embed(_t(A), offset, d1, d2)
        n = A.shape[-1] + abs(offset)
        assert out.shape[d1] == out.shape[d2] == n and out.ndim == 3
        _close(out.diagonal(offset, d1, d2), A)
        assert float(out.abs().sum()) == pytest.approx(np.abs(A).sum())  # zeros elsewhere
    assert _t(A).diag_embed().shape == (3, 4, 4)
    for k in (0, 2, -1):
        _close(tinytorch.diagflat(_t(A), k), np.diagflat(A, k))
    _close(_t(np.array(3.)).diagflat(), np.array([[3.]]))
    assert tinytorch.diagflat(_t(np.ones(0)), 2).shape == (2, 2)
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical 0, 0"):
        tinytorch.diag_embed(_t(A), 0, 0, 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        tinytorch.diag_embed(_t(np.array(1.)))


# ------------------------------------------------------------------ take, rotations, flips

def test_take_reads_the_flattened_tensor():
    idx = np.array([[0, -1], [11, 3]])
    _close(tinytorch.take(_t(A), _t(idx)), A.ravel()[idx])
    _close(_t(A).T.take(_t(np.array([1, 2]))), A.T.ravel()[[1, 2]])  # the logical (row-major) order of a view
    _close(tinytorch.take(_t(np.array(5.)), _t(np.array(0))), np.array(5.))
    assert tinytorch.take(_t(np.ones(0)), _t(np.zeros(0, np.int64))).shape == (0,)
    with pytest.raises(IndexError, match="out of range: tried to access index 12 on a tensor of 12 elements."):
        tinytorch.take(_t(A), _t(np.array([0, 12])))
    with pytest.raises(IndexError, match="tried to access index -13"):
        tinytorch.take(_t(A), _t(np.array([-13])))
    with pytest.raises(IndexError, match="tried to take from an empty tensor"):
        tinytorch.take(_t(np.ones(0)), _t(np.array([0])))
    with pytest.raises(RuntimeError, match="Expected a long tensor for index, but got Int"):
        tinytorch.take(_t(A), _t(np.array([0], np.int32)))


def test_rot90_fliplr_flipud_match_numpy():
    for k in range(-5, 6):
        _close(tinytorch.rot90(_t(B), k, (2, 0)), np.rot90(B, k, (2, 0)))
        _close(_t(A).rot90(k), np.rot90(A, k))
    _close(tinytorch.fliplr(_t(B)), np.fliplr(B))
    _close(_t(B).flipud(), np.flipud(B))
    _close(tinytorch.flipud(_t(np.arange(3.))), np.arange(3.)[::-1])
    with pytest.raises(RuntimeError, match="expected total rotation dims == 2, but got dims = 1"):
        tinytorch.rot90(_t(A), 1, [0])
    with pytest.raises(RuntimeError, match="expected total dims >= 2, but got total dims = 1"):
        tinytorch.rot90(_t(np.ones(3)))
    with pytest.raises(RuntimeError, match="expected rotation dims to be different, but got dim0 = 0 and dim1 = -2"):
        tinytorch.rot90(_t(A), 1, [0, -2])
    with pytest.raises(RuntimeError, match="Input must be >= 2-d."):
        tinytorch.fliplr(_t(np.ones(3)))
    with pytest.raises(RuntimeError, match="Input must be >= 1-d."):
        tinytorch.flipud(_t(np.array(1.)))


# ------------------------------------------------------------------ at least n-D, stacking, splitting

def test_atleast_nd_shapes_and_return_rules():
    arrays = [np.array(1.), np.arange(3.), np.ones((2, 3)), np.ones((2, 3, 1, 1))]
    for fn, ref in ((tinytorch.atleast_1d, np.atleast_1d), (tinytorch.atleast_2d, np.atleast_2d),
                    (tinytorch.atleast_3d, np.atleast_3d)):
        for a in arrays:
            got = fn(_t(a))
            assert isinstance(got, tinytorch.Tensor) and got.shape == ref(a).shape
        many = fn(*[_t(a) for a in arrays])
        assert isinstance(many, tuple) and [m.shape for m in many] == [ref(a).shape for a in arrays]
        assert isinstance(fn([_t(arrays[0])]), tuple) and isinstance(fn((_t(arrays[0]),)), tuple)
        assert fn() == ()
    x = _t(np.ones((2, 3, 4)))
    assert tinytorch.atleast_3d(x) is x
    with pytest.raises(TypeError, match="atleast_1d"):
        tinytorch.atleast_1d(1.0)


def test_broadcast_shapes_matches_numpy_and_returns_size():
    for shapes in (((2, 1, 3), (4, 1), 1), ((2, 0), (1,)), ((), (3,)), ([5, 1], (1, 4))):
        got = tinytorch.broadcast_shapes(*shapes)
        assert isinstance(got, tinytorch.Size)
        assert tuple(got) == np.broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s) for s in shapes])
    assert tinytorch.broadcast_shapes() == tinytorch.Size([])
    with pytest.raises(RuntimeError, match="Attempting to broadcast a dimension of length 3 at -2!"):
        tinytorch.broadcast_shapes((2, 1), (3, 2))
    with pytest.raises(ValueError, match="negative length"):
        tinytorch.broadcast_shapes((2, 1), -1)
    with pytest.raises(RuntimeError, match="Input shapes should be of type ints"):
        tinytorch.broadcast_shapes(2.0)


def test_hsplit_vsplit_dsplit_match_numpy():
    x = RNG.standard_normal((4, 6, 2))
    for fn, ref in ((tinytorch.hsplit, np.hsplit), (tinytorch.vsplit, np.vsplit), (tinytorch.dsplit, np.dsplit)):
        for sections in (2, [1, 3], [0, 5]):
            got, want = fn(_t(x), sections), ref(x, sections)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                _close(g, w)
    pieces = _t(np.arange(6.)).hsplit(3)
    assert [p.shape for p in pieces] == [(2,)] * 3 and pieces[0]._base is not None  # views
    with pytest.raises(RuntimeError, match="torch.hsplit attempted to split along dimension 1, but the size of the "
                                           "dimension 6 is not divisible by the split_size 4!"):
        tinytorch.hsplit(_t(x), 4)
    with pytest.raises(RuntimeError, match="not divisible by the split_size 0!"):
        tinytorch.hsplit(_t(np.ones(6)), 0)
    with pytest.raises(RuntimeError, match="torch.hsplit requires a tensor with at least 1 dimension, but got a "
                                           "tensor with 0 dimensions!"):
        tinytorch.hsplit(_t(np.array(1.)), 1)
    with pytest.raises(RuntimeError, match="torch.vsplit requires a tensor with at least 2 dimension"):
        tinytorch.vsplit(_t(np.ones(4)), 2)
    with pytest.raises(RuntimeError, match="torch.dsplit requires a tensor with at least 3 dimension"):
        tinytorch.dsplit(_t(A), 2)


def test_dstack_column_stack_row_stack_and_aliases():
    a, b = np.arange(3.), np.arange(3.) + 5
    _close(tinytorch.dstack([_t(a), _t(b)]), np.dstack([a, b]))
    _close(tinytorch.dstack([_t(A), _t(B.transpose(1, 2, 0))]), np.dstack([A, B.transpose(1, 2, 0)]))
    _close(tinytorch.column_stack([_t(a), _t(A), _t(b)]), np.column_stack([a, A, b]))
    _close(tinytorch.column_stack([_t(np.array(1.)), _t(np.array(2.))]), np.array([[1., 2.]]))
    _close(tinytorch.row_stack([_t(A[0]), _t(A)]), np.vstack([A[0], A]))
    with pytest.raises(RuntimeError, match="dstack expects a non-empty TensorList"):
        tinytorch.dstack([])
    with pytest.raises(RuntimeError, match="column_stack expects a non-empty TensorList"):
        tinytorch.column_stack([])
    _close(tinytorch.moveaxis(_t(B), 0, -1), np.moveaxis(B, 0, -1))
    _close(tinytorch.swapaxes(_t(B), 0, 2), np.swapaxes(B, 0, 2))
    _close(tinytorch.swapdims(_t(B), -1, 1), np.swapaxes(B, -1, 1))
    z = B + 1j * B[::-1]
    _close(tinytorch.adjoint(_t(z)), np.conj(z).swapaxes(-1, -2))
    _close(_t(B).adjoint(), B.swapaxes(-1, -2))
    with pytest.raises(RuntimeError, match="only supported on matrices or batches of matrices. Got 1-D tensor."):
        tinytorch.adjoint(_t(np.ones(3)))


# ------------------------------------------------------------------ diff, vander, empty_strided, narrow_copy, renorm

def test_diff_matches_numpy():
    for n, dim in ((1, -1), (2, 0), (3, 1), (0, 1), (7, 1)):
        _close(tinytorch.diff(_t(A), n, dim), np.diff(A, n, axis=dim))
    pre, app = RNG.standard_normal((1, 4)), RNG.standard_normal((2, 4))
    _close(_t(A).diff(2, 0, prepend=_t(pre), append=_t(app)), np.diff(A, 2, axis=0, prepend=pre, append=app))
    bools = np.array([True, False, False, True])
    got = tinytorch.diff(_t(bools))
    assert got.dtype == tinytorch.bool and got.tolist() == list(np.diff(bools))
    u8 = tinytorch.diff(_t(np.array([1, 5, 2], np.uint8)))
    assert u8.dtype == tinytorch.uint8 and u8.tolist() == [4, 253]  # wraps, as integer subtraction does
    with pytest.raises(RuntimeError, match="diff expects input to be at least one-dimensional"):
        tinytorch.diff(_t(np.array(1.)))
    with pytest.raises(RuntimeError, match="order must be non-negative but got -1"):
        tinytorch.diff(_t(A), -1)
    with pytest.raises(RuntimeError, match="diff expects prepend or append to be the same dimension as input"):
        tinytorch.diff(_t(A), prepend=_t(np.ones(3)))
    with pytest.raises(RuntimeError, match=r"input.size\(1\) = 4, but got tensor.size\(1\) = 2"):
        tinytorch.diff(_t(A), dim=0, prepend=_t(np.ones((1, 2))))
    with pytest.raises(TypeError, match="argument 'prepend' must be Tensor, not float"):
        tinytorch.diff(_t(A), prepend=0.0)


def test_vander_matches_numpy_and_promotes_integers_to_long():
    x = np.array([1.5, -2., 0.5])
    for N, inc in ((None, False), (4, True), (1, False), (0, True), (2, False)):
        _close(tinytorch.vander(_t(x), N, inc), np.vander(x, N, inc))
    for dt in (np.int32, np.uint8, np.bool_):
        got = tinytorch.vander(_t(np.array([1, 2, 0]).astype(dt)), 3)
        assert got.dtype == tinytorch.int64
        np.testing.assert_array_equal(got.numpy(), np.vander(np.array([1, 2, 0]).astype(dt).astype(np.int64), 3))
    assert tinytorch.vander(_t(np.ones(0))).shape == (0, 0)
    with pytest.raises(RuntimeError, match="x must be a one-dimensional tensor."):
        tinytorch.vander(_t(A))
    with pytest.raises(RuntimeError, match="N must be non-negative."):
        tinytorch.vander(_t(x), -1)


def test_empty_strided_reports_the_requested_layout():
    t = tinytorch.empty_strided((2, 3), (1, 2))
    assert t.shape == (2, 3) and t.stride() == (1, 2) and t.dtype == tinytorch.float32 and not t.is_contiguous()
    t.copy_(_t(A[:2, :3].astype(np.float32)))
    _close(t, A[:2, :3].astype(np.float32), rtol=1e-6)
    z = tinytorch.empty_strided([2, 3], [0, 1], dtype=tinytorch.int32, requires_grad=False)
    assert z.stride() == (0, 1) and z.dtype == tinytorch.int32
    assert tinytorch.empty_strided((0, 3), (1, 1)).shape == (0, 3)
    assert tinytorch.empty_strided((2,), (1,), dtype=tinytorch.float64, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match=r"dimensionality of sizes \(2\) must match dimensionality of strides \(3\)"):
        tinytorch.empty_strided((2, 3), (1, 2, 3))
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        tinytorch.empty_strided((2, 3), (-1, 1))


def test_narrow_copy_copies():
    x = _t(A)
    c = tinytorch.narrow_copy(x, 1, -2, 2)
    _close(c, A[:, 2:4])
    c.fill_(0.0)
    _close(x, A)
    assert c._base is None
    _close(x.narrow_copy(0, 1, 1), A[1:2])
    with pytest.raises(RuntimeError, match=r"start \(2\) \+ length \(3\) exceeds dimension size \(4\)."):
        tinytorch.narrow_copy(x, 1, 2, 3)


def _renorm_ref(x, p, dim, maxnorm):
    axes = tuple(k for k in range(x.ndim) if k != dim % x.ndim)
    norms = np.max(np.abs(x), axis=axes, keepdims=True) if p == np.inf else \
        (np.abs(x) ** p).sum(axis=axes, keepdims=True) ** (1 / p)
    return x * np.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


def test_renorm_matches_the_formula():
    for p, dim, maxnorm in ((2, 0, 1.0), (1, 1, 1.5), (np.inf, -1, 0.9), (3, 2, 0.5), (2, 1, 100.0)):
        x = B if dim == 2 else A
        _close(tinytorch.renorm(_t(x), p, dim, maxnorm), _renorm_ref(x, p, dim, maxnorm))
    y = _t(A.copy())
    assert y.renorm_(2, 0, 1.0) is y
    _close(y, _renorm_ref(A, 2, 0, 1.0))
    with pytest.raises(RuntimeError, match="renorm: non-positive-norm not supported"):
        tinytorch.renorm(_t(A), 0, 1, 5)
    with pytest.raises(RuntimeError, match="renorm: expected maxnorm to be >= 0 but got -5.5"):
        tinytorch.renorm(_t(A), 2, 1, -5.5)
    with pytest.raises(RuntimeError, match="renorm: input needs at least 2 dimensions, got 1 dimensions"):
        tinytorch.renorm(_t(np.ones(3)), 2, 0, 1)
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        tinytorch.renorm(_t(np.ones((2, 2), np.int64)), 2, 0, 1)


# ------------------------------------------------------------------ scatter_reduce

def _scatter_reduce_ref(x, dim, index, src, reduce, include_self):
    out = x.copy()
    slots = {}
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        slots.setdefault(tuple(target), []).append(src[pos])
    for target, vals in slots.items():
        vals = ([x[target]] if include_self else []) + vals
        if reduce == "sum":
            out[target] = np.sum(vals)
        elif reduce == "prod":
            out[target] = np.prod(vals)
        elif reduce == "amax":
            out[target] = np.max(vals)
        elif reduce == "amin":
            out[target] = np.min(vals)
        elif x.dtype.kind in "iu":
            out[target] = np.floor_divide(np.sum(vals), len(vals))
        else:
            out[target] = np.mean(vals)
    return out


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce_matches_a_loop(reduce):
    index = RNG.integers(0, 3, (4, 5))
    src = RNG.standard_normal((4, 5))
    for include_self in (True, False):
        for dim, idx in ((0, index[:3, :4]), (1, index[:3, :2]), (-1, index[:2, :3])):
            got = tinytorch.scatter_reduce(_t(A), dim, _t(idx), _t(src), reduce, include_self=include_self)
            _close(got, _scatter_reduce_ref(A, dim % 2, idx, src, reduce, include_self))
        ints = (A * 10).astype(np.int64)
        isrc = (src * 10).astype(np.int64)
        got = _t(ints).scatter_reduce(1, _t(index[:3, :4]), _t(isrc), reduce, include_self=include_self)
        assert got.dtype == tinytorch.int64
        np.testing.assert_array_equal(got.numpy(),
                                      _scatter_reduce_ref(ints, 1, index[:3, :4], isrc, reduce, include_self))


def test_scatter_reduce_edge_cases_and_errors():
    x = _t(np.array([1., 2., 3., 4.]))
    i32 = _t(np.array([0, 0], np.int32))
    _close(x.scatter_reduce(0, i32, _t(np.array([5., 6.])), "sum"), np.array([12., 2., 3., 4.]))
    _close(_t(np.array(2.)).scatter_reduce(0, _t(np.array([0, 0])), _t(np.array([3., 4.])), "prod"),
           np.array(24.))
    y = _t(np.array([1., 2.]))
    assert y.scatter_reduce_(0, _t(np.array([1, 1])), _t(np.array([5., -1.])), "amax", include_self=False) is y
    _close(y, np.array([1., 5.]))
    bools = _t(np.array([True, False])).scatter_reduce(0, _t(np.array([1])), _t(np.array([True])), "sum")
    assert bools.dtype == tinytorch.bool and bools.tolist() == [True, True]
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin, got foo"):
        x.scatter_reduce(0, i32, x, "foo")
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter_reduce(0, i32, _t(np.ones(2, np.float32)), "sum")
    with pytest.raises(RuntimeError, match="index 9 is out of bounds for dimension 0 with size 4"):
        x.scatter_reduce(0, _t(np.array([9])), x, "sum")
    with pytest.raises(RuntimeError, match="to be no larger size than src"):
        x.scatter_reduce(0, _t(np.array([0, 1, 2])), _t(np.ones(2)), "sum")


# ------------------------------------------------------------------ products

def test_tensordot_matches_numpy():
    b = RNG.standard_normal((4, 2, 5))
    _close(tinytorch.tensordot(_t(B), _t(b), ([0, 2], [1, 0])), np.tensordot(B, b, ([0, 2], [1, 0])))
    _close(tinytorch.tensordot(_t(B), _t(B.transpose(1, 2, 0)), 2), np.tensordot(B, B.transpose(1, 2, 0), 2))
    _close(tinytorch.tensordot(_t(A), _t(B), 0), np.tensordot(A, B, 0))
    _close(tinytorch.tensordot(_t(A), _t(B), [[-1], [2]]), np.tensordot(A, B, ([-1], [2])))
    _close(tinytorch.tensordot(_t(A), _t(A.T), _t(np.array(1))), A @ A.T)
    with pytest.raises(RuntimeError, match="tensordot expects dims >= 0, but got dims=-1"):
        tinytorch.tensordot(_t(A), _t(A), -1)
    with pytest.raises(RuntimeError, match="tensordot expects dims < ndim_a or ndim_b, but got dims=3"):
        tinytorch.tensordot(_t(A), _t(B), 3)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match, but first has size 4 in dim -1 and "
                                           "second has size 2 in dim 0"):
        tinytorch.tensordot(_t(A), _t(B), 1)
    with pytest.raises(RuntimeError, match="both dimension lists should have same length"):
        tinytorch.tensordot(_t(A), _t(B), ([0, 1], [1]))
    with pytest.raises(RuntimeError, match="both inputs should have same dtype"):
        tinytorch.tensordot(_t(A), _t(A.astype(np.float32)), 1)
    with pytest.raises(TypeError, match="must be tuple of ints, not int"):
        tinytorch.tensordot(_t(A), _t(B), (1, 0))


def test_kron_inner_vdot_match_numpy():
    ints = np.array([[1, 2], [3, 4]])
    _close(tinytorch.kron(_t(ints), _t(A)), np.kron(ints, A))
    _close(_t(A).kron(_t(B)), np.kron(A, B))
    _close(tinytorch.kron(_t(np.array(2.)), _t(np.arange(3.))), np.kron(2., np.arange(3.)))
    assert tinytorch.kron(_t(ints), _t(ints)).dtype == tinytorch.int64
    _close(tinytorch.inner(_t(B), _t(A)), np.inner(B, A))
    _close(_t(np.array(2.)).inner(_t(A)), 2 * A)
    _close(tinytorch.inner(_t(A[0]), _t(A[1])), np.inner(A[0], A[1]))
    u, v = A[0] + 1j * A[1], A[2] - 2j * A[0]
    _close(tinytorch.vdot(_t(u), _t(v)), np.vdot(u, v))
    _close(_t(A[0]).vdot(_t(A[1])), np.vdot(A[0], A[1]))
    with pytest.raises(RuntimeError, match=r"inner\(\) the last dimension must match on both input tensors but got "
                                           r"shapes \[3, 4\] and \[3\]"):
        tinytorch.inner(_t(A), _t(np.ones(3)))
    with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
        tinytorch.vdot(_t(A), _t(A[0]))
    with pytest.raises(RuntimeError, match="expected both vectors to have same dtype, but found Double and Float"):
        tinytorch.vdot(_t(A[0]), _t(A[0].astype(np.float32)))


def test_cross_matches_numpy_and_picks_the_first_dim_of_size_3():
    u, v = RNG.standard_normal((2, 3)), RNG.standard_normal((1, 3))
    _close(tinytorch.cross(_t(u), _t(v), dim=1), np.cross(u, v, axis=1))
    _close(_t(u.T).cross(_t(v.T), dim=-2), np.cross(u.T, v.T, axis=0))
    w = RNG.standard_normal((3, 3))
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim arg is deprecated"):
        _close(tinytorch.cross(_t(w), _t(w[::-1].copy())), np.cross(w, w[::-1], axis=0))
    ints = tinytorch.cross(_t(np.array([[1, 0, 0]])), _t(np.array([[0, 1, 0]])), dim=1)
    assert ints.dtype == tinytorch.int64 and ints.tolist() == [[0, 0, 1]]
    with pytest.raises(RuntimeError, match="linalg.cross: inputs dimension -1 must have length 3. Got 4 and 4"):
        tinytorch.cross(_t(A), _t(A), dim=-1)
    with pytest.raises(RuntimeError, match="no dimension of size 3 in input"), pytest.warns(UserWarning):
        tinytorch.cross(_t(np.ones((2, 4))), _t(np.ones((2, 4))))
    with pytest.raises(RuntimeError, match="linalg.cross: inputs must have the same number of dimensions."):
        tinytorch.cross(_t(u), _t(np.ones(3)), dim=-1)
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        tinytorch.cross(_t(u), _t(u.astype(np.float32)), dim=1)


def test_addmv_addr_addbmm_follow_the_formula():
    m, vec, bias = RNG.standard_normal((3, 4)), RNG.standard_normal(4), RNG.standard_normal(3)
    _close(tinytorch.addmv(_t(bias), _t(m), _t(vec), beta=0.5, alpha=2), 0.5 * bias + 2 * m @ vec)
    _close(_t(np.array(1.)).addmv(_t(m), _t(vec)), 1 + m @ vec)
    _close(tinytorch.addmv(_t(np.full(3, np.nan)), _t(m), _t(vec), beta=0), m @ vec)  # beta = 0 ignores nan
    v1, v2 = RNG.standard_normal(3), RNG.standard_normal(4)
    _close(tinytorch.addr(_t(A), _t(v1), _t(v2), beta=2, alpha=-1), 2 * A - np.outer(v1, v2))
    _close(tinytorch.addr(_t(A[0]), _t(v1), _t(v2)), A[0] + np.outer(v1, v2))
    promoted = tinytorch.addr(_t(A.astype(np.float32)), _t(np.ones(3, np.int64)), _t(np.ones(4, np.int64)), beta=0)
    assert promoted.dtype == tinytorch.float32 and promoted.tolist() == [[1.0] * 4] * 3
    b1, b2 = RNG.standard_normal((5, 3, 2)), RNG.standard_normal((5, 2, 4))
    _close(tinytorch.addbmm(_t(A), _t(b1), _t(b2), alpha=3), A + 3 * np.einsum("bij,bjk->ik", b1, b2))
    x = _t(A.copy())
    assert x.addbmm_(_t(b1), _t(b2), beta=0) is x
    _close(x, np.einsum("bij,bjk->ik", b1, b2))
    y = _t(bias.copy())
    y.addmv_(_t(m), _t(vec))
    _close(y, bias + m @ vec)
    z = _t(A.copy())
    z.addr_(_t(v1), _t(v2), alpha=2)
    _close(z, A + 2 * np.outer(v1, v2))
    with pytest.raises(RuntimeError, match="vector \\+ matrix @ vector expected, got 1, 2, 2"):
        tinytorch.addmv(_t(bias), _t(m), _t(m))
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(4\), mat \(3x4\), vec \(4\)"):
        tinytorch.addmv(_t(vec), _t(m), _t(vec))
    with pytest.raises(RuntimeError, match="addmv input tensors must have the same dtype, but got Double, Double, and "
                                           "Float"):
        tinytorch.addmv(_t(bias), _t(m), _t(vec.astype(np.float32)))
    with pytest.raises(RuntimeError, match="addr: Expected 1-D argument vec1, but got 2-D"):
        tinytorch.addr(_t(A), _t(A), _t(v2))
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(3\) must match the existing size \(4\)"):
        tinytorch.addr(_t(np.ones((4, 4))), _t(v1), _t(v2))
    with pytest.raises(RuntimeError, match="batch1 must be a 3D tensor"):
        tinytorch.addbmm(_t(A), _t(A), _t(b2))
    with pytest.raises(RuntimeError, match="batch1 and batch2 must have same number of batches, got 5 and 4"):
        tinytorch.addbmm(_t(A), _t(b1), _t(b2[:4]))
    with pytest.raises(RuntimeError, match=r"Incompatible matrix sizes for bmm \(3x2 and 4x2\)"):
        tinytorch.addbmm(_t(A), _t(b1), _t(b2.transpose(0, 2, 1)))


def test_chain_matmul_and_matrix_power():
    mats = [RNG.standard_normal(s) for s in ((2, 3), (3, 4), (4, 1))]
    with pytest.warns(UserWarning, match="torch.chain_matmul is deprecated"):
        got = tinytorch.chain_matmul(*[_t(m) for m in mats])
    _close(got, np.linalg.multi_dot(mats))
    with pytest.warns(UserWarning):
        single = _t(A)
        assert tinytorch.chain_matmul(single) is not single
        with pytest.raises(RuntimeError, match=r"chain_matmul\(\): Expected one or more matrices"):
            tinytorch.chain_matmul()
        with pytest.raises(RuntimeError, match="Tensor dimension is 1, expected 2 instead."):
            tinytorch.chain_matmul(_t(A), _t(np.ones(4)))
        with pytest.raises(RuntimeError, match=r"tensors 0 and 1 with shapes \[3, 4\] and \[3, 4\] cannot be "
                                               "multiplied"):
            tinytorch.chain_matmul(_t(A), _t(A))
        with pytest.raises(RuntimeError, match="all tensors must have be the same dtype but tensor 0 is double and "
                                               "tensor 1 float"):
            tinytorch.chain_matmul(_t(A), _t(A.T.astype(np.float32)))
    batch = RNG.standard_normal((2, 3, 3)) / 2
    for n in range(7):
        _close(tinytorch.matrix_power(_t(batch), n), np.linalg.matrix_power(batch, n), rtol=1e-10)
    ints = np.array([[1, 1], [1, 0]])
    fib = _t(ints).matrix_power(10)
    assert fib.dtype == tinytorch.int64 and fib.tolist() == np.linalg.matrix_power(ints, 10).tolist()
    assert tinytorch.matrix_power(_t(np.ones((0, 2, 2))), 3).shape == (0, 2, 2)
    one = _t(A[:, :3])
    assert tinytorch.matrix_power(one, 1) is not one
    with pytest.raises(RuntimeError, match="A must be batches of square matrices, but they are 3 by 4 matrices"):
        tinytorch.matrix_power(_t(A), 2)
    with pytest.raises(RuntimeError, match="The input tensor A must have at least 2 dimensions."):
        tinytorch.matrix_power(_t(np.ones(3)), 2)
    spd = np.array([[2., 1.], [1., 3.]])
    if hasattr(tinytorch.linalg, "inv"):
        _close(tinytorch.matrix_power(_t(spd), -2), np.linalg.matrix_power(spd, -2), rtol=1e-10)
    else:
        with pytest.raises(NotImplementedError, match="needs torch.linalg.inv"):
            tinytorch.matrix_power(_t(spd), -2)


# ------------------------------------------------------------------ gradients

GRAD_CASES = {
    "meshgrid": (lambda a, b: tinytorch.meshgrid(a, b, indexing="xy"), [(3,), (2,)]),
    "block_diag": (lambda a, b, c: tinytorch.block_diag(a, b, c), [(), (2,), (2, 3)]),
    "cartesian_prod": (lambda a, b: tinytorch.cartesian_prod(a, b), [(3,), (2,)]),
    "combinations": (lambda a: tinytorch.combinations(a, 2, True), [(4,)]),
    "diag_embed": (lambda a: tinytorch.diag_embed(a, 1, 0, 2), [(2, 3)]),
    "diagflat": (lambda a: tinytorch.diagflat(a, -1), [(2, 2)]),
    "take": (lambda a: a.take(tinytorch.tensor([[0, -1], [3, 0]])), [(2, 3)]),
    "rot90": (lambda a: tinytorch.rot90(a, 3, (1, 0)), [(2, 3)]),
    "fliplr_flipud": (lambda a: (a.fliplr(), tinytorch.flipud(a)), [(2, 3)]),
    "atleast": (lambda a, b: tinytorch.atleast_3d(a, b), [(), (3,)]),
    "splits": (lambda a: a.hsplit([1]) + tinytorch.vsplit(a, 2) + tinytorch.dsplit(a, [1, 1]), [(2, 3, 2)]),
    "dstack_column_stack": (lambda a, b: (tinytorch.dstack([a, b]), tinytorch.column_stack([a, b])), [(3,), (3,)]),
    "adjoint": (lambda a: a.adjoint(), [(2, 3, 2)]),
    "diff": (lambda a, b: tinytorch.diff(a, 2, 0, prepend=b, append=a), [(2, 3), (1, 3)]),
    "vander": (lambda a: tinytorch.vander(a, 4), [(3,)]),
    "narrow_copy": (lambda a: a.narrow_copy(1, 1, 2), [(2, 3)]),
    "renorm_2": (lambda a: tinytorch.renorm(a, 2, 0, 1.0), [(3, 2)]),
    "renorm_inf": (lambda a: a.renorm(float("inf"), 1, 1.2), [(3, 2)]),
    "renorm_3": (lambda a: a.renorm(3, -1, 0.8), [(2, 3)]),
    "tensordot": (lambda a, b: tinytorch.tensordot(a, b, ([0, 2], [1, 0])), [(2, 3, 2), (2, 2, 3)]),
    "kron": (lambda a, b: tinytorch.kron(a, b), [(2, 1), (2, 3)]),
    "cross": (lambda a, b: tinytorch.cross(a, b, dim=0), [(3, 2), (3, 1)]),
    "inner": (lambda a, b: tinytorch.inner(a, b), [(2, 3), (4, 3)]),
    "vdot": (lambda a, b: tinytorch.vdot(a, b), [(3,), (3,)]),
    "addmv": (lambda i, m, v: tinytorch.addmv(i, m, v, beta=0.5, alpha=2), [(2,), (2, 3), (3,)]),
    "addr": (lambda i, a, b: tinytorch.addr(i, a, b, beta=-1, alpha=3), [(2, 3), (2,), (3,)]),
    "addbmm": (lambda i, a, b: tinytorch.addbmm(i, a, b, alpha=0.5), [(2, 2), (3, 2, 2), (3, 2, 2)]),
    "chain_matmul": (lambda a, b, c: tinytorch.chain_matmul(a, b, c), [(2, 3), (3, 2), (2, 2)]),
    "matrix_power_0": (lambda a: tinytorch.matrix_power(a, 0) * a, [(2, 2)]),
    "matrix_power_5": (lambda a: a.matrix_power(5), [(2, 2, 2)]),
}


@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradcheck(name):
    fn, shapes = GRAD_CASES[name]
    inputs = tuple(_g(*s, seed=i) for i, s in enumerate(shapes))
    assert gradcheck(fn, inputs)


@pytest.mark.parametrize("name", ["renorm_2", "tensordot", "kron", "cross", "vander", "matrix_power_5", "addmv"])
def test_gradgradcheck(name):
    fn, shapes = GRAD_CASES[name]
    inputs = tuple(_g(*s, seed=i) for i, s in enumerate(shapes))
    assert gradgradcheck(fn, inputs)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients(reduce, include_self):
    index = tinytorch.tensor([[0, 1, 0], [1, 0, 1], [0, 0, 2]])
    x, src = _g(3, 4, seed=3), _g(4, 3, seed=5)  # distinct values: no ties for amax/amin

    def fn(a, s):
        return tinytorch.scatter_reduce(a, 0, index, s, reduce, include_self=include_self)
    assert gradcheck(fn, (x, src))
    assert gradgradcheck(fn, (x, src))


def test_scatter_reduce_prod_gradient_with_zeros():
    # one zero in a slot: its gradient is the product of the others, not 0/0
    x = tinytorch.tensor([2.0, 3.0], dtype=tinytorch.float64, requires_grad=True)
    src = tinytorch.tensor([0.0, 5.0, 4.0], dtype=tinytorch.float64, requires_grad=True)
    out = tinytorch.scatter_reduce(x, 0, tinytorch.tensor([0, 0, 1]), src, "prod")
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 4.0])
    np.testing.assert_allclose(src.grad.numpy(), [10.0, 0.0, 3.0])


# ------------------------------------------------------------------ PyTorch

TORCH_CASES = {
    "meshgrid": (lambda L, a, b: L.meshgrid(a, b, indexing="xy"), [(3,), (2,)]),
    "block_diag": (lambda L, a, b: L.block_diag(a, b), [(2,), (2, 3)]),
    "cartesian_prod": (lambda L, a, b: L.cartesian_prod(a, b), [(3,), (2,)]),
    "combinations": (lambda L, a: L.combinations(a, 3), [(5,)]),
    "diag_embed": (lambda L, a: L.diag_embed(a, -1, 2, 0), [(2, 3)]),
    "diagflat": (lambda L, a: L.diagflat(a, 2), [(2, 2)]),
    "take": (lambda L, a: L.take(a, L.tensor([[5, -2], [0, 0]])), [(2, 3)]),
    "rot90": (lambda L, a: L.rot90(a, -3, [0, 2]), [(2, 3, 2)]),
    "fliplr": (lambda L, a: a.fliplr(), [(2, 3)]),
    "atleast_3d": (lambda L, a, b: L.atleast_3d([a, b]), [(), (3,)]),
    "hsplit": (lambda L, a: L.hsplit(a, [1, 2]), [(2, 3)]),
    "dstack": (lambda L, a, b: L.dstack([a, b]), [(2, 3), (2, 3)]),
    "column_stack": (lambda L, a, b: L.column_stack([a, b]), [(3,), (3, 2)]),
    "diff": (lambda L, a, b: L.diff(a, 2, -1, append=b), [(2, 3), (2, 2)]),
    "renorm": (lambda L, a: L.renorm(a, 2, 1, 0.7), [(3, 2)]),
    "scatter_reduce_amax": (lambda L, a, s: a.scatter_reduce(1, L.tensor([[0, 1, 1]]), s, "amax", include_self=False),
                            [(2, 3), (1, 3)]),
    "scatter_reduce_mean": (lambda L, a, s: L.scatter_reduce(a, 0, L.tensor([[1, 1], [1, 0]]), s, "mean"),
                            [(2, 3), (2, 2)]),
    "scatter_reduce_prod": (lambda L, a, s: L.scatter_reduce(a, 0, L.tensor([[1, 1], [1, 0]]), s, "prod",
                                                             include_self=False), [(2, 3), (2, 2)]),
    "tensordot": (lambda L, a, b: L.tensordot(a, b, 1), [(2, 3), (3, 2)]),
    "kron": (lambda L, a, b: L.kron(a, b), [(2,), (2, 3)]),
    "cross": (lambda L, a, b: L.cross(a, b, dim=-1), [(2, 3), (2, 3)]),
    "inner": (lambda L, a, b: a.inner(b), [(2, 3), (3,)]),
    "vdot": (lambda L, a, b: L.vdot(a, b), [(3,), (3,)]),
    "addmv": (lambda L, i, m, v: L.addmv(i, m, v, beta=2, alpha=0.5), [(), (2, 3), (3,)]),
    "addr": (lambda L, i, a, b: i.addr(a, b, alpha=2), [(2, 3), (2,), (3,)]),
    "addbmm": (lambda L, i, a, b: L.addbmm(i, a, b, beta=0.5), [(2, 2), (3, 2, 2), (3, 2, 2)]),
    "matrix_power": (lambda L, a: L.matrix_power(a, 3), [(2, 2)]),
}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")
@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_matches_pytorch(name):
    import torch
    fn, shapes = TORCH_CASES[name]
    arrays = [np.random.default_rng(i + 7).standard_normal(s) for i, s in enumerate(shapes)]
    ours = [tinytorch.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    got, want = fn(tinytorch, *ours), fn(torch, *theirs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype) == str(w.dtype)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12, atol=1e-12)
    weights = [np.random.default_rng(99 + k).standard_normal(tuple(w.shape)) for k, w in enumerate(want)]
    sum(((g * tinytorch.tensor(c)).sum() for g, c in zip(got, weights)), tinytorch.tensor(0.0)).backward()
    sum(((w * torch.tensor(c)).sum() for w, c in zip(want, weights)), torch.tensor(0.0)).backward()
    for o, t in zip(ours, theirs):
        if t.grad is None:
            assert o.grad is None or not o.grad.numpy().any()
        else:
            np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="compares with PyTorch")
def test_integer_and_edge_results_match_pytorch():
    import torch
    calls = [
        lambda L: L.vander(L.tensor([1, 2, 3], dtype=L.int32), 3),
        lambda L: L.diff(L.tensor([True, False, True])),
        lambda L: L.tril_indices(3, 4, 1),
        lambda L: L.triu_indices(4, 3, -1, dtype=L.int32),
        lambda L: L.combinations(L.tensor([1, 2, 3]), 0),
        lambda L: L.block_diag(L.tensor(1), L.tensor([[2, 3]], dtype=L.int32), L.tensor([4.5])),
        lambda L: L.tensor([[5, 1], [2, 8]]).scatter_reduce(0, L.tensor([[1, 1], [1, 0]]), L.tensor([[-3, 4], [7, 2]]),
                                                           "mean"),
        lambda L: L.kron(L.tensor([[1, 2]]), L.tensor([[3], [4]])),
        lambda L: L.matrix_power(L.tensor([[1, 1], [1, 0]]), 0),
        lambda L: L.cross(L.tensor([[1, 2, 3]]), L.tensor([[4, 5, 6]]), dim=1),
    ]
    for call in calls:
        got, want = call(tinytorch), call(torch)
        assert tuple(got.shape) == tuple(want.shape) and str(got.dtype) == str(want.dtype)
        assert got.tolist() == want.tolist()
    # (vander's values only: PyTorch's own backward of vander fails, an in-place cumprod it then differentiates)
    x = np.array([1.5, -2.0, 0.25])
    np.testing.assert_allclose(tinytorch.vander(tinytorch.tensor(x), 4, increasing=True).numpy(),
                               torch.vander(torch.tensor(x), 4, increasing=True).numpy(), rtol=1e-15)
    # src larger than index takes part with its leading block only (PyTorch's backward mis-shapes that gradient)
    src = np.arange(6.0).reshape(2, 3)
    for reduce in ("sum", "mean", "amin"):
        np.testing.assert_allclose(
            tinytorch.scatter_reduce(tinytorch.zeros(2, 3, dtype=tinytorch.float64), 0, tinytorch.tensor([[1, 1]]),
                                     tinytorch.tensor(src), reduce).numpy(),
            torch.scatter_reduce(torch.zeros(2, 3, dtype=torch.float64), 0, torch.tensor([[1, 1]]), torch.tensor(src),
                                 reduce).numpy())
    shapes = ((2, 1, 3), (4, 1), 1)
    assert tuple(tinytorch.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))
    s_ours, s_theirs = tinytorch.empty_strided((2, 3), (1, 2)), torch.empty_strided((2, 3), (1, 2))
    assert s_ours.stride() == s_theirs.stride() and s_ours.is_contiguous() == s_theirs.is_contiguous()
