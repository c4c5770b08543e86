"""Autocast's state and cast policy, keyed by PyTorch's op names (the user-facing context manager is
tinytorch.amp.autocast_mode).

Every op PyTorch autocasts starts with one flag test, and only when it is set goes through `dispatch`:

    def conv2d(input, weight, bias=None, ...):
        if _autocast.active:
            return _autocast.dispatch("conv2d", conv2d, input, weight, bias, ...)
        ...

`dispatch` looks up the op's policy for the device of its first tensor argument, casts the tensor
arguments (inside lists too), and calls the op again with `active` cleared for this thread, so the op's inner
calls are not autocast (PyTorch's autocast wrappers exclude the autocast key the same way). Policies, from PyTorch's
"Autocast Op Reference" and its autocast kernels:
  lower  - floating inputs (not float64) become the region's dtype (bfloat16 on CPU, float16 on CUDA),
  fp32   - floating inputs become float32,
  promote - floating inputs become the widest floating type among them (float64 ignored),
  banned - raise (binary_cross_entropy on CUDA).
Ops called with an explicit `dtype=` are left alone. Casts of float32 leaves that require grad to the
region's dtype are cached until the outermost region exits, so a weight used by several ops is cast once.

The state is per thread, as PyTorch's: a thread starts with autocast off, its own dtypes and an empty cache,
whatever other threads do (the backward's worker threads included). `active` reads this thread's flag.
"""
from __future__ import annotations

import sys
import threading
import types

import numpy as np

from ._C import _grad_enabled
from ._dtype import bfloat16, float16, float32, float64

DEVICES = ("cpu", "cuda")


class _State(threading.local):
    """One thread's autocast state (threading.local runs __init__ afresh in every thread)."""

    def __init__(self) -> None:
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {"cpu": bfloat16, "cuda": float16}
        self.cache_enabled = True
        self.nesting = 0
        self.cache: dict = {}  # id(leaf) -> (leaf, cast): cleared when the outermost region exits
        self.active = False  # autocast on for some device, and not inside an op that dispatch already cast for


_tls = _State()


class _AutocastModule(types.ModuleType):
    @property
    def active(self) -> bool:
        """The one test every autocast op makes: autocast is on in this thread for some device."""
        return _tls.active


sys.modules[__name__].__class__ = _AutocastModule

# ------------------------------------------------------------------ op lists (PyTorch's names)

_CONV = ("conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
         "convolution", "_convolution", "prelu")

LOWER = {
    "cuda": frozenset(_CONV + (
        "__matmul__", "__rmatmul__", "addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul",
        "multi_dot", "linalg_multi_dot", "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear",
        "GRUCell", "LSTMCell", "RNNCell", "gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell",
        "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
        "_native_multi_head_attention", "_cudnn_rnn", "lstm", "gru", "rnn_tanh", "rnn_relu")),
    "cpu": frozenset(_CONV + (
        "__matmul__", "__rmatmul__", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm", "addbmm", "linear",
        "matmul", "einsum", "scaled_dot_product_attention", "_native_multi_head_attention", "mkldnn_rnn",
        "mkldnn_rnn_layer", "lstm", "rnn_tanh", "rnn_relu")),  # CPU GRU and the cells stay in their input type
}

FP32 = {
    "cuda": frozenset((
        "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "pow", "acos", "asin", "cosh", "sinh", "tan", "erfinv",
        "exp", "expm1", "log", "log10", "log1p", "log2", "reciprocal", "rsqrt", "cdist", "cosine_similarity",
        "dist", "pdist", "norm", "renorm", "normalize", "group_norm", "layer_norm", "native_layer_norm",
        "softplus", "softmax", "log_softmax", "softmin", "sum", "prod", "cumsum", "logsumexp", "huber_loss",
        "cumprod", "linalg_vector_norm", "linalg_matrix_norm", "frobenius_norm", "nuclear_norm",
        "binary_cross_entropy_with_logits", "cosine_embedding_loss", "cross_entropy", "cross_entropy_loss",
        "hinge_embedding_loss", "kl_div", "l1_loss", "margin_ranking_loss", "mse_loss", "multilabel_margin_loss",
        "multi_margin_loss", "nll_loss", "nll_loss2d", "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss",
        "triplet_margin_loss", "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
        "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d", "upsample_linear1d",
        "upsample_bilinear2d", "_upsample_bilinear2d_aa", "upsample_trilinear3d", "upsample_bicubic2d",
        "_upsample_bicubic2d_aa", "interpolate")),
    "cpu": frozenset((
        "avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile", "nanquantile", "stft",
        "cdist", "trace", "view_as_complex", "cholesky", "cholesky_inverse", "cholesky_solve", "inverse",
        "lu_solve", "orgqr", "ormqr", "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d",
        "adaptive_avg_pool3d", "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
        "replication_pad3d", "mse_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss",
        "poisson_nll_loss", "cross_entropy", "cross_entropy_loss", "smooth_l1_loss", "huber_loss", "l1_loss",
        "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "ctc_loss",
        "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits", "fft_fft", "fft_ifft", "fft_fft2",
        "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft", "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn",
        "fft_irfftn", "fft_hfft", "fft_ihfft", "linalg_cond", "linalg_matrix_rank", "linalg_solve",
        "linalg_cholesky", "linalg_svdvals", "linalg_eigvals", "linalg_eigvalsh", "linalg_inv",
        "linalg_householder_product",
        "linalg_tensorinv", "linalg_tensorsolve", "fake_quantize_per_tensor_affine", "geqrf", "_lu_with_info", "qr",
        "svd", "triangular_solve", "fractional_max_pool2d", "fractional_max_pool3d", "adaptive_max_pool3d",
        "multilabel_margin_loss_forward", "linalg_qr", "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh",
        "linalg_lstsq", "linalg_inv_ex")),
}

PROMOTE = {
    "cuda": frozenset(("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
                       "grid_sample", "index_put", "scatter_add", "tensordot")),
    "cpu": frozenset(("stack", "cat", "index_copy")),
}

BANNED = {
    "cuda": {"binary_cross_entropy": (
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
        "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
        "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
        "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
        "safe to autocast.")},
    "cpu": {},
}


def policy(op: str, device_type: str) -> str | None:
    """'lower', 'fp32', 'promote', 'banned' or None (runs in its inputs' types) for op on device_type."""
    if op in LOWER.get(device_type, ()):
        return "lower"
    if op in FP32.get(device_type, ()):
        return "fp32"
    if op in PROMOTE.get(device_type, ()):
        return "promote"
    if op in BANNED.get(device_type, ()):
        return "banned"
    return None


# ------------------------------------------------------------------ state (what tinytorch.autocast sets)

def _refresh() -> None:
    _tls.active = _tls.enabled["cpu"] or _tls.enabled["cuda"]


def _check_device(device_type: str) -> None:
    if device_type not in DEVICES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for device_type (no argument: CUDA, PyTorch's legacy default)."""
    if device_type is None:
        return _tls.enabled["cuda"]
    _check_device(device_type)
    return _tls.enabled[device_type]


def set_autocast_enabled(device_type, enabled: bool | None = None) -> None:
    """Turn autocast on/off for device_type (one bool argument: CUDA, PyTorch's legacy form)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _check_device(device_type)
    _tls.enabled[device_type] = bool(enabled)
    _refresh()


def get_autocast_dtype(device_type: str):
    """The dtype autocast's 'lower' ops run in on device_type."""
    _check_device(device_type)
    return _tls.dtype[device_type]


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast's 'lower' ops run in on device_type."""
    _check_device(device_type)
    _tls.dtype[device_type] = dtype


def is_autocast_cache_enabled() -> bool:
    """Whether casts of leaves that require grad are cached inside autocast regions."""
    return _tls.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn the autocast cast cache on/off."""
    _tls.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop every cached cast (done when the outermost autocast region exits)."""
    _tls.cache.clear()


def autocast_increment_nesting() -> int:
    """Enter an autocast region; returns the new depth."""
    _tls.nesting += 1
    return _tls.nesting


def autocast_decrement_nesting() -> int:
    """Leave an autocast region; returns the new depth."""
    _tls.nesting -= 1
    return _tls.nesting


# ------------------------------------------------------------------ casting

def _device_type(args) -> str | None:
    from ._tensor import Tensor
    for a in args:
        if isinstance(a, Tensor):
            return "cpu" if type(a._data) is np.ndarray else "cuda"
        if isinstance(a, (list, tuple)):
            d = _device_type(a)
            if d is not None:
                return d
    return None


def _eligible(t, device_type: str) -> bool:
    d = t.dtype
    return d.is_floating_point and d is not float64 and \
        (type(t._data) is np.ndarray) == (device_type == "cpu")


def _cast(t, to, device_type: str):
    from ._tensor import Tensor
    if isinstance(t, Tensor):
        if not _eligible(t, device_type) or t.dtype is to:
            return t
        # Only casts that carry a graph edge are cached: a cast made under no_grad reused later in grad
        # mode would silently cut the weight off from its gradient.
        cacheable = (_tls.cache_enabled and to is _tls.dtype[device_type] and t.dtype is float32
                     and t._requires_grad and t._grad_fn is None and t._base is None and _grad_enabled())
        if cacheable:
            hit = _tls.cache.get(id(t))
            if hit is not None and hit[0] is t:
                return hit[1]
        out = t.to(to)
        if cacheable:
            _tls.cache[id(t)] = (t, out)
        return out
    if isinstance(t, (list, tuple)) and t and any(isinstance(v, Tensor) for v in t):
        return type(t)(_cast(v, to, device_type) for v in t)
    return t


def _promote_type(args, device_type: str):
    """PyTorch's promote policy: float32 if any eligible argument is float32, else the region's dtype."""
    from ._tensor import Tensor
    to = _tls.dtype[device_type]
    for a in args:
        if isinstance(a, (list, tuple)):
            if _promote_type(a, device_type) is float32:
                return float32
        elif isinstance(a, Tensor) and _eligible(a, device_type) and a.dtype is not to:
            if a.dtype is float32 or to is float32:
                return float32
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return to


def cast_args(op: str, *args, device_type: str | None = None) -> tuple:
    """args cast as autocast's policy for op wants them (unchanged when autocast is off for their device)."""
    dev = device_type or _device_type(args)
    if dev is None or not _tls.enabled.get(dev, False):
        return args
    p = policy(op, dev)
    if p is None:
        return args
    if p == "banned":
        raise RuntimeError(BANNED[dev][op])
    to = _tls.dtype[dev] if p == "lower" else float32 if p == "fp32" else _promote_type(args, dev)
    return tuple(_cast(a, to, dev) for a in args)


def dispatch(op: str, fn, *args, **kwargs):
    """Call fn (the op itself) with its tensor arguments cast per op's policy, with autocast off inside
    so that the op's own inner calls keep the types it chose."""
    if kwargs.get("dtype") is None:  # an explicit dtype= makes the op ineligible, as in PyTorch
        if kwargs:
            keys = [k for k, v in kwargs.items() if _is_tensorish(v)]
            cast = cast_args(op, *args, *(kwargs[k] for k in keys))
            args = cast[:len(args)]
            if keys:
                kwargs = {**kwargs, **dict(zip(keys, cast[len(args):]))}
        else:
            args = cast_args(op, *args)
    prev = _tls.active
    _tls.active = False
    try:
        return fn(*args, **kwargs)
    finally:
        _tls.active = prev


def _is_tensorish(v) -> bool:
    from ._tensor import Tensor
    return isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) for x in v))


# ------------------------------------------------------------------ PyTorch's deprecated per-device spellings

def _deprecated(old: str, new: str) -> None:
    import warnings
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.", DeprecationWarning, stacklevel=3)


def get_autocast_gpu_dtype():
    """Deprecated: get_autocast_dtype('cuda')."""
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return _tls.dtype["cuda"]


def get_autocast_cpu_dtype():
    """Deprecated: get_autocast_dtype('cpu')."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return _tls.dtype["cpu"]


def set_autocast_gpu_dtype(dtype) -> None:
    """Deprecated: set_autocast_dtype('cuda', dtype)."""
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    _tls.dtype["cuda"] = dtype


def set_autocast_cpu_dtype(dtype) -> None:
    """Deprecated: set_autocast_dtype('cpu', dtype)."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    _tls.dtype["cpu"] = dtype


def is_autocast_cpu_enabled() -> bool:
    """Deprecated: is_autocast_enabled('cpu')."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return _tls.enabled["cpu"]


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """Deprecated: set_autocast_enabled('cpu', enabled)."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)
