"""Fetchers: turn one index (or a batch of indices) from the sampler into collated data, for map-style
and iterable datasets alike (PyTorch's _utils/fetch.py); the same code runs in the main process and in
workers."""
from __future__ import annotations

from typing import Any, Callable


class _MapDatasetFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        from ..dataset import TensorDataset
        from .collate import default_collate
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        # A TensorDataset batch with default_collate is one gather per tensor: the same batch as a getitem
        # per sample and a stack, without them.
        self._gather = auto_collation and type(dataset) is TensorDataset and collate_fn is default_collate

    def fetch(self, possibly_batched_index: Any) -> Any:
        if self._gather:
            from .... import tensor
            idx = tensor(list(possibly_batched_index))
            return [t[idx] for t in self.dataset.tensors]
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            if getitems is not None:
                data = getitems(possibly_batched_index)
            else:
                data = [self.dataset[i] for i in possibly_batched_index]
        else:
            data = self.dataset[possibly_batched_index]
        return self.collate_fn(data)


class _IterableDatasetFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.dataset_iter = iter(dataset)
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.ended = False

    def fetch(self, possibly_batched_index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in possibly_batched_index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if not data or (self.drop_last and len(data) < len(possibly_batched_index)):
                raise StopIteration
        else:
            data = next(self.dataset_iter)
        return self.collate_fn(data)


class _DatasetKind:
    Map = 0
    Iterable = 1

    @staticmethod
    def create_fetcher(kind: int, dataset: Any, auto_collation: bool, collate_fn: Callable, drop_last: bool):
        cls = _MapDatasetFetcher if kind == _DatasetKind.Map else _IterableDatasetFetcher
        return cls(dataset, auto_collation, collate_fn, drop_last)
