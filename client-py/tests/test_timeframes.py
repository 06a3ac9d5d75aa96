"""Higher timeframes from Python (protocol v1.4): ``daily``, ``weekly``, ``monthly`` in the
expression builder; their values checked against a pandas computation written here from the
definition (ISO weeks, UTC days, each period's value seen from the next period) by sending that
computation as an input column and comparing the two sweeps; the mistakes a user makes."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from backtesting.test import GOOG

import sweepflight
from sweepflight import Strategy, close, column, daily, monthly, param, sma, weekly

from .conftest import Server


@pytest.fixture(scope="module")
def sf(server: Server) -> Iterator[sweepflight.Client]:
    with sweepflight.connect(server.uri) as client:
        yield client


def previous_period(values: pd.Series, keys: pd.Series, per_period: object) -> np.ndarray:
    """At each bar, ``per_period`` (a function of one period's bars' values, in order, and of
    the periods before) of the period before the bar's own; NaN in the first period."""
    periods: list[list[float]] = []
    of_bar: list[int] = []
    last = None
    for v, k in zip(values, keys, strict=True):
        if k != last:
            periods.append([])
            last = k
        periods[-1].append(float(v))
        of_bar.append(len(periods) - 1)
    computed = per_period(periods)  # type: ignore[operator]
    return np.array([math.nan if p == 0 else computed[p - 1] for p in of_bar])


def sma_of_closes(n: int) -> object:
    """The spec's sma over each period's last close: a fresh sum, oldest first, one division."""

    def f(periods: list[list[float]]) -> list[float]:
        closes = [p[-1] for p in periods]
        out = []
        for i in range(len(closes)):
            if i + 1 < n:
                out.append(math.nan)
                continue
            s = 0.0
            for v in closes[i + 1 - n : i + 1]:
                s += v
            out.append(s / n)
        return out

    return f


def test_the_builder_prints_the_calls() -> None:
    n = param("n")
    assert str(close > weekly(sma(close, n))) == "close > weekly(sma(close, n))"
    assert str(daily(close) - monthly(close * 2)) == "daily(close) - monthly(close * 2)"
    assert {"daily", "weekly", "monthly"} <= set(sweepflight.expr.FUNCTIONS)


def test_weekly_on_real_daily_bars_equals_the_definition_computed_in_pandas(sf: sweepflight.Client) -> None:
    goog = GOOG.copy()
    iso = goog.index.isocalendar()
    week = iso["year"] * 100 + iso["week"]
    goog["wk"] = previous_period(goog["Close"], week, sma_of_closes(10))
    sf.put("goog", goog)
    framed = Strategy(long=close > weekly(sma(close, 10)), short=close < weekly(sma(close, 10)))
    sent = Strategy(long=close > column("wk"), short=close < column("wk"), inputs=["wk"])
    a = sf.sweep("goog", strategy=framed, params=[()])
    b = sf.sweep("goog", strategy=sent, params=[()])
    assert a["trades"][0] > 20
    assert a.drop("combo").equals(b.drop("combo"))
    ta = sf.trades("goog", strategy=framed, params=[()])
    tb = sf.trades("goog", strategy=sent, params=[()])
    assert ta["entry_row"].to_list() == tb["entry_row"].to_list()


def test_intraday_bars_in_new_york_are_gathered_into_utc_days(sf: sweepflight.Client) -> None:
    # Hourly bars 09:00-16:00 New York time (13:00-21:00 UTC in summer, 14:00-22:00 in winter):
    # the UTC date of a bar after 20:00 local is the next day, so a day's bars split.
    idx = pd.date_range("2024-03-01 09:00", periods=24 * 60, freq="h", tz="America/New_York")
    idx = idx[(idx.hour >= 9) & (idx.hour <= 22)]
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"close": 100 * np.exp(np.cumsum(rng.normal(0, 0.003, len(idx))))}, index=idx)
    utc_day = pd.Series(idx.tz_convert("UTC").date, index=idx)
    frame["yday"] = previous_period(frame["close"], utc_day, lambda ps: [p[-1] for p in ps])
    sf.put("hourly", frame)
    framed = Strategy(long=close > daily(close), short=close < daily(close))
    sent = Strategy(long=close > column("yday"), short=close < column("yday"), inputs=["yday"])
    a = sf.sweep("hourly", strategy=framed, params=[()])
    b = sf.sweep("hourly", strategy=sent, params=[()])
    assert a["trades"][0] > 10
    assert a.drop("combo").equals(b.drop("combo"))


def test_the_mistakes_users_make_are_refused_with_the_fix(sf: sweepflight.Client) -> None:
    no_time = GOOG.reset_index(drop=True)
    sf.put("no_time", no_time)
    trend = Strategy(long=close > weekly(sma(close, param("n"))))
    with pytest.raises(sweepflight.InvalidRequest, match=r"`weekly\(x\)` .* needs a column `time`"):
        sf.sweep("no_time", strategy=trend, grid={"n": [10]})
    sf.put("goog", GOOG)
    with pytest.raises(sweepflight.InvalidRequest, match="do not nest"):
        sf.sweep("goog", strategy=Strategy(long=close > weekly(daily(close))), params=[()])
    with pytest.raises(sweepflight.InvalidRequest, match="give `warmup` as a number of bars"):
        sf.sweep("goog", strategy=trend, grid={"n": [10]}, warmup="auto")
    with pytest.raises(sweepflight.InvalidRequest, match="got a condition"):
        sf.sweep("goog", strategy=Strategy(long=weekly(close > sma(close, 5)) > 0), params=[()])
    with pytest.raises(sweepflight.InvalidRequest, match="must be an integer"):
        sf.sweep("goog", strategy=trend, grid={"n": [10.5]})
    # A warm-up in bars works.
    assert sf.sweep("goog", strategy=trend, grid={"n": [10]}, rows=(500, 2148), warmup=60).height == 1
