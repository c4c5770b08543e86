"""parallelize_module: apply parallel styles to a module and its submodules by fully-qualified name."""
from __future__ import annotations

import warnings
from fnmatch import fnmatch
from typing import Optional, Union

from ....nn.modules.module import Module
from ...device_mesh import DeviceMesh, _mesh_resources
from .style import ParallelStyle

__all__ = ["parallelize_module"]


def parallelize_module(module: Module, device_mesh: Optional[DeviceMesh] = None,
                       parallelize_plan: Union[ParallelStyle, dict, None] = None, *,
                       src_data_rank: Optional[int] = 0) -> Module:
    """Parallelize `module` on a 1-d mesh: a ParallelStyle applies to the module itself, a dict maps submodule
    names to styles. Each name is matched one dot-separated token at a time against child names with fnmatch,
    so "layers.*.attention" reaches every layer's attention; "" is the module itself. A name that matches no
    submodule is skipped with a warning (as in PyTorch). src_data_rank is the rank whose weights are scattered
    (None: every rank keeps its own)."""
    device_mesh = device_mesh or _mesh_resources.get_current_mesh()
    if device_mesh is None:
        raise RuntimeError("parallelize_module: pass a device_mesh (or call it inside `with mesh:`)")
    if device_mesh.ndim != 1:
        raise ValueError(f"parallelize_module only accepts a 1-D DeviceMesh, but found {device_mesh.ndim}-D mesh "
                         f"{device_mesh}; slice it first, e.g. device_mesh[\"tp\"]")
    if parallelize_plan is None:
        warnings.warn("No parallelize_plan is provided and auto-parallel is not supported at the moment, so this "
                      "parallelize_module call will do nothing.", stacklevel=2)
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        return parallelize_plan._apply(module, device_mesh)
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"Expect Union[ParallelStyle, Dict[str, ParallelStyle]] for parallelize_plan, "
                        f"{type(parallelize_plan)} found!")
    for path, style in parallelize_plan.items():
        _apply_path(module, device_mesh, path, path, style, src_data_rank)
    return module


def _apply_path(module: Module, mesh: DeviceMesh, path: str, key: str, style: ParallelStyle,
                src_data_rank: Optional[int]) -> None:
    """Apply `style` to the submodules `path` (the rest of plan key `key`) names below `module`."""
    if path == "":
        parallelize_module(module, mesh, style, src_data_rank=src_data_rank)
        return
    token, _, rest = path.partition(".")
    matched = [child for name, child in module.named_children() if fnmatch(name, token)]
    if not matched:
        warnings.warn(f"Parallelize plan key '{key}' could not be resolved: no submodule matching token '{token}' "
                      f"in module {type(module).__name__}, skipping this plan entry.", stacklevel=3)
    for child in matched:
        _apply_path(child, mesh, rest, key, style, src_data_rank)
