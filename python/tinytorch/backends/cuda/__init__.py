"""tinytorch.backends.cuda: cuBLAS and scaled-dot-product-attention switches (stored; CuPy picks the kernels)."""
from __future__ import annotations

import contextlib


class cuBLASModule:
    """backends.cuda.matmul: allow_tf32 and the reduced-precision-reduction switches (unknown names raise)."""

    _precision = "highest"
    _flags = {"allow_fp16_reduced_precision_reduction": True, "allow_bf16_reduced_precision_reduction": True,
              "allow_fp16_accumulation": False}

    def __getattr__(self, name: str):
        if name == "allow_tf32":
            return type(self)._precision != "highest"
        if name in cuBLASModule._flags:
            return cuBLASModule._flags[name]
        raise AttributeError("Unknown attribute " + name)

    def __setattr__(self, name: str, value) -> None:
        if name == "allow_tf32":
            type(self)._precision = "high" if value else "highest"
        elif name == "_precision":
            type(self)._precision = value
        elif name in cuBLASModule._flags:
            cuBLASModule._flags[name] = value
        else:
            raise AttributeError("Unknown attribute " + name)


matmul = cuBLASModule()

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def is_built() -> bool:
    """Whether tinytorch can run CUDA tensors (CuPy is importable)."""
    try:
        import cupy  # noqa: F401
        return True
    except Exception:
        return False


def enable_flash_sdp(enabled: bool) -> None:
    """Record whether the flash attention kernel may be used."""
    _sdp["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Record whether the memory-efficient attention kernel may be used."""
    _sdp["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    """Record whether the math attention kernel may be used."""
    _sdp["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Record whether the cuDNN attention kernel may be used."""
    _sdp["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True,
               enable_cudnn: bool = True):
    """Set the SDPA kernel switches for a region, restoring them on exit."""
    prev = dict(_sdp)
    _sdp.update(flash=enable_flash, math=enable_math, mem_efficient=enable_mem_efficient, cudnn=enable_cudnn)
    try:
        yield
    finally:
        _sdp.update(prev)


def preferred_linalg_library(backend=None) -> str:
    """The linear algebra library CuPy uses (cuSOLVER); the argument is accepted and ignored."""
    return "cusolver"


__all__ = ["cudnn_sdp_enabled", "enable_cudnn_sdp", "enable_flash_sdp", "enable_math_sdp", "enable_mem_efficient_sdp",
           "flash_sdp_enabled", "is_built", "math_sdp_enabled", "matmul", "mem_efficient_sdp_enabled",
           "preferred_linalg_library", "sdp_kernel"]
