"""Op implementations. Importing this package attaches every op to Tensor as a method/operator."""
from . import complex, convert, indexing, linalg, nn, pointwise, reduction, shape  # noqa: F401
from . import decompositions, distance, searching, special, statistics  # noqa: F401
from . import spectral, tensor_methods, toplevel  # noqa: F401
