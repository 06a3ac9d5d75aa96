"""The Bollinger-and-RSI strategy with exits, written for vectorbt 1.2 as its docs teach, for
benches/study.py's formulas section.

    python benches/vbt_formulas.py ENGINE CLOSE.npy KS     # ENGINE: numba | rust; KS: comma list

Long when the close is below the lower Bollinger band (window n, k standard deviations) and
RSI(14) is below 35, short the mirror above the upper band with RSI above 65; a long exits when
the close is back above the middle band, a short below it. n in 10..49 and every k: the grid's
indicators come from ``vbt.BBANDS.run(..., param_product=True)`` and ``vbt.RSI.run``, the
signals are boolean arrays of every combo, ``Portfolio.from_signals`` trades them. Run twice in
this process: the first call compiles (numba) and warms up, the second is timed. Prints JSON:
the timed call's seconds, the process's peak RSS, and the combos' trade counts. vectorbt's own
conventions hold (its RSI and bands are not the contract's exact arithmetic), so trade counts
are reported, not compared. Runs in scripts/setup-vectorbt.sh's environment.
"""

from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np
import pandas as pd
import vectorbt as vbt


def run(close: pd.Series, ks: list[float]) -> pd.Series:
    bb = vbt.BBANDS.run(close, window=np.arange(10, 50), alpha=ks, param_product=True)
    rsi = vbt.RSI.run(close, window=14).rsi.to_numpy().reshape(-1, 1)
    c = close.to_numpy()[:, None]
    columns = bb.lower.columns

    def frame(a: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(a, index=close.index, columns=columns)

    lower, upper, middle = bb.lower.to_numpy(), bb.upper.to_numpy(), bb.middle.to_numpy()
    pf = vbt.Portfolio.from_signals(
        close,
        entries=frame((c < lower) & (rsi < 35)),
        exits=frame(c > middle),
        short_entries=frame((c > upper) & (rsi > 65)),
        short_exits=frame(c < middle),
    )
    trades: pd.Series = pf.trades.count()
    return trades


def main() -> None:
    engine, path, ks = sys.argv[1], sys.argv[2], [float(k) for k in sys.argv[3].split(",")]
    vbt.settings["engine"] = engine
    close = pd.Series(np.load(path))
    run(close, ks)
    t0 = time.perf_counter()
    trades = run(close, ks)
    secs = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {"engine": engine, "seconds": secs, "peak_rss": peak, "combos": len(trades), "trades": int(trades.sum())}
        )
    )


if __name__ == "__main__":
    main()
