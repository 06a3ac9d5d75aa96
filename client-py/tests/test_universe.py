"""Universes from Python: a keyed put from polars, pandas and pyarrow, sweeps over all or some
series and row ranges, against the numba reference per series; the bad inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import sweepflight
from sweepflight import reference

from .conftest import Server


def frame() -> pl.DataFrame:
    rng = np.random.default_rng(21)
    parts = []
    for k, (sym, n) in enumerate([("MSFT", 3_000), ("AAPL", 2_500), ("NVDA", 2_000)]):
        close = 100 * np.exp(np.cumsum(rng.normal(0, 0.001 + 0.001 * k, n)))
        parts.append(pl.DataFrame({"symbol": sym, "ts": np.arange(n), "close": close}))
    # Interleaved by time, as a pipeline delivers it.
    return pl.concat(parts).sort("ts", "symbol", maintain_order=True)


@pytest.fixture(scope="module")
def sf(server: Server) -> sweepflight.Client:
    with sweepflight.connect(server.uri) as client:
        yield client


def test_keyed_puts_from_every_frame_library_agree(sf: sweepflight.Client) -> None:
    df = frame()
    inputs = {
        "polars": df,
        "pandas": df.to_pandas(),
        "arrow": df.to_arrow(),
        "arrow-dictionary": df.with_columns(pl.col("symbol").cast(pl.Categorical)).to_arrow(),
    }
    tables = []
    for name, data in inputs.items():
        summary = sf.put(f"u-{name}", data, key="symbol")
        assert (summary.rows, summary.series) == (7_500, 3), name
        info = sf.info(f"u-{name}")
        assert (info.key, info.series) == ("symbol", 3)
        tables.append(sf.sweep(f"u-{name}", lengths=[6, 20]))
    assert all(t.equals(tables[0]) for t in tables)
    # Series in order of first appearance (AAPL sorts first at ts 0), series after series.
    assert tables[0]["series"].to_list() == ["AAPL", "AAPL", "MSFT", "MSFT", "NVDA", "NVDA"]
    stored = sf.get("u-polars")
    assert stored["symbol"].unique(maintain_order=True).to_list() == ["AAPL", "MSFT", "NVDA"]


def test_subsets_and_rows_equal_the_reference_per_series(sf: sweepflight.Client) -> None:
    df = frame()
    sf.put("u", df, key="symbol")
    lengths = [6, 14, 40]
    got = sf.sweep("u", lengths=lengths, series=["NVDA", "MSFT"], rows=(200, 1_800))
    assert got.columns[0] == "series" and got.height == 6
    request = sweepflight.request_of(got)
    assert request is not None and request.series == ("NVDA", "MSFT") and request.rows == (200, 1_800)
    params = reference.params_for(lengths)
    for sym in ["NVDA", "MSFT"]:
        close = df.filter(pl.col("symbol") == sym)["close"].to_numpy()[200:1_800]
        pnl, trades = reference.sweep(close, params)
        part = got.filter(pl.col("series") == sym)
        assert part["trades"].to_list() == trades.tolist(), sym
        assert np.abs(part["pnl"].to_numpy() - pnl).max() <= 1e-6, sym
    # Chunked, the same table; in a keyed session too.
    assert sf.sweep("u", lengths=lengths, series=["NVDA", "MSFT"], rows=(200, 1_800), chunk_combos=2).equals(got)
    with sf.session(keyed=True) as s:
        assert s.sweep("u", lengths=lengths, series=["NVDA", "MSFT"], rows=(200, 1_800)).equals(got)


def test_universe_errors(sf: sweepflight.Client) -> None:
    sf.put("u2", frame(), key="symbol")
    sf.put("plain2", pa.table({"close": [1.0, 2.0, 3.0]}))
    with pytest.raises(sweepflight.NotFound, match="has no series"):
        sf.sweep("u2", lengths=[6], series=["TSLA"])
    with pytest.raises(sweepflight.InvalidRequest, match="not keyed"):
        sf.sweep("plain2", lengths=[6], series=["A"])
    with pytest.raises(sweepflight.InvalidRequest, match="has 2000 rows"):
        sf.sweep("u2", lengths=[6], rows=(2_000, 2_500))
    with pytest.raises(sweepflight.InvalidRequest, match="start < end"):
        sf.sweep("u2", lengths=[6], rows=(5, 5))
    with pytest.raises(sweepflight.InvalidRequest, match="list of series"):
        sf.sweep("u2", lengths=[6], series="AAPL")  # type: ignore[arg-type]
    bad = pd.DataFrame({"symbol": ["A", None, "B"], "close": [1.0, 2.0, 3.0]})
    with pytest.raises(sweepflight.InvalidRequest, match="row 1: is null"):
        sf.put("k", bad, key="symbol")
    bad = pl.DataFrame({"symbol": ["A", "B", "A"], "close": [1.0, 2.0, -3.0]})
    with pytest.raises(sweepflight.InvalidRequest, match='series "A" row 1'):
        sf.put("k", bad, key="symbol")
    with pytest.raises(sweepflight.InvalidRequest, match="not in the schema"):
        sf.put("k", pl.DataFrame({"close": [1.0]}), key="symbol")
    assert "k" not in [d.name for d in sf.datasets()]
