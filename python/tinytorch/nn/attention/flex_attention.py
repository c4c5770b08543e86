"""FlexAttention (PyTorch's torch.nn.attention.flex_attention): attention whose scores are edited by a user
score_mod and restricted by a block-sparse BlockMask built from a mask_mod.

tinytorch computes it densely with tensor ops, so it is differentiable by autograd: the (B, H, Q, KV) scores are
materialised, score_mod/mask_mod are called once on broadcast index tensors b (B,1,1,1), h (1,H,1,1),
q_idx (1,1,Q,1), kv_idx (1,1,1,KV) -- what PyTorch's vmap over those four dimensions computes for mods written
with tensor ops (comparisons, arithmetic, torch.where, indexing captured tensors)."""
from __future__ import annotations

import functools
import inspect
import itertools
import math
import operator
import warnings
from enum import Enum
from typing import Callable, NamedTuple, TypedDict

from ... import _creation
from ..._dtype import bool_, float32, float64, int8, int32
from ..._tensor import Tensor

__all__ = ["BlockMask", "flex_attention", "AuxOutput", "AuxRequest", "FlexKernelOptions", "create_block_mask",
           "create_mask", "or_masks", "and_masks", "noop_mask"]

_score_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
_mask_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
# The block size of the mask flex_attention uses when given none: one block covering everything.
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30


class FlexKernelOptions(TypedDict, total=False):
    """Tuning options for PyTorch's generated kernels; tinytorch accepts and ignores them."""

    num_warps: int
    num_stages: int
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_M1: int
    BLOCK_N1: int
    BLOCK_M2: int
    BLOCK_N2: int
    PRESCALE_QK: bool
    ROWS_GUARANTEED_SAFE: bool
    BLOCKS_ARE_CONTIGUOUS: bool
    WRITE_DQ: bool
    FORCE_USE_FLEX_ATTENTION: bool
    USE_TMA: bool
    kpack: int
    matrix_instr_nonkdim: int
    waves_per_eu: int
    BACKEND: str


class AuxRequest(NamedTuple):
    """Which auxiliary outputs flex_attention should return."""

    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    """flex_attention's auxiliary outputs (None where not requested)."""

    lse: Tensor | None = None
    max_scores: Tensor | None = None


class _ModificationType(Enum):
    SCORE_MOD = 1
    MASK_MOD = 2
    UNKNOWN = 3


def _get_mod_type(fn: Callable) -> _ModificationType:
    """A function with 5 required positional arguments is a score_mod, with 4 a mask_mod."""
    if hasattr(fn, "__code__"):
        num_positional_args = fn.__code__.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    else:
        num_positional_args = sum(1 for p in inspect.signature(fn).parameters.values()
                                  if p.default is inspect.Parameter.empty)
    if num_positional_args not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {num_positional_args}")
    return _ModificationType.SCORE_MOD if num_positional_args == 5 else _ModificationType.MASK_MOD


def _identity(score: Tensor, batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    return score


def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """A mask_mod that masks nothing."""
    return batch.new_ones(size=(), dtype=bool_, device=batch.device)


def _sliced_mask_mod_error(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor):
    raise RuntimeError("Cannot use mask_mod from a sliced BlockMask. When you slice a BlockMask using [], the "
                       "mask_mod attribute is reset. You must set it from the original BlockMask's mask_mod.")


def or_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A mask_mod allowing what any of `mask_mods` allows."""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_zeros((), dtype=bool_)
        for mask in mask_mods:
            result = result | mask(b, h, q_idx, kv_idx)
        return result

    return or_mask


def and_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """A mask_mod allowing only what all of `mask_mods` allow."""
    if not all(callable(arg) for arg in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_ones((), dtype=bool_)
        for mask in mask_mods:
            result = result & mask(b, h, q_idx, kv_idx)
        return result

    return and_mask


def _index_grids(B: int, H: int, Q: int, KV: int, device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """b, h, q_idx, kv_idx as int64 aranges shaped to broadcast against (B, H, Q, KV)."""
    return (_creation.arange(B, device=device).view(B, 1, 1, 1), _creation.arange(H, device=device).view(1, H, 1, 1),
            _creation.arange(Q, device=device).view(1, 1, Q, 1), _creation.arange(KV, device=device).view(1, 1, 1, KV))


def _as_full(value, shape: tuple, device, dtype=None) -> Tensor:
    """A mod's result broadcast to the full (B, H, Q, KV) grid (mods may return fewer dims or a Python value)."""
    if not isinstance(value, Tensor):
        value = _creation.tensor(value, dtype=dtype, device=device)
    return value.expand(shape) if tuple(value.shape) != shape else value


def _eval_mask_mod(mask_mod: _mask_mod_signature, B: int, H: int, Q: int, KV: int, device) -> Tensor:
    shape = (B, H, Q, KV)
    return _as_full(mask_mod(*_index_grids(B, H, Q, KV, device)), shape, device).to(bool_)


def _ordered_to_dense(num_blocks_in_row: Tensor, col_indices: Tensor, num_cols: int) -> Tensor:
    """(..., rows) counts and (..., rows, max_entries) column indices -> a (..., rows, num_cols) int32 0/1 map."""
    from ... import where
    valid = _creation.arange(col_indices.shape[-1], device=col_indices.device) < num_blocks_in_row.unsqueeze(-1)
    # Entries past a row's count (and columns outside the grid) are scattered into an extra column, then dropped.
    cols = col_indices.long()
    cols = where(valid & (cols < num_cols), cols, num_cols)
    dense = _creation.zeros(tuple(cols.shape[:-1]) + (num_cols + 1,), dtype=int32, device=cols.device)
    return dense.scatter_(-1, cols, 1)[..., :num_cols]


def _dense_to_ordered(dense_mask: Tensor) -> tuple[Tensor, Tensor]:
    """A (..., rows, cols) 0/1 map -> per-row counts and the present columns first (in order), as int32."""
    from ... import argsort
    dense_mask = dense_mask.to(int32)
    num_blocks_in_row = dense_mask.sum(dim=-1).to(int32)
    col_indices = argsort(dense_mask, dim=-1, descending=True, stable=True).to(int32)
    return num_blocks_in_row.contiguous(), col_indices.contiguous()


def _transpose_ordered(num_blocks_in_row: Tensor, col_indices: Tensor) -> tuple[Tensor, Tensor]:
    dense = _ordered_to_dense(num_blocks_in_row, col_indices, col_indices.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _adjust_num_blocks_and_indices(num_blocks: Tensor, indices: Tensor, new_num_rows: int,
                                   new_num_cols: int) -> tuple[Tensor, Tensor]:
    indices = indices[:, :, :new_num_rows, :new_num_cols]
    num_blocks = num_blocks[:, :, :new_num_rows]
    num_blocks = num_blocks.clamp(max=new_num_cols)
    num_blocks = (indices < num_blocks[:, :, :, None]).sum(dim=-1).to(int32)
    return num_blocks, indices


class BlockMask:
    """A block-sparse attention mask: per (batch, head, query block) the KV blocks to compute, split into
    partial blocks (mask_mod applied) and full blocks (computed unmasked), with the transposed (q_*) indices
    PyTorch's backward uses."""

    _TENSOR_ATTRS = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                     "q_indices", "full_q_num_blocks", "full_q_indices", "dq_write_order", "dq_write_order_full",
                     "dq_kv_order"]

    def __init__(self, seq_lengths: tuple[int, int], kv_num_blocks: Tensor, kv_indices: Tensor,
                 full_kv_num_blocks: Tensor | None, full_kv_indices: Tensor | None, q_num_blocks: Tensor | None,
                 q_indices: Tensor | None, full_q_num_blocks: Tensor | None, full_q_indices: Tensor | None,
                 BLOCK_SIZE: tuple[int, int] = (_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod: _mask_mod_signature = noop_mask, *, dq_write_order: Tensor | None = None,
                 dq_write_order_full: Tensor | None = None, dq_kv_order: Tensor | None = None,
                 dq_kv_order_spt: bool | None = None) -> None:
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError("full_q_num_blocks and full_q_indices must be both provided or omitted")
        if dq_write_order_full is not None and dq_write_order is None:
            raise ValueError("dq_write_order_full requires dq_write_order")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.q_num_blocks = q_num_blocks
        self.q_indices = q_indices
        self.full_q_num_blocks = full_q_num_blocks
        self.full_q_indices = full_q_indices
        # Deterministic-dQ scheduling metadata for PyTorch's GPU kernels; kept so BlockMasks round-trip.
        self.dq_write_order = dq_write_order
        self.dq_write_order_full = dq_write_order_full
        self.dq_kv_order = dq_kv_order
        self.dq_kv_order_spt = dq_kv_order_spt
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks: Tensor, kv_indices: Tensor, full_kv_num_blocks: Tensor | None = None,
                       full_kv_indices: Tensor | None = None,
                       BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod: _mask_mod_signature | None = None, seq_lengths: tuple[int, int] | None = None,
                       compute_q_blocks: bool = True, *, dq_write_order: Tensor | None = None,
                       dq_write_order_full: Tensor | None = None,
                       dq_kv_order: Tensor | bool | None = None) -> "BlockMask":
        """A BlockMask from its KV block tensors, deriving the transposed q_* tensors."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num_blocks = q_indices = full_q_num_blocks = full_q_indices = None
        if compute_q_blocks:
            q_num_blocks, q_indices = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num_blocks, full_q_indices = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0], kv_indices.shape[-1] * BLOCK_SIZE[1])
        if dq_kv_order is not None and not isinstance(dq_kv_order, (bool, Tensor)):
            raise ValueError("dq_kv_order must be a bool, Tensor, or None")
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, q_num_blocks,
                   q_indices, full_q_num_blocks, full_q_indices, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask, dq_write_order=dq_write_order,
                   dq_write_order_full=dq_write_order_full,
                   dq_kv_order=dq_kv_order if isinstance(dq_kv_order, Tensor) else None,
                   dq_kv_order_spt=dq_kv_order if isinstance(dq_kv_order, bool) else None)

    def as_tuple(self, flatten: bool = True) -> tuple:
        """The fields in PyTorch's order (sequence lengths and block sizes unpacked when flatten)."""
        seq_lengths = tuple(self.seq_lengths) if flatten else (self.seq_lengths,)
        block_size = tuple(self.BLOCK_SIZE) if flatten else (self.BLOCK_SIZE,)
        return (*seq_lengths, *(getattr(self, a) for a in self._TENSOR_ATTRS), self.dq_kv_order_spt, *block_size,
                self.mask_mod)

    @property
    def shape(self) -> tuple[int, ...]:
        """(*batch dims, Q_LEN, KV_LEN)."""
        return tuple(self.kv_indices.shape[:-2]) + tuple(self.seq_lengths)

    def numel(self) -> int:
        """The number of elements of the dense mask (ignoring sparsity)."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """The percentage of blocks that are skipped."""
        computed_blocks = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            computed_blocks += int(self.full_kv_num_blocks.sum().item())
        computed_size = computed_blocks * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - computed_size / self.numel())

    def to_dense(self) -> Tensor:
        """The block-level mask (*batch dims, q blocks, kv blocks), int32 1 where a block is computed."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices, self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to_string(self, grid_size: int | tuple[int, int] = (20, 20), limit: int = 4) -> str:
        """A text picture of the block mask per (batch, head): '█' computed, ' ' skipped, '░' partly."""
        dense_mask = self.to_dense()
        *batch_dims, num_rows, num_cols = dense_mask.shape
        if grid_size == -1:
            max_rows, max_cols = num_rows, num_cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-num_rows // max_rows))
        col_step = max(1, -(-num_cols // max_cols))
        pictures = []
        for i, batch_idx in enumerate(itertools.product(*[range(n) for n in batch_dims])):
            if i == limit:
                pictures += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                             "You can also index (BlockMask[batch, head]) to choose a specific batch or head"]
                break
            mask = dense_mask[batch_idx] if batch_idx else dense_mask
            text = f"{batch_idx}\n"
            for r in range(0, num_rows, row_step):
                for c in range(0, num_cols, col_step):
                    fraction = mask[r:r + row_step, c:c + col_step].float().mean().item()
                    text += ("█" if fraction == 1 else " " if fraction == 0 else "░") * 2
                text += "\n"
            pictures.append(text)
        return "\n".join(pictures)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n" + self.to_string().strip()
                + "\n)")

    def __repr__(self) -> str:
        def shape_or_none(x):
            return x.shape if x is not None else None

        mask_mod = self.mask_mod.__name__ if hasattr(self.mask_mod, "__name__") else self.mask_mod
        return (f"BlockMask(\n    kv_num_blocks={self.kv_num_blocks.shape},\n    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape_or_none(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape_or_none(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape_or_none(self.q_num_blocks)},\n"
                f"    q_indices={shape_or_none(self.q_indices)},\n"
                f"    full_q_num_blocks={shape_or_none(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape_or_none(self.full_q_indices)},\n    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n    sparsity={self.sparsity():.2f}%,\n    mask_mod={mask_mod}\n)")

    def __getitem__(self, index) -> "BlockMask":
        """The mask for some batches/heads/query blocks; an int index keeps its dimension (as size 1). The
        result's mask_mod must be set again from the original's."""
        if self.dq_kv_order is not None:
            raise NotImplementedError("Slicing BlockMask with tensor dq_kv_order is not supported yet. Construct a "
                                      "new BlockMask with matching precomputed dq_write_order metadata.")
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1)) if isinstance(i, int) else i
                      for i, n in zip(padded, sizes))
        full_num = self.full_kv_num_blocks[index] if self.full_kv_num_blocks is not None else None
        full_idx = self.full_kv_indices[index] if self.full_kv_indices is not None else None
        sliced = BlockMask.from_kv_blocks(self.kv_num_blocks[index], self.kv_indices[index], full_num, full_idx,
                                          BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
                                          seq_lengths=self.seq_lengths,
                                          compute_q_blocks=self.q_indices is not None)
        sliced.dq_kv_order_spt = self.dq_kv_order_spt
        return sliced

    def _adjust(self, new_q_len: int, new_kv_len: int) -> "BlockMask":
        """Crop the mask to its top-left (new_q_len, new_kv_len) corner."""
        new_num_rows = (new_q_len + self.BLOCK_SIZE[0] - 1) // self.BLOCK_SIZE[0]
        new_num_cols = (new_kv_len + self.BLOCK_SIZE[1] - 1) // self.BLOCK_SIZE[1]
        kv_num, kv_idx = _adjust_num_blocks_and_indices(self.kv_num_blocks, self.kv_indices, new_num_rows,
                                                        new_num_cols)
        full_num = full_idx = None
        if self.full_kv_num_blocks is not None:
            full_num, full_idx = _adjust_num_blocks_and_indices(self.full_kv_num_blocks, self.full_kv_indices,
                                                                new_num_rows, new_num_cols)
        return self.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=self.BLOCK_SIZE,
                                   mask_mod=self.mask_mod, seq_lengths=(new_q_len, new_kv_len),
                                   compute_q_blocks=self.q_indices is not None)

    def to(self, device) -> "BlockMask":
        """A copy with every tensor moved to `device`."""
        moved = {}
        for attr in self._TENSOR_ATTRS:
            value = getattr(self, attr)
            moved[attr] = value.to(device) if isinstance(value, Tensor) else value
        return BlockMask(self.seq_lengths, **moved, BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod,
                         dq_kv_order_spt=self.dq_kv_order_spt)

    def _token_mask(self, B: int, H: int, Q: int, KV: int, device) -> Tensor | None:
        """The (B, H, Q, KV) bool mask flex_attention applies: mask_mod inside partial blocks, everything inside
        full blocks, nothing elsewhere. None when nothing is masked."""
        if self.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
            return None if self.mask_mod is noop_mask else _eval_mask_mod(self.mask_mod, B, H, Q, KV, device)
        q_bs, kv_bs = self.BLOCK_SIZE
        rows, cols = -(-Q // q_bs), -(-KV // kv_bs)

        def tokens(num_blocks: Tensor, indices: Tensor) -> Tensor:
            blocks = _ordered_to_dense(num_blocks[..., :rows], indices[..., :rows, :], cols).to(bool_)
            blocks = blocks.view((1,) * (4 - blocks.dim()) + tuple(blocks.shape))
            if blocks.shape[0] not in (1, B) or blocks.shape[1] not in (1, H):
                raise ValueError(f"block_mask of shape {self.shape} does not broadcast to the attention's batch and "
                                 f"heads ({B}, {H})")
            return blocks.repeat_interleave(q_bs, dim=-2).repeat_interleave(kv_bs, dim=-1)[..., :Q, :KV]

        allowed = tokens(self.kv_num_blocks, self.kv_indices)
        if self.mask_mod is not noop_mask:
            allowed = allowed & _eval_mask_mod(self.mask_mod, B, H, Q, KV, device)
        if self.full_kv_num_blocks is not None:
            allowed = allowed | tokens(self.full_kv_num_blocks, self.full_kv_indices)
        return allowed.expand(B, H, Q, KV)


def _default_device():
    from ... import accelerator
    return accelerator.current_accelerator() or "cpu"


def create_mask(mod_fn: _score_mod_signature | _mask_mod_signature, B: int | None, H: int | None, Q_LEN: int,
                KV_LEN: int, device=None) -> Tensor:
    """The dense (B, H, Q_LEN, KV_LEN) bool mask of a mask_mod, or of a score_mod (True where it leaves the
    score finite)."""
    if device is None:
        device = _default_device()
    B = 1 if B is None else B
    H = 1 if H is None else H
    shape = (B, H, Q_LEN, KV_LEN)
    if _get_mod_type(mod_fn) == _ModificationType.SCORE_MOD:
        from ... import isneginf
        scores = _creation.zeros(shape, device=device)
        return ~isneginf(_as_full(mod_fn(scores, *_index_grids(B, H, Q_LEN, KV_LEN, device)), shape, device))
    return _eval_mask_mod(mod_fn, B, H, Q_LEN, KV_LEN, device).contiguous()


def _convert_mask_to_block_mask(mask: Tensor, Q_BLOCK_SIZE: int, KV_BLOCK_SIZE: int,
                                separate_full_blocks: bool) -> tuple[Tensor, Tensor | None]:
    """Per block: partial (some but not all allowed) and full (all allowed) as int8 maps; without
    separate_full_blocks, every block with anything allowed counts as partial."""
    from ..functional import pad
    B, H, Q, KV = mask.shape
    mask = pad(mask, (0, -KV % KV_BLOCK_SIZE, 0, -Q % Q_BLOCK_SIZE))
    Qp, KVp = mask.shape[-2:]
    mask = mask.view(B, H, Qp // Q_BLOCK_SIZE, Q_BLOCK_SIZE, KVp // KV_BLOCK_SIZE, KV_BLOCK_SIZE)
    block_sum = mask.permute(0, 1, 2, 4, 3, 5).sum(dim=(-2, -1))
    if separate_full_blocks:
        full_block_sum = Q_BLOCK_SIZE * KV_BLOCK_SIZE
        partial = (block_sum > 0) & (block_sum < full_block_sum)
        return partial.to(int8), (block_sum == full_block_sum).to(int8)
    return (block_sum > 0).to(int8), None


def create_block_mask(mask_mod: _mask_mod_signature, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int,
                      device=None, BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE, _compile=False,
                      separate_full_blocks: bool = True, compute_dq_write_order: bool = False,
                      dq_kv_order: bool = True) -> BlockMask:
    """The BlockMask of `mask_mod` over (B, H, Q_LEN, KV_LEN) (B/H None: one mask shared by all). _compile
    and the dq_* arguments tune PyTorch's compiled GPU kernels and change nothing here."""
    if device is None:
        device = _default_device()
    if _get_mod_type(mask_mod) != _ModificationType.MASK_MOD:
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    B = 1 if B is None else B
    H = 1 if H is None else H
    q_bs, kv_bs = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    if _compile:
        warnings.warn("_compile flag on create_block_mask was originally added to work around a torch.compile "
                      "limitation. That limitation has since been addressed. So, to compile create_block_mask, we "
                      "suggest doing torch.compile(create_block_mask). This still works for now, but will be "
                      "removed in the future.", DeprecationWarning, stacklevel=2)
    if not isinstance(dq_kv_order, bool):
        raise ValueError("dq_kv_order must be a bool when using create_block_mask")
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _convert_mask_to_block_mask(mask, q_bs, kv_bs, separate_full_blocks)
    kv_num, kv_idx = _dense_to_ordered(partial)
    full_num, full_idx = _dense_to_ordered(full) if full is not None else (None, None)
    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=(q_bs, kv_bs), mask_mod=mask_mod,
                                    seq_lengths=(Q_LEN, KV_LEN))


def _create_empty_block_mask(query: Tensor) -> BlockMask:
    from ... import ones, zeros
    return BlockMask.from_kv_blocks(ones((1, 1, 1), dtype=int32, device=query.device),
                                    zeros((1, 1, 1, 1), dtype=int32, device=query.device),
                                    BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))


_warned: set[str] = set()


def _validate_inputs(query: Tensor, key: Tensor, value: Tensor, block_mask: BlockMask | None,
                     enable_gqa: bool) -> None:
    if query.device != key.device or query.device != value.device:
        raise ValueError(f"Expected query, key, and value to have the same device type, but got query.device: "
                         f"{query.device}, key.device: {key.device}, and value.device: {value.device} instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise ValueError(f"Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                         f"{query.dim()}, key.dim: {key.dim()} and value.dim: {value.dim()} instead.")
    if query.size(-1) != key.size(-1):
        raise ValueError(f"Expect query and key/value to have the same embedding dimension but got "
                         f"E={query.size(-1)} and E={key.size(-1)}.")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if not enable_gqa and query.size(-3) != key.size(-3):
        raise ValueError(f"Expect query and key/value to have the same number of heads but got Hq={query.size(-3)} "
                         f"and Hkv={key.size(-3)}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and query.size(1) % key.size(1) != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA but got "
                         f"Hq={query.size(1)} and Hkv={key.size(1)}.")
    if query.size(0) != key.size(0):
        if block_mask is None:
            raise ValueError(f"Expect query and key/value to have the same batch size, or non-none block_mask, but "
                             f"got block_mask=None, Bq={query.size(0)}, and Bkv={key.size(0)}.")
        if block_mask.kv_num_blocks.size(0) != query.size(0):
            raise ValueError(f"Expect query and key/value to have the same batch size, or block_mask and query to "
                             f"have the same batch size, but got Bq={query.size(0)}, Bkv={key.size(0)}, "
                             f"B_block_mask={block_mask.kv_num_blocks.size(0)}.")
        if key.size(0) != 1:
            raise RuntimeError(f"Bq and Bkv must broadcast. Got Bq={query.size(0)} and Bkv={key.size(0)}")


def _validate_block_mask_lengths(block_mask: BlockMask, q_len: int, kv_len: int) -> None:
    if block_mask.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
        return
    bm_q, bm_kv = block_mask.shape[-2], block_mask.shape[-1]
    if q_len > bm_q or kv_len > bm_kv:
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={q_len} and "
                         f"kv_len={kv_len}. As the block mask was created for a smaller length than you're using it "
                         "for, you likely need to create a new block mask.")
    if q_len != bm_q or kv_len != bm_kv:
        raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} but got q_len={q_len} and "
                         f"kv_len={kv_len}. As the block mask was created for a larger length than you're using it "
                         "for, you can either 1. create a new block mask with the correct length, or 2. 'adjust' "
                         "the existing block mask to the correct length by calling block_mask._adjust(q_len, "
                         "kv_len). This essentially 'crops' the block mask to the upper left corner, which does "
                         "not work for all mask_mods!")


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod: _score_mod_signature | None = None,
                   block_mask: BlockMask | None = None, scale: float | None = None, enable_gqa: bool = False,
                   return_lse: bool = False, kernel_options: FlexKernelOptions | None = None, *,
                   return_aux: AuxRequest | None = None):
    """softmax(score_mod(q k^T * scale) masked by block_mask) v for (B, H, L, E) query and (B, Hkv, S, E/Ev)
    key/value; rows where nothing is visible give 0 (and lse -inf). With return_lse, also the natural-log
    logsumexp (B, H, L); with return_aux, an AuxOutput of the requested statistics."""
    _validate_inputs(query, key, value, block_mask, enable_gqa)
    if score_mod is None:
        score_mod = _identity
    if block_mask is None:
        block_mask = _create_empty_block_mask(query)
    if block_mask.mask_mod is _sliced_mask_mod_error:
        raise RuntimeError("Cannot use mask_mod from a sliced BlockMask")
    B, Hq, L, _ = query.shape
    S = key.size(-2)
    _validate_block_mask_lengths(block_mask, L, S)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    if query.device != block_mask.kv_num_blocks.device:
        raise RuntimeError(f"Expect q/k/v and block_mask to be on the same device but got {query.device} and "
                           f"{block_mask.kv_num_blocks.device}.")
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, please use "
                         "return_aux=AuxRequest(lse=True) instead.")
    if return_lse and "deprecated_return_lse" not in _warned:
        _warned.add("deprecated_return_lse")
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)

    from ... import where
    # As PyTorch: scores in float64 for float64 inputs and float32 otherwise; probabilities back in query's dtype.
    working = float64 if query.dtype == float64 else float32
    G = Hq // key.size(1)
    if G > 1:
        key, value = key.repeat_interleave(G, dim=1), value.repeat_interleave(G, dim=1)
    if key.size(0) != B:
        key, value = key.expand(B, *key.shape[1:]), value.expand(B, *value.shape[1:])
    scores = (query.to(working) @ key.to(working).transpose(-2, -1)) * scale
    shape = (B, Hq, L, S)
    scores = _as_full(score_mod(scores, *_index_grids(B, Hq, L, S, query.device)), shape, query.device, working)
    allowed = block_mask._token_mask(B, Hq, L, S, query.device)
    if allowed is not None:
        scores = where(allowed, scores, float("-inf"))
    # A softmax that gives 0 (not NaN) on rows with nothing visible: shift by the row max, 0 for such rows.
    row_max = scores.detach().amax(dim=-1, keepdim=True)
    empty_row = row_max == float("-inf")
    exp_scores = (scores - where(empty_row, 0.0, row_max)).exp()
    denom = exp_scores.sum(dim=-1, keepdim=True)
    denom = where(empty_row, 1.0, denom)
    probs = exp_scores / denom
    out = probs.to(query.dtype) @ value.to(query.dtype)

    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = max_scores = None
    if want_lse:
        # Rows with nothing visible have denom 1 and row_max -inf, so their lse is -inf as in PyTorch.
        lse = (denom.log() + row_max).squeeze(-1)
    if want_max:
        max_scores = scores.amax(dim=-1)
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=max_scores)
    if return_lse:
        return out, lse
    return out
