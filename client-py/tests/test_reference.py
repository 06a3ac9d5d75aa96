"""The numba reference reproduces the 80 paper rows, and the paper helpers match the spec."""

from __future__ import annotations

import csv
import pathlib

import numpy as np
import pyarrow as pa
import pytest

from sweepflight import paper, reference

REFERENCE = pathlib.Path(__file__).resolve().parents[2] / "kernel" / "testdata" / "reference-80.csv"


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    with REFERENCE.open() as f:
        return list(csv.DictReader(f))


def test_paper_series_is_the_published_one() -> None:
    series = paper.series()
    assert series.type == pa.float64() and len(series) == 150_000 and series.null_count == 0
    close = series.to_numpy()
    # The pinned values are the formula's within 2 ulp on any CPU (numpy's exp varies by CPU).
    ulps = np.abs(close.view(np.int64) - paper.generate().view(np.int64))
    assert ulps.max() <= 2
    assert np.array_equal(paper.series(1_000).to_numpy(), close[:1_000])
    assert paper.table(10).column("close").to_pylist() == close[:10].tolist()
    assert paper.generate(10, seed=7).shape == (10,)
    with pytest.raises(ValueError):
        paper.series(150_001)


def test_grid_and_combo_rule_match_reference(rows: list[dict[str, str]]) -> None:
    assert [int(r["L"]) for r in rows] == paper.lengths()
    for r in rows:
        want = tuple(int(r[k]) for k in ("half", "full", "sqrt", "p3", "p2", "p"))
        assert paper.combo(int(r["L"])) == want


def test_combo_rule_edge_cases() -> None:
    assert paper.combo(1) == (1, 1, 1, 1, 1, 1)
    assert paper.combo(3) == (2, 3, 2, 1, 1, 2)
    with pytest.raises(ValueError):
        paper.combo(0)


def test_numba_reproduces_all_80_rows(
    rows: list[dict[str, str]], paper_reference: tuple[np.ndarray, np.ndarray]
) -> None:
    pnl, trades = paper_reference
    assert trades.tolist() == [int(r["trades"]) for r in rows]
    assert np.max(np.abs(pnl - np.array([float(r["pnl_pct_pts"]) for r in rows]))) <= 1e-6
    assert trades[0] == 57_029 and round(pnl[0], 2) == -5165.58


def test_wma_semantics() -> None:
    x = np.array([1.0, 2.0, np.nan, 4.0, 5.0, 6.0])
    out = reference.wma(x, 2)
    assert np.isnan(out[0]) and out[1] == (1 + 2 * 2) / 3
    assert np.isnan(out[2]) and np.isnan(out[3])
    assert out[5] == (5 + 2 * 6) / 3
    assert np.isnan(reference.wma(x, 7)).all()
    assert np.array_equal(reference.wma(x[3:], 1), x[3:])
