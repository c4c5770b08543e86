"""tinytorch.backends.cpu: what the CPU kernels were built for."""


def get_cpu_capability() -> str:
    """'AVX2' when the fused kernels run their AVX2 build, else 'DEFAULT' (PyTorch's names)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return "DEFAULT"
    return "AVX2" if " avx2" in flags else "DEFAULT"
