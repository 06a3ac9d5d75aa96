"""Walk a 20-symbol universe forward, and ask how likely the in-sample best is luck.

    .venv/bin/python client-py/examples/walk_forward.py [--uri grpc://127.0.0.1:8815]

Puts 20 synthetic symbols (random walks; the first four with a planted trend) as one keyed
dataset, then in one call each: a walk-forward of an SMA crossover grid (rolling folds of
3,000 train and 1,000 test bars, the best by Sharpe in-sample run on the test bars), and a
sweep of the same grid with 16 blocks per symbol, from which the probability of backtest
overfitting (PBO) and the deflated Sharpe ratio of each symbol's best combo follow.
docs/overfitting.md says what these numbers mean and when not to trust them.
"""

import argparse

import numpy as np
import polars as pl

import sweepflight
from sweepflight import stats

SYMBOLS, BARS, TRENDING = 20, 12_000, 4
GRID = {"fast": list(range(4, 40, 4)), "slow": list(range(30, 240, 15))}


def universe() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    frames = []
    for k in range(SYMBOLS):
        # A trend that reverses slowly (a sine of a 4,000-bar period) on the first few: the kind
        # of structure a crossover can follow; the rest are driftless random walks.
        drift = 0.0004 * np.sin(np.arange(BARS) * 2 * np.pi / 4_000) if k < TRENDING else 0.0
        close = 100 * np.exp(np.cumsum(rng.normal(0.0, 0.004, BARS) + drift))
        frames.append(pl.DataFrame({"symbol": f"S{k:02d}", "close": close}))
    return pl.concat(frames)


ap = argparse.ArgumentParser()
ap.add_argument("--uri", default=sweepflight.DEFAULT_URI)
args = ap.parse_args()

with sweepflight.connect(args.uri) as sf:
    put = sf.put("wf20", universe(), key="symbol")
    print(f"put {put.rows:,} bars of {put.series} symbols")
    wf = sf.walk_forward(
        "wf20", strategy="sma_cross", grid=GRID, warmup=250, folds={"train": 3_000, "test": 1_000}, select="sharpe"
    )
    combos = len(GRID["fast"]) * len(GRID["slow"])
    print(f"walk-forward: {wf.height} folds x {combos} combos in one call")
    per_symbol = (
        wf.group_by("series", maintain_order=True)
        .agg(pl.col("pnl").sum().alias("oos_pnl"), pl.col("train_score").mean().alias("mean_is_sharpe"))
        .sort("series")
    )
    # Overfitting diagnostics on the whole of each series: 16 blocks per combo.
    swept = sf.sweep("wf20", strategy="sma_cross", grid=GRID, blocks=16)
    pbos = stats.pbo(swept)
    assert isinstance(pbos, dict)
    rows = []
    for (name,), part in swept.group_by("series", maintain_order=True):
        best = part.sort("sharpe", descending=True, nulls_last=True).row(0, named=True)
        dsr = stats.deflated_sharpe(
            best["sharpe"],
            trials=part.height,
            sharpe_variance=float(part["sharpe"].drop_nulls().var() or 0.0),
            observations=BARS - 1,
        )
        rows.append({"series": name, "pbo": pbos[str(name)].pbo, "best_sharpe": best["sharpe"], "dsr": dsr})

table = per_symbol.join(pl.DataFrame(rows), on="series")
with pl.Config(tbl_rows=SYMBOLS):
    print(table)
trend = table.filter(pl.col("series") < f"S{TRENDING:02d}")
noise = table.filter(pl.col("series") >= f"S{TRENDING:02d}")
print(f"trending symbols: mean PBO {trend['pbo'].mean():.2f}, out-of-sample PnL {trend['oos_pnl'].sum():+.1f} pp")
print(f"random walks:     mean PBO {noise['pbo'].mean():.2f}, out-of-sample PnL {noise['oos_pnl'].sum():+.1f} pp")
print(f"deflated Sharpe > 0.95 on {table.filter(pl.col('dsr') > 0.95).height} of {table.height} symbols")
