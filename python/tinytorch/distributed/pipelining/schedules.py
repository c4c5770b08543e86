"""Pipeline schedules, as torch.distributed.pipelining.schedules: GPipe, 1F1B, interleaved 1F1B, looped BFS.

Every schedule is a compute order per rank: a list of actions (stage, F or B, microbatch), computed on every rank
for all ranks. `_add_send_recv` lowers those orders to ones with explicit SEND/RECV actions by playing the whole
pipeline forward: whenever a rank's next compute action has its input, it is appended to that rank's list, and if
its result must cross to another rank, the send goes right after it and the matching receive at the current end
of the receiver's list. Each send/receive pair thus has one place in a single global order that every rank's list
follows. With blocking point-to-point (the ring backend runs one operation at a time; NCCL runs them on one
stream) the earliest unfinished pair is always at the head of both ranks' queues, so a step cannot deadlock.

Waits are bounded by the process group's timeout and name the rank, the stage and the transfer. A rank whose
stage raises writes the error to the group's store; the other ranks poll for it while they wait, so every rank
still waiting fails within a fraction of a second naming the stage that failed instead of hanging.
"""
from __future__ import annotations

import json
import time
import weakref
from collections import Counter
from enum import Enum
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import tinytorch as torch
from .. import distributed_c10d as c10d
from ..store import DistError, DistNetworkError, DistTimeoutError
from .microbatch import TensorChunkSpec, merge_chunks, split_args_kwargs_into_chunks
from .stage import _PipelineStageBase

__all__ = [
    "get_schedule_class",
    "PipelineScheduleSingle",
    "PipelineScheduleMulti",
    "Schedule1F1B",
    "ScheduleGPipe",
    "ScheduleInterleaved1F1B",
    "ScheduleLoopedBFS",
    "ScheduleInterleavedZeroBubble",
    "ScheduleZBVZeroBubble",
    "ScheduleDualPipeV",
]


class _ComputationType(Enum):
    FORWARD = 1
    FULL_BACKWARD = 10
    SEND_F = 6
    RECV_F = 7
    SEND_B = 8
    RECV_B = 9

    def __str__(self) -> str:
        return {"FORWARD": "F", "FULL_BACKWARD": "B"}.get(self.name, self.name)


FORWARD = _ComputationType.FORWARD
FULL_BACKWARD = _ComputationType.FULL_BACKWARD
SEND_F = _ComputationType.SEND_F
RECV_F = _ComputationType.RECV_F
SEND_B = _ComputationType.SEND_B
RECV_B = _ComputationType.RECV_B
F, B = FORWARD, FULL_BACKWARD


class _Action(NamedTuple):
    stage_index: int
    computation_type: _ComputationType
    microbatch_index: Optional[int] = None

    def __repr__(self) -> str:
        mb = "" if self.microbatch_index is None else str(self.microbatch_index)
        return f"{self.stage_index}{self.computation_type}{mb}"


# ---------------------------------------------------------------------- compute orders (one rank each)


def _gpipe_order(rank: int, m: int) -> List[_Action]:
    return [_Action(rank, F, i) for i in range(m)] + [_Action(rank, B, i) for i in range(m)]


def _1f1b_order(rank: int, p: int, m: int) -> List[_Action]:
    """Stage `rank` of `p`: min(m, p - rank) warm-up forwards, then a backward and a forward in turn, then the
    remaining backwards; at most p - rank microbatches are in flight."""
    warmup = min(m, p - rank)
    out = [_Action(rank, F, i) for i in range(warmup)]
    fwd = warmup
    for bwd in range(m):
        out.append(_Action(rank, B, bwd))
        if fwd < m:
            out.append(_Action(rank, F, fwd))
            fwd += 1
    return out


def _interleaved_order(rank: int, p: int, v: int, m: int) -> List[_Action]:
    """Narayanan et al.'s interleaved 1F1B (depth first) for rank `rank` holding stages rank, rank + p, ...:
    forwards go through the local stages in rounds of `mpr` microbatches, backwards through them in reverse."""
    rounds = max(1, m // p)
    mpr = m // rounds
    warmup = min((v - 1) * mpr + 2 * (p - 1 - rank), m * v)
    total = m * v
    fwd_next: Counter = Counter()
    bwd_next: Counter = Counter()
    out: List[_Action] = []

    def forward(k: int) -> None:
        stage = ((k // mpr) % v) * p + rank
        out.append(_Action(stage, F, fwd_next[stage]))
        fwd_next[stage] += 1

    def backward(k: int) -> None:
        stage = (v - 1 - (k // mpr) % v) * p + rank
        out.append(_Action(stage, B, bwd_next[stage]))
        bwd_next[stage] += 1

    for k in range(warmup):
        forward(k)
    for k in range(total - warmup):
        forward(warmup + k)
        backward(k)
    for k in range(total - warmup, total):
        backward(k)
    return out


def _looped_bfs_order(rank: int, p: int, v: int, m: int) -> List[_Action]:
    """Breadth first: every microbatch through local stage 0, then local stage 1, ...; backwards in reverse."""
    stages = range(rank, p * v, p)
    out = [_Action(s, F, i) for s in stages for i in range(m)]
    return out + [_Action(s, B, i) for s in reversed(stages) for i in reversed(range(m))]


def _add_send_recv(compute: Dict[int, List[_Action]], stage_to_rank: Callable[[int], int],
                   num_stages: int) -> Dict[int, List[_Action]]:
    """Insert SEND/RECV actions into per-rank compute orders so that all ranks follow one global order of
    transfers (see the module docstring). Raises if the orders cannot all complete."""
    out: Dict[int, List[_Action]] = {r: [] for r in compute}
    done = set()
    pos = {r: 0 for r in compute}

    def ready(a: _Action) -> bool:
        s, kind, mb = a
        if kind is F:
            return s == 0 or (s - 1, F, mb) in done
        return (s, F, mb) in done and (s == num_stages - 1 or (s + 1, B, mb) in done)

    while any(pos[r] < len(compute[r]) for r in compute):
        progressed = False
        for r in sorted(compute):
            if pos[r] == len(compute[r]) or not ready(compute[r][pos[r]]):
                continue
            a = compute[r][pos[r]]
            pos[r] += 1
            progressed = True
            done.add((a.stage_index, a.computation_type, a.microbatch_index))
            out[r].append(a)
            peer = a.stage_index + 1 if a.computation_type is F else a.stage_index - 1
            if 0 <= peer < num_stages and stage_to_rank(peer) != r:
                send, recv = (SEND_F, RECV_F) if a.computation_type is F else (SEND_B, RECV_B)
                out[r].append(_Action(a.stage_index, send, a.microbatch_index))
                out[stage_to_rank(peer)].append(_Action(peer, recv, a.microbatch_index))
        if not progressed:
            stuck = {r: compute[r][pos[r]] for r in compute if pos[r] < len(compute[r])}
            raise RuntimeError(f"malformed pipeline schedule: no rank can proceed; next actions {stuck}")
    return out


# ---------------------------------------------------------------------- waits that fail instead of hanging

_POLL_S = 0.1
_REPORT_GRACE_S = 2.0
_step_counters: "weakref.WeakKeyDictionary[c10d.ProcessGroup, int]" = weakref.WeakKeyDictionary()


class _StepComm:
    """One step's view of the pipeline group: bounded waits that also watch the store for another rank's
    failure, and the means to report this rank's own."""

    def __init__(self, pg: c10d.ProcessGroup) -> None:
        seq = _step_counters.get(pg, 0) + 1
        _step_counters[pg] = seq
        self.pg = pg
        self.prefix = f"pipelining/step{seq}"
        self.rank = c10d.get_global_rank(pg, pg.rank())
        self._error_key = f"{self.prefix}/error"

    def abort(self, message: str) -> None:
        """Tell the other ranks that this step failed here (the first report wins)."""
        try:
            if not self.pg._store.check([self._error_key]):
                self.pg._store.set(self._error_key, message)
        except Exception:  # noqa: BLE001 - the store may be gone with a dead rank; the caller raises anyway
            pass

    def _failure(self, grace: float = 0.0) -> Optional[str]:
        """Another rank's report of this step's failure, waiting up to `grace` seconds for one."""
        store = self.pg._store
        try:
            if grace > 0:
                try:
                    store.wait([self._error_key], grace)
                except DistTimeoutError:
                    return None
            if store.check([self._error_key]):
                return store.get(self._error_key).decode()
        except DistError:  # the store went down with the rank that hosted it
            pass
        return None

    def _abandoned(self, what: str, failure: str) -> DistError:
        return DistError(f"rank {self.rank}: {what}: the pipeline step was abandoned because {failure}")

    def _poll(self, attempt: Callable[[float], bool], what: str) -> None:
        deadline = time.monotonic() + self.pg._timeout
        while not attempt(max(0.001, min(_POLL_S, deadline - time.monotonic()))):
            failure = self._failure()
            if failure is not None:
                raise self._abandoned(what, failure)
            if time.monotonic() >= deadline:
                raise DistTimeoutError(f"rank {self.rank}: {what} did not complete within {self.pg._timeout:g}s "
                                       "(the process group's timeout)")

    def wait(self, works: Sequence[Any], what: str, hint: Optional[str] = None) -> None:
        """Wait for point-to-point works; raise naming `what` (and `hint` if one fails) on error, another rank's
        failure, or timeout."""
        for w in works:
            def attempt(slice_s: float, w: Any = w) -> bool:
                try:
                    w.wait(timeout=slice_s)
                    return True
                except DistError as e:
                    if not w.is_completed():
                        return False
                    # A peer that hung up has usually failed itself: name that failure, which its rank reports in
                    # a moment (or has reported already).
                    # The ring names the group's first failure: when it was another rank's, wait for that
                    # rank's report; when it was this rank's, this rank's own error is the cause to raise.
                    mine = f"first failure in this group: rank {self.pg.rank()}:"
                    elsewhere = isinstance(e, DistNetworkError) or \
                        ("first failure in this group: rank " in str(e) and mine not in str(e))
                    failure = self._failure(grace=_REPORT_GRACE_S if elsewhere else 0.0)
                    if failure is not None and mine not in failure:
                        raise self._abandoned(what, failure) from e
                    raise type(e)(f"rank {self.rank}: {what} failed: {e}" + (f" ({hint})" if hint else "")) from e

            self._poll(attempt, what)

    def exchange(self, name: str, value: str, what: str) -> List[str]:
        """Every group rank's `value` (through the store), in group-rank order."""
        store = self.pg._store
        store.set(f"{self.prefix}/{name}/{self.pg.rank()}", value)
        out = []
        for r in range(self.pg.size()):
            key = f"{self.prefix}/{name}/{r}"

            def attempt(slice_s: float, key: str = key) -> bool:
                try:
                    store.wait([key], slice_s)
                    return True
                except DistTimeoutError:
                    return False

            self._poll(attempt, f"{what} (waiting for group rank {r})")
            out.append(store.get(key).decode())
        return out


# ---------------------------------------------------------------------- schedules


class _PipelineSchedule:
    """Splits the batch, runs the microbatches in the schedule's order, computes losses, merges outputs."""

    def __init__(self, n_microbatches: int, loss_fn: Optional[Callable[..., Any]] = None,
                 args_chunk_spec: Optional[Tuple[TensorChunkSpec, ...]] = None,
                 kwargs_chunk_spec: Optional[Dict[str, TensorChunkSpec]] = None,
                 output_merge_spec: Optional[Union[Dict[str, Any], Tuple[Any, ...]]] = None,
                 scale_grads: bool = True) -> None:
        if isinstance(n_microbatches, bool) or not isinstance(n_microbatches, int) or n_microbatches < 1:
            raise ValueError(f"n_microbatches must be a positive integer, got {n_microbatches!r}")
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads
        self._args_chunk_spec = args_chunk_spec
        self._kwargs_chunk_spec = kwargs_chunk_spec
        self._output_merge_spec = output_merge_spec
        self._has_backward = loss_fn is not None
        self._internal_losses: Dict[int, Any] = {}
        self._loss_kwargs: Dict[str, Any] = {}
        self._stages: List[_PipelineStageBase] = []
        self._checked = False
        self._shapes: Dict[int, Tuple[Any, Any]] = {}
        self._lowered: Dict[bool, Dict[int, List[_Action]]] = {}

    # -------------------------------------------------------------- placement
    def _setup(self, stages: List[_PipelineStageBase]) -> None:
        """Check that `stages` are this rank's share under loop placement (stage i on group rank i % size)."""
        if not stages:
            raise ValueError(f"{type(self).__name__} needs at least one stage")
        first = stages[0]
        for s in stages:
            if not isinstance(s, _PipelineStageBase):
                raise TypeError(f"{type(self).__name__}: expected PipelineStage objects, got {type(s).__name__}")
            if s.num_stages != first.num_stages or s._pg is not first._pg:
                raise ValueError(f"{type(self).__name__}: all local stages need the same num_stages and group")
        self._stages = stages
        self._pg = first._pg
        self._num_stages = first.num_stages
        self.pp_group_size = first.group_size
        self.rank = first.group_rank
        if self._num_stages % self.pp_group_size != 0:
            raise ValueError(f"{type(self).__name__}: num_stages ({self._num_stages}) must be a multiple of the "
                             f"pipeline group's size ({self.pp_group_size})")
        self.n_local_stages = self._num_stages // self.pp_group_size
        expected = list(range(self.rank, self._num_stages, self.pp_group_size))
        have = sorted(s.stage_index for s in stages)
        if have != expected:
            raise ValueError(f"{type(self).__name__} places stage i on group rank i % {self.pp_group_size}: group "
                             f"rank {self.rank} must hold stages {expected}, but was given stages {have}")
        self.stage_index_to_group_rank = {i: i % self.pp_group_size for i in range(self._num_stages)}
        for s in stages:
            s.stage_index_to_group_rank = self.stage_index_to_group_rank
        self._check_microbatches()
        self.pipeline_order = {r: self._compute_order(r) for r in range(self.pp_group_size)}

    def _check_microbatches(self) -> None:
        """Raise if the schedule cannot run `n_microbatches` on this pipeline (checked before building orders)."""

    def _compute_order(self, rank: int) -> List[_Action]:
        raise NotImplementedError

    def _order_with_comms(self, has_backward: bool) -> List[_Action]:
        if has_backward not in self._lowered:
            orders = {r: [a for a in acts if has_backward or a.computation_type is F]
                      for r, acts in self.pipeline_order.items()}
            self._lowered[has_backward] = _add_send_recv(orders, self.stage_index_to_group_rank.__getitem__,
                                                         self._num_stages)
        return self._lowered[has_backward][self.rank]

    def _check_schedules_agree(self, comm: _StepComm) -> None:
        """Once: every rank of the group must run the same schedule class, microbatch count and stage count."""
        mine = [type(self).__name__, self._n_microbatches, self._num_stages, [s.stage_index for s in self._stages]]
        every = [json.loads(v) for v in comm.exchange("config", json.dumps(mine), "comparing pipeline schedules")]
        if any(e[:3] != every[0][:3] for e in every):
            listing = "; ".join(f"group rank {r}: {cls}(n_microbatches={n}, stages {st} of {ns})"
                                for r, (cls, n, ns, st) in enumerate(every))
            raise ValueError(f"the ranks of the pipeline group run different schedules ({listing}): every rank must "
                             "build the same schedule class with the same n_microbatches and num_stages")

    # -------------------------------------------------------------- step
    def step(self, *args: Any, target: Any = None, losses: Optional[List[Any]] = None, return_outputs: bool = True,
             loss_kwargs: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Any:
        """Run one iteration on the whole batch: the first stage's rank passes the model inputs, the last stage's
        rank `target=` (and optionally `losses=[]`, filled with one loss per microbatch; `loss_kwargs` go to
        loss_fn). Returns the merged output on the last stage's rank (unless return_outputs=False), else None."""
        comm = _StepComm(self._pg)
        try:
            if self._has_backward and not torch.is_grad_enabled():
                raise RuntimeError("step() requires gradients to be enabled for backward computation; it should not "
                                   "be used under torch.no_grad() context. Please call eval() instead.")
            first_step = not self._checked
            if first_step:
                self._check_schedules_agree(comm)
                self._checked = True
            for stage in self._stages:
                stage.has_backward = self._has_backward
                stage.clear_runtime_states()
                # The shapes this schedule's first step established (stages may serve several schedules).
                stage._send_meta, stage._recv_meta = self._shapes.get(stage.stage_index, (None, None))
            if losses is not None and not isinstance(losses, list):
                raise TypeError(f"losses must be a list but got a {type(losses)}")
            self._internal_losses.clear()
            self._loss_kwargs = loss_kwargs or {}
            args_split, kwargs_split = self._split_inputs(args, kwargs)
            targets_split = None if target is None else self._split_target(target)
            self._step_microbatches(args_split, kwargs_split, targets_split, losses, comm, first_step)
            self._shapes = {stage.stage_index: (stage._send_meta, stage._recv_meta) for stage in self._stages}
        except BaseException as e:
            where = ", ".join(f"stage {s.stage_index}" for s in self._stages)
            comm.abort(f"rank {comm.rank} ({where}) failed: {type(e).__name__}: {e}")
            raise
        for stage in self._stages:
            if stage.is_last and return_outputs:
                return self._merge_outputs([stage.output_chunks[i] for i in range(self._n_microbatches)])
        return None

    def eval(self, *args: Any, target: Any = None, losses: Optional[List[Any]] = None, **kwargs: Any) -> Any:
        """step() with forwards only (no backward, no gradients); losses are computed when a target is given."""
        has_backward = self._has_backward
        try:
            self._has_backward = False
            return self.step(*args, target=target, losses=losses, **kwargs)
        finally:
            self._has_backward = has_backward

    def _split_inputs(self, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[List[Tuple], List[Dict]]:
        n = self._n_microbatches
        if not args and not kwargs:
            if any(s.is_first for s in self._stages):
                raise ValueError("step(): this rank holds the first stage, so it must pass the batch (the model's "
                                 "inputs) to step()")
            return [()] * n, [{}] * n
        arg_mbs, kwarg_mbs = split_args_kwargs_into_chunks(args, kwargs, n, self._args_chunk_spec,
                                                           self._kwargs_chunk_spec)
        if len(arg_mbs) != n:
            raise ValueError(f"step(): the batch splits into only {len(arg_mbs)} microbatches, not the schedule's "
                             f"n_microbatches={n}")
        for c, name in [(a, f"args[{i}]") for i, a in enumerate(zip(*arg_mbs))] + \
                       [(tuple(k[key] for k in kwarg_mbs), f"kwargs['{key}']") for key in kwargs]:
            self._check_even(name, c)
        return arg_mbs, kwarg_mbs

    def _check_even(self, name: str, chunks: Sequence[Any]) -> None:
        shapes = [tuple(t.shape) for t in chunks if isinstance(t, torch.Tensor)]
        if len(set(shapes)) > 1:
            raise ValueError(f"step(): {name} does not split into {self._n_microbatches} equal microbatches (their "
                             f"shapes would be {shapes}); the batch size must be divisible by n_microbatches, since "
                             "every microbatch travels through the stages in buffers of one shape")

    def _split_target(self, target: Any) -> List[Any]:
        if not isinstance(target, torch.Tensor):
            raise TypeError(f"step(): target must be a Tensor, got {type(target).__name__}")
        if target.dim() == 0 or target.size(0) < self._n_microbatches:
            raise ValueError(f"step(): target of shape {tuple(target.shape)} cannot be split into "
                             f"{self._n_microbatches} microbatches along dim 0")
        parts = list(torch.tensor_split(target, self._n_microbatches))
        self._check_even("target", parts)
        return parts

    def _merge_outputs(self, output_chunks: List[Any]) -> Any:
        return merge_chunks(output_chunks, self._output_merge_spec)

    def _maybe_compute_loss(self, stage: _PipelineStageBase, output: Any, target_mbs: Optional[List[Any]],
                            mb: int) -> None:
        if not stage.is_last or self._loss_fn is None:
            return
        if target_mbs is None:
            if self._has_backward:
                raise ValueError(f"{stage.log_prefix} step() on the last stage needs target= for loss_fn (or call "
                                 "eval() for forwards only)")
            return
        try:
            loss = self._loss_fn(output, target_mbs[mb], **self._loss_kwargs)
        except Exception as e:
            raise RuntimeError(f"{stage.log_prefix} failed to compute the loss of microbatch {mb}: "
                               f"{type(e).__name__}: {e}") from e
        self._internal_losses[mb] = loss

    def _update_losses(self, losses: Optional[List[Any]]) -> None:
        if losses is None or not any(s.is_last for s in self._stages):
            return
        if len(self._internal_losses) != self._n_microbatches:
            raise RuntimeError(f"Expecting {self._n_microbatches} losses but got {len(self._internal_losses)}")
        losses.clear()
        losses.extend(self._internal_losses[i] for i in range(self._n_microbatches))

    def _step_microbatches(self, arg_mbs: List[Tuple[Any, ...]], kwarg_mbs: List[Dict[str, Any]],
                           target_mbs: Optional[List[Any]], losses: Optional[List[Any]], comm: _StepComm,
                           first_step: bool) -> None:
        """Run this rank's lowered actions on the split microbatches; `first_step` sends the shape headers."""
        stages = {s.stage_index: s for s in self._stages}
        n = self._n_microbatches
        recvs: Dict[Tuple[_ComputationType, int, int], Tuple[List[Any], str, Optional[str]]] = {}
        sends: List[Tuple[List[Any], str]] = []
        backwards: Counter = Counter()
        for action in self._order_with_comms(self._has_backward):
            # Finished sends let go of their tensors now rather than at the end of the step.
            sends = [(works, what) for works, what in sends if not _finished(works, what, comm)]
            s, kind, mb = action
            stage = stages[s]
            if kind is RECV_F:
                what = f"{stage.log_prefix} receiving microbatch {mb}'s activations from {stage._where(s - 1)}"
                if mb == 0 and first_step:
                    op, header = stage._get_meta_recv_op()
                    comm.wait(c10d.batch_isend_irecv([op]), f"{stage.log_prefix} receiving the shape header from "
                                                            f"{stage._where(s - 1)}")
                    stage._set_recv_meta(header)
                # Tags say whether activations belong to a training or a forward-only step.
                hint = f"this rank runs {'step()' if self._has_backward else 'eval() or a schedule without loss_fn'}" \
                    f"; a different tag means {stage._where(s - 1)} does not"
                recvs[(F, s, mb)] = (c10d.batch_isend_irecv(stage.get_fwd_recv_ops(mb)), what, hint)
            elif kind is SEND_F:
                what = f"{stage.log_prefix} sending microbatch {mb}'s activations to {stage._where(s + 1)}"
                ops = ([stage._get_meta_send_op()] if mb == 0 and first_step else []) + stage.get_fwd_send_ops(mb)
                sends.append((c10d.batch_isend_irecv(ops), what))
            elif kind is RECV_B:
                what = f"{stage.log_prefix} receiving microbatch {mb}'s gradients from {stage._where(s + 1)}"
                recvs[(B, s, mb)] = (c10d.batch_isend_irecv(stage.get_bwd_recv_ops(mb)), what, None)
            elif kind is SEND_B:
                what = f"{stage.log_prefix} sending microbatch {mb}'s input gradients to {stage._where(s - 1)}"
                sends.append((c10d.batch_isend_irecv(stage.get_bwd_send_ops(mb)), what))
            elif kind is F:
                if (F, s, mb) in recvs:
                    comm.wait(*recvs.pop((F, s, mb)))
                output = stage.forward_one_chunk(mb, arg_mbs[mb], kwarg_mbs[mb])
                self._maybe_compute_loss(stage, output, target_mbs, mb)
                if s + 1 in stages:
                    stage._to_send.pop(mb, None)
                    stages[s + 1].set_local_fwd_input(output, mb)
            else:
                if (B, s, mb) in recvs:
                    comm.wait(*recvs.pop((B, s, mb)))
                backwards[s] += 1
                last = backwards[s] == n
                stage.backward_one_chunk(mb, loss=self._internal_losses.get(mb) if stage.is_last else None,
                                         last_backward=last)
                if last:
                    stage.scale_grads(n if self.scale_grads else 1)
                if s - 1 in stages:
                    stages[s - 1].set_local_bwd_input(stage.get_local_bwd_output(mb), mb)
        for works, what in sends:
            comm.wait(works, what)
        self._update_losses(losses)


def _finished(works: List[Any], what: str, comm: _StepComm) -> bool:
    """True when every work is done (raising, through comm.wait, if one failed)."""
    if not all(w.is_completed() for w in works):
        return False
    comm.wait(works, what)
    return True


class PipelineScheduleSingle(_PipelineSchedule):
    """Base of schedules with one stage per rank (`num_stages` equals the pipeline group's size).

    Gradients are divided by the number of microbatches when `scale_grads` (the default), which matches a loss
    function that averages; pass `scale_grads=False` for a summed loss."""

    def __init__(self, stage: _PipelineStageBase, n_microbatches: int, loss_fn: Optional[Callable] = None,
                 args_chunk_spec: Optional[Tuple[TensorChunkSpec, ...]] = None,
                 kwargs_chunk_spec: Optional[Dict[str, TensorChunkSpec]] = None,
                 output_merge_spec: Optional[Union[Dict[str, Any], Tuple[Any, ...]]] = None,
                 scale_grads: bool = True) -> None:
        super().__init__(n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec, output_merge_spec,
                         scale_grads)
        self._stage = stage
        if isinstance(stage, _PipelineStageBase) and stage.num_stages != stage.group_size:
            raise ValueError(f"{type(self).__name__} runs one stage per rank: num_stages ({stage.num_stages}) must "
                             f"equal the pipeline group's size ({stage.group_size}); for several stages per rank "
                             "use ScheduleInterleaved1F1B or ScheduleLoopedBFS")
        self._setup([stage])


class ScheduleGPipe(PipelineScheduleSingle):
    """GPipe: every microbatch's forward, then every backward (fill, drain)."""

    def _compute_order(self, rank: int) -> List[_Action]:
        return _gpipe_order(rank, self._n_microbatches)


class Schedule1F1B(PipelineScheduleSingle):
    """1F1B: warm-up forwards, then one backward and one forward in turn; p - s microbatches in flight at most."""

    def _check_microbatches(self) -> None:
        if self._n_microbatches < self._num_stages:
            raise ValueError(f"Number of microbatches ({self._n_microbatches}) must be greater than or equal to the "
                             f"number of stages ({self._num_stages}).")

    def _compute_order(self, rank: int) -> List[_Action]:
        return _1f1b_order(rank, self.pp_group_size, self._n_microbatches)


class PipelineScheduleMulti(_PipelineSchedule):
    """Base of schedules with several stages per rank: group rank r holds stages r, r + p, r + 2p, ...

    Gradients are divided by the number of microbatches when `scale_grads` (the default)."""

    def __init__(self, stages: List[_PipelineStageBase], n_microbatches: int, loss_fn: Optional[Callable] = None,
                 args_chunk_spec: Optional[Tuple[TensorChunkSpec, ...]] = None,
                 kwargs_chunk_spec: Optional[Dict[str, TensorChunkSpec]] = None,
                 output_merge_spec: Optional[Union[Dict[str, Any], Tuple[Any, ...]]] = None,
                 scale_grads: bool = True) -> None:
        super().__init__(n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec, output_merge_spec,
                         scale_grads)
        if not isinstance(stages, (list, tuple)):
            raise TypeError(f"{type(self).__name__} takes a list of this rank's stages, got {type(stages).__name__}")
        self._setup(list(stages))


class ScheduleLoopedBFS(PipelineScheduleMulti):
    """Breadth-first looped schedule (Lamy-Poirier 2022): all microbatches through one local stage before the
    next; backwards in reverse order."""

    def __init__(self, stages: List[_PipelineStageBase], n_microbatches: int, loss_fn: Optional[Callable] = None,
                 output_merge_spec: Optional[Union[Dict[str, Any], Tuple[Any, ...]]] = None,
                 scale_grads: bool = True) -> None:
        super().__init__(stages, n_microbatches, loss_fn, output_merge_spec=output_merge_spec,
                         scale_grads=scale_grads)

    def _compute_order(self, rank: int) -> List[_Action]:
        return _looped_bfs_order(rank, self.pp_group_size, self.n_local_stages, self._n_microbatches)


class ScheduleInterleaved1F1B(PipelineScheduleMulti):
    """Interleaved 1F1B (Narayanan et al. 2021): several stages per rank, depth first; the bubble shrinks to
    (p - 1) / (v m). The microbatch count must be a multiple of the number of rounds, max(1, m // p)."""

    def _check_microbatches(self) -> None:
        rounds = max(1, self._n_microbatches // self.pp_group_size)
        if self._n_microbatches % rounds != 0:
            raise ValueError("Interleaved 1F1B requires the number of microbatches to be a multiple of the number "
                             f"of rounds ({rounds}), but got {self._n_microbatches}.")

    def _compute_order(self, rank: int) -> List[_Action]:
        return _interleaved_order(rank, self.pp_group_size, self.n_local_stages, self._n_microbatches)


class _SplitBackwardSchedule:
    """Zero-bubble schedules split each backward into input- and weight-gradient steps; tinytorch runs whole
    backwards only, so these names import (scripts that mention them load) and constructing one raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__}: zero-bubble schedules need the backward split into input "
                                  "and weight gradients, which tinytorch's pipelining does not do; use "
                                  "ScheduleInterleaved1F1B (bubble (p - 1) / (v m)) or Schedule1F1B")


class ScheduleInterleavedZeroBubble(_SplitBackwardSchedule):
    """ZB1P (Qi et al. 2023): not available, raises."""


class ScheduleZBVZeroBubble(_SplitBackwardSchedule):
    """ZB-V: not available, raises."""


class ScheduleDualPipeV(_SplitBackwardSchedule):
    """DualPipeV: not available, raises."""


_SCHEDULES = {
    "1F1B": Schedule1F1B,
    "Interleaved1F1B": ScheduleInterleaved1F1B,
    "GPipe": ScheduleGPipe,
    "LoopedBFS": ScheduleLoopedBFS,
    "InterleavedZeroBubble": ScheduleInterleavedZeroBubble,
    "ZBVZeroBubble": ScheduleZBVZeroBubble,
    "DualPipeV": ScheduleDualPipeV,
}


def get_schedule_class(schedule_name: str) -> type:
    """The schedule class for a name such as "1F1B" or "GPipe" (case-insensitive)."""
    for name, cls in _SCHEDULES.items():
        if schedule_name.lower() == name.lower():
            return cls
    raise ValueError(f"Unknown schedule name '{schedule_name}'. The valid options are {list(_SCHEDULES)}")
