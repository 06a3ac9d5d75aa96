"""Portfolio strategies from Python (protocol v1.4): a universe pushed as a long frame or a dict
of frames, a Portfolio built from the expression builder swept like any strategy, its trades
and equity by date, a plot; the mistakes a user makes, refused with the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import sweepflight
from sweepflight import Portfolio, close, column, param, roc, sma, std

from .conftest import Server


def frames() -> dict[str, pd.DataFrame]:
    """Four daily series by name (pandas, a date index), one starting late, one ending early,
    one missing days."""
    rng = np.random.default_rng(7)
    days = pd.date_range("2021-01-04", periods=300, freq="D")
    out = {}
    for k, (sym, a, b) in enumerate([("AAA", 0, 300), ("BBB", 40, 300), ("CCC", 0, 220), ("DDD", 0, 300)]):
        idx = days[a:b]
        if sym == "DDD":
            idx = idx[np.arange(len(idx)) % 9 != 4]
        closes = 100 * np.exp(np.cumsum(rng.normal(0.0003 * (k - 1), 0.012, len(idx))))
        out[sym] = pd.DataFrame(
            {
                "open": closes * (1 + rng.normal(0, 0.002, len(idx))),
                "close": closes,
                "pred": rng.normal(0, 1, len(idx)),
            },
            index=idx,
        )
    return out


@pytest.fixture(scope="module")
def sf(server: Server) -> sweepflight.Client:
    with sweepflight.connect(server.uri) as client:
        client.put("u", frames())
        yield client


MOMENTUM = Portfolio(
    rank=roc(close, param("n")),
    filter=close > sma(close, param("m")),
    longs=param("k"),
    rebalance="weekly",
)


def test_a_dict_of_frames_and_a_long_frame_are_the_same_universe(sf: sweepflight.Client) -> None:
    long = pl.concat(
        [
            pl.from_pandas(df.reset_index(names="time")).with_columns(pl.lit(s).alias("symbol"))
            for s, df in frames().items()
        ]
    )
    sf.put("long", long, key="symbol")
    info = sf.info("u")
    assert (info.key, info.series) == ("symbol", 4)
    grid = {"n": np.arange(5, 25, 10), "m": [20], "k": [1, 2]}
    a = sf.sweep("u", strategy=MOMENTUM, grid=grid)
    b = sf.sweep("long", strategy=MOMENTUM, grid=grid)
    assert a.equals(b)
    assert a.height == 4 and "series" not in a.columns
    assert a.columns[:5] == ["combo", "n", "m", "k", "total_return"]
    # Weekly over 300 days; a fill whose tradable equity is 0 (all of it in a series without a
    # bar that day) is not counted.
    assert 38 <= a["rebalances"].min() <= a["rebalances"].max() <= 43
    # A mapping of fields is the same strategy.
    c = sf.sweep("u", strategy=MOMENTUM.wire(), grid=grid)
    assert c.equals(a)


def test_trades_and_equity_by_date_and_the_plot(sf: sweepflight.Client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    params = [(15, 20, 2)]
    trades = sf.trades("u", strategy=MOMENTUM, params=params)
    assert set(trades["series"].unique()) <= {"AAA", "BBB", "CCC", "DDD"}
    assert trades["time"].dtype == pl.Datetime("ns") or str(trades["time"].dtype).startswith("Datetime")
    equity = sf.equity("u", strategy=MOMENTUM, params=params)
    assert equity.height == 300
    row = sf.sweep("u", strategy=MOMENTUM, params=params)
    assert (equity["equity"][-1] - 1) * 100 == pytest.approx(row["total_return"][0], abs=1e-12)
    # The fees the trades paid add up to the metric (percent of the start).
    assert trades["fee"].sum() * 100 == pytest.approx(row["fees"][0], rel=1e-12)
    fig = sweepflight.plot_equity(equity, path=str(tmp_path / "book.png"))
    assert fig is not None and (tmp_path / "book.png").stat().st_size > 10_000


def test_a_models_scores_rank_through_inputs_and_weights_by_inverse_volatility(sf: sweepflight.Client) -> None:
    scored = Portfolio(rank=column("pred"), longs=2, shorts=2, rebalance=5, inputs=["pred"])
    r = sf.sweep("u", strategy=scored, params=[()])
    assert r.height == 1 and r["avg_holdings"][0] > 2
    inv_vol = Portfolio(rank=roc(close, 20), weight=1 / std(roc(close, 1), param("w")), longs=3, rebalance="monthly")
    w = sf.sweep("u", strategy=inv_vol, grid={"w": [10, 20]})
    assert w.height == 2 and w["turnover"].to_list()[0] > 0


def test_mistakes_are_refused_with_the_fix(sf: sweepflight.Client) -> None:
    with pytest.raises(ValueError, match=r"longs= takes an integer or a parameter"):
        Portfolio(rank=close, longs=2.0, rebalance=5)
    with pytest.raises(ValueError, match=r"rebalance= takes an integer, \"daily\""):
        Portfolio(rank=close, longs=2, rebalance="every month")
    # A word that is not a period is a parameter's name: the server asks for its values.
    with pytest.raises(sweepflight.InvalidRequest, match="is read as a parameter named quarterly; a period is"):
        sf.sweep("u", strategy=Portfolio(rank=close, longs=2, rebalance="quarterly"), params=[()])
    with pytest.raises(ValueError, match="needs longs= or shorts="):
        Portfolio(rank=close, rebalance=5)
    # numpy integers are integers, never refused or cast.
    assert Portfolio(rank=close, longs=np.int64(3), rebalance=np.int32(5)).wire()["longs"] == 3
    with pytest.raises(sweepflight.InvalidRequest, match="does not apply to a portfolio strategy"):
        sf.sweep("u", strategy=MOMENTUM, params=[(5, 20, 1)], stop_loss=0.05)
    with pytest.raises(sweepflight.InvalidRequest, match=r"\(k\) must be an integer in 0..=100000"):
        sf.sweep("u", strategy=MOMENTUM, params=[(5, 20, -1)])
    with pytest.raises(sweepflight.InvalidRequest, match="a portfolio's fields are"):
        sf.sweep("u", strategy={"rank": "close", "longs": 1, "rebalance": 5, "long": "close > 1"}, params=[()])
    shuffled = frames()
    shuffled["AAA"] = shuffled["AAA"].sample(frac=1.0, random_state=3)
    sf.put("shuffled", shuffled)
    with pytest.raises(sweepflight.FailedPrecondition, match="out of time order"):
        sf.sweep("shuffled", strategy=MOMENTUM, params=[(5, 20, 1)])
    bad = frames()
    bad["BBB"] = bad["BBB"].drop(columns=["pred"])
    with pytest.raises(sweepflight.InvalidRequest, match="every series of a universe has the same columns"):
        sf.put("bad", bad)


def test_a_session_answers_a_portfolio_on_each_action(sf: sweepflight.Client) -> None:
    params = [(15, 20, 2)]
    for action in ("sweep", "trades", "equity"):
        with sf.session(action=action, strategy=MOMENTUM, keyed=True) as s:
            got = getattr(s, action)("u", params=params)
        direct = getattr(sf, action)("u", strategy=MOMENTUM, params=params)
        # A session's schema is sent before any dataset: its trades and equity leave out `time`.
        assert got.equals(direct.drop("time") if "time" in direct.columns else direct), action
