"""vectorbt's canonical SMA-crossover grid, as a new user runs it, for benches/study.py.

    python benches/vbt_peer.py ENGINE CLOSE.npy     # ENGINE: rust | numba

Runs ``vbt.MA.run_combs(close, window=np.arange(10, 40), r=2)`` (435 fast/slow pairs) and
``Portfolio.from_signals`` stop-and-reverse (long on the fast MA crossing above the slow, short
below) twice in this process: the first call compiles (numba) or warms up, the second is timed.
Prints JSON: the timed call's seconds, the process's peak RSS (the timed call's working set; the
warm-up's was the same size), and each combo's (fast, slow, trades). It runs in its own
environment (vectorbt pins its own numpy and pandas): ``scripts/setup-vectorbt.sh``.
"""

from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np
import pandas as pd
import vectorbt as vbt


def run(close: pd.Series) -> tuple[pd.Series, list[tuple[int, int]]]:
    fast, slow = vbt.MA.run_combs(close, window=np.arange(10, 40), r=2, short_names=["fast", "slow"])
    entries = fast.ma_crossed_above(slow)
    exits = fast.ma_crossed_below(slow)
    pf = vbt.Portfolio.from_signals(close, entries, exits, direction="both", upon_opposite_entry="reverse")
    trades = pf.trades.count()
    # One column per combo, indexed by (fast window, slow window).
    pairs = [(int(a), int(b)) for a, b in trades.index.to_list()]
    return trades, pairs


def main() -> None:
    engine, path = sys.argv[1], sys.argv[2]
    vbt.settings["engine"] = engine
    close = pd.Series(np.load(path))
    run(close)
    t0 = time.perf_counter()
    trades, pairs = run(close)
    secs = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    combos = [[a, b, int(t)] for (a, b), t in zip(pairs, trades.to_list(), strict=True)]
    out = {"engine": engine, "seconds": secs, "peak_rss": peak, "combos": combos}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
