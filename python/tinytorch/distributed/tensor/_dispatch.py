"""The DTensor op dispatcher: sharding rule -> redistribute inputs -> run the op on local pieces -> wrap outputs.

A rule (registered per op name in _ops/) receives an OpCall and returns the result, usually through `run`:
it names the placements each DTensor argument must have and the placements and global shape of each output.
`run` redistributes the arguments (recorded, so backward runs the dual collectives), hands their local pieces
to the ordinary tinytorch op through to_local nodes, and wraps the outputs through from_local nodes.

The to_local node of an input also says how its local gradient is laid out. One rule covers every op: an input
that is Replicate on a mesh dim where some output is not (sharded or a pending sum) only sees part of the
output's gradient, so its local gradient is a Partial sum there; otherwise it has the input's own placement
(Partial read as Replicate). Partial sums of gradients are reduced where a layout needs it: at a redistribute
back to Shard (reduce-scatter) or Replicate (all-reduce), or when the gradient lands in a parameter.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..._tensor import Tensor
from ._api import DTensor, _from_local, _mixed_error, _redistribute, _to_local
from .placement_types import Partial, Placement, Replicate

_RULES: dict[str, Callable] = {}
_LOSS_PARALLEL_RULES: dict[str, Callable] = {}  # used instead inside parallel.loss_parallel()
_ATEN = {"__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub", "__rsub__": "rsub",
         "__isub__": "sub_", "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_", "__truediv__": "div",
         "__rtruediv__": "div", "__itruediv__": "div_", "__matmul__": "matmul", "__rmatmul__": "matmul",
         "__pow__": "pow", "__rpow__": "pow", "__neg__": "neg", "__getitem__": "index", "__setitem__": "index_put_"}


class _Flags:
    implicit_replication = False  # experimental.implicit_replication(): plain tensors count as Replicate
    loss_parallel = False  # parallel.loss_parallel(): cross_entropy and log_softmax on class-sharded logits


flags = _Flags()


def register(*names: str) -> Callable:
    """Register a sharding rule under op names (function names, Tensor method names, dunder operators)."""
    def deco(rule: Callable) -> Callable:
        for n in names:
            _RULES[n] = rule
        return rule
    return deco


def register_loss_parallel(*names: str) -> Callable:
    """Register the rule an op follows inside loss_parallel() (it takes plain tensors as targets)."""
    def deco(rule: Callable) -> Callable:
        rule.allow_plain = True
        for n in names:
            _LOSS_PARALLEL_RULES[n] = rule
        return rule
    return deco


def aten_name(name: str) -> str:
    """PyTorch's name of the op behind a tinytorch function or method (for error messages)."""
    return f"aten.{_ATEN.get(name, name)}.default"


class OpCall:
    """One call of an op with DTensor arguments: the op, its arguments and the DTensors among them, in order."""

    __slots__ = ("name", "fn", "args", "kwargs", "dtensors", "mesh")

    def __init__(self, name: str, fn: Callable, args: tuple, kwargs: dict, allow_plain: bool = False) -> None:
        self.name, self.fn = name, fn
        found: list = []
        plain: list = []
        for a in args:
            _collect(a, found, plain)
        for v in kwargs.values():
            _collect(v, found, plain)
        mesh = found[0]._mesh
        for d in found[1:]:
            if d._mesh != mesh:
                raise RuntimeError(f"{aten_name(name)}: DTensor does not support cross-mesh operation on "
                                   f"{mesh} and {d._mesh}; redistribute or rebuild the DTensors on one DeviceMesh")
        if plain and not allow_plain:
            if flags.implicit_replication:
                args, kwargs = _replicate_plain(args, kwargs, mesh)
                found = []
                for a in args:
                    _collect(a, found, [])
                for v in kwargs.values():
                    _collect(v, found, [])
            else:
                raise _mixed_error(aten_name(name))
        self.args, self.kwargs, self.dtensors, self.mesh = args, kwargs, found, mesh

    def describe(self) -> str:
        """The DTensor arguments' placements and shapes, for error messages."""
        return ", ".join(f"{tuple(d._placements)} {tuple(d._gshape)}" for d in self.dtensors)

    def unsupported(self, why: str = "") -> NotImplementedError:
        extra = f" ({why})" if why else ""
        return NotImplementedError(f"Operator {aten_name(self.name)} does not have a sharding strategy registered for "
                                   f"DTensor inputs with placements {self.describe()}{extra}. Call "
                                   ".full_tensor() (the whole tensor) or .to_local() (this rank's piece) first")


def _collect(x: Any, found: list, plain: list) -> None:
    if type(x) is DTensor:
        found.append(x)
    elif isinstance(x, Tensor):
        if x._data.size != 1:  # a one-element tensor is a scalar and counts as replicated
            plain.append(x)
    elif type(x) is list or type(x) is tuple:
        for e in x:
            if type(e) is DTensor:
                found.append(e)
            elif isinstance(e, Tensor) and e._data.size != 1:
                plain.append(e)


def _replicate_plain(args: tuple, kwargs: dict, mesh: Any) -> tuple:
    def conv(x: Any) -> Any:
        if type(x) is not DTensor and isinstance(x, Tensor) and x._data.size != 1:
            return DTensor.from_local(x, mesh, [Replicate()] * mesh.ndim)
        if type(x) is list or type(x) is tuple:
            return type(x)(conv(e) for e in x)
        return x
    return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}


def dispatch(name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
    """Run op `name` (fn: the plain tinytorch op) on arguments that include DTensors."""
    rule = _LOSS_PARALLEL_RULES.get(name) if flags.loss_parallel else None
    rule = rule or _RULES.get(name)
    call = OpCall(name, fn, args, kwargs, getattr(rule, "allow_plain", False))
    if rule is None:
        raise call.unsupported()
    return rule(call)


# ------------------------------------------------------------------ running an op on local pieces


def grad_placements(target: Sequence[Placement], outs: Sequence[Sequence[Placement]]) -> tuple:
    """How an input's local gradient is laid out, given its placements and the outputs' (see the module docs)."""
    result = []
    for m, p in enumerate(target):
        if p.is_replicate():
            result.append(Partial("sum") if any(not o[m].is_replicate() for o in outs) else p)
        elif p.is_partial():
            result.append(Replicate())
        else:
            result.append(p)
    return tuple(result)


def localize(x: DTensor, target: tuple, outs: Sequence[Sequence[Placement]]) -> Tensor:
    """x redistributed to `target` and handed over as its local piece (both steps recorded)."""
    if x._placements != target:
        x = _redistribute(x, target)
    return _to_local(x, grad_placements(target, outs))


def wrap(local: Tensor, mesh: Any, placements: tuple, gshape: Sequence[int]) -> DTensor:
    """A local result as this rank's piece of a DTensor (recorded)."""
    return _from_local(local, mesh, tuple(placements), tuple(int(s) for s in gshape), None)


def replace_dtensors(obj: Any, it: Any) -> Any:
    """obj with each DTensor (also inside lists/tuples) replaced by the next item of `it`."""
    if type(obj) is DTensor:
        return next(it)
    if (type(obj) is list or type(obj) is tuple) and any(type(e) is DTensor for e in obj):
        return type(obj)(next(it) if type(e) is DTensor else e for e in obj)
    return obj


def run(call: OpCall, targets: Sequence[Optional[tuple]], outs: Any, *, fn: Optional[Callable] = None,
        args: Optional[tuple] = None, kwargs: Optional[dict] = None) -> Any:
    """Redistribute call's DTensors to `targets` (None: keep), run fn (default: the op) on the local pieces and wrap
    the result. `outs` is (placements, global shape) for one tensor output or a list of them for a tuple output;
    an output spec of None leaves that output a plain tensor (integer results such as indices keep no layout)."""
    single = not isinstance(outs, list)
    out_specs = [outs] if single else outs
    out_pl = [o[0] for o in out_specs if o is not None]
    locals_ = [localize(d, d._placements if t is None else tuple(t), out_pl) for d, t in zip(call.dtensors, targets)]
    it = iter(locals_)
    a = tuple(replace_dtensors(x, it) for x in (call.args if args is None else args))
    k = {key: replace_dtensors(v, it) for key, v in (call.kwargs if kwargs is None else kwargs).items()}
    result = (fn or call.fn)(*a, **k)
    if single:
        return wrap(result, call.mesh, *outs)
    items = [wrap(r, call.mesh, *spec) if spec is not None and isinstance(r, Tensor) else r
             for r, spec in zip(result, out_specs)]
    return type(result)(*items) if hasattr(result, "_fields") else type(result)(items)
