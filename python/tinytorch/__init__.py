"""tinytorch: a small training runtime with PyTorch's API (`import tinytorch as torch`)."""
from __future__ import annotations

from . import _C  # noqa: F401  (the C++ engine; also registers the Tensor helpers it calls)
import warnings as _warnings

# Small tensors compute through NumPy, which warns on log(0), 0/0, overflow; PyTorch computes the same inf and
# NaN silently (and so do tinytorch's kernels on big tensors). Only NumPy's floating-point warnings raised from
# tinytorch's own modules are silenced: a user's NumPy code keeps its warnings, at no cost per op.
_warnings.filterwarnings("ignore", r"(divide by zero|invalid value|overflow|underflow) encountered",
                         RuntimeWarning, r"tinytorch\.")
from . import _memory
from ._tensor import Size, Tensor
from ._dtype import (bfloat16, dtype, float16, float32, float64, get_default_dtype, int8, int16, int32, int64,
                     promote_types, result_type, set_default_dtype, uint8, uint16, uint32, uint64)
from ._dtype import complex64, complex128, complex64 as cfloat, complex128 as cdouble  # noqa: F811
from ._dtype import bool_ as bool  # noqa: A001  (PyTorch's name)
from ._device import device, get_default_device, set_default_device
from . import _ops  # noqa: F401  (attaches the ops to Tensor)
from ._creation import *  # noqa: F401,F403
from ._creation import __all__ as _creation_all
from ._ops.pointwise import *  # noqa: F401,F403
from ._ops.pointwise import __all__ as _pointwise_all
from ._ops.reduction import (all, amax, amin, any, argmax, argmin, argsort, count_nonzero, cumprod, cumsum,
                             logsumexp, max, mean, min, norm, prod, sort, std, std_mean, sum, topk, var, var_mean)
from ._ops.shape import (broadcast_tensors, broadcast_to, cat, chunk, clone, concat, concatenate, diagonal,
                         flatten, flip, hstack, movedim, narrow, permute, repeat_interleave, reshape, split, squeeze,
                         stack, t, tensor_split, tile, transpose, tril, triu, unbind, unflatten, unsqueeze, vstack,
                         diag, ravel, roll, select, trace, adjoint, atleast_1d, atleast_2d, atleast_3d, block_diag,
                         broadcast_shapes, cartesian_prod, column_stack, combinations, diag_embed, diagflat, diff,
                         dsplit, dstack, empty_strided, fliplr, flipud, hsplit, meshgrid, moveaxis, narrow_copy,
                         renorm, rot90, row_stack, scatter_reduce, swapaxes, swapdims, take, tril_indices,
                         triu_indices, vander, vsplit)
from ._ops.linalg import (addbmm, addmm, addmv, addr, baddbmm, bmm, chain_matmul, cross, dot, einsum, inner, kron,
                          matmul, matrix_power, mm, mv, outer, tensordot, vdot)
from ._ops.indexing import (argwhere, gather, index_add, index_copy, index_fill, index_put, index_select,
                            masked_scatter, masked_select, nonzero, scatter, scatter_add, take_along_dim)
from ._ops.nn import log_softmax, softmax
from ._ops.complex import (angle, complex, conj, conj_physical, is_conj, is_neg, polar, real, imag,  # noqa: A004
                           resolve_conj, resolve_neg, sgn, view_as_complex, view_as_real)
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
                                 set_grad_enabled)
from . import autograd, cuda, utils  # noqa: E402
from . import nn, optim  # noqa: E402
from . import func, futures, jit, multiprocessing, overrides  # noqa: E402
from .func import vmap  # noqa: E402
from . import linalg  # noqa: E402  (torch.linalg)
from . import accelerator  # noqa: E402  (device-generic: torch.accelerator)
from .serialization import load, save  # noqa: E402
from .storage import TypedStorage, UntypedStorage  # noqa: E402

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16

from . import torch_version, version  # noqa: E402
__version__ = torch_version.TorchVersion(version.__version__)  # the API's release, tinytorch's as a label

from ._misc import allclose, compile, equal, get_num_threads, is_tensor, isclose, numel, set_num_threads  # noqa: E402,A004
from ._lowrank import pca_lowrank, svd_lowrank  # noqa: E402

_memory.keep_freed_memory()  # the process keeps freed arrays for the next step (see _memory.py)
_memory.follow_torch_huge_page_policy()

# Mixed precision, backend switches and determinism (PyTorch's top-level names)
from . import _dynamo, _inductor, amp, backends, compiler, cpu, mps, random, xpu  # noqa: E402
from . import _torch_function  # noqa: E402

# PyTorch keeps the subclass protocol's switches in torch._C, where overrides reach for them
_C.DisableTorchFunctionSubclass = _C.DisableTorchFunction = _torch_function.DisableTorchFunctionSubclass
_C._disabled_torch_function_impl = _torch_function._disabled_torch_function_impl
from ._foreach import ops as _foreach_table  # noqa: E402  (torch._foreach_add_ and the rest)
globals().update(_foreach_table)


def _assert(condition, message: str) -> None:
    """torch._assert: assert that survives tracing in PyTorch (here, a plain assert that python -O keeps)."""
    if isinstance(condition, Tensor):
        condition = condition.item()
    if not condition:
        raise AssertionError(message)
from .amp import GradScaler, autocast  # noqa: E402
from .cuda import OutOfMemoryError  # noqa: E402
from ._autocast import (autocast_decrement_nesting, autocast_increment_nesting, clear_autocast_cache,  # noqa: E402
                        get_autocast_cpu_dtype, get_autocast_dtype, get_autocast_gpu_dtype, is_autocast_cache_enabled,
                        is_autocast_cpu_enabled, is_autocast_enabled, set_autocast_cache_enabled,
                        set_autocast_cpu_dtype, set_autocast_cpu_enabled, set_autocast_dtype, set_autocast_enabled,
                        set_autocast_gpu_dtype)
from .backends import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402
from ._deterministic import (are_deterministic_algorithms_enabled, get_deterministic_debug_mode,  # noqa: E402
                             is_deterministic_algorithms_warn_only_enabled, set_deterministic_debug_mode,
                             use_deterministic_algorithms)
from ._ops.loss import bilinear, cosine_similarity, pairwise_distance  # noqa: E402  (torch.* aliases of F.*)
from ._ops.special import *  # noqa: E402,F401,F403
from ._ops.searching import *  # noqa: E402,F401,F403
from ._ops.statistics import *  # noqa: E402,F401,F403
from ._ops.distance import *  # noqa: E402,F401,F403
from ._ops.decompositions import *  # noqa: E402,F401,F403
from ._finfo import *  # noqa: E402,F401,F403
from . import distributions, special, testing  # noqa: E402
from ._ops.activation import (celu, celu_, channel_shuffle, hardshrink, native_channel_shuffle, prelu,  # noqa: E402
                              rrelu, rrelu_, selu, selu_, threshold, threshold_)
from ._ops.conv import conv3d, conv_transpose3d  # noqa: E402
from ._ops.pooling import max_pool3d  # noqa: E402
from ._ops.spectral import *  # noqa: E402,F401,F403
from ._ops.toplevel import *  # noqa: E402,F401,F403
from . import fft  # noqa: E402
from ._ops.tensor_methods import as_strided, frexp, ldexp, layout, msort, positive, strided  # noqa: E402

from . import _dispatch  # noqa: E402

_dispatch.route(globals(), "tinytorch")  # torch.* op functions hand DTensor arguments to DTensor's sharding rules

from . import functional, hub  # noqa: E402,F401  (torch.functional, torch.hub: after the ops they re-export)
