"""Variable-length sequences for the recurrent layers: pad_sequence, PackedSequence and packing/unpacking.

A PackedSequence's data holds the valid steps time-major (all sequences' step 0, then step 1, ...), with
the batch sorted by decreasing length; batch_sizes[t] says how many sequences are still running at t.
The recurrent layers run it as a padded batch with a validity mask (see tinytorch._ops.rnn).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..._tensor import Tensor

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence",
           "unpad_sequence", "unpack_sequence", "invert_permutation"]


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Packed steps of a batch of variable-length sequences (what pack_padded_sequence returns)."""

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None, sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> "PackedSequence":
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """The same packing with data moved/cast like Tensor.to (indices follow the device)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        si = None if self.sorted_indices is None else self.sorted_indices.to(data.device)
        ui = None if self.unsorted_indices is None else self.unsorted_indices.to(data.device)
        return type(self)(data, self.batch_sizes, si, ui)

    def cpu(self) -> "PackedSequence":
        return self.to("cpu")

    def cuda(self, *args, **kwargs) -> "PackedSequence":
        return self.to("cuda")

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def _tensor(a, device=None) -> Tensor:
    from ..._creation import tensor
    return tensor(a, device=device)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes `permutation` (None stays None): PackedSequence's unsorted_indices."""
    if permutation is None:
        return None
    p = np.asarray(permutation._data.get() if hasattr(permutation._data, "get") else permutation._data)
    out = np.empty_like(p)
    out[p] = np.arange(p.size, dtype=p.dtype)
    return _tensor(out, device=permutation.device)


def _sizes(batch_sizes) -> np.ndarray:
    return np.asarray(batch_sizes._data if isinstance(batch_sizes, Tensor) else batch_sizes, dtype=np.int64)


def _packed_to_padded(data: Tensor, batch_sizes) -> tuple:
    """Packed rows -> a time-major padded tensor (T, B, *) with zeros past each end, and the (T, B) validity mask."""
    from ..._creation import zeros
    from ... import cat
    bs = _sizes(batch_sizes)
    T, B = bs.size, int(bs[0])
    mask = np.arange(B)[None, :] < bs[:, None]
    offsets = np.concatenate([[0], np.cumsum(bs)[:-1]])
    n = int(bs.sum())
    idx = np.where(mask, offsets[:, None] + np.arange(B)[None, :], n).reshape(-1)  # n: an appended zero row
    ext = cat([data, zeros((1,) + tuple(data.shape[1:]), dtype=data.dtype, device=data.device)], 0)
    padded = ext.index_select(0, _tensor(idx, device=data.device))
    return padded.reshape((T, B) + tuple(data.shape[1:])), mask


def _padded_to_packed(padded: Tensor, batch_sizes) -> Tensor:
    """A time-major padded tensor (T, B, *) -> its valid rows, packed."""
    bs = _sizes(batch_sizes)
    T, B = padded.shape[0], padded.shape[1]
    mask = np.arange(B)[None, :] < bs[:, None]
    idx = np.flatnonzero(mask.reshape(-1))
    flat = padded.reshape((T * B,) + tuple(padded.shape[2:]))
    return flat.index_select(0, _tensor(idx, device=padded.device))


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences with the given lengths."""
    lens = np.asarray(lengths._data if isinstance(lengths, Tensor) else lengths, dtype=np.int64).reshape(-1)
    if hasattr(lens, "get"):
        lens = lens.get()
    if enforce_sorted:
        sorted_indices = None
    else:
        order = np.argsort(-lens, kind="stable")
        lens = lens[order]
        sorted_indices = _tensor(order.astype(np.int64), device=input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    batch_size = input.shape[0 if batch_first else 1]
    if lens.size != batch_size:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {lens.size} "
                           f"(batch_size={batch_size})")
    if lens.size and lens.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    if enforce_sorted and lens.size > 1 and (np.diff(lens) > 0).any():
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                           "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                           "sidestep this requirement if you do not need ONNX exportability.")
    if batch_first:
        input = input.transpose(0, 1)
    T = int(lens[0]) if lens.size else 0
    if T > input.shape[0]:
        raise RuntimeError(f"Expected sequence length to be larger than or equal to {T}, but got {input.shape[0]}")
    batch_sizes = (lens[None, :] > np.arange(T)[:, None]).sum(1).astype(np.int64)
    data = _padded_to_packed(input[:T], batch_sizes)
    return PackedSequence(data, _tensor(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo pack_padded_sequence: (padded batch, lengths), in the caller's original batch order."""
    data, batch_sizes, _, unsorted_indices = sequence
    bs = _sizes(batch_sizes)
    padded, mask = _packed_to_padded(data, bs)
    T = bs.size
    if total_length is not None:
        if total_length < T:
            raise ValueError(f"Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {T}")
        if total_length > T:
            from ..functional import pad
            padded = pad(padded, [0, 0] * (padded.dim() - 1) + [0, total_length - T])
            mask = np.concatenate([mask, np.zeros((total_length - T, mask.shape[1]), bool)], 0)
    if padding_value != 0:
        fill = (~mask).reshape(mask.shape + (1,) * (padded.dim() - 2)) * float(padding_value)
        padded = padded + _tensor(fill.astype(padded._data.dtype), device=padded.device)
    lengths = mask.sum(0).astype(np.int64)
    if unsorted_indices is not None:
        padded = padded.index_select(1, unsorted_indices)
        ui = np.asarray(unsorted_indices._data.get() if hasattr(unsorted_indices._data, "get")
                        else unsorted_indices._data)
        lengths = lengths[ui]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, _tensor(lengths)


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of shape (L_i, *) into (L_max, B, *) (or (B, L_max, *)), padding with padding_value."""
    from ..._ops.nn import _pad_constant
    from ... import stack
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    L = max(s.shape[0] for s in sequences)
    trailing = tuple(sequences[0].shape[1:])
    padded = []
    for s in sequences:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"The size of tensor a ({trailing[0] if trailing else 0}) must match the size of "
                               f"tensor b ({s.shape[1] if s.dim() > 1 else 0}) at non-singleton dimension 1")
        extra = L - s.shape[0]
        pads = [0, 0] * (s.dim() - 1) + ([extra, 0] if padding_side == "left" else [0, extra])
        padded.append(_pad_constant(s, pads, padding_value) if extra else s)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences (the inverse of pad_sequence)."""
    if not batch_first:
        # In place, as PyTorch does: the caller's (T, B, *) tensor is left as (B, T, *).
        padded_sequences.transpose_(0, 1)
    lens = np.asarray(lengths._data if isinstance(lengths, Tensor) else lengths).reshape(-1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(lens)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of shape (L_i, *) (pad_sequence then pack_padded_sequence)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a PackedSequence holds (the inverse of pack_sequence)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
