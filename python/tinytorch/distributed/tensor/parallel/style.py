"""Parallel styles: how parallelize_module shards a module's parameters and lays out its inputs and outputs.

Megatron-LM's tensor parallelism in PyTorch's terms: ColwiseParallel splits a Linear's output features (weight
Shard(0): each rank computes its columns of the output, Shard(-1)); RowwiseParallel splits its input features
(weight Shard(1): each rank's product is a term of the output, reduced by all-reduce to Replicate or by
reduce-scatter to Shard); SequenceParallel runs LayerNorm/RMSNorm/Dropout on a sequence shard; the Prepare*
styles convert a module's inputs or outputs from one layout to another at the module boundary.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from ....nn.modules.linear import Linear
from ....nn.modules.sparse import Embedding
from ....nn.parameter import Parameter
from ....nn.modules.module import Module
from ...._tensor import Tensor
from ...device_mesh import DeviceMesh
from .._api import DTensor, distribute_module, distribute_tensor
from ..placement_types import Placement, Replicate, Shard

__all__ = ["ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel", "PrepareModuleInput",
           "PrepareModuleOutput", "PrepareModuleInputOutput"]


class ParallelStyle:
    """Base class: a style knows how to parallelize one module on a 1-d DeviceMesh (`_apply`)."""

    src_data_rank: Optional[int] = 0

    def _apply(self, module: Module, device_mesh: DeviceMesh) -> Module:
        raise NotImplementedError


def _as_dtensor(x: Any, mesh: DeviceMesh, layouts: tuple) -> DTensor:
    if isinstance(x, DTensor):
        return x
    if not isinstance(x, Tensor):
        raise ValueError(f"expecting a torch.Tensor or DTensor as the module input, but got {type(x).__name__}")
    return DTensor.from_local(x, mesh, layouts, run_check=False)


def _shard_params(module: Module, mesh: DeviceMesh, placements: dict, src_data_rank: Optional[int]) -> None:
    """Register each named parameter as a DTensor with placements[name] (default: the '*' entry)."""
    for name, param in list(module.named_parameters(recurse=False)):
        pl = placements.get(name, placements.get("*"))
        if pl is None or isinstance(param, DTensor):
            continue
        dist = distribute_tensor(param.detach(), mesh, [pl], src_data_rank=src_data_rank)
        module.register_parameter(name, Parameter(dist, requires_grad=param.requires_grad))


class ColwiseParallel(ParallelStyle):
    """Shard a Linear's weight and bias on dim 0 (an Embedding's weight on dim 1): the output comes out sharded on
    its last dim. The input (plain tensors are read as `input_layouts`, default Replicate) is made Replicate; the
    output is redistributed to `output_layouts` (default Shard(-1)) and handed on as a local tensor when
    use_local_output (default)."""

    def __init__(self, *, input_layouts: Optional[Placement] = None, output_layouts: Optional[Placement] = None,
                 use_local_output: bool = True) -> None:
        self.input_layouts = (input_layouts or Replicate(),)
        self.output_layouts = (output_layouts or Shard(-1),)
        self.desired_input_layouts = (Replicate(),)
        self.use_local_output = use_local_output

    def _prepare_input(self, mod: Module, inputs: tuple, mesh: DeviceMesh) -> Any:
        x = _as_dtensor(inputs[0], mesh, self.input_layouts)
        if x.placements != self.desired_input_layouts:
            x = x.redistribute(placements=self.desired_input_layouts)
        return (x,) + tuple(inputs[1:])

    def _prepare_output(self, mod: Module, outputs: DTensor, mesh: DeviceMesh) -> Any:
        if outputs.placements != _normalized(self.output_layouts, outputs.ndim):
            outputs = outputs.redistribute(placements=self.output_layouts)
        return outputs.to_local() if self.use_local_output else outputs

    def _partition(self, name: str, module: Module, mesh: DeviceMesh) -> None:
        if isinstance(module, Linear):
            _shard_params(module, mesh, {"*": Shard(0)}, self.src_data_rank)
        elif isinstance(module, Embedding):
            _shard_params(module, mesh, {"*": Shard(1)}, self.src_data_rank)

    def _apply(self, module: Module, device_mesh: DeviceMesh) -> Module:
        if not isinstance(module, (Linear, Embedding)):
            raise NotImplementedError(f"{type(self).__name__} currently only support nn.Linear and nn.Embedding! "
                                      f"(got {type(module).__name__})")
        return distribute_module(module, device_mesh, lambda n, m, mesh: self._partition(n, m, mesh) if m is module
                                 else None, self._prepare_input, self._prepare_output)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(input_layouts={self.input_layouts}, output_layouts={self.output_layouts}, "
                f"use_local_output={self.use_local_output})")


class RowwiseParallel(ColwiseParallel):
    """Shard a Linear's weight on dim 1 (bias replicated; an Embedding's weight on dim 0): each rank's output is a
    term of the sum. The input (plain tensors read as `input_layouts`, default Shard(-1)) is made Shard(-1) for a
    Linear, Replicate for an Embedding; the output is reduced to `output_layouts` (default Replicate: all-reduce;
    Shard(d): reduce-scatter)."""

    def __init__(self, *, input_layouts: Optional[Placement] = None, output_layouts: Optional[Placement] = None,
                 use_local_output: bool = True) -> None:
        self.input_layouts = (input_layouts or Shard(-1),)
        self.output_layouts = (output_layouts or Replicate(),)
        self.desired_input_layouts = (Shard(-1),)
        self.use_local_output = use_local_output

    def _prepare_input(self, mod: Module, inputs: tuple, mesh: DeviceMesh) -> Any:
        x = _as_dtensor(inputs[0], mesh, self.input_layouts)
        if x.placements != _normalized(self.desired_input_layouts, x.ndim):
            x = x.redistribute(placements=self.desired_input_layouts)
        return (x,) + tuple(inputs[1:])

    def _partition(self, name: str, module: Module, mesh: DeviceMesh) -> None:
        if isinstance(module, Linear):
            _shard_params(module, mesh, {"weight": Shard(1), "bias": Replicate()}, self.src_data_rank)
        elif isinstance(module, Embedding):
            _shard_params(module, mesh, {"*": Shard(0)}, self.src_data_rank)

    def _apply(self, module: Module, device_mesh: DeviceMesh) -> Module:
        if isinstance(module, Embedding):
            self.desired_input_layouts = (Replicate(),)
        elif not isinstance(module, Linear):
            raise NotImplementedError(f"RowwiseParallel currently only support nn.Linear and nn.Embedding! "
                                      f"(got {type(module).__name__})")
        return super()._apply(module, device_mesh)


def _normalized(layouts: tuple, ndim: int) -> tuple:
    return tuple(Shard(p.dim + ndim) if p.is_shard() and p.dim < 0 else p for p in layouts)


class SequenceParallel(ParallelStyle):
    """Run a LayerNorm/RMSNorm/Dropout on a sequence shard (Korthikanti et al.'s sequence parallelism): its
    parameters are replicated as they are (no broadcast: they are initialised identically), a plain input is read
    as Shard(sequence_dim), a DTensor input is redistributed to it, and the output stays a DTensor unless
    use_local_output."""

    def __init__(self, *, sequence_dim: int = 1, use_local_output: bool = False) -> None:
        self.sequence_sharding = (Shard(sequence_dim),)
        self.use_local_output = use_local_output

    def _replicate(self, name: str, module: Module, mesh: DeviceMesh) -> None:
        for p_name, param in list(module.named_parameters(recurse=False)):
            if not isinstance(param, DTensor):
                rep = DTensor.from_local(param.detach(), mesh, [Replicate()], run_check=False)
                module.register_parameter(p_name, Parameter(rep, requires_grad=param.requires_grad))

    def _prepare_input(self, mod: Module, inputs: tuple, mesh: DeviceMesh) -> Any:
        x = inputs[0]
        if isinstance(x, DTensor):
            if x.placements != _normalized(self.sequence_sharding, x.ndim):
                x = x.redistribute(placements=self.sequence_sharding)
        else:
            x = _as_dtensor(x, mesh, self.sequence_sharding)
        return (x,) + tuple(inputs[1:])

    def _prepare_output(self, mod: Module, outputs: Any, mesh: DeviceMesh) -> Any:
        return outputs.to_local() if self.use_local_output else outputs

    def _apply(self, module: Module, device_mesh: DeviceMesh) -> Module:
        return distribute_module(module, device_mesh, self._replicate, self._prepare_input, self._prepare_output)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(sequence_dim={self.sequence_sharding[0].dim}, "
                f"use_local_output={self.use_local_output})")


def _tuple(layouts: Union[Placement, tuple, None]) -> Optional[tuple]:
    return (layouts,) if isinstance(layouts, Placement) else (None if layouts is None else tuple(layouts))


class PrepareModuleInput(ParallelStyle):
    """Convert a module's inputs at runtime: each input with a layout in `input_layouts` (None: leave it alone) is
    read as that layout if it is a plain tensor and redistributed to its `desired_input_layouts` entry; keyword
    inputs likewise through input_kwarg_layouts / desired_input_kwarg_layouts."""

    def __init__(self, *, input_layouts: Union[Placement, tuple, None] = None,
                 desired_input_layouts: Union[Placement, tuple, None] = None,
                 input_kwarg_layouts: Optional[dict] = None, desired_input_kwarg_layouts: Optional[dict] = None,
                 use_local_output: bool = False) -> None:
        self.input_layouts = _tuple(input_layouts)
        self.desired_input_layouts = _tuple(desired_input_layouts)
        self.use_local_output = use_local_output
        if self.input_layouts is not None:
            if self.desired_input_layouts is None:
                raise AssertionError("desired module inputs should not be None!")
            if len(self.input_layouts) != len(self.desired_input_layouts):
                raise AssertionError("input_layouts and desired_input_layouts should have same length!")
        self.with_kwargs = input_kwarg_layouts is not None
        self.input_kwarg_layouts = input_kwarg_layouts or {}
        self.desired_input_kwarg_layouts = desired_input_kwarg_layouts or {}
        if self.with_kwargs and len(self.input_kwarg_layouts) != len(self.desired_input_kwarg_layouts):
            raise AssertionError("input_kwarg_layouts and desired_input_kwarg_layouts should have same length!")

    def _prepare_arg(self, x: Any, mesh: DeviceMesh, layout: Optional[Placement],
                     desired: Optional[Placement]) -> Any:
        if layout is None:
            return x
        if not isinstance(x, Tensor):
            raise AssertionError("expecting input to be a torch.Tensor!")
        d = x if isinstance(x, DTensor) else DTensor.from_local(x, mesh, (layout,), run_check=False)
        if desired is not None and layout != desired:
            d = d.redistribute(placements=(desired,))
        return d.to_local() if self.use_local_output else d

    def _prepare_inputs(self, inputs: Any, mesh: DeviceMesh) -> tuple:
        if self.input_layouts is None:
            return inputs
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        if len(inputs) != len(self.input_layouts):
            raise ValueError(f"module inputs and input_layouts should have same length! (got {len(inputs)} inputs "
                             f"and {len(self.input_layouts)} layouts)")
        return tuple(self._prepare_arg(x, mesh, lay, want)
                     for x, lay, want in zip(inputs, self.input_layouts, self.desired_input_layouts))

    def _apply(self, module: Module, device_mesh: DeviceMesh) -> Module:
        if self.with_kwargs:
            def hook(_mod: Module, args: tuple, kwargs: dict) -> tuple:
                new_kwargs = {k: self._prepare_arg(v, device_mesh, self.input_kwarg_layouts.get(k),
                                                   self.desired_input_kwarg_layouts.get(k)) for k, v in kwargs.items()}
                return self._prepare_inputs(args, device_mesh), new_kwargs
            module.register_forward_pre_hook(hook, with_kwargs=True)
        else:
            module.register_forward_pre_hook(lambda _mod, args: self._prepare_inputs(args, device_mesh))
        return module

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(input_layouts={self.input_layouts}, desired_input_layouts="
                f"{self.desired_input_layouts}, input_kwarg_layouts={self.input_kwarg_layouts}, "
                f"desired_input_kwarg_layouts={self.desired_input_kwarg_layouts}, "
                f"use_local_output={self.use_local_output})")


class PrepareModuleOutput(ParallelStyle):
    """Convert a module's outputs at runtime: each output with a layout in `output_layouts` (None: leave it alone)
    is read as that layout if it is a plain tensor and redistributed to `desired_output_layouts`; local tensors
    are handed on when use_local_output (default)."""

    def __init__(self, *, output_layouts: Union[Placement, tuple], desired_output_layouts: Union[Placement, tuple],
                 use_local_output: bool = True) -> None:
        self.output_layouts = _tuple(output_layouts)
        self.desired_output_layouts = _tuple(desired_output_layouts)
        self.use_local_output = use_local_output
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise AssertionError("output_layouts and desired_output_layouts should have same length!")

    def _prepare_outputs(self, outputs: Any, mesh: DeviceMesh) -> Any:
        outs = outputs if isinstance(outputs, tuple) else (outputs,)
        if len(outs) != len(self.output_layouts):
            raise ValueError(f"module outputs and output_layouts should have same length! (got {len(outs)} outputs "
                             f"and {len(self.output_layouts)} layouts)")
        prepared = []
        for out, layout, desired in zip(outs, self.output_layouts, self.desired_output_layouts):
            if layout is None:
                prepared.append(out)
                continue
            d = out if isinstance(out, DTensor) else DTensor.from_local(out, mesh, (layout,), run_check=False)
            if layout != desired:
                d = d.redistribute(placements=(desired,))
            prepared.append(d.to_local() if self.use_local_output else d)
        return prepared[0] if len(prepared) == 1 else tuple(prepared)

    def _apply(self, module: Module, device_mesh: DeviceMesh) -> Module:
        module.register_forward_hook(lambda _mod, _args, outputs: self._prepare_outputs(outputs, device_mesh))
        return module

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(output_layouts={self.output_layouts}, desired_output_layouts="
                f"{self.desired_output_layouts}, use_local_output={self.use_local_output})")


class PrepareModuleInputOutput(ParallelStyle):
    """PrepareModuleInput and PrepareModuleOutput on one module."""

    def __init__(self, *, input_layouts: Union[Placement, tuple, None] = None,
                 desired_input_layouts: Union[Placement, tuple, None] = None,
                 input_kwarg_layouts: Optional[dict] = None, desired_input_kwarg_layouts: Optional[dict] = None,
                 use_local_input: bool = False, output_layouts: Union[Placement, tuple],
                 desired_output_layouts: Union[Placement, tuple], use_local_output: bool = True) -> None:
        self.prepare_module_input = PrepareModuleInput(
            input_layouts=input_layouts, desired_input_layouts=desired_input_layouts,
            input_kwarg_layouts=input_kwarg_layouts, desired_input_kwarg_layouts=desired_input_kwarg_layouts,
            use_local_output=use_local_input)
        self.prepare_module_output = PrepareModuleOutput(
            output_layouts=output_layouts, desired_output_layouts=desired_output_layouts,
            use_local_output=use_local_output)

    def _apply(self, module: Module, device_mesh: DeviceMesh) -> Module:
        self.prepare_module_input._apply(module, device_mesh)
        self.prepare_module_output._apply(module, device_mesh)
        return module

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.prepare_module_input!r}, {self.prepare_module_output!r})"
