"""The momentum rotation of benches/study.py's portfolios section, written for vectorbt 1.2 the
way its users write it (there is no rank-and-hold in vectorbt: the rotation is built by hand and
handed to ``Portfolio.from_orders`` as target weights).

    python benches/vbt_portfolio.py UNIVERSE.npz GRID_JSON [COMBOS]

For each combo of the grid (``{"n": [...], "m": [...], "k": [...], "r": [...]}``, in that
nesting order, the last fastest): ``roc = close.pct_change(n) * 100`` and
``close > close.rolling(m).mean()`` with pandas; every ``r`` rows from the first, the ``k``
eligible series (the filter holds, the rate finite) with the highest rate picked with numpy
(ties by series order), each weighted ``1/k``; the weights filled at the next row's open by
``Portfolio.from_orders(size_type="targetpercent", group_by=..., cash_sharing=True,
call_seq="auto", val_price=np.inf, fees=fee / 2)``, a dozen combos a call (their columns side
by side, one group each), as a user batches them to fit memory. ``COMBOS`` stops after that many
(a part of the grid). Prints JSON: seconds, the process's peak RSS, and each combo's total
return in percent (for the study to compare with sweepflight's). Runs in
scripts/setup-vectorbt.sh's environment.
"""

from __future__ import annotations

import itertools
import json
import resource
import sys
import time

import numpy as np
import pandas as pd
import vectorbt as vbt  # type: ignore[import-not-found]

FEE = 0.0009
BATCH = 12


def main() -> None:
    data = np.load(sys.argv[1])
    grid = json.loads(sys.argv[2])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
    close = pd.DataFrame(data["close"], index=pd.date_range("2004-01-05", periods=data["close"].shape[0], freq="D"))
    open_ = pd.DataFrame(data["open"], index=close.index)
    rows, series = close.shape
    combos = list(itertools.product(grid["n"], grid["m"], grid["k"], grid["r"]))[:limit]
    totals: list[float] = []
    batch: list[np.ndarray] = []

    def run(batch: list[np.ndarray]) -> None:
        if not batch:
            return
        b = len(batch)
        size = pd.DataFrame(np.hstack(batch), index=close.index)
        pf = vbt.Portfolio.from_orders(
            close=pd.DataFrame(np.tile(close.to_numpy(), b), index=close.index),
            size=size,
            size_type="targetpercent",
            price=pd.DataFrame(np.tile(open_.to_numpy(), b), index=close.index),
            val_price=np.inf,
            group_by=np.repeat(np.arange(b), series),
            cash_sharing=True,
            call_seq="auto",
            fees=FEE / 2,
            init_cash=1.0,
            freq="1D",
        )
        totals.extend((np.asarray(pf.total_return()) * 100).tolist())

    t0 = time.perf_counter()
    cache: dict[tuple[int, int], np.ndarray] = {}
    for n, m, k, r in combos:
        if (n, m) not in cache:
            cache.clear()
            roc = close.pct_change(n, fill_method=None) * 100
            above = close > close.rolling(m).mean()
            cache[(n, m)] = roc.where(above).to_numpy()
        rank = cache[(n, m)]
        size = np.full((rows, series), np.nan)
        for row in range(0, rows - 1, r):
            x = rank[row]
            ok = np.isfinite(x)
            w = np.zeros(series)
            if ok.any():
                order = np.argsort(-np.where(ok, x, -np.inf), kind="stable")[: min(k, int(ok.sum()))]
                w[order] = 1.0 / len(order)
            size[row + 1] = w
        batch.append(size)
        if len(batch) == BATCH:
            run(batch)
            batch = []
    run(batch)
    secs = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": secs, "peak_rss": peak, "combos": len(totals), "total_return": totals}))


if __name__ == "__main__":
    main()
