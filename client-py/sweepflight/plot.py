"""Pictures of a sweep (needs matplotlib: ``pip install sweepflight[plot]``).

:func:`plot` draws what the grid is: PnL by length for a one-parameter grid (the paper's
lengths, or explicit combos where one window varies), one line per series on a keyed dataset,
and a heatmap of PnL over the two windows that vary in a two-parameter grid.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa

from ._protocol import SERIES_COLUMN, STRATEGIES, strategy_of
from .client import request_of

#: Units of the result columns, for axis labels.
UNITS = {"pnl": "percentage points", "max_drawdown": "percentage points", "win_rate": "fraction"}

#: More series than this are drawn as their mean and spread, not one line each.
MAX_SERIES_LINES = 12


def plot(
    result: pl.DataFrame | pa.Table, path: str | None = None, title: str | None = None, metric: str = "pnl"
) -> Any:
    """Plots a sweep result and returns the matplotlib figure; with ``path`` also saves it.

    The x axis is the length ``L`` (``full``) when the grid came from ``lengths``, or the one
    parameter that varies; a heatmap of ``metric`` (its colours centred on zero: losses red,
    gains green) when exactly two parameters vary; the best combo is marked.
    """
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = result if isinstance(result, pl.DataFrame) else pl.from_arrow(result)
    assert isinstance(df, pl.DataFrame)
    if df.height == 0:
        raise ValueError("nothing to plot: the sweep result is empty")
    request = request_of(result)
    table = result if isinstance(result, pa.Table) else df.to_arrow()
    params = [n for n, _ in STRATEGIES[strategy_of(table.schema)]]
    varying = [w for w in params if df[w].n_unique() > 1]
    from_lengths = request is not None and request.lengths is not None
    if len(varying) == 2 and not from_lengths:
        fig = _heatmap(plt, df, varying[0], varying[1], metric)
    else:
        x = "full" if from_lengths or "full" in params or not varying else varying[0]
        fig = _lines(plt, df, x, metric)
    fig.axes[0].set_title(title or f"Sweep of {df.height:,} runs: {metric}")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _lines(plt: Any, df: pl.DataFrame, x: str, metric: str) -> Any:
    fig, ax = plt.subplots(figsize=(9, 4.8))
    keyed = SERIES_COLUMN in df.columns
    names = df[SERIES_COLUMN].unique(maintain_order=True).to_list() if keyed else [None]
    if len(names) <= MAX_SERIES_LINES:
        for name in names:
            part = df if name is None else df.filter(pl.col(SERIES_COLUMN) == name)
            part = part.sort(x)
            ax.plot(part[x], part[metric], marker=".", label=name or metric)
    else:
        agg = df.group_by(x).agg(pl.col(metric).mean().alias("mean"), pl.col(metric).std().alias("std")).sort(x)
        ax.plot(agg[x], agg["mean"], label=f"mean over {len(names)} series")
        ax.fill_between(agg[x], agg["mean"] - agg["std"], agg["mean"] + agg["std"], alpha=0.25, label="+/- 1 std")
    best = df.sort(metric, descending=True).row(0, named=True)
    ax.scatter([best[x]], [best[metric]], s=120, facecolors="none", edgecolors="tab:red", linewidths=2, zorder=5)
    where = f" ({best[SERIES_COLUMN]})" if keyed else ""
    # The label sits in the corner, an arrow to the point: it never covers a line.
    ax.annotate(
        f"best: {x}={best[x]}{where}, {metric} {best[metric]:.4g}",
        (best[x], best[metric]),
        xycoords="data",
        xytext=(0.98, 0.04),
        textcoords="axes fraction",
        ha="right",
        color="tab:red",
        arrowprops={"arrowstyle": "->", "color": "tab:red"},
    )
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.set_xlabel("L (full window, bars)" if x == "full" else f"{x} (bars)")
    ax.set_ylabel(_label(metric))
    if keyed or len(names) > 1:
        ax.legend(fontsize="small")
    return fig


def _heatmap(plt: Any, df: pl.DataFrame, x: str, y: str, metric: str) -> Any:
    if SERIES_COLUMN in df.columns:
        df = df.group_by(x, y).agg(pl.col(metric).mean())
    grid = df.pivot(on=x, index=y, values=metric, aggregate_function="mean").sort(y)
    columns = sorted((c for c in grid.columns if c != y), key=float)
    # Pivoted column names are text; the parameter's values come back in its own type.
    xs = [int(float(c)) if df[x].dtype.is_integer() else float(c) for c in columns]
    values = grid.select(columns).to_numpy()
    fig, ax = plt.subplots(figsize=(8, 6))
    from matplotlib.colors import TwoSlopeNorm

    low, high = float(df[metric].min()), float(df[metric].max())  # type: ignore[arg-type]
    # Centred on zero where the values straddle it, so a loss is never drawn in a gain's colour.
    norm = TwoSlopeNorm(vcenter=0.0, vmin=low, vmax=high) if low < 0.0 < high else None
    cmap = "RdYlGn" if norm is not None else ("Greens" if low >= 0.0 else "Reds_r")
    image = ax.imshow(values, origin="lower", aspect="auto", cmap=cmap, norm=norm)
    fig.colorbar(image, ax=ax, label=_label(metric))
    step = max(1, len(xs) // 12)
    ax.set_xticks(range(0, len(xs), step), [str(v) for v in xs[::step]])
    ys = grid[y].to_list()
    step = max(1, len(ys) // 12)
    ax.set_yticks(range(0, len(ys), step), [str(v) for v in ys[::step]])
    ax.set_xlabel(f"{x} (bars)" if df[x].dtype.is_integer() else x)
    ax.set_ylabel(f"{y} (bars)" if df[y].dtype.is_integer() else y)
    best = df.sort(metric, descending=True).row(0, named=True)
    ax.scatter([xs.index(best[x])], [ys.index(best[y])], s=160, marker="*", color="black", label="best")
    ax.legend(loc="upper right", fontsize="small")
    return fig


def _label(metric: str) -> str:
    unit = UNITS.get(metric)
    return f"{metric} ({unit})" if unit else metric
