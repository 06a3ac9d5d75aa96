"""Protocol v1.4's trust rules from Python, with the mistakes users make: a shuffled frame
(refused, or run in row order with ``ignore_time=True``), backtesting.py's frame with its
unnamed DatetimeIndex (its dates kept), a model's column read through ``inputs``, a typo of a
column or a function (the server names what was meant), numpy integers as windows, and a
window that is not a whole number (refused, never cut)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sweepflight
from sweepflight import Strategy, close, column, param, sma

from .conftest import Server

DAYS = 800


def bt_frame(seed: int = 5) -> pd.DataFrame:
    """Daily bars as backtesting.py's test data holds them: capitalised columns and an unnamed
    DatetimeIndex (what ``pa.Table.from_pandas`` names ``__index_level_0__``)."""
    rng = np.random.default_rng(seed)
    c = 100 * np.exp(np.cumsum(rng.normal(0, 0.012, DAYS)))
    o = np.concatenate([[c[0]], c[:-1]])
    frame = pd.DataFrame(
        {"Open": o, "High": np.maximum(o, c) * 1.004, "Low": np.minimum(o, c) * 0.996, "Close": c},
        index=pd.bdate_range("2018-01-02", periods=DAYS),
    )
    # A model's prediction: the next bar's return, as a real model would hope to know it.
    frame["pred"] = np.concatenate([np.diff(np.log(c)), [0.0]])
    return frame


@pytest.fixture(scope="module")
def sf(server: Server) -> Iterator[sweepflight.Client]:
    with sweepflight.connect(server.uri) as client:
        client.put("bt", bt_frame())
        yield client


def test_an_unnamed_pandas_index_keeps_its_dates(sf: sweepflight.Client) -> None:
    summary = sf.put("bt2", bt_frame(6))
    assert summary.columns == ("open", "high", "low", "close", "time")
    ranked = sf.sweep("bt2", strategy="sma_cross", params=[(10, 20)], periods_per_year="auto")
    assert ranked["sharpe"][0] is not None
    trades = sf.trades("bt2", strategy="sma_cross", params=[(10, 20)], fill="next_open")
    assert "entry_time" in trades.columns
    assert str(trades["entry_time"][0]).startswith("2018-")


def test_a_shuffled_frame_is_refused_unless_ignore_time(sf: sweepflight.Client) -> None:
    frame = bt_frame(7)
    shuffled = frame.sample(frac=1.0, random_state=1)
    with pytest.warns(sweepflight.UnusableColumns, match="out of time order"):
        sf.put("shuffled", shuffled)
    for call in (sf.sweep, sf.trades, sf.equity):
        with pytest.raises(sweepflight.FailedPrecondition, match=r"row \d+: time .* sort the bars by time"):
            call("shuffled", strategy="sma_cross", params=[(10, 20)])
    with pytest.raises(sweepflight.FailedPrecondition, match="ignore_time"):
        sf.explain("shuffled", strategy="sma_cross", params=[(10, 20)])
    with pytest.raises(sweepflight.FailedPrecondition):
        sf.walk_forward("shuffled", strategy="sma_cross", params=[(10, 20)], folds={"train": 300, "test": 100})
    # In row order, as asked: the same as the shuffled closes put without their time.
    ran = sf.sweep("shuffled", strategy="sma_cross", params=[(10, 20)], ignore_time=True)
    sf.put("rows", shuffled.reset_index(drop=True))
    assert ran.equals(sf.sweep("rows", strategy="sma_cross", params=[(10, 20)]))
    trades = sf.trades("shuffled", strategy="sma_cross", params=[(10, 20)], ignore_time=True)
    assert "entry_time" not in trades.columns
    with pytest.raises(sweepflight.InvalidRequest, match="ignore_time= takes True or False"):
        sf.sweep("shuffled", strategy="sma_cross", params=[(10, 20)], ignore_time="yes")
    # Sorted again, it runs with its dates: the same result as the frame before shuffling.
    sf.put("sorted", shuffled.sort_index())
    sf.put("original", frame)
    assert sf.sweep("sorted", strategy="sma_cross", params=[(10, 20)]).equals(
        sf.sweep("original", strategy="sma_cross", params=[(10, 20)])
    )


def test_a_models_column_through_inputs_and_typos_that_name_the_column(sf: sweepflight.Client) -> None:
    k = param("k")
    mine = Strategy(long=column("pred") > k, short=column("pred") < -k, inputs=["pred"])
    got = sf.sweep("bt", strategy=mine, grid={"k": [0.0, 0.005]})
    assert got["k"].to_list() == [0.0, 0.005]
    assert min(got["trades"].to_list()) > 10
    # The same as a mapping, and explain lists the input.
    as_text = {"long": "pred > k", "short": "pred < -k", "inputs": ["pred"]}
    assert sf.sweep("bt", strategy=as_text, grid={"k": [0.0, 0.005]}).equals(got)
    assert sf.explain("bt", strategy=mine, grid={"k": [0.0]})["columns"] == ["close", "pred"]
    # Without inputs the name is a parameter, and the server says the column was meant.
    with pytest.raises(sweepflight.InvalidRequest, match=r"list it in the strategy's \"inputs\""):
        sf.sweep("bt", strategy=Strategy(long=column("pred") > 0), params=[[]])
    with pytest.raises(sweepflight.InvalidRequest, match="did you mean the column close"):
        sf.sweep("bt", strategy=Strategy(long=param("clsoe") > 100), params=[[]])
    with pytest.raises(sweepflight.InvalidRequest, match="did you mean `atr`"):
        sf.sweep("bt", strategy={"long": "art(14) > 1"}, params=[[]])
    with pytest.raises(sweepflight.InvalidRequest, match="`inputs` names `vwap`, which dataset `bt` does not have"):
        sf.sweep("bt", strategy=Strategy(long=column("vwap") > 0, inputs=["vwap"]), params=[[]])
    with pytest.raises(ValueError, match="inputs= takes a list"):
        Strategy(long=close > 0, inputs="pred")


def test_numpy_integers_are_windows_and_fractions_are_refused(sf: sweepflight.Client) -> None:
    n = param("n")
    mine = Strategy(long=close > sma(close, n), short=close < sma(close, n))
    got = sf.sweep("bt", strategy=mine, grid={"n": np.arange(5, 20, 5)})
    assert got["n"].to_list() == [5, 10, 15]
    got = sf.sweep("bt", strategy=mine, params=np.array([[5], [10]]))
    assert got["n"].to_list() == [5, 10]
    for bad, said in ((5.9, "got 5.9"), (-3, "got -3"), (np.float64(7.5), "got 7.5")):
        with pytest.raises(sweepflight.InvalidRequest, match=said):
            sf.sweep("bt", strategy=mine, grid={"n": [bad]})


def test_plots_read_dates_and_name_each_combo_by_its_parameters(sf: sweepflight.Client, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from sweepflight.plot import plot_equity, plot_trades

    grid = {"fast": [5, 10], "slow": [20, 50]}
    curves = sf.equity("bt", strategy="sma_cross", grid=grid, order_by="sharpe", top=2)
    fig = plot_equity(curves, path=str(tmp_path / "equity.png"))
    top, bottom = fig.axes
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert len(labels) == 2 and all(re.fullmatch(r"fast=\d+ slow=\d+", x) for x in labels), labels
    assert bottom.get_xlabel() == "date"
    # By date: the x range is the dataset's years, not row numbers.
    low, high = top.get_xlim()
    assert 17_000 < low < high < 20_000, (low, high)  # days since 1970: 2018 to 2021
    # A strategy of formulas: the sweep's frame names the combos.
    n = param("n")
    mine = Strategy(long=close > sma(close, n), short=close < sma(close, n))
    swept = sf.sweep("bt", strategy=mine, grid={"n": [10, 30]})
    fig = plot_equity(sf.equity("bt", strategy=mine, grid={"n": [10, 30]}), params=swept)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["n=10", "n=30"]
    # Trades on candles by date, from the frame as it was put (its DatetimeIndex).
    trades = sf.trades("bt", strategy="sma_cross", params=[(10, 20)], fill="next_open")
    fig = plot_trades(bt_frame(), trades, path=str(tmp_path / "trades.png"))
    assert fig.axes[0].get_xlabel() == "date"
    assert (tmp_path / "trades.png").stat().st_size > 10_000
