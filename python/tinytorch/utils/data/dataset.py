"""Datasets: the map-style Dataset protocol, IterableDataset, TensorDataset, Subset, ConcatDataset, random_split."""
from __future__ import annotations

import bisect
import math
import warnings
from typing import Generic, Iterator, Sequence, TypeVar

from ..._tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "Subset", "ConcatDataset", "ChainDataset",
           "random_split"]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses implement __getitem__(index) and usually __len__."""

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A stream-style dataset: subclasses implement __iter__."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset[tuple]):
    """Samples are tuples of the i-th rows of the given tensors (all with the same first dimension)."""

    def __init__(self, *tensors: Tensor) -> None:
        assert all(tensors[0].size(0) == t.size(0) for t in tensors), "Size mismatch between tensors"
        self.tensors = tensors

    def __getitem__(self, index) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset[T_co]):
    """Samples are tuples (positional datasets) or dicts (keyword datasets) of the i-th sample of each dataset."""

    def __init__(self, *args: Dataset, **kwargs: Dataset) -> None:
        if args:
            if kwargs:
                raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/"
                                 "output, but both types are given.")
            self._length = len(args[0])
            if any(self._length != len(dataset) for dataset in args):
                raise ValueError("Size mismatch between datasets")
            self.datasets = args
        elif kwargs:
            tmp = list(kwargs.values())
            self._length = len(tmp[0])
            if any(self._length != len(dataset) for dataset in tmp):
                raise ValueError("Size mismatch between datasets")
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: dataset[index] for k, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self) -> int:
        return self._length


class Subset(Dataset[T_co]):
    """The samples of `dataset` at `indices`."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """Datasets one after another."""

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)
        assert len(self.datasets) > 0, "datasets should not be an empty iterable"
        for d in self.datasets:
            assert not isinstance(d, IterableDataset), "ConcatDataset does not support IterableDataset"
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (chained lazily, for streams)."""

    def __init__(self, datasets) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            assert isinstance(d, IterableDataset), "ChainDataset only supports IterableDataset"
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            assert isinstance(d, IterableDataset), "ChainDataset only supports IterableDataset"
            total += len(d)
        return total


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator=None) -> list[Subset]:
    """Split into non-overlapping random subsets of the given lengths (or fractions summing to 1)."""
    from ..._creation import randperm
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(len(dataset) * frac)))
        remainder = len(dataset) - sum(subset_lengths)
        # the leftover items go one each to the splits in turn
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()
    out, offset = [], 0
    for n in lengths:
        out.append(Subset(dataset, indices[offset:offset + n]))
        offset += n
    return out
