"""Gradient clipping: clip_grad_norm_ (with PyTorch's arithmetic), clip_grads_with_norm_ and clip_grad_value_."""
from __future__ import annotations

import math
import warnings
from typing import Iterable

import numpy as np

from ... import _C
from ..._device import cuda_context, cupy, move
from ..._meta import MetaArray, namespace as meta_namespace
from ..._tensor import Tensor, _wrap

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _xp(a):
    if type(a) is np.ndarray:
        return np
    return meta_namespace if type(a) is MetaArray else cupy()


def _array_norm(a, norm_type: float):
    """The vector norm of an array as a 0-d array on its device, accumulated in the array's dtype."""
    xp = _xp(a)
    flat = a.reshape(-1)
    if norm_type == math.inf:
        return xp.abs(flat).max() if flat.size else xp.zeros((), a.dtype)
    if norm_type == -math.inf:
        return xp.abs(flat).min() if flat.size else xp.zeros((), a.dtype)
    if norm_type == 2.0:
        # dot is one BLAS pass with no temporary, unlike (a * a).sum().
        return xp.sqrt(xp.dot(flat, flat)) if flat.dtype.kind == "f" and flat.dtype.itemsize >= 4 \
            else xp.sqrt((flat.astype(np.float32) ** 2).sum()).astype(a.dtype)
    if norm_type == 0:
        return (flat != 0).sum().astype(a.dtype)
    return (xp.abs(flat) ** norm_type).sum() ** (1.0 / norm_type)


def _grads(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p._grad for p in parameters if p._grad is not None]


def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The norm of the norms of `tensors` (as if they were concatenated into one vector)."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = [t for t in tensors if t is not None]
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return _wrap(np.array(0.0, dtype=np.float32))
    first = tensors[0]._data
    dev = tensors[0].device
    if getattr(tensors[0], "_placements", None) is not None:
        return _dtensor_total_norm(tensors, norm_type, error_if_nonfinite)
    if norm_type == 2.0 and _foreach_ok(tensors):
        # Every norm in one C++ pass over the pool (torch._foreach_norm), then the norm of the norms.
        norms = np.empty(len(tensors), first.dtype)
        _C._cpu.foreach_norm([t._data for t in tensors], norms)
        return _finish_total_norm(np, norms, norm_type, error_if_nonfinite)
    norms = []
    for t in tensors:
        with cuda_context(t.device):
            norms.append(move(_array_norm(t._data, norm_type).reshape(1), dev))
    xp = _xp(first)
    with cuda_context(dev):
        stacked = xp.concatenate([n.astype(first.dtype, copy=False) for n in norms])
        return _finish_total_norm(xp, stacked, norm_type, error_if_nonfinite)


def _foreach_ok(tensors: list) -> bool:
    """C-contiguous NumPy arrays of one float dtype (float32 or float64): what the foreach kernels take."""
    dt = tensors[0]._data.dtype
    return dt in _FOREACH_DTYPES and all(
        type(t._data) is np.ndarray and t._data.dtype == dt and t._data.flags.c_contiguous for t in tensors)


_FOREACH_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _finish_total_norm(xp, norms, norm_type: float, error_if_nonfinite: bool) -> Tensor:
    """The total norm from the per-tensor norms (a 1-D array of their dtype)."""
    total = xp.asarray(_array_norm(norms, norm_type), dtype=norms.dtype)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`")
    return _wrap(total)


def _dtensor_total_norm(tensors: list, norm_type: float, error_if_nonfinite: bool) -> Tensor:
    """The total norm of DTensors (FSDP's sharded gradients, FSDP x TP's 2-d ones, on one mesh or several
    slices of one): each rank's pieces contribute their p-th powers (or their max for inf), reduced over exactly
    the mesh dims that shard them (one all-reduce per mesh dim, of a value per layout); replicas count once."""
    from ...distributed import distributed_c10d as c10d
    from ...distributed.tensor._api import DTensor
    from ...distributed.tensor.placement_types import Replicate
    if not all(isinstance(t, DTensor) for t in tensors):
        raise RuntimeError("clip_grad_norm_: got a mix of Tensor and DTensor gradients; make every parameter a "
                           "DTensor (fully_shard or parallelize_module the whole model)")
    meshes: list = []  # in order of first appearance: the same on every rank
    for t in tensors:
        if all(t._mesh != m for m in meshes):
            meshes.append(t._mesh)
    inf = norm_type in (math.inf, -math.inf)
    combine = (max if norm_type == math.inf else min) if inf else sum
    power = 1.0 if inf or norm_type == 0 else norm_type
    neutral = -math.inf if norm_type == math.inf else math.inf if inf else 0.0
    by_layout: dict = {}  # (mesh, the mesh dims sharding the tensor) -> its pieces' contributions on this rank
    replicated = []
    for t in tensors:
        m = next(i for i, mesh in enumerate(meshes) if mesh == t._mesh)
        dims = tuple(d for d, p in enumerate(t._placements) if not isinstance(p, Replicate))
        n = float(_array_norm(t._data, norm_type)) ** power if t._data.size or not inf else neutral
        (by_layout.setdefault((m, dims), []) if dims else replicated).append(n)
    layouts = sorted(by_layout)  # the same on every rank: every rank has the same parameters
    buf = np.array([combine(by_layout[k]) for k in layouts], dtype=np.float64)
    op = c10d.ReduceOp.MAX if norm_type == math.inf else c10d.ReduceOp.MIN if inf else c10d.ReduceOp.SUM
    for m, mesh in enumerate(meshes):
        for d in range(mesh.ndim):
            rows = [i for i, (mk, dims) in enumerate(layouts) if mk == m and d in dims]
            if rows:
                part = np.ascontiguousarray(buf[rows])
                c10d.all_reduce(part, op=op, group=mesh.get_group(d))
                buf[rows] = part
    mesh = meshes[0]
    value = combine([neutral] + [float(v) for v in buf] + replicated)
    if not inf and norm_type != 0:
        value = value ** (1.0 / norm_type)
    xp = _xp(tensors[0]._data)
    total = xp.asarray(value, dtype=tensors[0]._data.dtype)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`")
    return DTensor._make(total, mesh, tuple(Replicate() for _ in range(mesh.ndim)), ())


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale all gradients together so that their total norm is at most max_norm; return the total norm."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        parameters = list(parameters)  # a generator would be exhausted by the norm pass
    grads = _grads(parameters)
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grads_with_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the gradients by min(max_norm / (total_norm + 1e-6), 1): clip_grad_norm_'s second half, for a total
    norm computed elsewhere (get_total_norm over several groups, or across ranks)."""
    grads = _grads(parameters)
    if not grads:
        return
    if not isinstance(total_norm, Tensor):
        total_norm = _wrap(np.asarray(total_norm, dtype=grads[0]._data.dtype))
    max_norm = float(max_norm)
    tn = total_norm._data
    xp = _xp(tn)
    # PyTorch multiplies by min(max_norm / (norm + 1e-6), 1) unconditionally (no host sync on the norm).
    coef = xp.minimum(xp.asarray(max_norm, dtype=tn.dtype) / (tn + tn.dtype.type(1e-6)), tn.dtype.type(1.0))
    if xp is np and _foreach_ok(grads) and all(g._data.flags.writeable for g in grads):
        _C._cpu.foreach_mul_([g._data for g in grads], float(coef))  # torch._foreach_mul_
        for g in grads:
            g._bump_version()
        return
    for g in grads:
        with cuda_context(g.device):
            c = coef if g.device == total_norm.device else move(coef, g.device)
            _xp(g._data).multiply(g._data, c.astype(g._data.dtype, copy=False), out=g._data)
        g._bump_version()


def clip_grad_norm(parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated alias of clip_grad_norm_."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        _xp(g._data).clip(g._data, -clip_value, clip_value, out=g._data)
        g._bump_version()
