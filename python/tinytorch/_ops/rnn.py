"""Recurrent layers as one fused node per layer and direction: the time loop of RNN (tanh/relu), LSTM
(optionally projected) and GRU runs on arrays, saving the gate activations; backward runs the BPTT loop
on arrays too and does the weight gradients as a few large matrix products after it.

Recording one node per layer-direction instead of a dozen per time step keeps a 64-step LSTM from
spending its time in Python node bookkeeping. The input projection x @ W_ih^T (and its gradients)
is one matrix product over all time steps; only h @ W_hh^T is done per step.

An optional (T, B) boolean mask marks the valid steps of each sequence (packed sequences): a masked
step leaves that sequence's state unchanged and writes zeros to the output, so a reverse direction
starts each sequence at its own last valid step.
"""
from __future__ import annotations

import numpy as np

from .._tensor import Tensor, _wrap
from .. import _C, _autocast, _threads
from ._common import _grad_enabled, needs_grad, record
from .linalg import _matmul

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _xp(a):
    if type(a) is np.ndarray:
        return np
    from .._device import cupy
    return cupy()




def _arr(t):
    return None if t is None else t._data


def rnn_layer(mode: str, x: Tensor, h0: Tensor, c0: Tensor | None, w_ih: Tensor, w_hh: Tensor,
              b_ih: Tensor | None, b_hh: Tensor | None, w_hr: Tensor | None = None, reverse: bool = False,
              mask=None):
    """One layer, one direction, over a time-major input x (T, B, I): returns (y, h_n, c_n or None).

    y is (T, B, H_out); h0/h_n are (B, H_out), c0/c_n (B, H) for LSTM. mask is a (T, B) bool array or None.
    """
    if _autocast.active:
        return _autocast.dispatch(mode.lower(), rnn_layer, mode, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse,
                                  mask)
    if type(x._data) is np.ndarray and x._data.dtype.itemsize == 2 and x._data.dtype.kind in "fV":
        # float16/bfloat16 on the CPU: the layer runs in float32 (BLAS, as PyTorch accumulates) and its
        # outputs are rounded once; NumPy's 2-byte products would return float32 anyway.
        up = [None if t is None else t.float() for t in (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)]
        y, hn, cn = rnn_layer(mode, *up, reverse=reverse, mask=mask)
        dt = x.dtype
        return y.to(dt), hn.to(dt), None if cn is None else cn.to(dt)
    X = x._data
    xp = _xp(X)
    T, B, I = X.shape
    Wih, Whh = w_ih._data, w_hh._data
    G = _GATES[mode]
    GH = Wih.shape[0]
    H = GH // G
    Hout = Whh.shape[1]
    bih, bhh, Whr = _arr(b_ih), _arr(b_hh), _arr(w_hr)
    dt = X.dtype
    m = None if mask is None else xp.asarray(mask).reshape(T, B, 1)

    # All time steps' input projections in one product; for RNN/LSTM both biases fold into it.
    xg = _matmul(X.reshape(T * B, I), Wih.T).reshape(T, B, GH)
    if bih is not None:
        xg += bih
        if mode != "GRU":
            xg += bhh
    y = xp.empty((T, B, Hout), dt)
    hprev = xp.empty((T, B, Hout), dt)  # the state each step read (indexed by time position)
    h = h0._data.astype(dt, copy=True)
    order = range(T - 1, -1, -1) if reverse else range(T)
    # A contiguous W_hh^T: OpenBLAS runs the small per-step product ~1.4x faster than on the transposed view.
    WhhT = xp.ascontiguousarray(Whh.T)
    WhrT = xp.ascontiguousarray(Whr.T) if Whr is not None else None
    saved = {}
    if mode == "LSTM":
        acts = xg  # activated in place: the pre-activations are not needed again
        cprev = xp.empty((T, B, H), dt)
        tcs = xp.empty((T, B, H), dt)
        ms = xp.empty((T, B, H), dt) if Whr is not None else None
        c = c0._data.astype(dt, copy=True)
        # sigmoid(v) = 0.5 * tanh(0.5 v) + 0.5: one tanh over all four gates, then one affine map.
        scale = xp.full(GH, 0.5, dt)
        scale[2 * H:3 * H] = 1.0
        shift = xp.full(GH, 0.5, dt)
        shift[2 * H:3 * H] = 0.0
        # Without a projection or a mask, one C++ call does the step's pointwise math (csrc/kernels/lstm_cell.cpp).
        fused = xp is np and Whr is None and m is None and dt in (np.float32, np.float64)
        for t in order:
            hprev[t] = h
            cprev[t] = c
            a = acts[t]
            a += _matmul(h, WhhT)
            if fused:
                cn = np.empty((B, H), dt)
                _C._cpu.lstm_cell(a, c, cn, tcs[t], y[t], _threads.count)
                h, c = y[t], cn
                continue
            a *= scale
            xp.tanh(a, out=a)
            a *= scale
            a += shift
            i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
            cn = f * c
            cn += i * g
            tc = xp.tanh(cn)
            tcs[t] = tc
            hn = o * tc
            if Whr is not None:
                ms[t] = hn
                hn = _matmul(hn, WhrT)
            if m is not None:
                mt = m[t]
                cn = xp.where(mt, cn, c)
                y[t] = xp.where(mt, hn, 0)
                hn = xp.where(mt, hn, h)
            else:
                y[t] = hn
            h, c = hn, cn
        saved.update(acts=acts, cprev=cprev, tcs=tcs, ms=ms)
        c_n = c
    elif mode == "GRU":
        acts = xg  # r, z, n after activation
        hgn = xp.empty((T, B, H), dt)  # W_hn h + b_hn: the reset gate multiplies it
        for t in order:
            hprev[t] = h
            hg = _matmul(h, WhhT)
            if bhh is not None:
                hg += bhh
            a = acts[t]
            rz = a[:, :2 * H]
            rz += hg[:, :2 * H]
            rz *= 0.5
            xp.tanh(rz, out=rz)
            rz *= 0.5
            rz += 0.5
            r, z = a[:, :H], a[:, H:2 * H]
            hgn[t] = hg[:, 2 * H:]
            n = a[:, 2 * H:]
            n += r * hg[:, 2 * H:]
            xp.tanh(n, out=n)
            hn = n + z * (h - n)
            if m is not None:
                mt = m[t]
                y[t] = xp.where(mt, hn, 0)
                hn = xp.where(mt, hn, h)
            else:
                y[t] = hn
            h = hn
        saved.update(acts=acts, hgn=hgn)
        c_n = None
    else:
        relu = mode == "RNN_RELU"
        acts = xg
        for t in order:
            hprev[t] = h
            a = acts[t]
            a += _matmul(h, WhhT)
            if relu:
                xp.maximum(a, 0, out=a)
            else:
                xp.tanh(a, out=a)
            if m is not None:
                mt = m[t]
                y[t] = xp.where(mt, a, 0)
                h = xp.where(mt, a, h)
            else:
                y[t] = a
                h = a
        saved.update(acts=acts)
        c_n = None
    y_t, hn_t = _wrap(y), _wrap(xp.array(h, copy=True))
    cn_t = _wrap(xp.array(c_n, copy=True)) if c_n is not None else None
    inputs = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
    if needs_grad(*[t for t in inputs if t is not None]):
        # Which inputs get a gradient is fixed now: saved tensors may come back detached (checkpoint recomputes).
        wanted = tuple(t is not None and t._requires_grad for t in inputs)

        def rnn_backward(gy, ghn, gcn=None):
            grads = _backward(mode, saved, hprev, X, Wih, Whh, Whr, bih is not None, H, Hout, reverse, m,
                              _arr(gy), _arr(ghn), _arr(gcn), wanted)
            if _grad_enabled():  # create_graph: these gradients are computed on arrays, so not differentiable
                grads = _once_differentiable(grads, tuple(g for g in (gy, ghn, gcn) if g is not None) +
                                             tuple(t for t in inputs if t is not None))
            return grads
        outs = (y_t, hn_t, cn_t) if mode == "LSTM" else (y_t, hn_t)
        record({"LSTM": "LstmBackward0", "GRU": "GruBackward0"}.get(mode, "RnnBackward0"), rnn_backward, outs,
               inputs, tuple(t for t in inputs if t is not None))
    return y_t, hn_t, cn_t


def _once_differentiable(grads: tuple, depends_on: tuple) -> tuple:
    """Gradients that raise if differentiated again (instead of silently giving zero second derivatives)."""
    sources = tuple(g for g in depends_on if isinstance(g, Tensor) and g._requires_grad)
    if not sources:
        return grads

    def delayed_error(*_):
        raise RuntimeError("double backward through the fused RNN/LSTM/GRU (or CTC loss) node is not supported in "
                           "tinytorch: its backward is computed on arrays (create_graph=True gives first derivatives "
                           "only)")
    out = []
    for g in grads:
        if g is not None and sources:
            _C._record("RnnDoubleBackwardError", delayed_error, g, sources)
        out.append(g)
    return tuple(out)


def _backward(mode, saved, hprev, X, Wih, Whh, Whr, has_bias, H, Hout, reverse, m, gy, ghn, gcn, wanted):
    """BPTT over the saved activations; weight gradients as products over all steps at the end."""
    xp = _xp(X)
    T, B, I = X.shape
    dt = X.dtype
    acts = saved["acts"]
    GH = acts.shape[2]
    dgates = xp.empty((T, B, GH), dt)
    dh = xp.zeros((B, Hout), dt) if ghn is None else ghn.astype(dt, copy=True)
    order = range(T) if reverse else range(T - 1, -1, -1)
    extra = {}
    if mode == "LSTM":
        cprev, tcs, ms = saved["cprev"], saved["tcs"], saved["ms"]
        dc = xp.zeros((B, H), dt) if gcn is None else gcn.astype(dt, copy=True)
        dH = xp.empty((T, B, Hout), dt) if Whr is not None else None
        fused = xp is np and Whr is None and m is None and dt in (np.float32, np.float64)
        gyc = None if gy is None or not fused else np.ascontiguousarray(gy, dtype=dt)
        if fused:
            dc = np.ascontiguousarray(dc)
        for t in order:
            if fused:  # one C++ call for the step's pointwise backward; dc is updated in place
                _C._cpu.lstm_cell_backward(acts[t], cprev[t], tcs[t], np.ascontiguousarray(dh),
                                           None if gyc is None else gyc[t], dc, dgates[t], _threads.count)
                dh = _matmul(dgates[t], Whh)
                continue
            dht = dh if gy is None else (dh + (gy[t] if m is None else gy[t] * m[t]))
            a = acts[t]
            i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
            if m is not None:
                dht_m = dht * m[t]
            else:
                dht_m = dht
            if Whr is not None:
                dH[t] = dht_m
                dm = _matmul(dht_m, Whr)
            else:
                dm = dht_m
            tc = tcs[t]
            dct = dm * o
            dct *= 1 - tc * tc
            if m is not None:
                dct += dc * m[t]
            else:
                dct += dc
            d = dgates[t]
            d[:, :H] = dct * g
            d[:, H:2 * H] = dct * cprev[t]
            d[:, 2 * H:3 * H] = dct * i
            d[:, 3 * H:] = dm * tc
            # sigmoid' = a (1 - a) for i, f, o; tanh' = 1 - g^2
            da = a - a * a
            da[:, 2 * H:3 * H] = 1 - g * g
            d *= da
            dcp = dct * f
            dhp = _matmul(d, Whh)
            if m is not None:
                keep = ~m[t]
                dcp += dc * keep
                dhp += dht * keep
            dc, dh = dcp, dhp
        extra["dc0"] = dc
        extra["dH"] = dH
    elif mode == "GRU":
        hgn = saved["hgn"]
        dhg = xp.empty((T, B, GH), dt)  # gradient of W_hh h + b_hh
        for t in order:
            dht = dh if gy is None else (dh + (gy[t] if m is None else gy[t] * m[t]))
            dht_m = dht * m[t] if m is not None else dht
            a = acts[t]
            r, z, n = a[:, :H], a[:, H:2 * H], a[:, 2 * H:]
            hp = hprev[t]
            d = dgates[t]
            dn = dht_m * (1 - z)
            dn *= 1 - n * n
            d[:, 2 * H:] = dn
            dz = dht_m * (hp - n)
            dz *= z * (1 - z)
            d[:, H:2 * H] = dz
            dr = dn * hgn[t]
            dr *= r * (1 - r)
            d[:, :H] = dr
            e = dhg[t]
            e[:, :2 * H] = d[:, :2 * H]
            e[:, 2 * H:] = dn * r
            dhp = _matmul(e, Whh)
            dhp += dht_m * z
            if m is not None:
                dhp += dht * ~m[t]
            dh = dhp
        extra["dhg"] = dhg
    else:
        relu = mode == "RNN_RELU"
        for t in order:
            dht = dh if gy is None else (dh + (gy[t] if m is None else gy[t] * m[t]))
            a = acts[t]
            d = dgates[t]
            if relu:
                xp.multiply(dht, a > 0, out=d)
            else:
                xp.multiply(dht, 1 - a * a, out=d)
            if m is not None:
                d *= m[t]
                dh = _matmul(d, Whh) + dht * ~m[t]
            else:
                dh = _matmul(d, Whh)
    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr = wanted
    D2 = dgates.reshape(T * B, GH)
    Dh2 = extra["dhg"].reshape(T * B, GH) if mode == "GRU" else D2
    gx = _wrap(_matmul(D2, Wih).reshape(T, B, I)) if x else None
    gwih = _wrap(_matmul(D2.T, X.reshape(T * B, I))) if w_ih else None
    gwhh = _wrap(_matmul(Dh2.T, hprev.reshape(T * B, Hout))) if w_hh else None
    gbih = gbhh = None
    if has_bias:
        gbih = _wrap(D2.sum(0)) if b_ih else None
        gbhh = _wrap(Dh2.sum(0) if mode == "GRU" else D2.sum(0)) if b_hh else None
    gwhr = None
    if w_hr:
        gwhr = _wrap(_matmul(extra["dH"].reshape(T * B, Hout).T, saved["ms"].reshape(T * B, H)))
    gh0 = _wrap(dh) if h0 else None
    gc0 = _wrap(extra["dc0"]) if c0 else None
    return gx, gh0, gc0, gwih, gwhh, gbih, gbhh, gwhr


__all__ = ["rnn_layer"]
