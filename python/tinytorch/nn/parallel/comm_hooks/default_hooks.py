"""Default DDP communication hooks: plain all-reduce, and all-reduce in float16 / bfloat16."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...._tensor import Tensor, _wrap
from ....distributed import ReduceOp, all_reduce
from ....distributed import distributed_c10d as _c10d
from ....distributed._work import Future
from ..reducer import GradBucket


def _allreduce_fut(process_group: Any, tensor: Tensor) -> Future:
    """Average `tensor` across the group: divide first (avoids overflow in low precision), then sum."""
    pg = _c10d._resolve(process_group)
    tensor._data /= pg.size()
    work = all_reduce(tensor, ReduceOp.SUM, group=pg, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def allreduce_hook(process_group: Any, bucket: GradBucket) -> Future:
    """All-reduce the bucket's flat buffer and average it (what DDP does without a hook)."""
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype: Any, process_group: Any, bucket: GradBucket) -> Future:
    buffer = bucket.buffer()
    pg = _c10d._resolve(process_group)
    compressed = _wrap(buffer._data.astype(dtype))
    compressed._data /= compressed._data.dtype.type(pg.size())
    work = all_reduce(compressed, ReduceOp.SUM, group=pg, async_op=True)

    def decompress(fut: Future) -> Tensor:
        # Decompress in place so no second full-precision buffer is allocated.
        buffer._data[...] = fut.value()[0]._data
        return buffer

    return work.get_future().then(decompress)


def fp16_compress_hook(process_group: Any, bucket: GradBucket) -> Future:
    """Cast the bucket to float16, divide by the world size, all-reduce, and decompress into the bucket."""
    return _compress_hook(np.float16, process_group, bucket)


def bf16_compress_hook(process_group: Any, bucket: GradBucket) -> Future:
    """Cast the bucket to bfloat16, divide by the world size, all-reduce, and decompress into the bucket."""
    import ml_dtypes

    return _compress_hook(ml_dtypes.bfloat16, process_group, bucket)


def fp16_compress_wrapper(hook: Callable[[Any, GradBucket], Future]) -> Callable[[Any, GradBucket], Future]:
    """Wrap `hook` so it runs on a float16 copy of the bucket, cast back into the bucket afterwards."""
    return _wrapper(np.float16, hook)


def bf16_compress_wrapper(hook: Callable[[Any, GradBucket], Future]) -> Callable[[Any, GradBucket], Future]:
    """Wrap `hook` so it runs on a bfloat16 copy of the bucket, cast back into the bucket afterwards."""
    import ml_dtypes

    return _wrapper(ml_dtypes.bfloat16, hook)


def _wrapper(dtype: Any, hook: Callable[[Any, GradBucket], Future]) -> Callable[[Any, GradBucket], Future]:
    def wrapped(state: Any, bucket: GradBucket) -> Future:
        buffer = bucket.buffer()
        bucket.set_buffer(_wrap(buffer._data.astype(dtype)))
        fut = hook(state, bucket)

        def decompress(f: Future) -> Tensor:
            value = f.value()
            value = value[0] if isinstance(value, (list, tuple)) else value
            buffer._data[...] = value._data
            return buffer

        return fut.then(decompress)

    return wrapped
