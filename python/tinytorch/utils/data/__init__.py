"""tinytorch.utils.data: datasets, samplers and the DataLoader (PyTorch's torch.utils.data)."""
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split
from .distributed import DistributedSampler
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info", "Dataset", "IterableDataset",
           "TensorDataset", "Subset", "ConcatDataset", "random_split", "DistributedSampler", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler"]
