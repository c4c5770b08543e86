"""Ready-made parametrizations (PyTorch's torch.nn.utils.parametrizations): weight_norm, spectral_norm, orthogonal."""
from __future__ import annotations

from ..._tensor import Tensor
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "weight_norm", "spectral_norm"]


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of v over every dim but dim, shaped to broadcast against v (dim == -1: over all of v)."""
    if dim == -1:
        return (v * v).sum().sqrt()
    dims = tuple(d for d in range(v.dim()) if d != dim)
    return (v * v).sum(dims, keepdim=True).sqrt() if dims else v.abs()


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """w = g * v / ||v|| (PyTorch's torch._weight_norm)."""
    return v * (g / _norm_except_dim(v, dim))


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        weight_g = _norm_except_dim(weight, self.dim)
        weight_v = weight
        return weight_g, weight_v


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize module.<name> as g * v / ||v|| (magnitude original0, direction original1)."""
    _weight_norm_mod = _WeightNorm(dim)
    parametrize.register_parametrization(module, name, _weight_norm_mod, unsafe=True)

    def _load_legacy(mod, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # Accept state_dicts saved with the older nn.utils.weight_norm (keys name_g, name_v).
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    module.register_load_state_dict_pre_hook(_load_legacy)
    return module


def _reshape_weight_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """weight as (size of dim, everything else): the matrix whose largest singular value spectral norm divides by."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.dim()) if d != dim))
    return weight.flatten(1)


def _power_iteration(weight_mat: Tensor, u: Tensor, v: Tensor, n: int, eps: float) -> None:
    """n steps of the power method, updating the u and v buffers in place (they live in the state_dict)."""
    from ..._ops.nn import normalize
    from ...autograd.grad_mode import no_grad
    with no_grad():
        for _ in range(n):
            u.copy_(normalize(weight_mat.mv(v), dim=0, eps=eps))
            v.copy_(normalize(weight_mat.mH.mv(u), dim=0, eps=eps))


class _SpectralNorm(Module):
    """W -> W / sigma_max(W), with sigma_max = u^H W v from power-iteration vectors kept as buffers."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        from ..._ops.nn import normalize
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] "
                             f"but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = _reshape_weight_to_matrix(weight.detach(), self.dim)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            # Start from a well-converged estimate so that the first forward already divides by ~sigma_max.
            _power_iteration(weight_mat, self._u, self._v, 15, self.eps)

    def forward(self, weight: Tensor) -> Tensor:
        from ..._ops.nn import normalize
        if weight.dim() == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = _reshape_weight_to_matrix(weight, self.dim)
        if self.training:
            _power_iteration(weight_mat.detach(), self._u, self._v, self.n_power_iterations, self.eps)
        # Clones: backward must see the u, v of this call, not the next call's in-place update.
        u = self._u.clone()
        v = self._v.clone()
        sigma = u.vdot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Reparametrize module.<name> as W / sigma_max(W), sigma_max estimated by power iteration (buffers _u, _v)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


_ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of a's QR decomposition, with columns signed so that R's diagonal is positive (unique Q)."""
    from ... import geqrf, linalg
    x, tau = geqrf(a)
    q = linalg.householder_product(x, tau)
    return q * x.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _is_orthogonal(q: Tensor) -> bool:
    from ... import allclose, eye, finfo
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * finfo(q.dtype).eps
    return allclose(q.mH @ q, eye(k, dtype=q.dtype, device=q.device), atol=eps)


class _Orthogonal(Module):
    """Maps an unconstrained tensor to a matrix (or batch) with orthonormal columns or rows.

    matrix_exp/cayley: exp(A) or the Cayley transform of the skew-Hermitian A built from the lower triangle;
    householder: the product of the Householder reflectors stored below the diagonal. With use_trivialization
    the result is multiplied by the buffer `base`, which right_inverse sets to the assigned matrix.
    """

    def __init__(self, weight: Tensor, orthogonal_map: str, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        from ... import cat, eye, linalg
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map == "householder":
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = linalg.householder_product(A, tau)
            # The diagonal of X picks each column's sign (its integer part: 0 would zero the column).
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        else:
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(*X.shape[:-1], n - k)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == "matrix_exp":
                Q = linalg.matrix_exp(A)
            else:
                Id = eye(n, dtype=A.dtype, device=A.device)
                Q = linalg.solve(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        if getattr(self, "base", None) is not None:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        from ... import bool as bool_, cat, eye, geqrf, no_grad, randn, where
        if tuple(Q.shape) != tuple(self.shape):
            raise ValueError(f"Expected a matrix or batch of matrices of shape {tuple(self.shape)}. "
                             f"Got a tensor of shape {tuple(Q.shape)}.")
        Q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transposed = n < k
        if transposed:
            Q = Q.mT
            n, k = k, n
        with no_grad():
            if not hasattr(self, "base"):
                if self.orthogonal_map != "householder":
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the "
                                              "Cayley parametrizations when use_trivialization=False.")
                # Reflectors of Q's QR with R's diagonal signs stored on the diagonal: forward gives Q back.
                A, tau = geqrf(Q)
                sign = A.diagonal(dim1=-2, dim2=-1).sign()
                new_diag = where(tau == 0.0, -sign, sign).unsqueeze(-2)  # entry (i, i) reads column i
                A = where(eye(n, k, dtype=bool_, device=A.device), new_diag, A)
                return A.mT if transposed else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                # Complete the columns to a square orthogonal base with random directions.
                N = randn(*(Q.shape[:-2] + (n, n - k)), dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            # -Id maps to the identity under every map, so that forward returns base at first.
            rows, cols = Q_init.shape[-2], Q_init.shape[-1]
            return (-eye(rows, cols, dtype=Q_init.dtype, device=Q_init.device)).expand(Q_init.shape).clone()


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain module.<name> to (a batch of) matrices with orthonormal columns or rows."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.dim()} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in _ORTHOGONAL_MAPS:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
