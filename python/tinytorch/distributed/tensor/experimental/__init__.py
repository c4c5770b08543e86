"""torch.distributed.tensor.experimental: implicit_replication and local_map."""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Optional, Sequence

from ...._tensor import Tensor
from ...device_mesh import DeviceMesh
from .._api import DTensor
from .._dispatch import flags

__all__ = ["implicit_replication", "local_map"]


@contextlib.contextmanager
def implicit_replication() -> Iterator[None]:
    """Inside, plain tensors mixed with DTensors in an op count as replicated DTensors (the caller promises they
    hold the same values on every rank)."""
    previous = flags.implicit_replication
    flags.implicit_replication = True
    try:
        yield
    finally:
        flags.implicit_replication = previous


def local_map(func: Callable, out_placements: Any, in_placements: Optional[Sequence] = None,
              device_mesh: Optional[DeviceMesh] = None, *, redistribute_inputs: bool = False) -> Callable:
    """func wrapped to run on local pieces: DTensor arguments are checked against (or, with redistribute_inputs,
    redistributed to) in_placements and handed over as local tensors; tensor results come back as DTensors laid
    out as out_placements (one placements tuple per output, None for a non-tensor output)."""
    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mesh = device_mesh
        local_args = []
        for i, a in enumerate(args):
            if isinstance(a, DTensor):
                mesh = mesh or a.device_mesh
                want = None if in_placements is None else in_placements[i]
                if want is not None and tuple(want) != a.placements:
                    if not redistribute_inputs:
                        raise ValueError(f"local_map: argument {i} has placements {a.placements} but in_placements "
                                         f"says {tuple(want)}; pass redistribute_inputs=True to redistribute it")
                    a = a.redistribute(mesh, want)
                a = a.to_local()
            local_args.append(a)
        out = func(*local_args, **kwargs)
        if mesh is None:
            return out
        single = not isinstance(out, (tuple, list))
        outs = (out,) if single else out
        specs = (out_placements,) if single else out_placements
        wrapped_out = [DTensor.from_local(o, mesh, spec) if isinstance(o, Tensor) and spec is not None else o
                       for o, spec in zip(outs, specs)]
        return wrapped_out[0] if single else type(out)(wrapped_out)
    return wrapped
