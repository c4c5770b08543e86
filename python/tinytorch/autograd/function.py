"""Custom differentiable functions: subclass Function with forward/backward staticmethods."""
from __future__ import annotations

import functools
import inspect
import warnings

from .. import _C
from .._tensor import Tensor, _new


class FunctionCtx:
    """What forward leaves for backward: saved tensors, needs_input_grad, and output flags."""

    def __init__(self) -> None:
        self._saved = ()
        self._saved_is_output = ()
        self._non_differentiable = set()
        self._dirty = set()
        self.materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors for backward; modifying them in place afterwards makes backward raise."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to save_for_backward (in backward under create_graph, differentiable)."""
        out = []
        node = _C._current_node() if _C._grad_enabled() else None
        for t, output_nr in zip(self._saved, self._saved_is_output or (None,) * len(self._saved)):
            if output_nr is not None and node is not None:
                # A saved output is kept as a history-less alias (no output -> node -> output cycle);
                # under create_graph reconnect it to this node so double backward sees through it.
                r = _new(Tensor)
                r._data, r._vc = t._data, t._shared_vc()
                r._grad_fn, r._output_nr, r._requires_grad = node, output_nr, True
                t = r
            out.append(t)
        return tuple(out)

    saved_variables = saved_tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """These outputs get no gradient (their grads arrive as zeros or None)."""
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        """These inputs were modified in place by forward (and are returned as outputs)."""
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward receives None instead of zero tensors for outputs that got no gradient."""
        self.materialize_grads = bool(value)


class Function:
    """Base class of custom autograd ops: implement forward(ctx, *args) and backward(ctx, *grads)
    as staticmethods (or forward(*args) with setup_context(ctx, inputs, output)), call with .apply."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    def __init__(self, *args, **kwargs) -> None:
        # PyTorch still allows an instance (old code builds one and calls .apply on it); only calling it fails.
        warnings.warn(f"{self.__class__} should not be instantiated. Methods on autograd functions are all static, "
                      "so you should invoke them on the class itself. Instantiating an autograd function will raise "
                      "an error in a future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use new-style "
                           "autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        grad_on = _C._grad_enabled()
        ctx.needs_input_grad = tuple(grad_on and isinstance(a, Tensor) and a._requires_grad for a in args)
        separate_setup = cls.setup_context is not Function.setup_context
        from .grad_mode import no_grad
        with no_grad():
            if separate_setup:
                try:
                    output = cls.forward(*args, **kwargs)
                except TypeError:
                    # PyTorch binds the arguments to forward's signature first: report a mismatch as it does.
                    inspect.signature(cls.forward).bind(*args, **kwargs)
                    raise
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        tensor_inputs = tuple(a for a in args if isinstance(a, Tensor))
        if not (grad_on and any(t._requires_grad for t in tensor_inputs)):
            return output
        single = not isinstance(output, tuple)
        outs = (output,) if single else output
        inputs_by_id = {id(t) for t in tensor_inputs}
        recorded = []
        final = []
        for o in outs:
            if isinstance(o, Tensor):
                if id(o) in inputs_by_id and id(o) not in ctx._dirty:
                    # Returning an input unchanged: the output must be a new tensor of its own history.
                    v = _new(Tensor)
                    v._data, v._vc = o._data, o._shared_vc()
                    o = v
                elif id(o) in ctx._dirty and o._grad_fn is None and o._requires_grad:
                    raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
                final.append(o)
                differentiable = id(o) not in ctx._non_differentiable and o.dtype.is_floating_point
                recorded.append(o if differentiable else None)
            else:
                final.append(o)
                recorded.append(None)
        # Saved outputs are kept as aliases: output -> node -> ctx -> output would be a cycle.
        ids = [id(o) for o in outs]
        saved, flags = [], []
        for t in ctx._saved:
            # An input returned unchanged is saved as the input (its own history), not as an output.
            if t is not None and id(t) in ids and (id(t) not in inputs_by_id or id(t) in ctx._dirty):
                a = _new(Tensor)
                a._data, a._vc = t._data, t._shared_vc()
                saved.append(a)
                flags.append(ids.index(id(t)))
            else:
                saved.append(t)
                flags.append(None)
        ctx._saved, ctx._saved_is_output = tuple(saved), tuple(flags)
        templates = [(o._data.shape, o.dtype, o.device) if isinstance(o, Tensor) else None for o in final]
        arg_is_tensor = [isinstance(a, Tensor) for a in args]
        n_args = len(args)  # backward must not hold `args` itself: saved_tensors_hooks pack only what ctx saved
        input_meta = [(a._data.shape, a.dtype) for a in tensor_inputs]
        name = cls.__name__ + "Backward"

        def backward(*grads):
            if ctx.materialize_grads:
                from .._creation import zeros
                grads = tuple(zeros(*tpl[0], dtype=tpl[1], device=tpl[2]) if g is None and tpl is not None else g
                              for g, tpl in zip(grads, templates))
            result = cls.backward(ctx, *grads)
            if not isinstance(result, tuple):
                result = (result,)
            if len(result) != n_args:
                if len(result) > n_args and all(r is None for r in result[n_args:]):
                    result = result[:n_args]
                else:
                    raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                                       f"(expected {n_args}, got {len(result)})")
            out = []
            for i, (r, is_t) in enumerate(zip(result, arg_is_tensor)):
                if not is_t:
                    if r is not None:
                        raise RuntimeError(f"function {name} returned a gradient different than None at position "
                                           f"{i + 1}, but the corresponding forward input was not a Variable")
                    continue
                shape, dt = input_meta[len(out)]
                if r is not None:
                    if not isinstance(r, Tensor):
                        raise TypeError(f"function {name} returned a non-Tensor gradient at index {i}")
                    if r._data.shape != shape:
                        import numpy as np
                        try:
                            np.broadcast_shapes(shape, r._data.shape)
                            expandable = len(r._data.shape) >= len(shape)
                        except ValueError:
                            expandable = False
                        if not expandable:
                            raise RuntimeError(f"Function {name} returned an invalid gradient at index {i} - got "
                                               f"{list(r._data.shape)} but expected shape compatible with {list(shape)}")
                        from .._ops._common import sum_to
                        r = sum_to(r, shape)
                    if r.dtype is not dt:
                        r = r.to(dt)
                out.append(r)
            return tuple(out) if len(out) != 1 else out[0]

        # Always a tuple: the node has one input per forward output, None where no gradient flows.
        # (The in-place op inside forward already bumped a dirty tensor's version, as in PyTorch.)
        _C._record(name, backward, tuple(recorded), tensor_inputs,
                   tuple(t for t in ctx._saved if isinstance(t, Tensor)) or None, None, True)
        for o, r in zip(final, recorded):
            if isinstance(o, Tensor) and r is None and id(o) in ctx._dirty:
                o._grad_fn, o._output_nr, o._requires_grad = None, 0, False
        return final[0] if single else tuple(final)


def once_differentiable(fn):
    """Mark a backward as not differentiable: it runs under no_grad, and differentiating its result
    raises instead of silently giving wrong higher-order gradients."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        from .grad_mode import no_grad
        with no_grad():
            outputs = fn(ctx, *args)
        if not _C._grad_enabled():
            return outputs
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        wrapped = []
        grad_inputs = tuple(a for a in args if isinstance(a, Tensor) and a._requires_grad)

        def delayed_error(*grads):
            raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")
        for o in outs:
            if isinstance(o, Tensor) and o.dtype.is_floating_point:
                v = _new(Tensor)
                v._data = o._data
                _C._record("DelayedError", delayed_error, v, grad_inputs)
                o = v
            wrapped.append(o)
        return wrapped[0] if single else tuple(wrapped)
    return wrapper
