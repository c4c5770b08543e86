"""torch.functional: the home PyTorch gives some of its top-level functions (torch.functional.einsum is
torch.einsum), for code that imports them from there."""
from . import (atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_shapes, broadcast_tensors,  # noqa: F401
               cartesian_prod, cdist, chain_matmul, einsum, istft, meshgrid, norm, split, stft, tensordot, unique,
               unique_consecutive, unravel_index)
from .nn import functional as F  # noqa: F401

__all__ = ["atleast_1d", "atleast_2d", "atleast_3d", "block_diag", "broadcast_shapes", "broadcast_tensors",
           "cartesian_prod", "cdist", "chain_matmul", "einsum", "istft", "meshgrid", "norm", "split", "stft",
           "tensordot", "unique", "unique_consecutive", "unravel_index"]
