"""A picture of a sweep: PnL and trades against the length, the best combo marked."""

from __future__ import annotations

from typing import Any

import polars as pl


def plot_sweep(df: pl.DataFrame | Any, path: str | None = None, title: str | None = None):
    """Plots a sweep result (polars DataFrame or pyarrow Table) and returns the figure.

    PnL (left axis) and trade count (right axis) against ``full`` (the length ``L`` for paper
    combos); the best-PnL combo is marked. With ``path`` the figure is also saved there.
    """
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not isinstance(df, pl.DataFrame):
        df = pl.from_arrow(df)
    df = df.sort("full")
    best = df.sort("pnl", descending=True).row(0, named=True)

    fig, ax = plt.subplots(figsize=(9, 4.8))
    ax.plot(df["full"], df["pnl"], color="tab:blue", marker=".", label="PnL")
    ax.set_xlabel("L (full window)")
    ax.set_ylabel("PnL, percentage points", color="tab:blue")
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.scatter([best["full"]], [best["pnl"]], s=120, facecolors="none", edgecolors="tab:red", linewidths=2, zorder=5)
    ax.annotate(
        f"best: L={best['full']}, PnL {best['pnl']:.1f} pp, {best['trades']} trades",
        (best["full"], best["pnl"]), textcoords="offset points", xytext=(-10, -28), ha="right", color="tab:red",
    )
    ax2 = ax.twinx()
    ax2.plot(df["full"], df["trades"], color="tab:orange", linestyle="--", label="trades")
    ax2.set_ylabel("trades", color="tab:orange")
    ax2.set_yscale("log")
    ax.set_title(title or f"Sweep of {df.height} combos")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
