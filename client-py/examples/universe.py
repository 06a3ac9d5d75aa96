"""A universe: many symbols in one dataset, optimised in-sample and checked out-of-sample.

    .venv/bin/python client-py/examples/universe.py [--uri grpc://127.0.0.1:8815] [--bars FILE.parquet]

Reads a multi-symbol Parquet file (`symbol, ts, close`; without --bars it writes a demo file of
eight random-walk symbols first) with Polars, puts it keyed by symbol in one call, sweeps every
symbol on its first 70% of bars, picks each symbol's best L, and sweeps those on the last 30%:
which parameters hold up out of sample.
"""

import argparse
import pathlib
import tempfile

import numpy as np
import polars as pl

import sweepflight

IN_SAMPLE = 0.7


def demo_file(path: pathlib.Path, symbols: int = 8, bars: int = 20_000) -> pathlib.Path:
    rng = np.random.default_rng(7)
    frames = []
    for k in range(symbols):
        close = 50 * (k + 1) * np.exp(np.cumsum(rng.normal(0.0, 0.001 + 0.0002 * k, bars)))
        frames.append(pl.DataFrame({"symbol": f"SYM{k}", "ts": np.arange(bars), "close": close}))
    # Sorted by time, as a market-data pipeline delivers it: the symbols interleave.
    pl.concat(frames).sort("ts", "symbol").write_parquet(path)
    return path


ap = argparse.ArgumentParser()
ap.add_argument("--uri", default=sweepflight.DEFAULT_URI)
ap.add_argument("--bars", type=pathlib.Path)
args = ap.parse_args()
path = args.bars or demo_file(pathlib.Path(tempfile.mkdtemp()) / "universe.parquet")

bars = pl.read_parquet(path)
split = int(bars.group_by("symbol").len()["len"].min() * IN_SAMPLE)
lengths = list(range(6, 201, 2))

with sweepflight.connect(args.uri) as sf:
    summary = sf.put("universe", bars, key="symbol")
    print(f"put {summary.rows:,} bars of {summary.series} symbols as one dataset")
    in_sample = sf.sweep("universe", lengths=lengths, rows=(0, split))
    best = (
        in_sample.sort("pnl", descending=True)
        .group_by("series", maintain_order=True)
        .first()
        .select("series", "full", pl.col("pnl").alias("pnl_in"), pl.col("trades").alias("trades_in"))
    )
    # Out of sample: each symbol with its own best L, in one call per distinct L.
    checks = []
    for length, group in best.group_by("full"):
        out = sf.sweep("universe", lengths=[int(length[0])], series=group["series"].to_list(), rows=(split, 10**12))
        checks.append(out.select("series", pl.col("pnl").alias("pnl_out"), pl.col("trades").alias("trades_out")))

table = best.join(pl.concat(checks), on="series").sort("series").rename({"full": "best_L"})
print(table)
held = table.filter(pl.col("pnl_out") > 0).height
print(f"{held} of {table.height} symbols kept a positive PnL out of sample")
