"""Strategies of your own from Python against the real server: the expression builder's text
is the server's canonical text; a strategy built with it, written as text, or as a built-in's
formula form sweeps as the server's own forms do; the constraint leaves gaps; explain, trades,
walk-forward and sessions take a formula strategy; a bad formula is named with its offset."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import sweepflight
from sweepflight import (
    Strategy,
    atr,
    close,
    cross_above,
    ema,
    high,
    lag,
    param,
    rsi,
    sma,
    std,
    where,
)

from .conftest import Server

n, k, fast, slow = param("n"), param("k"), param("fast"), param("slow")
BOLLINGER = Strategy(
    long=(close < sma(close, n) - k * std(close, n)) & (rsi(close, 14) < 35),
    short=(close > sma(close, n) + k * std(close, n)) & (rsi(close, 14) > 65),
    exit_long=close > sma(close, n),
    exit_short=close < sma(close, n),
)
SMA_FORMS = {
    "long": "cross_above(sma(close, fast), sma(close, slow))",
    "short": "cross_below(sma(close, fast), sma(close, slow))",
}


@pytest.fixture(scope="module")
def sf(server: Server) -> Iterator[sweepflight.Client]:
    with sweepflight.connect(server.uri) as client:
        rng = np.random.default_rng(5)
        client.put("walk", 100 * np.exp(np.cumsum(rng.normal(0, 0.004, 4_000))))
        yield client


def test_the_builders_text_is_the_servers_canonical_text(sf: sweepflight.Client) -> None:
    cases = [
        ((close < sma(close, n) - k * std(close, n)) & (rsi(close, 14) < 35), [20, 2.0]),
        (cross_above(ema(close, fast), ema(close, slow)), [5, 20]),
        (close.cross_below(lag(sma(close, n), 1)) | ~(close > 2.5), [5]),
        (where(close > 1e-5, -close / 2, 100 - close) >= 1e16, []),
        ((high - close) * 0.1 > atr(14) * (k - (1 - k)), [0.5]),
        (-(-close) < 0.25 * -close, []),  # noqa: B002 (two unary minuses, on purpose)
    ]
    for expr, values in cases:
        plan = sf.explain("walk", strategy={"long": expr}, params=[values])
        assert plan["formulas"]["long"] == str(expr), plan
    assert str(close > 2.0) == "close > 2"
    with pytest.raises(TypeError, match="no truth value"):
        bool(close > 1)


def test_explain_counts_what_a_grid_computes(sf: sweepflight.Client) -> None:
    grid = {"n": range(10, 50), "k": [1.0 + 0.25 * j for j in range(10)]}
    plan = sf.explain("walk", strategy=BOLLINGER, grid=grid)
    assert plan["params"] == [{"name": "n", "kind": "int"}, {"name": "k", "kind": "number"}]
    assert (plan["combos"], plan["arrays"], plan["lookback"]) == (400, 40 * 2 + 400 * 3 + 1, 48)
    assert plan["columns"] == ["close"]


def test_formula_strategies_sweep_as_the_servers_own_forms(sf: sweepflight.Client) -> None:
    grid = {"fast": [3, 5, 8], "slow": [10, 21]}
    builtin = sf.sweep("walk", strategy="sma_cross", grid=grid)
    as_text = sf.sweep("walk", strategy=SMA_FORMS, grid=grid)
    built = sf.sweep(
        "walk",
        strategy=Strategy(
            long=sma(close, fast).cross_above(sma(close, slow)), short=sma(close, fast).cross_below(sma(close, slow))
        ),
        grid=grid,
    )
    assert builtin.equals(as_text) and builtin.equals(built)
    # Bollinger and RSI with exits: integer windows, float bands, in the server's order.
    df = sf.sweep("walk", strategy=BOLLINGER, grid={"n": [10, 20], "k": [1.0, 2.0]})
    assert df.columns[:3] == ["combo", "n", "k"]
    assert df["n"].dtype.is_integer() and df["k"].dtype.is_float()
    assert df["trades"].sum() > 0


def test_constraint_leaves_gaps_and_every_verb_takes_formulas(sf: sweepflight.Client) -> None:
    df = sf.sweep("walk", strategy="sma_cross", grid={"fast": [5, 10, 20], "slow": [10, 20]}, constraint=fast < slow)
    assert df["combo"].to_list() == [0, 1, 3]
    chosen = {"strategy": BOLLINGER, "grid": {"n": [10, 20, 30], "k": [1.5, 2.0]}, "order_by": "pnl", "top": 2}
    best = sf.sweep("walk", **chosen)  # type: ignore[arg-type]
    trades = sf.trades("walk", **chosen)  # type: ignore[arg-type]
    assert set(trades["combo"].unique().to_list()) <= set(best["combo"].to_list())
    wf = sf.walk_forward(
        "walk", strategy=BOLLINGER, grid={"n": [10, 20], "k": [1.0, 2.0]}, folds={"train": 1500, "test": 500}
    )
    assert wf.height == 5 and "k" in wf.columns
    assert sf.walk_forward_equity(wf).height > 0
    with sf.session(strategy=BOLLINGER) as s:
        again = s.sweep("walk", grid={"n": [10, 20], "k": [1.0, 2.0]})
    assert again.equals(sf.sweep("walk", strategy=BOLLINGER, grid={"n": [10, 20], "k": [1.0, 2.0]}))


def test_bad_formulas_are_named_by_the_server(sf: sweepflight.Client) -> None:
    with pytest.raises(sweepflight.InvalidRequest, match=r"long: .*did you mean `sma`.*byte 8"):
        sf.sweep("walk", strategy={"long": "close > smaa(close, n)"}, params=[[5]])
    with pytest.raises(sweepflight.InvalidRequest, match="fields are long, short"):
        sf.sweep("walk", strategy={"entry": "close > 1"}, params=[[]])
    with pytest.raises(sweepflight.InvalidRequest, match="`high`"):
        sf.sweep("walk", strategy={"long": "high > close"}, params=[[]])
