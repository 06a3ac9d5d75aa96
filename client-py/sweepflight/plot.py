"""Pictures of a sweep (needs matplotlib: ``pip install sweepflight[plot]``).

:func:`plot` draws what the grid is: PnL by length for a one-parameter grid (the paper's
lengths, or explicit combos where one window varies), one line per series on a keyed dataset,
and a heatmap of PnL over the two windows that vary in a two-parameter grid.
:func:`plot_equity` draws the equity curves of :meth:`sweepflight.Client.equity` with their
drawdowns, :func:`plot_trades` the trades of :meth:`sweepflight.Client.trades` on the price,
:func:`plot_walk_forward` a walk-forward's stitched out-of-sample equity.
"""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl
import pyarrow as pa

from ._protocol import SERIES_COLUMN, param_columns_of
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
    plt = _pyplot(path)
    df = result if isinstance(result, pl.DataFrame) else pl.from_arrow(result)
    assert isinstance(df, pl.DataFrame)
    if df.height == 0:
        raise ValueError("nothing to plot: the sweep result is empty")
    request = request_of(result)
    table = result if isinstance(result, pa.Table) else df.to_arrow()
    params = [n for n, _ in param_columns_of(table.schema)]
    varying = [w for w in params if df[w].n_unique() > 1]
    from_lengths = request is not None and request.lengths is not None
    if len(varying) == 2 and not from_lengths:
        fig = _heatmap(plt, df, varying[0], varying[1], metric)
    else:
        x = "full" if from_lengths or "full" in params or not varying else varying[0]
        fig = _lines(plt, df, x, metric)
    fig.axes[0].set_title(title or f"Sweep of {df.height:,} runs: {metric}")
    return _finish(fig, path)


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


def _labels(frame: pl.DataFrame, params: pl.DataFrame | None) -> dict[int, str]:
    """Combo -> its parameters as text: from ``params`` (a sweep's frame: ``combo`` and the
    parameter columns before ``pnl``) if given, else what the client attached to ``frame``."""
    if params is not None and "combo" in params.columns:
        names = params.columns[params.columns.index("combo") + 1 : params.columns.index("pnl")]
        names = [n for n in names if n != SERIES_COLUMN]
        return {
            row["combo"]: " ".join(f"{n}={row[n]:g}" if isinstance(row[n], float) else f"{n}={row[n]}" for n in names)
            for row in params.select("combo", *names).unique("combo").iter_rows(named=True)
        }
    found = getattr(frame, "combo_labels", None)
    return dict(found) if isinstance(found, dict) else {}


def plot_equity(
    equity: pl.DataFrame, path: str | None = None, title: str | None = None, params: pl.DataFrame | None = None
) -> Any:
    """The equity curves of an :meth:`sweepflight.Client.equity` frame (one line per combo, and
    series on a keyed dataset) or of :meth:`sweepflight.Client.walk_forward_equity` (one
    stitched line per series), by date where the dataset has a time column (else by row), and
    below them each curve's drawdown from its running peak; returns the figure (saved to
    ``path`` if given). Each combo's legend says its parameters where the call said them (a
    built-in's grid, tuples or lengths) or ``params``, the sweep's frame, gives them. A
    portfolio's equity (protocol v1.4: a book that starts at 1.0) is drawn as that multiple,
    its drawdown in percent of the running peak."""
    plt = _pyplot(path)
    if equity.height == 0:
        raise ValueError("nothing to plot: the equity frame is empty")
    missing = [c for c in ("row", "equity") if c not in equity.columns]
    if missing:
        raise ValueError(
            f"plot_equity takes what Client.equity or Client.walk_forward_equity returns; this frame has no "
            f"{missing[0]!r} column (columns: {equity.columns})"
        )
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True, height_ratios=(3, 1))
    # One line per combo (and series); a stitched walk-forward has no combo: one per series.
    keys = [k for k in (SERIES_COLUMN, "combo") if k in equity.columns]
    parts = equity.group_by(keys, maintain_order=True) if keys else [((), equity)]
    dated = "time" in equity.columns and equity["time"].null_count() == 0
    x_of = "time" if dated else "row"
    labels = _labels(equity, params)
    # A portfolio's book (its `holdings` column): equity a multiple of the start.
    book = "holdings" in equity.columns
    for key, part in parts:
        words = []
        for k, v in zip(keys, key, strict=True):
            words.append(str(v) if k == SERIES_COLUMN else labels.get(v, f"combo {v}"))
        label = " ".join(words) or "walk-forward, out of sample"
        q = part["equity"]
        (line,) = top.plot(part[x_of], q, linewidth=1, label=label)
        drawdown = (q / q.cum_max() - 1.0) * 100.0 if book else q - q.cum_max()
        bottom.fill_between(part[x_of], drawdown, 0, alpha=0.3, step="post", color=line.get_color())
    top.axhline(1.0 if book else 0.0, color="grey", linewidth=0.6)
    top.set_ylabel("equity (x the start)" if book else "equity (percentage points)")
    bottom.set_ylabel("drawdown (%)" if book else "drawdown (pp)")
    bottom.set_xlabel("date" if dated else ("calendar row" if book else "row (bars)"))
    top.legend(fontsize="small", loc="upper left")
    default = (
        "Portfolio equity (cash plus holdings at their closes)"
        if book
        else ("Equity (booked trades plus the open trade's mark)")
    )
    top.set_title(title or default)
    return _finish(fig, path)


#: How each exit reason is marked on :func:`plot_trades`: marker, colour.
EXIT_MARKS = {
    "signal": ("x", "black"),
    "exit": ("X", "tab:blue"),
    "stop_loss": ("s", "tab:red"),
    "trailing_stop": ("D", "tab:orange"),
    "take_profit": ("*", "tab:green"),
    "end": ("|", "grey"),
}


def plot_trades(prices: Any, trades: pl.DataFrame, path: str | None = None, title: str | None = None) -> Any:
    """The trades of a :meth:`sweepflight.Client.trades` frame (one series, one or a few
    combos) on the prices: ``prices`` is the series' closes (indexed by row), or a frame of its
    bars (polars, pandas or pyarrow, with open, high, low and close columns in any case, as put),
    then drawn as candles. Long entries are green triangles up, short entries red down, each
    exit marked by its reason (``exit_reason``: signal, exit formula, stop-loss, trailing stop,
    take-profit, end), each trade's span shaded by its side. Drawn by date where the bars have
    a time (a date column, or a pandas DatetimeIndex), else by row."""
    plt = _pyplot(path)
    bars = _bars(prices)
    times = _times(prices)
    fig, ax = plt.subplots(figsize=(10, 4.8))
    n = len(bars["close"]) if bars is not None else len(prices)
    xs: list[Any] = times if times is not None and len(times) == n else list(range(n))

    def at(rows: Any) -> list[Any]:
        return [xs[r] for r in rows]

    if bars is not None:
        colours = ["tab:green" if c >= o else "tab:red" for o, c in zip(bars["open"], bars["close"], strict=True)]
        ax.vlines(xs, bars["low"], bars["high"], colors=colours, linewidth=0.6)
        body_low = [min(o, c) for o, c in zip(bars["open"], bars["close"], strict=True)]
        body = [abs(c - o) for o, c in zip(bars["open"], bars["close"], strict=True)]
        ax.bar(xs, body, bottom=body_low, width=_bar_width(xs), color=colours, linewidth=0, label="bars")
    else:
        closes = pl.Series(prices).to_numpy() if not hasattr(prices, "shape") else prices
        ax.plot(xs, closes, color="grey", linewidth=0.8, label="close")
    for side, colour, marker, name in ((1, "tab:green", "^", "long entry"), (-1, "tab:red", "v", "short entry")):
        mine = trades.filter(pl.col("side") == side)
        if mine.height:
            entries = at(mine["entry_row"])
            ax.scatter(entries, mine["entry_price"], marker=marker, color=colour, s=30, label=name, zorder=4)
            for row in mine.iter_rows(named=True):
                ax.axvspan(xs[row["entry_row"]], xs[row["exit_row"]], color=colour, alpha=0.08, linewidth=0)
    if trades.height:
        reasons = trades["exit_reason"] if "exit_reason" in trades.columns else pl.Series(["signal"] * trades.height)
        for reason, (marker, colour) in EXIT_MARKS.items():
            mine = trades.filter(reasons == reason)
            if mine.height:
                ax.scatter(
                    at(mine["exit_row"]),
                    mine["exit_price"],
                    marker=marker,
                    color=colour,
                    s=24,
                    label=f"exit: {reason.replace('_', ' ')}",
                    zorder=5,
                )
    ax.set_xlabel("date" if xs is times else "row (bars)")
    ax.set_ylabel("price")
    ax.legend(fontsize="small", loc="upper left")
    ax.set_title(title or f"{trades.height:,} trades")
    return _finish(fig, path)


#: Names a time column of bars may have (ignoring case), as the server recognises them.
_TIME_NAMES = ("time", "date", "datetime", "timestamp", "__index_level_0__")


def _times(prices: Any) -> list[Any] | None:
    """The bars' times: a pandas DatetimeIndex, or a column named as the server recognises a
    time (ignoring case) of a date or datetime type; None without one."""
    index = getattr(prices, "index", None)
    if index is not None and type(index).__name__ == "DatetimeIndex":
        return list(index.to_pydatetime())
    try:
        frame = pl.DataFrame(prices) if not isinstance(prices, pl.DataFrame) else prices
    except (TypeError, ValueError):
        return None
    for c in frame.columns:
        if c.lower() in _TIME_NAMES and (frame[c].dtype == pl.Date or isinstance(frame[c].dtype, pl.Datetime)):
            return frame[c].to_list()
    return None


def _bar_width(xs: list[Any]) -> Any:
    """A candle's width: 0.7 of a row, or of the median time between bars (in days, the unit
    of matplotlib's date axis)."""
    if len(xs) < 2 or isinstance(xs[0], int):
        return 0.7
    gaps = sorted((b - a).total_seconds() for a, b in itertools.pairwise(xs))
    return 0.7 * gaps[len(gaps) // 2] / 86_400


def _bars(prices: Any) -> dict[str, Any] | None:
    """The open, high, low and close of a frame of bars (names in any case), or None for
    closes alone."""
    try:
        frame = pl.DataFrame(prices) if not isinstance(prices, pl.DataFrame) else prices
    except (TypeError, ValueError):
        return None
    if frame.width < 4:
        return None
    by_lower = {c.lower(): c for c in reversed(frame.columns)}
    by_lower.update({c: c for c in frame.columns if c in ("open", "high", "low", "close")})
    if not all(k in by_lower for k in ("open", "high", "low", "close")):
        return None
    return {k: frame[by_lower[k]].cast(pl.Float64).to_list() for k in ("open", "high", "low", "close")}


def plot_walk_forward(
    stitched: pl.DataFrame,
    path: str | None = None,
    in_sample: pl.DataFrame | None = None,
    title: str | None = None,
) -> Any:
    """The stitched out-of-sample equity of :meth:`sweepflight.Client.walk_forward_equity`
    (one line per series, fold boundaries marked) beside, if given, the equity of the combo
    that was best in-sample over the whole range (an :meth:`sweepflight.Client.equity` frame
    of ``top=1``): the gap between the two is what choosing in-sample cost out of sample.
    Returns the figure (saved to ``path`` if given)."""
    plt = _pyplot(path)
    if stitched.height == 0:
        raise ValueError("nothing to plot: no fold chose a combo")
    fig, ax = plt.subplots(figsize=(10, 4.8))
    keyed = SERIES_COLUMN in stitched.columns
    parts = stitched.group_by(SERIES_COLUMN, maintain_order=True) if keyed else [((None,), stitched)]
    for (name, *_), part in parts:
        label = "out of sample (walk-forward)" + (f" {name}" if name is not None else "")
        (line,) = ax.plot(part["row"], part["equity"], linewidth=1.2, label=label)
        starts = part.group_by("fold", maintain_order=True).agg(pl.col("row").first())["row"]
        for x in starts.to_list()[1:]:
            ax.axvline(x, color=line.get_color(), linewidth=0.4, alpha=0.4)
    if in_sample is not None and in_sample.height:
        first = in_sample.filter(pl.col("combo") == in_sample["combo"][0])
        ax.plot(
            first["row"], first["equity"], linewidth=1, linestyle="--", color="grey", label="best in-sample, all rows"
        )
    ax.axhline(0, color="grey", linewidth=0.6)
    ax.set_xlabel("row (bars)")
    ax.set_ylabel("equity (percentage points)")
    ax.legend(fontsize="small", loc="upper left")
    ax.set_title(title or "Walk-forward: each fold's in-sample choice, run on the rows after it")
    return _finish(fig, path)


def _pyplot(path: str | None) -> Any:
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(fig: Any, path: str | None) -> Any:
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _label(metric: str) -> str:
    unit = UNITS.get(metric)
    return f"{metric} ({unit})" if unit else metric
