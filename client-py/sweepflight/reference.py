"""The numba reference kernel: the paper's single-thread rung, written from the kernel's definition
(``docs/kernel.md``).

Every WMA output is a fresh sum with weights ascending and one division at the end, as the
paper's kernel does; this is the order the Rust kernel reproduces bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numba
import numpy as np

from . import paper

#: The paper's fee: 0.09% per round trip.
DEFAULT_FEE = 0.0009


@numba.njit(cache=True)
def wma(x: np.ndarray, n: int) -> np.ndarray:
    """``WMA(x, n)``: NaN for ``i < n-1`` and wherever the window holds a NaN."""
    m = x.shape[0]
    out = np.full(m, np.nan)
    denom = n * (n + 1) // 2
    for i in range(n - 1, m):
        s = 0.0
        bad = False
        for k in range(n):
            v = x[i - n + 1 + k]
            if np.isnan(v):
                bad = True
                break
            s += v * (k + 1)
        if not bad:
            out[i] = s / denom
    return out


@numba.njit(cache=True)
def _run(close: np.ndarray, half: int, full: int, sqrt: int, p3: int, p2: int, p: int, fee: float) -> tuple[float, int]:
    a = wma(2.0 * wma(close, half) - wma(close, full), sqrt)
    wp = wma(close, p)
    b = wma(3.0 * wma(close, p3) - wma(close, p2) - wp, p)
    pos = 0
    entry = 0.0
    pnl = 0.0
    trades = 0
    for i in range(1, close.shape[0]):
        if np.isnan(a[i - 1]) or np.isnan(a[i]) or np.isnan(b[i - 1]) or np.isnan(b[i]):
            continue
        sig = 0
        if b[i] > a[i] and b[i - 1] <= a[i - 1]:
            sig = 1
        elif b[i] < a[i] and b[i - 1] >= a[i - 1]:
            sig = -1
        if sig != 0 and sig != pos:
            if pos != 0:
                ret = pos * (close[i] / entry - 1.0)
                pnl += ((1.0 + ret) * (1.0 - fee) - 1.0) * 100.0
                trades += 1
            pos = sig
            entry = close[i]
    if pos != 0:
        ret = pos * (close[-1] / entry - 1.0)
        pnl += ((1.0 + ret) * (1.0 - fee) - 1.0) * 100.0
        trades += 1
    return pnl, trades


@numba.njit(cache=True, parallel=True)
def _sweep_parallel(close: np.ndarray, params: np.ndarray, fee: float) -> tuple[np.ndarray, np.ndarray]:
    n = params.shape[0]
    pnl = np.empty(n)
    trades = np.empty(n, dtype=np.int64)
    for j in numba.prange(n):
        q = params[j]
        pnl[j], trades[j] = _run(close, q[0], q[1], q[2], q[3], q[4], q[5], fee)
    return pnl, trades


def run_combo(close: np.ndarray, params: Sequence[int], fee: float = DEFAULT_FEE) -> tuple[float, int]:
    """PnL (percentage points) and trade count of one combo ``(half, full, sqrt, p3, p2, p)``."""
    half, full, sqrt, p3, p2, p = (int(v) for v in params)
    pnl, trades = _run(np.ascontiguousarray(close, dtype=np.float64), half, full, sqrt, p3, p2, p, fee)
    return float(pnl), int(trades)


def params_for(lengths: Iterable[int]) -> np.ndarray:
    """The ``(n, 6)`` int64 array of paper combos for the given lengths."""
    return np.array([paper.combo(int(L)) for L in lengths], dtype=np.int64).reshape(-1, 6)


def sweep(
    close: np.ndarray, params: np.ndarray, fee: float = DEFAULT_FEE, parallel: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Every combo of ``params`` (``(n, 6)`` ints): arrays of PnL and trades in input order.

    ``parallel=False`` is the paper's single-thread rung; ``True`` uses numba ``prange``.
    """
    close = np.ascontiguousarray(close, dtype=np.float64)
    params = np.ascontiguousarray(params, dtype=np.int64).reshape(-1, 6)
    if parallel:
        pnl_p, trades_p = _sweep_parallel(close, params, fee)
        return np.asarray(pnl_p), np.asarray(trades_p)
    pnl = np.empty(len(params))
    trades = np.empty(len(params), dtype=np.int64)
    for j, q in enumerate(params):
        pnl[j], trades[j] = _run(close, q[0], q[1], q[2], q[3], q[4], q[5], fee)
    return pnl, trades
