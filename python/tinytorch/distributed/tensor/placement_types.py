"""Placements: how a DTensor's global data maps onto one dimension of its device mesh.

Shard(d) cuts tensor dim d into torch.chunk pieces (ceil(size/n) each, trailing pieces smaller or empty),
Replicate() keeps a whole copy per rank, Partial(op) keeps a per-rank term of a pending reduction, and
_StridedShard(d, split_factor=k) is the layout FSDP gives a tensor that tensor parallelism already cut k ways
on dim d (each rank takes its piece of every one of the k blocks).
"""
from __future__ import annotations

__all__ = ["Placement", "Shard", "Replicate", "Partial"]

_REDUCE_OPS = ("sum", "avg", "max", "min", "product")


class Placement:
    """Base class of Shard, Replicate and Partial."""

    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return False


class Shard(Placement):
    """The tensor is split along `dim` into torch.chunk pieces, one per rank of the mesh dimension."""

    def __init__(self, dim: int = 0) -> None:
        self.dim = int(dim)

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self) -> int:
        return hash(("Shard", self.dim))

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"

    def __str__(self) -> str:
        return f"S({self.dim})"


class _StridedShard(Shard):
    """Shard(dim) of a tensor already cut into `split_factor` blocks on dim by a mesh dim applied after this one
    (FSDP over tensor parallelism): rank i holds its torch.chunk piece of each block, blocks kept in order."""

    def __init__(self, dim: int = 0, *, split_factor: int) -> None:
        super().__init__(dim)
        self.split_factor = int(split_factor)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StridedShard) and other.dim == self.dim and other.split_factor == self.split_factor

    def __hash__(self) -> int:
        return hash(("_StridedShard", self.dim, self.split_factor))

    def __repr__(self) -> str:
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self) -> str:
        return f"_S({self.dim}, {self.split_factor})"


class Replicate(Placement):
    """Every rank of the mesh dimension holds the whole tensor."""

    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Replicate)

    def __hash__(self) -> int:
        return hash("Replicate")

    def __repr__(self) -> str:
        return "Replicate()"

    def __str__(self) -> str:
        return "R"


class Partial(Placement):
    """Every rank holds a partial value; the global tensor is their reduction (sum by default)."""

    def __init__(self, reduce_op: str = "sum") -> None:
        if reduce_op not in _REDUCE_OPS:
            raise ValueError(f"Partial: reduce_op must be one of {_REDUCE_OPS}, got {reduce_op!r}")
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return reduce_op is None or reduce_op == self.reduce_op

    @property
    def is_linear(self) -> bool:
        """Whether a linear op may run on the partial terms (sum and avg commute with it)."""
        return self.reduce_op in ("sum", "avg")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return hash(("Partial", self.reduce_op))

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"

    def __str__(self) -> str:
        return f"P({self.reduce_op})"
