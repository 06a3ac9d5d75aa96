"""Writes kernel/testdata/portfolio-vbt.json: vectorbt 1.2's equity for target weights filled at
the next open on small aligned universes, the outside check of the kernel's portfolio
accounting (kernel/tests/portfolio.rs reads it; the kernel's equity must equal vectorbt's to
1e-9 relative).

The contract's accounting is vectorbt's ``Portfolio.from_orders`` with ``size_type=
"targetpercent"``, cash shared in one group, ``call_seq="auto"`` (sells first, then the
smallest buys), valued at the order price (``val_price=np.inf``), each side paying half the
round-trip fee. Needs vectorbt (``scripts/setup-vectorbt.sh`` makes its environment):

    target/vbt-venv/bin/python kernel/testdata/make_portfolio_fixture.py
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pandas as pd
import vectorbt as vbt  # type: ignore[import-not-found]

OUT = pathlib.Path(__file__).resolve().parent / "portfolio-vbt.json"


def case(seed: int, series: int, rows: int, every: int, fee: float, slippage: float, shorts: bool) -> dict:
    rng = np.random.default_rng(seed)
    close = 50 * np.exp(np.cumsum(rng.normal(0, 0.02, (rows, series)), axis=0))
    open_ = np.vstack([close[:1], close[:-1]]) * np.exp(rng.normal(0, 0.005, (rows, series)))
    decisions = list(range(0, rows - 1, every))
    targets = []
    for _ in decisions:
        w = rng.uniform(0.0, 1.0, series)
        w[rng.uniform(size=series) < 0.3] = 0.0  # some series out of the book
        if w.sum() == 0.0:
            w[0] = 1.0
        w = w / w.sum()
        if shorts:
            # Half long, half short: the lower half of the draws go short.
            order = np.argsort(w)
            w = w.copy()
            half = series // 2
            w[order[:half]] *= -1.0
            w[w > 0] = 0.5 * w[w > 0] / w[w > 0].sum()
            if (w < 0).any():
                w[w < 0] = -0.5 * w[w < 0] / w[w < 0].sum()
        targets.append(w.tolist())
    # Each decision fills at the next row's open.
    size = np.full((rows, series), np.nan)
    for r, w in zip(decisions, targets, strict=True):
        size[r + 1] = w
    index = pd.date_range("2020-01-01", periods=rows, freq="D")
    frame = lambda a: pd.DataFrame(a, index=index)  # noqa: E731
    pf = vbt.Portfolio.from_orders(
        close=frame(close),
        size=frame(size),
        size_type="targetpercent",
        price=frame(open_),
        val_price=np.inf,
        group_by=True,
        cash_sharing=True,
        call_seq="auto",
        fees=fee / 2,
        slippage=slippage,
        init_cash=1.0,
        freq="1D",
    )
    equity = np.asarray(pf.value()).ravel()
    return {
        "seed": seed,
        "fee": fee,
        "slippage": slippage,
        "open": open_.T.tolist(),
        "close": close.T.tolist(),
        "decisions": decisions,
        "targets": targets,
        "equity": equity.tolist(),
    }


def main() -> None:
    cases = [
        case(1, 5, 120, 5, 0.0, 0.0, False),
        case(2, 6, 150, 3, 0.002, 0.001, False),
        case(3, 6, 150, 7, 0.0009, 0.0, True),
        case(4, 8, 200, 1, 0.004, 0.002, True),
    ]
    OUT.write_text(json.dumps({"vectorbt": vbt.__version__, "cases": cases}))
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
