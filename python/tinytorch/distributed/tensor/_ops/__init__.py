"""DTensor sharding rules, one file per op family (importing the package registers them)."""
from . import _embedding_ops, _math_ops, _matrix_ops, _pointwise_ops, _tensor_ops, _view_ops  # noqa: F401
