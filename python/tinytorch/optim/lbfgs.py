"""L-BFGS (Nocedal & Wright, Algorithm 7.4/7.5) over all parameters flattened into one vector, with an
optional strong-Wolfe line search (bracketing plus cubic interpolation, as in Schmidt's minFunc)."""
from __future__ import annotations

from typing import Any, Callable

from .._ops.shape import cat
from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad, no_grad
from ._single_tensor import _check_lr
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_minimum(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                   bounds: tuple[float, float] | None = None) -> float:
    """Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to bounds (default: [x1, x2])."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = disc ** 0.5
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate: Callable, t: float, d: Tensor, f: float, g: Tensor, gtd: float, c1: float = 1e-4,
                  c2: float = 0.9, tolerance_change: float = 1e-9, max_ls: int = 25):
    """Step length t along d meeting the strong Wolfe conditions; returns (loss, flat grad, t, evaluations)."""
    d_norm = float(d.abs().max())
    g = g.clone()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    # Phase 1: grow the step until an interval is known to hold a point meeting the conditions.
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            brk = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new.clone(), gtd_new]]
            break
        if abs(gtd_new) <= -c2 * gtd:
            brk = [[t, f_new, g_new, gtd_new]]
            done = True
            break
        if gtd_new >= 0:
            brk = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new.clone(), gtd_new]]
            break
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.clone(), gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
    if it == max_ls:
        brk = [[0.0, f, g, None], [t, f_new, g_new, None]]
    # Phase 2: shrink the bracket (zoom) by cubic interpolation, guarding against too-small progress.
    low, high = (0, 1) if brk[0][1] <= brk[-1][1] else (1, 0)
    stalled = False
    while not done and it < max_ls:
        if abs(brk[1][0] - brk[0][0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(brk[0][0], brk[0][1], brk[0][3], brk[1][0], brk[1][1], brk[1][3])
        a, b = min(brk[0][0], brk[1][0]), max(brk[0][0], brk[1][0])
        eps = 0.1 * (b - a)
        if min(b - t, t - a) < eps:
            if stalled or t >= b or t <= a:
                t = b - eps if abs(t - b) < abs(t - a) else a + eps
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= brk[low][1]:
            brk[high] = [t, f_new, g_new.clone(), gtd_new]
            low, high = (0, 1) if brk[0][1] <= brk[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (brk[high][0] - brk[low][0]) >= 0:
                brk[high] = list(brk[low])
            brk[low] = [t, f_new, g_new.clone(), gtd_new]
    t, f_new, g_new = brk[low][0], brk[low][1], brk[low][2]
    return f_new, g_new, t, evals


class LBFGS(Optimizer):
    """Limited-memory BFGS; step(closure) re-evaluates the model up to max_eval times. One param group only."""

    def __init__(self, params, lr: float | Tensor = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        _check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        return cat([p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel())
                              for p in self._params], 0)

    def _add_step(self, t: float, d: Tensor) -> None:
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].view_as(p), alpha=t)
            offset += n

    def _evaluate_at(self, closure: Callable, x0: list, t: float, d: Tensor) -> tuple[float, Tensor]:
        """Loss and flat gradient at x0 + t*d, leaving the parameters at x0."""
        self._add_step(t, d)
        with enable_grad():
            loss = float(closure())
        g = self._flat_grad()
        for p, x in zip(self._params, x0):
            p.copy_(x)
        return loss, g

    def step(self, closure: Callable[[], Any]):  # type: ignore[override]
        """Up to max_iter L-BFGS iterations; closure() must zero the grads, compute the loss, backward and return it."""
        with no_grad():
            return self._step(closure)

    def _step(self, closure: Callable[[], Any]):
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(flat_grad.abs().max()) <= tol_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro, H_diag = [], [], [], 1.0
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = float(y.dot(s))
                if ys > 1e-10:  # keep the pair only when the curvature condition holds
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(y.dot(y))
                # Two-loop recursion: d = -H g with H the L-BFGS inverse-Hessian estimate.
                al = state.setdefault("al", [None] * history_size)
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i].dot(q)) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = q.mul(H_diag)
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i].dot(d)) * ro[i]
                    d.add_(old_stps[i], alpha=al[i] - be_i)
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tol_change:  # not a descent direction
                break
            ls_evals = 0
            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x0 = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    lambda step: self._evaluate_at(closure, x0, step, d), t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - evals)
                self._add_step(t, d)
                converged = float(flat_grad.abs().max()) <= tol_grad
            else:
                self._add_step(t, d)
                converged = False
                if n_iter != max_iter:
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    converged = float(flat_grad.abs().max()) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or converged:
                break
            if float(d.mul(t).abs().max()) <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
