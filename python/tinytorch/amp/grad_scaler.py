"""torch.amp.GradScaler: dynamic loss scaling for float16 training (PyTorch's algorithm and errors)."""
from __future__ import annotations

import warnings
from collections import abc, defaultdict
from enum import Enum
from typing import Any

import numpy as np

from .._tensor import Tensor


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _unscale_arrays(grads: list, inv_scale: float, found_inf):
    """Multiply each gradient array by inv_scale in place and return found_inf (0-d float32 array on the
    grads' device) set to 1 if any element was inf/NaN. On CUDA one fused kernel per gradient dtype does both
    (src/amp_unscale.cu), with no host synchronisation; what it cannot take goes through device reductions."""
    if not grads:
        return found_inf
    xp = np if type(grads[0]) is np.ndarray else _cupy()
    if xp is not np:
        from .. import _kernels
        found_inf = found_inf.astype(np.float32).reshape(())  # the kernel's own flag, on the device
        grads = _kernels.amp_unscale_(grads, inv_scale, found_inf)
        if not grads:
            return found_inf
    bad = None
    for g in grads:
        if g.dtype.itemsize == 2:  # float16/bfloat16: check and scale in float32, round once
            g32 = g.astype(np.float32)
            nonfinite = ~xp.isfinite(g32).all()
            g[...] = (g32 * np.float32(inv_scale)).astype(g.dtype)
        else:
            nonfinite = ~xp.isfinite(g).all()
            xp.multiply(g, g.dtype.type(inv_scale), out=g)
        bad = nonfinite if bad is None else (bad | nonfinite)
    return xp.asarray(xp.maximum(found_inf, bad.astype(np.float32)), dtype=np.float32)


def _cupy():
    from .._device import cupy
    return cupy()


class GradScaler:
    """Scales the loss so small float16 gradients don't flush to zero, unscales the gradients before the
    optimizer step, skips steps whose gradients hold inf/NaN and adapts the scale (PyTorch's GradScaler)."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if self._device == "cuda":
            from .. import cuda
            if enabled and not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.")
                self._enabled = False
        if self._enabled:
            assert growth_factor > 1.0, "The growth factor must be > 1.0."
            assert backoff_factor < 1.0, "The backoff factor must be < 1.0."
            self._init_scale = init_scale
            self._scale: Tensor | None = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None
            self._per_optimizer_states: dict = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname: str):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        assert self._scale is not None, f"Attempted {funcname} but _scale is None.  " + fix
        assert self._growth_tracker is not None, f"Attempted {funcname} but _growth_tracker is None.  " + fix
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev) -> None:
        from .._creation import full
        from .._dtype import float32, int32
        assert self._growth_tracker is None, "_growth_tracker initialized before _scale"
        self._scale = full((), self._init_scale, dtype=float32, device=dev)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=int32, device=dev)

    def scale(self, outputs: Any) -> Any:
        """outputs (a tensor or nested iterables of tensors) multiplied by the scale factor."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale.to(device=val.device)
            if isinstance(val, abc.Iterable):
                iterable = map(apply_scale, val)
                if isinstance(val, (list, tuple)):
                    return type(val)(iterable)
                return iterable
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: float, allow_fp16: bool) -> dict:
        """Unscale every gradient of optimizer's params in place; per device, a 0-d float32 tensor: 1 if
        any gradient held inf/NaN."""
        from .._tensor import _wrap
        per_device: dict = defaultdict(list)
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if (not allow_fp16) and param.grad.dtype.name == "float16":
                    raise ValueError("Attempting to unscale FP16 gradients.")
                per_device[str(param.grad.device)].append(param.grad._data)
        found: dict = {}
        for dev, grads in per_device.items():
            xp = np if type(grads[0]) is np.ndarray else _cupy()
            zero = xp.zeros((), dtype=np.float32)
            found[dev] = _unscale_arrays(grads, inv_scale, zero)
        return {dev: _wrap(arr) for dev, arr in found.items()}

    def unscale_(self, optimizer) -> None:
        """Divide optimizer's gradients by the scale in place (once per optimizer per step), recording infs."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        elif optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        assert self._scale is not None
        inv_scale = float(np.float32(1.0 / np.float64(self._scale.item())))
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, optimizer_state: dict, *args, **kwargs):
        retval = None
        if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        return retval

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if not done yet) and call optimizer.step() unless the gradients hold inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        assert len(optimizer_state["found_inf_per_device"]) > 0, "No inf checks were recorded for this optimizer."
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back the scale off after a step with infs, grow it after growth_interval clean steps, or set it."""
        if not self._enabled:
            return
        _scale, _growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                _scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                          "torch.FloatTensor with requires_grad=False.")
                assert new_scale.device.type == self._device, reason
                assert new_scale.numel() == 1, reason
                assert new_scale.requires_grad is False, reason
                _scale.copy_(new_scale.reshape(()))
        else:
            found_infs = [found_inf for state in self._per_optimizer_states.values()
                          for found_inf in state["found_inf_per_device"].values()]
            assert len(found_infs) > 0, "No inf checks were recorded prior to update."
            found = sum(float(f.item()) for f in found_infs)  # the one host sync of the step
            scale = float(_scale.item())
            if found:
                _scale.fill_(scale * self._backoff_factor)
                _growth_tracker.fill_(0)
            else:
                successful = int(_growth_tracker.item()) + 1
                if successful == self._growth_interval:
                    grown = np.float32(scale) * np.float32(self._growth_factor)
                    if np.isfinite(grown):
                        _scale.fill_(float(grown))
                    _growth_tracker.fill_(0)
                else:
                    _growth_tracker.fill_(successful)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _get_scale_async(self) -> Tensor | None:
        return self._scale

    def get_scale(self) -> float:
        """The current scale factor (a Python float; 1.0 when disabled)."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale.item())
        return 1.0

    def get_growth_factor(self) -> float:
        """The factor the scale grows by after growth_interval clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after a step with infs/NaNs."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        """How many consecutive clean steps grow the scale."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if self._enabled:
            return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())
        return 0

    def is_enabled(self) -> bool:
        """Whether this scaler does anything (False on CUDA without a GPU)."""
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval, _growth_tracker (empty when disabled)."""
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what state_dict() returned."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            assert len(self._per_optimizer_states) == 0, \
                "A GradScaler instance may only be pickled at the beginning of an iteration, or at the end " \
                "after scaler.update()."
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
