"""Sharding rules of elementwise ops (with broadcasting) and their in-place forms.

Per mesh dim: if an operand is sharded on a dim the output keeps at full size, every operand that has that dim
at full size is sharded the same way and the others (broadcast there) are replicated; the output is sharded.
Otherwise pending sums pass through ops that are linear in them (a sum of Partials, a Partial times replicated
values, casts, neg) and are reduced first for anything else; replicated inputs give a replicated output.
"""
from __future__ import annotations

from typing import Any

from ...._tensor import Tensor
from ...._C import _grad_enabled
from .._api import DTensor
from .._dispatch import OpCall, register, run
from ..placement_types import Placement, Shard, _StridedShard
from .utils import R, broadcast_shape, is_partial_linear

_UNARY = ("abs absolute acos arccos asin arcsin atan arctan ceil cos cosh erf exp exp2 expm1 floor frac log log10 "
          "log1p log2 reciprocal relu round rsqrt sigmoid sign sin sinh sqrt square tan tanh trunc nan_to_num isnan "
          "isinf isfinite logical_not bitwise_not clamp clip clamp_min clamp_max int long short char byte bool gelu "
          "silu relu6 leaky_relu elu softplus logsigmoid hardtanh dropout __abs__ __invert__ angle sgn")
_LINEAR_UNARY = ("neg negative __neg__ __pos__ clone detach contiguous float double half bfloat16 to cpu cuda "
                 "conj conj_physical resolve_conj resolve_neg real imag cfloat cdouble")
_ADD = "add sub subtract rsub __add__ __radd__ __sub__ __rsub__"
_MUL = "mul multiply __mul__ __rmul__"
_DIV = "div divide true_divide __truediv__"
_BINARY = ("pow maximum minimum remainder fmod floor_divide atan2 arctan2 eq ne lt le gt ge greater greater_equal "
           "less less_equal not_equal logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor where "
           "masked_fill lerp addcmul addcdiv __rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __pow__ "
           "__rpow__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ "
           "polar complex")
_INPLACE = ("add_ sub_ subtract_ mul_ multiply_ div_ divide_ pow_ remainder_ floor_divide_ bitwise_and_ bitwise_or_ "
            "bitwise_xor_ neg_ abs_ exp_ log_ sqrt_ rsqrt_ sin_ cos_ tanh_ sigmoid_ relu_ floor_ ceil_ round_ trunc_ "
            "sign_ reciprocal_ square_ clamp_ clip_ clamp_min_ clamp_max_ masked_fill_ lerp_ addcmul_ addcdiv_ "
            "nan_to_num_ zero_ fill_ copy_ uniform_ normal_ bernoulli_ exponential_ __iadd__ __isub__ __imul__ "
            "__itruediv__ __ipow__ __imod__ __ifloordiv__ __iand__ __ior__ __ixor__")
_ADD_INPLACE = "add_ sub_ subtract_ __iadd__ __isub__ copy_"
_MUL_INPLACE = "mul_ multiply_ div_ divide_ __imul__ __itruediv__ neg_ zero_"


def _kind(name: str) -> str:
    """How a pending sum passes through the op: 'add', 'mul', 'div', 'unary' (linear) or '' (reduce first)."""
    for kind, names in (("add", _ADD), ("mul", _MUL), ("div", _DIV), ("unary", _LINEAR_UNARY)):
        if name in names.split():
            return kind
    return ""


def _like(p: Placement, dim: int) -> Placement:
    return _StridedShard(dim, split_factor=p.split_factor) if isinstance(p, _StridedShard) else Shard(dim)


def _has_scalar(call: OpCall) -> bool:
    """Whether a positional operand is a number or a one-element plain tensor (added on every rank)."""
    return any(type(a) is not DTensor and (isinstance(a, (int, float)) or isinstance(a, Tensor))
               for a in call.args)


def _plan(call: OpCall, out_shape: tuple, kind: str) -> tuple:
    """(targets per DTensor, output placements) for an elementwise op."""
    ds, mesh = call.dtensors, call.mesh
    on = len(out_shape)
    targets: list = [[] for _ in ds]
    out: list = []
    for m in range(mesh.ndim):
        cur = [d._placements[m] for d in ds]
        lead = None
        for d, p in zip(ds, cur):
            if p.is_shard():
                k = p.dim + on - d.ndim
                if d._gshape[p.dim] == out_shape[k] and (out_shape[k] > 1 or mesh.size(m) == 1):
                    lead = (k, p)
                    break
        if lead is not None:
            k, p0 = lead
            for i, d in enumerate(ds):
                kd = k - (on - d.ndim)
                targets[i].append(_like(p0, kd) if kd >= 0 and d._gshape[kd] == out_shape[k] else R)
            out.append(_like(p0, k))
            continue
        partials = [p for p in cur if p.is_partial()]
        first = partials[0] if partials else None
        linear = first is not None and is_partial_linear(first) and all(p == first or p.is_replicate() for p in cur)
        if linear and kind == "add" and not _has_scalar(call):
            for i in range(len(ds)):
                targets[i].append(first)  # replicated operands contribute a share each
            out.append(first)
        elif linear and kind in ("mul", "div") and len(partials) == 1 and (kind == "mul" or cur[0].is_partial()):
            for i, p in enumerate(cur):
                targets[i].append(p)
            out.append(first)
        elif linear and kind == "unary" and len(ds) == 1:
            targets[0].append(first)
            out.append(first)
        else:
            for i in range(len(ds)):
                targets[i].append(R)
            out.append(R)
    return [tuple(t) for t in targets], tuple(out)


def _scalar_shapes(call: OpCall) -> list:
    return [tuple(a._data.shape) for a in call.args if type(a) is not DTensor and isinstance(a, Tensor)]


@register(*(_UNARY + " " + _LINEAR_UNARY + " " + _ADD + " " + _MUL + " " + _DIV + " " + _BINARY).split())
def pointwise(call: OpCall) -> Any:
    """Elementwise op with broadcasting."""
    if call.name == "to" and len(call.dtensors) > 1:
        return call.args[0].to(call.args[1].dtype)  # x.to(other): only other's dtype matters
    out_shape = broadcast_shape(*[d._gshape for d in call.dtensors], *_scalar_shapes(call))
    targets, out = _plan(call, out_shape, _kind(call.name))
    return run(call, targets, (out, out_shape))


@register(*_INPLACE.split())
def pointwise_inplace(call: OpCall) -> Any:
    """In-place elementwise op: `self` keeps its layout, the other operands follow it."""
    self = call.args[0]
    if type(self) is not DTensor:
        raise call.unsupported("the tensor written in place is not a DTensor")
    on = self.ndim
    targets: list = [[] for _ in call.dtensors]
    kind = "add" if call.name in _ADD_INPLACE.split() else "mul" if call.name in _MUL_INPLACE.split() else ""
    for m, p in enumerate(self._placements):
        for i, d in enumerate(call.dtensors):
            if d is self:
                targets[i].append(p)
            elif p.is_shard():
                kd = p.dim - (on - d.ndim)
                targets[i].append(_like(p, kd) if kd >= 0 and d._gshape[kd] == self._gshape[p.dim] else R)
            elif p.is_partial():
                if kind == "add" and not _has_scalar(call):
                    targets[i].append(p)
                elif kind == "mul":
                    targets[i].append(R)
                else:
                    raise call.unsupported(f"{call.name} is not linear, so it cannot update a pending sum "
                                           f"({p}) in place; redistribute it to Replicate first")
            else:
                targets[i].append(R)
        if p.is_partial() and kind == "" and len(call.dtensors) == 1:
            raise call.unsupported(f"{call.name} cannot update a pending sum ({p}) in place")
    recording = _grad_enabled() and any(d._requires_grad for d in call.dtensors)
    if recording and self._grad_fn is None and self._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    result = run(call, [tuple(t) for t in targets], (self._placements, self._gshape))
    # The op wrote into this rank's piece (the local tensor shares its memory); a recorded op moves self's
    # history onto the new node, as an in-place op on a plain tensor does.
    self._data = result._data
    self._bump_version()
    if result._grad_fn is not None:
        self._grad_fn, self._output_nr, self._requires_grad = result._grad_fn, result._output_nr, True
    return self

