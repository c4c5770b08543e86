"""torch.func's autodiff transforms (grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian, linearize,
functionalize) on tinytorch's eager autograd.

Each transform runs `func` on fresh differentiable copies of the differentiated inputs and calls
autograd.grad on the result. Where the result also depends on tensors that require grad outside the
transform (an input that already required grad, a closed-over parameter, an enclosing transform's
input) the backward builds a graph, so transforms nest (grad(grad(f)), jacrev(jacrev(f))) and their
results stay differentiable by ordinary autograd, as with PyTorch's functorch levels. jvp uses the
double-vjp trick and jacfwd computes the same Jacobian as jacrev: there is no forward-mode AD.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Union

from .. import _C
from .._tensor import Tensor
from ..autograd import functional as _af
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..utils._pytree import tree_flatten, treespec_pprint

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize", "functionalize"]

ArgnumsType = Union[int, tuple[int, ...]]


def _fresh(leaves: list, outer_grad: bool) -> list:
    """Differentiable stand-ins for the inputs: a view keeps an input that requires grad connected to
    its graph (when the caller records one), anything else becomes a new leaf."""
    out = []
    for t in leaves:
        if not isinstance(t, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
        if not (t.is_floating_point() or t.is_complex()):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if t.requires_grad and outer_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return out


def _reaches_outside(tensors: list, fresh: list) -> bool:
    """Whether any of `tensors` depends on a tensor requiring grad other than the fresh leaves, i.e.
    whether the transform's results must stay differentiable for the code around it."""
    own = {id(t) for t in fresh if t.grad_fn is None}
    seen: dict = {}  # id -> node: holding the node keeps its id from being reused by a new wrapper
    stack = []
    for t in tensors:
        if not isinstance(t, Tensor) or not t.requires_grad:
            continue
        if t.grad_fn is None:
            if id(t) not in own:
                return True
        else:
            stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        if isinstance(node, _C.AccumulateGrad) and (node.variable is None or id(node.variable) not in own):
            return True  # a leaf from outside (a variable of None: one the engine holds but Python dropped)
        stack.extend(fn for fn, _ in node.next_functions)
    return False


def _detach_tree(tree: Any) -> Any:
    leaves, spec = tree_flatten(tree)
    return spec.unflatten([t.detach() if isinstance(t, Tensor) else t for t in leaves])


def _zeros_for_none(grads: tuple, like: list) -> list:
    from .._creation import zeros_like
    return [zeros_like(ref) if g is None else g for g, ref in zip(grads, like)]


def _normalize_argnums(argnums: Any, num_args: int) -> tuple[tuple[int, ...], bool]:
    """(non-negative argnums, whether the caller passed a tuple), with PyTorch's errors."""
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        is_tuple, nums = False, (argnums,)
    elif isinstance(argnums, tuple):
        if len(argnums) == 0:
            raise RuntimeError("argnums must be non-empty")
        for a in argnums:
            if not isinstance(a, int) or isinstance(a, bool):
                raise RuntimeError(f"argnum must be int, got: {type(a)}")
        is_tuple, nums = True, argnums
    else:
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    out = []
    for a in nums:
        if not -num_args <= a < num_args:
            raise RuntimeError(f"Got argnum={a}, but only {num_args} positional inputs")
        out.append(a % num_args)
    if len(set(out)) != len(out):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return tuple(out), is_tuple


class _Diff:
    """The differentiated positional arguments of one call, flattened and replaced by fresh tensors."""

    def __init__(self, args: tuple, argnums: tuple[int, ...], argnums_is_tuple: bool, outer_grad: bool) -> None:
        self.argnums_is_tuple = argnums_is_tuple
        selected = tuple(args[a] for a in argnums)
        leaves, self.spec = tree_flatten(selected)
        self.fresh = _fresh(leaves, outer_grad)
        fresh_selected = self.spec.unflatten(self.fresh)
        new_args = list(args)
        for a, value in zip(argnums, fresh_selected):
            new_args[a] = value
        self.args = tuple(new_args)

    def unflatten(self, leaves: list) -> Any:
        """Per-input results shaped like the differentiated argument(s)."""
        per_arg = self.spec.unflatten(leaves)
        return per_arg if self.argnums_is_tuple else per_arg[0]


def _split_aux(output: Any, has_aux: bool, api: str) -> tuple[Any, Any]:
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return output


def _check_outputs(leaves: list, api: str) -> None:
    for t in leaves:
        if not isinstance(t, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got unsupported type {type(t)}")


def grad_and_value(func: Callable, argnums: ArgnumsType = 0, has_aux: bool = False) -> Callable:
    """A function returning (gradient of func's scalar output w.r.t. args[argnums], func's output)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        outer_grad = is_grad_enabled()
        nums, is_tuple = _normalize_argnums(argnums, len(args))
        with enable_grad():
            diff = _Diff(args, nums, is_tuple, outer_grad)
            output, aux = _split_aux(func(*diff.args, **kwargs), has_aux, "grad_and_value(f)(*args)")
            if not isinstance(output, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output.dim() != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {output.dim()} dims. Maybe you wanted to use the vjp or jacrev "
                                   "APIs instead?")
            keep_graph = outer_grad and _reaches_outside([output], diff.fresh)
            grads = _af._grad((output,), tuple(diff.fresh), None, keep_graph)
        grads = diff.unflatten(_zeros_for_none(grads, diff.fresh))
        if not keep_graph:
            output, aux = output.detach(), _detach_tree(aux)
        return (grads, (output, aux)) if has_aux else (grads, output)

    return wrapper


def grad(func: Callable, argnums: ArgnumsType = 0, has_aux: bool = False) -> Callable:
    """A function computing the gradient of func's scalar output w.r.t. args[argnums] (a pytree of tensors)."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        grads, value = gv(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapper


def vjp(func: Callable, *primals: Any, has_aux: bool = False):
    """(func(*primals), vjp_fn) where vjp_fn(cotangents) is the tuple of cotangent^T J for each primal."""
    outer_grad = is_grad_enabled()
    with enable_grad():
        diff = _Diff(primals, tuple(range(len(primals))), True, outer_grad)
        output, aux = _split_aux(func(*diff.args), has_aux, "vjp(f, *primals)")
        out_leaves, out_spec = tree_flatten(output)
        _check_outputs(out_leaves, "vjp(f, *primals)")
        keep_graph = outer_grad and _reaches_outside(out_leaves, diff.fresh)

    def vjp_fn(cotangents: Any, retain_graph: bool = True, create_graph: Optional[bool] = None) -> tuple:
        """cotangents^T J per primal. The graph is always retained (retain_graph is accepted for PyTorch's
        signature), so vjp_fn can be called repeatedly, e.g. under vmap."""
        ct_leaves, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {treespec_pprint(ct_spec)}, primal output: "
                               f"{treespec_pprint(out_spec)}")
        for i, (ct, out) in enumerate(zip(ct_leaves, out_leaves)):
            if not isinstance(ct, Tensor):
                raise RuntimeError(f"vjp_fn: expected cotangents to be Tensors, got {type(ct)}")
            if ct.shape != out.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {ct.shape} and output[{i}] "
                                   f"has a shape of {out.shape}.")
        if create_graph is None:
            create_graph = is_grad_enabled() and (keep_graph or any(c.requires_grad for c in ct_leaves))
        with enable_grad():
            grads = _af._grad(tuple(out_leaves), tuple(diff.fresh), tuple(ct_leaves), create_graph)
        return diff.unflatten(_zeros_for_none(grads, diff.fresh))

    if not keep_graph:
        output, aux = _detach_tree(output), _detach_tree(aux)
    return (output, vjp_fn, aux) if has_aux else (output, vjp_fn)


def jvp(func: Callable, primals: Any, tangents: Any, *, strict: bool = False, has_aux: bool = False):
    """(func(*primals), J @ tangents), the Jacobian-vector product by differentiating a vjp w.r.t. its cotangent.
    strict is accepted for PyTorch's signature: outputs independent of the primals get zero tangents."""
    from .._creation import zeros_like
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, tangents also must be. Got "
                           f"primals with structure {p_spec!r} and tangents with structure {t_spec!r}")
    if not p_leaves:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to contain at least one Tensor.")
    for p, t in zip(p_leaves, t_leaves):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor):
            raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to only contain Tensors, "
                               f"got {type(p if not isinstance(p, Tensor) else t)}")
        if p.shape != t.shape:
            raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                               f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given "
                               f"forward gradient is of size {list(t.shape)}.")
    outer_grad = is_grad_enabled()
    with enable_grad():
        diff = _Diff(primals, tuple(range(len(primals))), True, outer_grad)
        output, aux = _split_aux(func(*diff.args), has_aux, "jvp(f, primals, tangents)")
        out_leaves, out_spec = tree_flatten(output)
        _check_outputs(out_leaves, "jvp(f, primals, tangents)")
        output_needs_graph = outer_grad and _reaches_outside(out_leaves, diff.fresh)
        keep_graph = output_needs_graph or (outer_grad and any(t.requires_grad for t in t_leaves))
        # J v = d/du <J^T u, v>: the vjp is linear in its cotangent u, so its gradient w.r.t. u is J v.
        dummies = tuple(zeros_like(o).requires_grad_(True) for o in out_leaves)
        vjps = _af._grad(tuple(out_leaves), tuple(diff.fresh), dummies, True)
        pairs = [(g, t) for g, t in zip(vjps, t_leaves) if g is not None and g.requires_grad]
        if pairs:
            from ..autograd import grad as _autograd_grad
            jvps = _autograd_grad([g for g, _ in pairs], dummies, [t for _, t in pairs], create_graph=keep_graph,
                                  allow_unused=True)
        else:
            jvps = (None,) * len(out_leaves)
    jvps = out_spec.unflatten(_zeros_for_none(jvps, out_leaves))
    if not output_needs_graph:
        output, aux = _detach_tree(output), _detach_tree(aux)
    if not keep_graph:
        jvps = _detach_tree(jvps)
    return (output, jvps, aux) if has_aux else (output, jvps)


def linearize(func: Callable, *primals: Any) -> tuple[Any, Callable]:
    """(func(*primals), jvp_fn) with jvp_fn(*tangents) the Jacobian-vector product at primals."""
    output = jvp(func, primals, tuple(_zeros_like_tree(p) for p in primals))[0]

    def jvp_fn(*tangents: Any) -> Any:
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn


def _zeros_like_tree(tree: Any) -> Any:
    from .._creation import zeros_like
    leaves, spec = tree_flatten(tree)
    return spec.unflatten([zeros_like(t) if isinstance(t, Tensor) else t for t in leaves])


def jacrev(func: Callable, argnums: ArgnumsType = 0, *, has_aux: bool = False, chunk_size: Optional[int] = None,
           _preallocate_and_copy: bool = False) -> Callable:
    """A function computing the Jacobian of func w.r.t. args[argnums], one backward per output element (so
    chunk_size only gets validated): for each output leaf, a pytree like args[argnums] of out.shape + in.shape."""
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        outer_grad = is_grad_enabled()
        nums, is_tuple = _normalize_argnums(argnums, len(args))
        with enable_grad():
            diff = _Diff(args, nums, is_tuple, outer_grad)
            output, aux = _split_aux(func(*diff.args, **kwargs), has_aux, "vjp(f, *primals)")
            out_leaves, out_spec = tree_flatten(output)
            _check_outputs(out_leaves, "vjp(f, *primals)")
            keep_graph = outer_grad and _reaches_outside(out_leaves, diff.fresh)
            table = _af._jacobian_rows(tuple(out_leaves), tuple(diff.fresh), keep_graph, False)
        jac = out_spec.unflatten([diff.unflatten(row) for row in table])
        return (jac, aux if keep_graph else _detach_tree(aux)) if has_aux else jac

    return wrapper


def jacfwd(func: Callable, argnums: ArgnumsType = 0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """The Jacobian in jacrev's layout; without forward-mode AD it is computed by reverse mode, which gives the
    same values."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func: Callable, argnums: ArgnumsType = 0) -> Callable:
    """The Hessian of func w.r.t. args[argnums]: the Jacobian of its Jacobian."""
    return jacfwd(jacrev(func, argnums), argnums)


def functionalize(func: Callable, *, remove: str = "mutations") -> Callable:
    """func itself: tinytorch runs eagerly, and its transforms already see the effect of in-place ops."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper
