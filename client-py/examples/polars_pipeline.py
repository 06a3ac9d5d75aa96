"""A Polars pipeline: OHLCV bars from a file -> push the closes -> sweep -> join the best
parameters back onto the bars.

    .venv/bin/python client-py/examples/polars_pipeline.py [--uri grpc://127.0.0.1:8815] [--bars FILE]

Without --bars it writes a demo file of one-minute bars (from the paper series) first. FILE may
be CSV or Parquet with a `close` column (any other columns are kept by the server).
"""

import argparse
import pathlib
import tempfile

import numpy as np
import polars as pl

import sweepflight
from sweepflight import paper


def demo_bars(path: pathlib.Path) -> pathlib.Path:
    close = paper.series(50_000)
    start = pl.datetime(2026, 1, 5)
    bars = pl.DataFrame({"close": close}).with_columns(
        ts=pl.datetime_range(start, start + pl.duration(minutes=len(close) - 1), "1m", eager=True),
        open=pl.col("close").shift(1).fill_null(pl.col("close")),
        volume=pl.lit(np.random.default_rng(1).integers(1, 500, len(close))),
    )
    bars = bars.with_columns(high=pl.max_horizontal("open", "close"), low=pl.min_horizontal("open", "close"))
    bars.select("ts", "open", "high", "low", "close", "volume").write_csv(path)
    return path


ap = argparse.ArgumentParser()
ap.add_argument("--uri", default=sweepflight.DEFAULT_URI)
ap.add_argument("--bars", type=pathlib.Path)
args = ap.parse_args()
path = args.bars or demo_bars(pathlib.Path(tempfile.mkdtemp()) / "bars.csv")

scan = pl.scan_parquet(path) if path.suffix == ".parquet" else pl.scan_csv(path, try_parse_dates=True)
bars = scan.with_columns(pl.col("close").cast(pl.Float64)).collect()

with sweepflight.connect(args.uri) as sf:
    summary = sf.put("bars", bars.lazy().select("ts", "close", "volume"))
    print(f"pushed {summary.rows:,} bars as dataset {summary.dataset!r} (version {summary.version})")
    grid = sf.sweep("bars", lengths=range(6, 201, 2))

best = grid.sort("pnl", descending=True).head(3)
print(best.select("full", "half", "sqrt", "p", "pnl", "trades", "win_rate", "max_drawdown"))

# Tag every bar with the best combo's parameters, ready for the next stage of the pipeline.
tagged = bars.join(best.head(1).select("half", "full", "sqrt", "p3", "p2", "p", "pnl"), how="cross")
print(tagged.head(3))
