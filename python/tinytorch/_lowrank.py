"""torch.svd_lowrank and torch.pca_lowrank. PyTorch approximates the leading q singular triplets by randomized
subspace iteration; tinytorch takes them from the exact thin SVD (LAPACK through linalg.svd), which is what the
iteration converges to: the same factors up to signs, with the SVD's gradients."""
from __future__ import annotations

from ._tensor import Tensor


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int = 2, M: Tensor | None = None):
    """(U, S, V) with A - M ~= U diag(S) V^T, keeping the q largest singular values (batched over leading dims)."""
    from .linalg import svd
    q = 6 if q is None else q
    m, n = A.shape[-2], A.shape[-1]
    if not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if niter < 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    U, S, Vh = svd(A if M is None else A - M, full_matrices=False)
    return U[..., :q], S[..., :q], Vh[..., :q, :].mT


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2):
    """Principal components of A's rows: svd_lowrank of A less its column means (center=True); q defaults to
    min(6, m, n)."""
    m, n = A.shape[-2], A.shape[-1]
    q = min(6, m, n) if q is None else q
    if not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    return svd_lowrank(A - A.mean(dim=-2, keepdim=True) if center else A, q, niter)
