"""sweepflight.stats against the papers' formulas on worked numbers and constructed matrices, and a
sanity table from real sweeps: on random walks the best combo's PBO is high and its deflated
Sharpe not significant; on a planted trend both say it is real."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import sweepflight
from sweepflight import stats

from .conftest import Server


def test_deflated_sharpe_reproduces_the_papers_example() -> None:
    # Bailey and López de Prado (2014), section 4: an annualised SR of 2.5 on 1,250 daily
    # returns, 100 trials whose annualised SRs vary by 0.5, skewness -3, kurtosis 10: the
    # expected maximum is 0.1132 a day and the DSR 0.9004.
    sr, var = 2.5 / math.sqrt(250), 0.5 / 250
    dsr = stats.deflated_sharpe(sr, trials=100, sharpe_variance=var, observations=1_250, skewness=-3, kurtosis=10)
    assert dsr == pytest.approx(0.9004, abs=5e-4)
    # More trials raise the bar; normal returns lower it.
    assert (
        stats.deflated_sharpe(sr, trials=1_000, sharpe_variance=var, observations=1_250, skewness=-3, kurtosis=10) < dsr
    )
    assert stats.deflated_sharpe(sr, trials=100, sharpe_variance=var, observations=1_250) > dsr
    with pytest.raises(ValueError, match="two trials"):
        stats.deflated_sharpe(sr, trials=1, sharpe_variance=var, observations=1_250)


def test_pbo_on_constructed_matrices() -> None:
    rng = np.random.default_rng(3)
    noise = rng.normal(size=(16, 50))
    # A combo better than every other in every block is never overfit.
    dominant = noise.copy()
    dominant[:, 7] += 100.0
    p = stats.pbo_matrix(dominant)
    assert (p.pbo, p.splits, p.blocks, p.combos) == (0.0, math.comb(16, 8), 16, 50)
    assert np.all(p.logits > 0)
    # Two combos that each win one half and lose the other: split {0,1} picks combo 0, worst
    # out of sample; {2,3} picks combo 1, likewise; the four mixed splits tie everywhere (the
    # chosen combo's mean rank is the median, logit 0, not below it): PBO 2/6.
    reverting = np.zeros((4, 3))
    reverting[:, 0] = [10.0, 10.0, -10.0, -10.0]
    reverting[:, 1] = [-10.0, -10.0, 10.0, 10.0]
    both = stats.pbo_matrix(reverting)
    assert both.splits == 6 and both.pbo == pytest.approx(2 / 6)
    assert sorted(both.logits)[2:] == [0.0] * 4
    # Noise: the in-sample best is a coin flip out of sample.
    assert 0.3 < stats.pbo_matrix(noise).pbo < 0.7
    assert stats.pbo_matrix(noise, metric="sharpe").splits == 12_870
    # Too many splits: a reproducible random subset.
    wide = rng.normal(size=(40, 10))
    a, b = stats.pbo_matrix(wide, max_splits=500, seed=1), stats.pbo_matrix(wide, max_splits=500, seed=1)
    assert a.splits == 500 and np.array_equal(a.logits, b.logits)
    with pytest.raises(ValueError, match="even number of blocks"):
        stats.pbo_matrix(rng.normal(size=(5, 3)))
    with pytest.raises(ValueError, match="two combos"):
        stats.pbo_matrix(rng.normal(size=(4, 1)))


def walk(n: int, seed: int, drift: float = 0.0) -> np.ndarray:
    return 100 * np.exp(np.cumsum(np.random.default_rng(seed).normal(drift, 0.005, n)))


def best_dsr(df: pl.DataFrame, bars: int) -> float:
    sharpe = df["sharpe"].drop_nulls()
    return stats.deflated_sharpe(
        float(sharpe.max()),  # type: ignore[arg-type]
        trials=df.height,
        sharpe_variance=float(sharpe.var()),  # type: ignore[arg-type]
        observations=bars - 1,
    )


def test_sanity_table_random_walks_against_a_planted_trend(server: Server) -> None:
    bars = 20_000
    grid = {"fast": range(2, 40, 3), "slow": range(20, 200, 15)}
    with sweepflight.connect(server.uri) as sf:
        table = {}
        for name, close, side in [
            *[(f"walk{k}", walk(bars, k), "both") for k in range(3)],
            ("trend", walk(bars, 0, drift=0.0005), "long"),
        ]:
            sf.put(name, close)
            df = sf.sweep(name, strategy="sma_cross", grid=grid, blocks=16, fee=0.0, side=side)
            result = stats.pbo(df)
            assert isinstance(result, stats.PBO)
            table[name] = (result.pbo, best_dsr(df, bars))
        walks = [table[f"walk{k}"] for k in range(3)]
        assert sum(p for p, _ in walks) / 3 >= 0.4, table
        assert all(d < 0.95 for _, d in walks), table
        assert table["trend"][0] <= 0.05 and table["trend"][1] > 0.95, table
        # A universe: one PBO per series.
        sf.put("u", pl.DataFrame({"s": ["a"] * 3_000 + ["b"] * 3_000, "close": walk(6_000, 5)}), key="s")
        per = stats.pbo(sf.sweep("u", strategy="sma_cross", grid={"fast": [3, 5, 8], "slow": [20, 40]}, blocks=4))
        assert isinstance(per, dict) and sorted(per) == ["a", "b"] and per["a"].splits == 6
        with pytest.raises(ValueError, match="blocks=B"):
            stats.pbo(sf.sweep("walk0", strategy="sma_cross", grid=grid))
