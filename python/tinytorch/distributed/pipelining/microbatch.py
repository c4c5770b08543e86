"""Splitting a batch into microbatches and merging the outputs back, as torch.distributed.pipelining.microbatch.

Arguments are walked through nested tuples, lists and dicts; each tensor leaf is split with `tensor_split` along
the dim its `TensorChunkSpec` names (dim 0 by default), and any other leaf (or a leaf marked `_Replicate`) is
handed unchanged to every microbatch.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ... import _tensor
from ..._ops import shape as _shape

__all__ = ["TensorChunkSpec", "split_args_kwargs_into_chunks", "merge_chunks"]

logger = logging.getLogger(__name__)

# Dimension split when the caller gives no chunk spec.
DEFAULT_CHUNK_DIM = 0


class TensorChunkSpec:
    """How to split (and merge) one tensor argument: along dim `split_dim`."""

    def __init__(self, split_dim: int) -> None:
        self.split_dim = split_dim

    def __repr__(self) -> str:
        return f"{self.__class__.__module__}.{self.__class__.__name__}({self.split_dim})"

    def __str__(self) -> str:
        return f"TensorChunkSpec({self.split_dim})"

    @staticmethod
    def from_tuple(chunk_dims: Tuple[int, ...]) -> Tuple["TensorChunkSpec", ...]:
        """One spec per positional argument, from a tuple of split dims."""
        return tuple(TensorChunkSpec(d) for d in chunk_dims)

    @staticmethod
    def from_dict(chunk_dims: Dict[str, int]) -> Dict[str, "TensorChunkSpec"]:
        """One spec per keyword argument, from a dict of split dims."""
        return {k: TensorChunkSpec(d) for k, d in chunk_dims.items()}


class _Replicate:
    """Chunk-spec marker: give the whole value to every microbatch."""


class _CustomReducer:
    """Merge spec that folds the microbatches' values with `reduce_fn`, starting from `init_value`."""

    def __init__(self, init_value: Any, reduce_fn: Callable[[Any, Any], Any]) -> None:
        self.init_value = init_value
        self.reduce_fn = reduce_fn


def _is_tensor(x: Any) -> bool:
    return isinstance(x, _tensor.Tensor)


def _flatten(x: Any) -> Tuple[List[Any], Any]:
    """Leaves of nested tuples/lists/dicts, and a structure `_unflatten` rebuilds from new leaves."""
    if isinstance(x, (tuple, list)):
        leaves: List[Any] = []
        subs = []
        for v in x:
            lv, sv = _flatten(v)
            leaves.extend(lv)
            subs.append((len(lv), sv))
        return leaves, (type(x), subs)
    if isinstance(x, dict):
        leaves, subs = [], []
        for k, v in x.items():
            lv, sv = _flatten(v)
            leaves.extend(lv)
            subs.append((k, len(lv), sv))
        return leaves, (dict, subs)
    return [x], None


def _unflatten(leaves: Sequence[Any], structure: Any) -> Any:
    if structure is None:
        return leaves[0]
    kind, subs = structure
    if kind is dict:
        out, i = {}, 0
        for k, n, s in subs:
            out[k] = _unflatten(leaves[i:i + n], s)
            i += n
        return out
    items, i = [], 0
    for n, s in subs:
        items.append(_unflatten(leaves[i:i + n], s))
        i += n
    return kind(items) if kind in (tuple, list) else kind(*items)


def _chunked_leaves(value: Any, spec: Any) -> List[Tuple[Any, Optional[int]]]:
    """(leaf, split dim or None to replicate) for every leaf of one argument."""
    leaves, _ = _flatten(value)
    spec_leaves, _ = _flatten(spec)
    if len(spec_leaves) == 1 and len(leaves) != 1:
        spec_leaves = spec_leaves * len(leaves)
    if len(leaves) != len(spec_leaves):
        raise ValueError(f"Argument value {value} did not have the same number of values as as chunk spec {spec}")
    out = []
    for v, s in zip(leaves, spec_leaves):
        if s is _Replicate or isinstance(s, _Replicate) or s is None or not _is_tensor(v):
            out.append((v, None))
        elif isinstance(s, TensorChunkSpec):
            out.append((v, s.split_dim))
        else:
            raise TypeError(f"Unrecognized chunk spec: {s}")
    return out


def _number_of_chunks(named: List[Tuple[str, List[Tuple[Any, Optional[int]]]]], chunks: int) -> int:
    """As PyTorch: the first tensor may lower the count to its size (with a warning); a later one may not."""
    first = True
    for name, leaves in named:
        for v, dim in leaves:
            if dim is None:
                continue
            size = v.size(dim)
            if size < chunks:
                if not first:
                    raise RuntimeError(f"Arg {name} on chunking dimension has a size of {size}, smaller than the "
                                       f"number of chunks {chunks}. The number of chunks cannot be reduced because "
                                       "other arguments have bigger chunk-dimension sizes. Please adjust your "
                                       "num_chunks setting.")
                logger.warning("Tensor size on chunking dimension is %s, downsizing the number of chunks from %s "
                               "to %s.", size, chunks, size)
                chunks = size
            first = False
    return chunks


def _split(value: Any, leaves: List[Tuple[Any, Optional[int]]], chunks: int) -> List[Any]:
    """`value` split into `chunks` values of the same structure."""
    parts = [[v] * chunks if dim is None else list(_shape.tensor_split(v, chunks, dim)) for v, dim in leaves]
    structure = _flatten(value)[1]
    return [_unflatten([p[c] for p in parts], structure) for c in range(chunks)]


def split_args_kwargs_into_chunks(
    args: Tuple[Any, ...],
    kwargs: Optional[Dict[str, Any]],
    chunks: int,
    args_chunk_spec: Optional[Tuple[Any, ...]] = None,
    kwargs_chunk_spec: Optional[Dict[str, Any]] = None,
) -> Tuple[List[Tuple[Any, ...]], List[Dict[str, Any]]]:
    """Split positional and keyword arguments into `chunks` microbatches (lists of args tuples and kwargs dicts).

    Tensors are split with `tensor_split` along their spec's dim (dim 0 by default), so the last chunks may be one
    row shorter; non-tensors are replicated. If the first tensor is shorter than `chunks` along its dim, the
    number of chunks drops to its size (with a warning), as in PyTorch."""
    kwargs = kwargs or {}
    if args_chunk_spec is None:
        args_chunk_spec = (TensorChunkSpec(DEFAULT_CHUNK_DIM),) * len(args)
    if kwargs_chunk_spec is None:
        kwargs_chunk_spec = dict.fromkeys(kwargs, TensorChunkSpec(DEFAULT_CHUNK_DIM))
    if len(args_chunk_spec) != len(args):
        raise ValueError(f"args_chunk_spec has {len(args_chunk_spec)} entries but {len(args)} positional arguments "
                         "were given")
    missing = set(kwargs) - set(kwargs_chunk_spec)
    if missing:
        raise ValueError(f"kwargs_chunk_spec has no entry for keyword argument(s) {sorted(missing)}")
    named = [(str(i), _chunked_leaves(a, args_chunk_spec[i])) for i, a in enumerate(args)]
    named += [(k, _chunked_leaves(v, kwargs_chunk_spec[k])) for k, v in kwargs.items()]
    n = _number_of_chunks(named, chunks)
    arg_parts = [_split(a, leaves, n) for a, (_, leaves) in zip(args, named)]
    kwarg_parts = {k: _split(v, leaves, n) for (k, v), (_, leaves) in zip(kwargs.items(), named[len(args):])}
    return ([tuple(p[c] for p in arg_parts) for c in range(n)],
            [{k: p[c] for k, p in kwarg_parts.items()} for c in range(n)])


def merge_chunks(chunks: List[Any], chunk_spec: Any) -> Any:
    """Merge microbatch outputs into one batch output: tensors are concatenated along their spec's dim (dim 0 when
    `chunk_spec` is None), a `_CustomReducer` folds the values, and other values must agree and are kept once."""
    if not chunks:
        raise ValueError("merge_chunks: no chunks to merge")
    if chunk_spec is not None:
        spec_leaves, _ = _flatten(chunk_spec)
    else:
        spec_leaves = [TensorChunkSpec(DEFAULT_CHUNK_DIM)] * len(_flatten(chunks[0])[0])
    structure = _flatten(chunks[0])[1]
    flat = []
    for c in chunks:
        leaves, _ = _flatten(c)
        if len(leaves) != len(spec_leaves):
            raise ValueError(f"Chunk {c} did not match chunk spec {chunk_spec}")
        flat.append(leaves)
    merged = []
    for i, spec in enumerate(spec_leaves):
        values = [f[i] for f in flat]
        if isinstance(spec, TensorChunkSpec) and _is_tensor(values[0]):
            merged.append(_shape.cat(values, dim=spec.split_dim))
        elif isinstance(spec, _CustomReducer):
            acc = spec.init_value
            for v in values:
                acc = spec.reduce_fn(acc, v)
            merged.append(acc)
        else:
            merged.append(values[0])
    return _unflatten(merged, structure)
