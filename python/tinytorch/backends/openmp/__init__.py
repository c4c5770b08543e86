"""tinytorch.backends.openmp: tinytorch's CPU kernels use their own threads, not OpenMP."""


def is_available() -> bool:
    """False: the fused kernels use std::thread (see tinytorch.set_num_threads)."""
    return False
