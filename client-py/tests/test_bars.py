"""Real bars from Python against the real server (protocol v1.3): a pandas frame shaped as
yfinance returns it (capitalised names, a Date index) and a polars frame put as they come; a bad
column stored with a warning and refused where a sweep needs it; the execution options as
keyword arguments on every verb, trades with their exit reasons and times; periods_per_year
"auto"; candles with marked exits, and the stitched walk-forward equity plotted."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

import sweepflight
from sweepflight.plot import plot_equity, plot_trades

from .conftest import Server

DAYS = 1_500


def yfinance_frame(seed: int = 7) -> pd.DataFrame:
    """Daily bars as ``yfinance.download`` returns them: a DatetimeIndex named Date, Open,
    High, Low, Close, Volume."""
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.012, DAYS)))
    open_ = np.concatenate([[close[0]], close[:-1]]) * np.exp(rng.normal(0, 0.004, DAYS))
    high = np.maximum(open_, close) * (1 + rng.uniform(0, 0.01, DAYS))
    low = np.minimum(open_, close) * (1 - rng.uniform(0, 0.01, DAYS))
    index = pd.bdate_range("2019-01-02", periods=DAYS, name="Date")
    volume = rng.integers(1_000_000, 5_000_000, DAYS)
    return pd.DataFrame({"Open": open_, "High": high, "Low": low, "Close": close, "Volume": volume}, index=index)


@pytest.fixture(scope="module")
def sf(server: Server) -> Iterator[sweepflight.Client]:
    with sweepflight.connect(server.uri) as client:
        client.put("goog", yfinance_frame())
        yield client


def test_a_yfinance_frame_is_put_as_it_comes(sf: sweepflight.Client) -> None:
    summary = sf.put("spy", yfinance_frame(3))
    assert summary.columns == ("open", "high", "low", "close", "volume", "time")
    assert summary.unusable == {}
    info = next(d for d in sf.datasets() if d.name == "spy")
    assert info.columns == summary.columns
    # The table comes back as sent: the capitalised names, the index as a Date column (pandas
    # puts it last).
    back = sf.get("spy")
    assert back.columns == ["Open", "High", "Low", "Close", "Volume", "Date"]
    assert isinstance(back["Date"].dtype, pl.Datetime)


def test_a_bad_column_is_stored_with_a_warning_and_refused_where_needed(sf: sweepflight.Client) -> None:
    frame = pl.from_pandas(yfinance_frame(4).reset_index())
    frame = frame.with_columns(pl.when(pl.int_range(pl.len()) == 17).then(0.5).otherwise(pl.col("High")).alias("High"))
    with pytest.warns(sweepflight.UnusableColumns, match=r"high: row 17 \(2019-01-25T00:00:00\): high 0.5 < close"):
        summary = sf.put("bad", frame)
    assert "high" not in summary.columns
    # A sweep that does not need the high runs; one that does is refused with the reason.
    assert sf.sweep("bad", strategy="sma_cross", params=[(5, 20)], fill="next_open").height == 1
    with pytest.raises(sweepflight.InvalidRequest, match="row 17"):
        sf.sweep("bad", strategy="sma_cross", params=[(5, 20)], stops="high_low", stop_loss=0.02)


def test_execution_options_on_every_verb(sf: sweepflight.Client) -> None:
    options = dict(fill="next_open", stops="high_low", stop_loss=0.03, trailing_stop=0.05, slippage=0.0005)
    grid = {"fast": [5, 10, 20], "slow": [50, 100]}
    swept = sf.sweep("goog", strategy="sma_cross", grid=grid, **options)  # type: ignore[arg-type]
    plain = sf.sweep("goog", strategy="sma_cross", grid=grid)
    assert swept["pnl"].to_list() != plain["pnl"].to_list()
    trades = sf.trades("goog", strategy="sma_cross", params=[(10, 50)], **options)  # type: ignore[arg-type]
    assert set(trades["exit_reason"].unique()) <= {"signal", "stop_loss", "trailing_stop", "end"}
    assert {"stop_loss", "trailing_stop"} & set(trades["exit_reason"].unique())
    row = swept.filter((pl.col("fast") == 10) & (pl.col("slow") == 50))
    assert math.isclose(trades["pnl"].sum(), row["pnl"][0], abs_tol=1e-6)
    # Next-open fills: every entry at a bar's open, slipped, on the entry's own date.
    frame = yfinance_frame()
    for t in trades.head(20).iter_rows(named=True):
        opened = frame["Open"].iloc[t["entry_row"]]
        slipped = opened * (1 + 0.0005) if t["side"] > 0 else opened * (1 - 0.0005)
        assert t["entry_price"] == pytest.approx(slipped, rel=1e-15)
        assert t["entry_time"] == frame.index[t["entry_row"]].to_pydatetime()
    equity = sf.equity("goog", strategy="sma_cross", params=[(10, 50)], **options)  # type: ignore[arg-type]
    assert equity["time"][0] == dt.datetime(2019, 1, 2)
    with sf.session(strategy="sma_cross") as s:
        assert s.sweep("goog", grid=grid, **options)["pnl"].to_list() == swept["pnl"].to_list()  # type: ignore[arg-type]
    folds = {"train": 500, "test": 250}
    wf = sf.walk_forward("goog", folds=folds, strategy="sma_cross", grid=grid, **options)  # type: ignore[arg-type]
    assert wf.height == 4


def test_periods_per_year_auto_reads_the_dates(sf: sweepflight.Client) -> None:
    auto = sf.sweep("goog", strategy="sma_cross", params=[(10, 50)], periods_per_year="auto")
    frame = yfinance_frame()
    years = (frame.index[-1] - frame.index[0]).total_seconds() / 31_557_600
    per_year = (DAYS - 1) / years
    assert 255 < per_year < 265
    given = sf.sweep("goog", strategy="sma_cross", params=[(10, 50)], periods_per_year=per_year)
    assert auto["sharpe"][0] == pytest.approx(given["sharpe"][0], rel=1e-12)
    with pytest.raises(sweepflight.InvalidRequest, match="time"):
        sf.put("closes", np.linspace(100, 120, 200))
        sf.sweep("closes", strategy="sma_cross", params=[(5, 20)], periods_per_year="auto")


def test_bad_option_values_are_refused_before_the_wire(sf: sweepflight.Client) -> None:
    for bad in [dict(fill="open"), dict(stops="intrabar"), dict(slippage="1%"), dict(trailing_stop=True)]:
        with pytest.raises(sweepflight.InvalidRequest):
            sf.sweep("goog", strategy="sma_cross", params=[(5, 20)], **bad)  # type: ignore[arg-type]
    with pytest.raises(sweepflight.InvalidRequest, match="slippage"):
        sf.sweep("goog", strategy="sma_cross", params=[(5, 20)], slippage=0.5)


def test_candles_with_exit_reasons_and_the_stitched_equity_plot(sf: sweepflight.Client, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    options = dict(fill="next_open", stops="high_low", stop_loss=0.03, trailing_stop=0.05)
    trades = sf.trades("goog", strategy="sma_cross", params=[(10, 50)], **options)  # type: ignore[arg-type]
    fig = plot_trades(yfinance_frame().reset_index(), trades, path=str(tmp_path / "trades.png"))
    labels = {t.get_text() for t in fig.axes[0].get_legend().get_texts()}
    assert "bars" in labels
    assert any(label.startswith("exit: ") and label != "exit: signal" for label in labels)
    assert (tmp_path / "trades.png").stat().st_size > 10_000
    folds = {"train": 500, "test": 250}
    wf = sf.walk_forward("goog", folds=folds, strategy="sma_cross", grid={"fast": [5, 10], "slow": [50]})
    fig = plot_equity(sf.walk_forward_equity(wf), path=str(tmp_path / "wf.png"))
    assert fig.axes[0].get_legend().get_texts()[0].get_text() == "walk-forward, out of sample"


def test_a_stop_formula_sweeps_its_parameter(sf: sweepflight.Client) -> None:
    m = sweepflight.param("m")
    stop = m * sweepflight.atr(14) / sweepflight.close
    grid = {"fast": [5, 10], "slow": [50], "m": [1.0, 2.0, 3.0]}
    swept = sf.sweep("goog", strategy="sma_cross", grid=grid, stop_loss=stop, fill="next_open", stops="high_low")
    assert swept.columns[:4] == ["combo", "fast", "slow", "m"]
    assert swept.height == 6
    # Text and expression are one formula; a tighter stop stops more trades.
    text = sf.sweep("goog", strategy="sma_cross", grid=grid, stop_loss="m * atr(14) / close", fill="next_open")
    assert text.height == 6
    tight = sf.trades("goog", strategy="sma_cross", params=[(10, 50, 1.0)], stop_loss=stop, stops="high_low")
    loose = sf.trades("goog", strategy="sma_cross", params=[(10, 50, 3.0)], stop_loss=stop, stops="high_low")
    count = lambda t: int((t["exit_reason"] == "stop_loss").sum())  # noqa: E731
    assert count(tight) > count(loose)
    with pytest.raises(sweepflight.InvalidRequest, match="stop_loss"):
        sf.sweep("goog", strategy="sma_cross", params=[(5, 20)], stop_loss="close > 1")
