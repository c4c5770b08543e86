"""PipelineStage: one piece of a manually split model, as torch.distributed.pipelining.PipelineStage.

A stage runs its submodule on one microbatch at a time, keeps what backward needs per microbatch, and hands out
the point-to-point operations (`P2POp`s) that move activations to the next stage and gradients to the previous
one. The schedule decides when each runs. Shapes need not be given: a schedule's first step sends a fixed-size
header (shapes and dtypes of microbatch 0's outputs) ahead of the first activations from each stage to the next;
the receiver sizes its buffers from it, then and in every later step, and the sender checks every later
microbatch against it, as PyTorch's runtime shape inference does.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

import tinytorch as torch
from ... import profiler
from .. import distributed_c10d as c10d

__all__ = ["PipelineStage"]

# Message tags on the pipeline group: the ring backend checks them, so a stage that expects activations and
# gets gradients or a header raises instead of misreading bytes, and so does a stage of a training step
# (activations of _TAG_ACT) that meets one of a forward-only step (_TAG_ACT_EVAL).
_TAG_META, _TAG_ACT, _TAG_GRAD, _TAG_ACT_EVAL = 0x5050, 0x5051, 0x5052, 0x5053

# The shape header: magic, tensor count, then (dtype code, ndim, *shape) per tensor.
_HEADER_LEN = 128
_HEADER_MAGIC = 0x50504844
_DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64"]


def _normalize_model_output_as_tuple(output: Any) -> Tuple[Any, ...]:
    """A stage returns a Tensor or a tuple (or list) of Tensors; the schedule works with a tuple."""
    if type(output) is list:
        output = tuple(output)
    return output if type(output) is tuple else (output,)


def _meta(t: Any) -> Tuple[Tuple[int, ...], str]:
    return tuple(int(s) for s in t.shape), t.dtype.name


def _describe(metas: Sequence[Tuple[Tuple[int, ...], str]]) -> str:
    return ", ".join(f"{list(shape)}:{dt}" for shape, dt in metas)


def _is_float(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype.is_floating_point


class _PipelineStageBase:
    """The runtime part of a stage: forward/backward per microbatch, gradient scaling, and its P2P operations."""

    def __init__(self, submodule: Any, stage_index: int, num_stages: int, device: Any,
                 group: Optional[c10d.ProcessGroup] = None,
                 dw_builder: Optional[Callable[[], Callable[..., None]]] = None) -> None:
        if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 1:
            raise ValueError(f"num_stages must be a positive integer, got {num_stages!r}")
        if isinstance(stage_index, bool) or not isinstance(stage_index, int) or stage_index >= num_stages:
            raise ValueError(f"Stage index {stage_index} is out of range of {num_stages}")
        if stage_index < 0:
            raise ValueError(f"Stage index {stage_index} is negative; stages are numbered 0 to {num_stages - 1}")
        pg = c10d._resolve(group)
        if pg is None:
            raise ValueError(f"[Stage {stage_index}] this rank is not a member of the pipeline's process group")
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.device = torch.device(device)
        self.group = group
        self.dw_builder = dw_builder
        self._pg = pg
        self.group_rank = pg.rank()
        self.group_size = pg.size()
        if self.group_size > self.num_stages:
            raise RuntimeError(f"Pipeline group size {self.group_size} cannot be larger than number of stages "
                               f"{self.num_stages}")
        self.log_prefix = f"[Stage {self.stage_index}]"
        # Set by the schedule (loop placement by default: stage i on group rank i % group size).
        self.stage_index_to_group_rank: Dict[int, int] = {i: i % self.group_size for i in range(self.num_stages)}
        self.has_backward = False
        # Shapes and dtypes from input_args / output_args, checked every step (None: not given).
        self.inputs_meta: Optional[Tuple[Tuple[Tuple[int, ...], str], ...]] = None
        self._outputs_meta: Optional[Tuple[Tuple[Tuple[int, ...], str], ...]] = None
        # What travels between this stage and its neighbours, as the running schedule's first step found it.
        self._send_meta: Optional[Tuple[Tuple[Tuple[int, ...], str], ...]] = None
        self._recv_meta: Optional[Tuple[Tuple[Tuple[int, ...], str], ...]] = None
        # Per-step state, keyed by microbatch.
        self.fwd_cache: Dict[int, Tuple[Tuple[Any, ...], List[Any]]] = {}
        self.bwd_cache: Dict[int, Tuple[Any, ...]] = {}
        self.output_chunks: Dict[int, Any] = {}
        self._fwd_inputs: Dict[int, Tuple[Any, ...]] = {}
        self._grad_outputs: Dict[int, Tuple[Any, ...]] = {}
        self._to_send: Dict[int, Tuple[Any, ...]] = {}

    # ------------------------------------------------------------------ identity
    @property
    def is_first(self) -> bool:
        """True for stage 0."""
        return self.stage_index == 0

    @property
    def is_last(self) -> bool:
        """True for the last stage (which computes the loss)."""
        return self.stage_index == self.num_stages - 1

    def _peer(self, stage_index: int) -> int:
        """Global rank holding `stage_index`."""
        return c10d.get_global_rank(self._pg, self.stage_index_to_group_rank[stage_index])

    def _on_this_rank(self, stage_index: int) -> bool:
        return self.stage_index_to_group_rank[stage_index] == self.group_rank

    def _where(self, stage_index: int) -> str:
        return f"stage {stage_index} (rank {self._peer(stage_index)})"

    def clear_runtime_states(self) -> None:
        """Forget the previous step's microbatches (the schedule calls this at the start of every step)."""
        for d in (self.fwd_cache, self.bwd_cache, self.output_chunks, self._fwd_inputs, self._grad_outputs,
                  self._to_send):
            d.clear()

    # ------------------------------------------------------------------ compute
    def _span(self, kind: str, mb: int, t0: int) -> None:
        prof = profiler._active
        if prof is not None:
            prof._add_event(f"stage {self.stage_index} {kind} mb {mb}", "pipeline", t0, time.monotonic_ns(),
                            profiler.TRACK_PIPELINE, {"stage": self.stage_index, "microbatch": mb, "kind": kind})

    def _ddp(self) -> Optional[Any]:
        from ...nn.parallel import DistributedDataParallel

        return self.submod if isinstance(self.submod, DistributedDataParallel) else None

    def forward_one_chunk(self, fwd_chunk_id: int, args: Tuple[Any, ...],
                          kwargs: Optional[Dict[str, Any]] = None) -> Any:
        """Run the submodule on microbatch `fwd_chunk_id`: the first stage on `args`, the others on what the
        previous stage sent; `kwargs` go to every stage."""
        mb = fwd_chunk_id
        if self.is_first:
            inputs = tuple(args)
            if self.inputs_meta is not None and all(isinstance(t, torch.Tensor) for t in inputs) and \
                    tuple(_meta(t) for t in inputs) != self.inputs_meta:
                raise RuntimeError(f"{self.log_prefix} forward inputs of microbatch {mb} are "
                                   f"[{_describe([_meta(t) for t in inputs])}] but input_args says "
                                   f"[{_describe(self.inputs_meta)}]")
        else:
            if mb not in self._fwd_inputs:
                raise RuntimeError(f"{self.log_prefix} forward of microbatch {mb} ran before its inputs arrived")
            inputs = self._fwd_inputs.pop(mb)
            if self.has_backward:
                for t in inputs:
                    if _is_float(t):
                        t.requires_grad_(True)
        kwargs = kwargs or {}
        t0 = time.monotonic_ns()
        ddp = self._ddp()
        try:
            # DDP's gradient all-reduce belongs to the last microbatch's backward; its forwards never arm it.
            with (torch.enable_grad() if self.has_backward else torch.no_grad()), \
                    (ddp.no_sync() if ddp is not None else contextlib.nullcontext()):
                output = self.submod(*inputs, **kwargs)
        except Exception as e:
            raise RuntimeError(f"{self.log_prefix} failed to run forward of microbatch {mb}: "
                               f"{type(e).__name__}: {e}") from e
        self._span("fwd", mb, t0)
        outputs = _normalize_model_output_as_tuple(output)
        if not self.is_last:
            self._validate_fwd_outputs(outputs, mb)
            self._to_send[mb] = outputs
        else:
            self.output_chunks[mb] = output
        if self.has_backward:
            self.fwd_cache[mb] = (outputs, [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad])
        return output

    def _validate_fwd_outputs(self, outputs: Tuple[Any, ...], mb: int) -> None:
        """A stage that feeds another sends Tensors whose shapes stay those of the step's first microbatch."""
        for i, o in enumerate(outputs):
            if not isinstance(o, torch.Tensor):
                raise TypeError(f"{self.log_prefix} output {i} of microbatch {mb} is a {type(o).__name__}: a stage "
                                "that feeds the next stage must return a Tensor or a tuple of Tensors")
            if o.dtype.name not in _DTYPES:
                raise TypeError(f"{self.log_prefix} output {i} of microbatch {mb} has dtype {o.dtype.name}, which "
                                f"cannot be sent between stages (supported: {', '.join(_DTYPES)})")
        metas = tuple(_meta(o) for o in outputs)
        if self._outputs_meta is not None and metas != self._outputs_meta:
            raise RuntimeError(f"{self.log_prefix} forward outputs of microbatch {mb} are [{_describe(metas)}] but "
                               f"output_args says [{_describe(self._outputs_meta)}]")
        if self._send_meta is None:
            self._send_meta = metas
        elif metas != self._send_meta:
            raise RuntimeError(f"{self.log_prefix} forward outputs of microbatch {mb} are [{_describe(metas)}] but "
                               f"the next stage was told [{_describe(self._send_meta)}] (microbatch 0 of this "
                               "schedule's first step): every microbatch of every step must keep those shapes; "
                               "build a new schedule for other shapes")

    def backward_one_chunk(self, bwd_chunk_id: int, loss: Any = None, full_backward: bool = True,
                           last_backward: bool = False) -> None:
        """Backward of microbatch `bwd_chunk_id`: from `loss` on the last stage, else from the gradients the next
        stage sent. Parameter gradients accumulate in `.grad`; the input gradients wait in `bwd_cache`."""
        if not full_backward:
            raise NotImplementedError(f"{self.log_prefix} the split input/weight backward (zero-bubble schedules) "
                                      "is not supported; use a schedule with full backward steps")
        mb = bwd_chunk_id
        if mb not in self.fwd_cache:
            raise RuntimeError(f"{self.log_prefix} backward of microbatch {mb} ran before its forward")
        outputs, inputs = self.fwd_cache.pop(mb)
        if self.is_last:
            if loss is None:
                raise RuntimeError(f"{self.log_prefix} backward of microbatch {mb} needs a loss: give the schedule "
                                   "a loss_fn and the last stage's step() a target")
            roots, grads = [loss], [None]
        else:
            received = self._grad_outputs.pop(mb)
            pairs = [(o, g) for o, g in zip([o for o in outputs if _is_float(o)], received) if o.requires_grad]
            roots, grads = [o for o, _ in pairs], [g for _, g in pairs]
        t0 = time.monotonic_ns()
        ddp = self._ddp()
        try:
            if roots:
                if ddp is not None and last_backward:
                    # Arm DDP's reducer for this backward only: it all-reduces the gradients summed over
                    # every microbatch once, as PyTorch does for a DDP-wrapped stage.
                    ddp.reducer.prepare_for_forward(True)
                    ddp.reducer.prepare_for_backward(list(roots))
                torch.autograd.backward(roots, grad_tensors=grads)
            if self.dw_builder is not None:
                self.dw_builder()()
        except Exception as e:
            raise RuntimeError(f"{self.log_prefix} failed to run backward of microbatch {mb}: "
                               f"{type(e).__name__}: {e}") from e
        self._span("bwd", mb, t0)
        if not self.is_first:
            floats = [t for t in inputs if _is_float(t)]
            self.bwd_cache[mb] = tuple(torch.zeros_like(t) if t.grad is None else t.grad for t in floats)
        if self.is_last:
            # The outputs go back to the caller: without their graph, which backward has consumed.
            out = self.output_chunks[mb]
            self.output_chunks[mb] = tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in out) \
                if isinstance(out, tuple) else (out.detach() if isinstance(out, torch.Tensor) else out)

    def scale_grads(self, grad_scale_factor: int) -> None:
        """Divide every parameter gradient by `grad_scale_factor` (the number of microbatches for a mean loss)."""
        if grad_scale_factor != 1:
            with torch.no_grad():
                for p in self.submod.parameters():
                    if p.grad is not None:
                        p.grad.div_(grad_scale_factor)

    # ------------------------------------------------------------------ stages on one rank
    def set_local_fwd_input(self, prev_stage_outputs: Any, mb_index: int) -> None:
        """Take the previous stage's outputs (same rank) as this stage's inputs: detached leaves, no copy."""
        outs = _normalize_model_output_as_tuple(prev_stage_outputs)
        self._fwd_inputs[mb_index] = tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in outs)

    def get_local_bwd_output(self, mb_index: int) -> Tuple[Any, ...]:
        """This stage's input gradients for microbatch `mb_index` (for a previous stage on the same rank)."""
        return self.bwd_cache.pop(mb_index)

    def set_local_bwd_input(self, next_stage_bwd_outputs: Tuple[Any, ...], mb_index: int) -> None:
        """Take the next stage's input gradients (same rank) as this stage's output gradients."""
        self._grad_outputs[mb_index] = tuple(next_stage_bwd_outputs)

    # ------------------------------------------------------------------ point-to-point operations
    def _op(self, fn: Callable, tensor: Any, stage_index: int, tag: int) -> c10d.P2POp:
        return c10d.P2POp(fn, tensor, self._peer(stage_index), self._pg, tag)

    def _header(self) -> Any:
        """The shape header for the next stage (after this stage's first forward of the schedule)."""
        metas = self._send_meta or ()
        words = [_HEADER_MAGIC, len(metas)]
        for shape, dt in metas:
            words += [_DTYPES.index(dt), len(shape), *shape]
        if len(words) > _HEADER_LEN:
            raise ValueError(f"{self.log_prefix} sends {len(metas)} tensors with {len(words)} header words; the "
                             f"stage-to-stage header holds {_HEADER_LEN} (fewer outputs or dimensions are needed)")
        h = np.zeros(_HEADER_LEN, dtype=np.int64)
        h[:len(words)] = words
        return torch.from_numpy(h).to(self.device)

    def _act_tag(self) -> int:
        return _TAG_ACT if self.has_backward else _TAG_ACT_EVAL

    def _get_meta_send_op(self) -> c10d.P2POp:
        return self._op(c10d.isend, self._header(), self.stage_index + 1, _TAG_META)

    def _get_meta_recv_op(self) -> Tuple[c10d.P2POp, Any]:
        buf = torch.zeros(_HEADER_LEN, dtype=torch.int64, device=self.device)
        return self._op(c10d.irecv, buf, self.stage_index - 1, _TAG_META), buf

    def _set_recv_meta(self, header: Any) -> None:
        """Take the previous stage's shape header (checked against input_args) for the receive buffers."""
        h = [int(x) for x in header.cpu().numpy()]
        src = self._where(self.stage_index - 1)
        if h[0] != _HEADER_MAGIC:
            raise RuntimeError(f"{self.log_prefix} received a malformed shape header from {src}")
        metas, i = [], 2
        for _ in range(h[1]):
            code, ndim = h[i], h[i + 1]
            metas.append((tuple(h[i + 2:i + 2 + ndim]), _DTYPES[code]))
            i += 2 + ndim
        metas_t = tuple(metas)
        if self.inputs_meta is not None and metas_t != self.inputs_meta:
            raise RuntimeError(f"{self.log_prefix} input_args say [{_describe(self.inputs_meta)}] but {src} sends "
                               f"[{_describe(metas_t)}]")
        self._recv_meta = metas_t

    def get_fwd_recv_ops(self, fwd_chunk_id: int) -> List[c10d.P2POp]:
        """Receives of microbatch `fwd_chunk_id`'s inputs from the previous stage (into fresh buffers)."""
        if self.is_first or self._on_this_rank(self.stage_index - 1):
            return []
        if self._recv_meta is None:
            raise RuntimeError(f"{self.log_prefix} no shape header received from the previous stage")
        bufs = tuple(torch.empty(shape, dtype=getattr(torch, dt), device=self.device)
                     for shape, dt in self._recv_meta)
        self._fwd_inputs[fwd_chunk_id] = bufs
        return [self._op(c10d.irecv, b, self.stage_index - 1, self._act_tag()) for b in bufs]

    def get_fwd_send_ops(self, fwd_chunk_id: int) -> List[c10d.P2POp]:
        """Sends of microbatch `fwd_chunk_id`'s outputs to the next stage."""
        outputs = self._to_send.pop(fwd_chunk_id, ())
        if self.is_last or self._on_this_rank(self.stage_index + 1):
            return []
        return [self._op(c10d.isend, o.detach().contiguous(), self.stage_index + 1, self._act_tag()) for o in outputs]

    def get_bwd_recv_ops(self, bwd_chunk_id: int) -> List[c10d.P2POp]:
        """Receives of the gradients of microbatch `bwd_chunk_id`'s floating-point outputs from the next stage."""
        if not self.has_backward or self.is_last or self._on_this_rank(self.stage_index + 1):
            return []
        outputs = self.fwd_cache[bwd_chunk_id][0]
        bufs = tuple(torch.empty(tuple(o.shape), dtype=o.dtype, device=self.device) for o in outputs if _is_float(o))
        self._grad_outputs[bwd_chunk_id] = bufs
        return [self._op(c10d.irecv, b, self.stage_index + 1, _TAG_GRAD) for b in bufs]

    def get_bwd_send_ops(self, bwd_chunk_id: int) -> List[c10d.P2POp]:
        """Sends of microbatch `bwd_chunk_id`'s input gradients to the previous stage."""
        if not self.has_backward or self.is_first or self._on_this_rank(self.stage_index - 1):
            return []
        grads = self.bwd_cache.pop(bwd_chunk_id)
        return [self._op(c10d.isend, g.detach().contiguous(), self.stage_index - 1, _TAG_GRAD) for g in grads]


def _metas_of(args: Union[Any, Tuple[Any, ...]]) -> Tuple[Tuple[Tuple[int, ...], str], ...]:
    return tuple(((), "None") if t is None else _meta(t) for t in _normalize_model_output_as_tuple(args))


class PipelineStage(_PipelineStageBase):
    """A stage of a manually split model.

    Args:
        submodule: the part of the model this stage runs.
        stage_index: this stage's position, 0 to num_stages - 1.
        num_stages: stages in the whole pipeline (a multiple of the pipeline group's size; several per rank for
            interleaved schedules).
        device: where this stage's receive buffers live.
        input_args / output_args: example inputs and outputs (real or meta tensors). Shapes are otherwise taken
            from each step's first microbatch; when given, what the stage receives and sends is checked
            against them every step.
        output_grads / input_grads: example gradients of the outputs and inputs; a gradient has its tensor's
            shape and dtype (None for one that gets no gradient), which is checked here.
        group: the pipeline's process group (default: the world), e.g. one dimension of a device mesh.
        dw_builder: called after each backward; returns a function that runs weight-gradient work the module
            deferred in its own backward.
    """

    def __init__(self, submodule: Any, stage_index: int, num_stages: int, device: Any,
                 input_args: Optional[Union[Any, Tuple[Any, ...]]] = None,
                 output_args: Optional[Union[Any, Tuple[Any, ...]]] = None,
                 output_grads: Optional[Union[Any, Tuple[Any, ...]]] = None,
                 input_grads: Optional[Union[Any, Tuple[Any, ...]]] = None,
                 group: Optional[c10d.ProcessGroup] = None,
                 dw_builder: Optional[Callable[[], Callable[..., None]]] = None) -> None:
        super().__init__(submodule, stage_index, num_stages, device, group, dw_builder)
        if input_args is not None:
            self.inputs_meta = _metas_of(input_args)
        if output_args is not None and not self.is_last:
            self._outputs_meta = _metas_of(output_args)
        for grads, args, name in ((output_grads, output_args, "output"), (input_grads, input_args, "input")):
            if grads is None:
                continue
            if args is None:
                raise ValueError(f"{self.log_prefix} {name}_grads needs {name}_args to check against")
            pairs = list(zip(_normalize_model_output_as_tuple(grads), _normalize_model_output_as_tuple(args)))
            if len(pairs) != len(_normalize_model_output_as_tuple(args)) or any(
                    g is not None and _meta(g) != _meta(a) for g, a in pairs):
                raise ValueError(f"{self.log_prefix} {name}_grads must match {name}_args in number, shape and dtype "
                                 f"(None for a tensor without gradient), got [{_describe(_metas_of(grads))}] "
                                 f"for [{_describe(_metas_of(args))}]")
