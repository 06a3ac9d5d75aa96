"""The v1.2 strategies from Python against the real server: each strategy's result checked row
by row against a plain Python oracle written from strategies.md (its indicators, signals and
execution loop, one bar at a time), grids equal to their explicit tuples, chunked grids equal to
one call, samples reproducible, strategy sessions, and the client's refusals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

import sweepflight
from sweepflight import _protocol

from .conftest import Server


def walk(n: int, seed: int) -> np.ndarray:
    return 100 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0, 0.004, n)))


def sma(x: list[float], n: int) -> list[float]:
    out = [math.nan] * len(x)
    for i in range(n - 1, len(x)):
        s = 0.0
        for v in x[i - n + 1 : i + 1]:
            s += v
        out[i] = s / n
    return out


def ema(x: list[float], n: int) -> list[float]:
    alpha = 2.0 / (n + 1.0)
    beta = 1.0 - alpha
    out = [x[0]]
    for v in x[1:]:
        out.append(alpha * v + beta * out[-1])
    return out


def rsi(x: list[float], n: int) -> list[float]:
    out = [math.nan] * len(x)
    if n >= len(x):
        return out
    g = sum(max(x[k] - x[k - 1], 0.0) for k in range(1, n + 1)) / n
    loss = sum(max(x[k - 1] - x[k], 0.0) for k in range(1, n + 1)) / n

    def value(g: float, loss: float) -> float:
        if g == 0.0 and loss == 0.0:
            return 50.0
        if loss == 0.0:
            return 100.0
        return 100.0 - 100.0 / (1.0 + g / loss)

    out[n] = value(g, loss)
    for k in range(n + 1, len(x)):
        g = (g * (n - 1.0) + max(x[k] - x[k - 1], 0.0)) / n
        loss = (loss * (n - 1.0) + max(x[k - 1] - x[k], 0.0)) / n
        out[k] = value(g, loss)
    return out


def cross(fast: list[float], slow: list[float]) -> list[int]:
    s = [0] * len(fast)
    for i in range(1, len(fast)):
        a0, a1, b0, b1 = fast[i - 1], fast[i], slow[i - 1], slow[i]
        if any(math.isnan(v) for v in (a0, a1, b0, b1)):
            continue
        if a1 > b1 and a0 <= b0:
            s[i] = 1
        elif a1 < b1 and a0 >= b0:
            s[i] = -1
    return s


def signals(x: list[float], strategy: str, p: tuple[float, ...]) -> list[int]:
    if strategy == "sma_cross":
        return cross(sma(x, int(p[0])), sma(x, int(p[1])))
    if strategy == "ema_cross":
        if max(p) > len(x):
            return [0] * len(x)
        return cross(ema(x, int(p[0])), ema(x, int(p[1])))
    if strategy == "donchian":
        n = int(p[0])
        return [
            0 if i < n else (1 if x[i] > max(x[i - n : i]) else -1 if x[i] < min(x[i - n : i]) else 0)
            for i in range(len(x))
        ]
    r, (lower, upper) = rsi(x, int(p[0])), p[1:]
    return [0] + [
        1 if r[i] > lower and r[i - 1] <= lower else -1 if r[i] < upper and r[i - 1] >= upper else 0
        for i in range(1, len(x))
    ]


def execute(
    x: list[float], s: list[int], start: int, fee: float, side: str, sl: float | None, tp: float | None
) -> tuple[float, int]:
    """strategies.md's loop, bar by bar: (pnl, trades)."""
    booked = trade_list(x, s, start, fee, side, sl, tp)
    pnl = 0.0
    for t in booked:
        pnl += t[5]
    return pnl, len(booked)


Trade = tuple[int, int, int, float, float, float]


def trade_list(
    x: list[float], s: list[int], start: int, fee: float, side: str, sl: float | None, tp: float | None
) -> list[Trade]:
    """strategies.md's loop, bar by bar: every booked trade as (side, entry_row, exit_row,
    entry_price, exit_price, net)."""
    trades: list[Trade] = []
    pos, entry, entry_row = 0, 0.0, 0

    def book(i: int) -> None:
        ret = pos * (x[i] / entry - 1.0)
        trades.append((pos, entry_row, i, entry, x[i], ((1.0 + ret) * (1.0 - fee) - 1.0) * 100.0))

    for i in range(start, len(x)):
        c = x[i]
        # The stop-loss first, then the take-profit, both on the close.
        loss = sl is not None and ((pos > 0 and c <= entry * (1.0 - sl)) or (pos < 0 and c >= entry * (1.0 + sl)))
        profit = tp is not None and ((pos > 0 and c >= entry * (1.0 + tp)) or (pos < 0 and c <= entry * (1.0 - tp)))
        if pos != 0 and i > entry_row and (loss or profit):
            book(i)
            pos = 0
        if side == "long" and s[i] == -1:
            if pos > 0:
                book(i)
                pos = 0
            continue
        if side == "short" and s[i] == 1:
            if pos < 0:
                book(i)
                pos = 0
            continue
        if s[i] != 0 and s[i] != pos:
            if pos != 0:
                book(i)
            pos, entry, entry_row = s[i], c, i
    if pos != 0:
        book(len(x) - 1)
    return trades


@pytest.fixture(scope="module")
def sf(server: Server) -> sweepflight.Client:
    with sweepflight.connect(server.uri) as client:
        yield client


CASES = [
    ("sma_cross", {"fast": [3, 8], "slow": [20, 45]}),
    ("ema_cross", {"fast": [4, 12], "slow": [26, 3]}),
    ("donchian", {"n": [10, 40]}),
    ("rsi_revert", {"n": [3, 14], "lower": [25, 30.5], "upper": [70]}),
]
OPTIONS = [
    {},
    {"side": "long", "stop_loss": 0.01},
    {"side": "short", "take_profit": 0.02, "fee": 0.0},
    {"rows": (400, 1500), "warmup": 150, "stop_loss": 0.015, "take_profit": 0.03},
]


@pytest.mark.parametrize("strategy,grid", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("options", OPTIONS, ids=["plain", "long-stop", "short-take", "rows-warmup-stops"])
def test_every_strategy_matches_the_plain_oracle(
    sf: sweepflight.Client, strategy: str, grid: dict, options: dict
) -> None:
    close = walk(1_600, seed=5)
    sf.put("walk", close)
    df = sf.sweep("walk", strategy=strategy, grid=grid, **options)
    names = list(grid)
    assert df.columns[1 : 1 + len(names)] == names
    assert df.height == math.prod(len(v) for v in grid.values())
    start, end = options.get("rows", (0, len(close)))
    begin = max(0, start - options.get("warmup", 0))
    x = close[begin:end].tolist()
    fee = options.get("fee", 0.0009)
    traded = 0
    for row in df.iter_rows(named=True):
        p = tuple(float(row[n]) for n in names)
        pnl, trades = execute(
            x,
            signals(x, strategy, p),
            start - begin,
            fee,
            options.get("side", "both"),
            options.get("stop_loss"),
            options.get("take_profit"),
        )
        assert row["trades"] == trades, (strategy, p, options)
        assert row["pnl"] == pytest.approx(pnl, abs=1e-6), (strategy, p, options)
        traded += trades
    assert traded > 0


def test_grids_params_chunks_and_samples(sf: sweepflight.Client) -> None:
    sf.put("g", walk(3_000, seed=8))
    grid = {"fast": range(2, 30, 3), "slow": range(10, 120, 10)}
    df = sf.sweep("g", strategy="sma_cross", grid=grid, side="long")
    # The product, first parameter outermost, as explicit tuples.
    tuples = list(itertools.product(grid["fast"], grid["slow"]))
    assert df.select("fast", "slow").rows() == tuples
    assert sf.sweep("g", strategy="sma_cross", params=tuples, side="long").equals(df)
    chunked = sf.sweep("g", strategy="sma_cross", grid=grid, side="long", chunk_combos=7, progress=False)
    assert chunked.equals(df)
    assert sweepflight.request_of(df).grid is not None
    # A sample is the server's draw: the same for a seed, every combo valid.
    sample = {"n": 30, "seed": 4, "ranges": {"n": (2, 20), "lower": (10, 40), "upper": (35, 90)}}
    a = sf.sweep("g", strategy="rsi_revert", sample=sample)
    b = sf.sweep("g", strategy="rsi_revert", sample=sample, chunk_combos=5)
    assert a.equals(b) and a.height == 30
    assert (a["lower"] < a["upper"]).all()
    assert a.schema["upper"] == pl.Float64 and a.schema["n"] == pl.Int64
    # A strategy session answers like sweep.
    with sf.session(strategy="donchian") as s:
        one = s.sweep("g", strategy="donchian", params=[[20], [50]])
    assert one.equals(sf.sweep("g", strategy="donchian", params=[[20], [50]]))
    listed = sf.strategies()
    assert [s["name"] for s in listed] == ["hma_sar", "sma_cross", "ema_cross", "donchian", "rsi_revert"]


def test_refusals(sf: sweepflight.Client) -> None:
    sf.put("r", walk(200, seed=1))
    # The client checks built-in names and parameters against the server's own table (its
    # `strategies` reply, asked once), keeping no list of its own.
    with pytest.raises(sweepflight.InvalidRequest, match="unknown strategy 'macd'; known: hma_sar, sma_cross"):
        sf.sweep("r", strategy="macd", params=[[1, 2]])
    assert sf._builtins() == _protocol.builtins_of(sf.strategies())
    assert sf._builtins() is sf._builtins()
    with pytest.raises(sweepflight.InvalidRequest, match="exactly one of"):
        sf.sweep("r", strategy="sma_cross", params=[[5, 20]], grid={"fast": [5], "slow": [20]})
    # A flat list of integers is one combo's values, not a list of combos: said, not a TypeError.
    with pytest.raises(sweepflight.InvalidRequest, match="one row of values per combo"):
        sf.sweep("r", params=[3, 6, 2, 1, 2, 3])
    with pytest.raises(sweepflight.InvalidRequest, match="unknown sweep option 'stoploss'"):
        sf.sweep("r", lengths=[6], stoploss=0.1)  # type: ignore[call-arg]
    with pytest.raises(sweepflight.InvalidRequest, match="grid= has unknown parameter 'mid'"):
        sf.sweep("r", strategy="sma_cross", grid={"fast": [5], "slow": [9], "mid": [1]})
    # The server's refusals name the combo and parameter.
    with pytest.raises(sweepflight.InvalidRequest, match=r"params\[1\] \(lower\) must be below upper"):
        sf.sweep("r", strategy="rsi_revert", params=[[14, 30, 70], [14, 70, 30]])
    with pytest.raises(sweepflight.InvalidRequest, match="stop_loss"):
        sf.sweep("r", strategy="donchian", params=[[5]], stop_loss=-1)
    with pytest.raises(sweepflight.InvalidRequest, match="opened for donchian"), sf.session(strategy="donchian") as s:
        s.sweep("r", lengths=[6], strategy="hma_sar")


def test_plots_of_any_strategy(sf: sweepflight.Client, tmp_path) -> None:
    """A two-parameter grid of any strategy draws as a heatmap, one varying parameter as a line:
    PNG files that open as non-empty images."""
    from matplotlib import image  # the dev extras install it: this test never skips

    sf.put("p", walk(2_000, seed=2))
    cases = {
        "heat.png": sf.sweep("p", strategy="sma_cross", grid={"fast": range(3, 20, 4), "slow": range(20, 80, 15)}),
        "rsi.png": sf.sweep("p", strategy="rsi_revert", grid={"n": [14], "lower": [20, 25.5, 30], "upper": [70, 80]}),
        "line.png": sf.sweep("p", strategy="donchian", grid={"n": range(5, 60, 5)}),
    }
    for name, df in cases.items():
        fig = sweepflight.plot(df, str(tmp_path / name))
        pixels = image.imread(tmp_path / name)
        assert pixels.shape[0] > 100 and pixels.shape[1] > 100 and pixels.std() > 0, name
        if name != "line.png":
            # A heatmap's colours are centred on zero where the PnL straddles it.
            norm = fig.axes[0].images[0].norm
            low, high = float(df["pnl"].min()), float(df["pnl"].max())
            assert low >= 0 or high <= 0 or getattr(norm, "vcenter", None) == 0.0, name


def test_metric_columns_and_their_nulls(sf: sweepflight.Client) -> None:
    sf.put("m", walk(3_000, seed=6))
    df = sf.sweep("m", strategy="donchian", params=[[20], [5_000]], periods_per_year=252)
    metrics = [
        "avg_trade",
        "best_trade",
        "worst_trade",
        "profit_factor",
        "exposure",
        "avg_bars",
        "sharpe",
        "sortino",
        "sqn",
    ]
    # The v1.2 metrics, then (v1.3) total_return, last.
    assert df.columns[-10:] == [*metrics, "total_return"]
    traded, idle = df.row(0, named=True), df.row(1, named=True)
    assert idle["total_return"] == 0.0 and traded["total_return"] != 0.0
    assert traded["trades"] > 10 and traded["avg_trade"] == pytest.approx(traded["pnl"] / traded["trades"])
    assert traded["worst_trade"] <= traded["avg_trade"] <= traded["best_trade"]
    assert 0 < traded["exposure"] <= 1 and traded["sharpe"] is not None
    # A window longer than the series: no trade, every metric null but exposure 0.
    assert idle["trades"] == 0 and idle["exposure"] == 0.0
    assert all(idle[m] is None for m in metrics if m != "exposure")
    # Annualising scales the per-bar Sharpe by sqrt(periods_per_year).
    per_bar = sf.sweep("m", strategy="donchian", params=[[20]]).row(0, named=True)
    assert traded["sharpe"] == pytest.approx(per_bar["sharpe"] * math.sqrt(252), rel=1e-12)


def test_selection_on_the_server_equals_sorting_the_full_result(sf: sweepflight.Client) -> None:
    sf.put("sel", walk(4_000, seed=12))
    grid = {"fast": range(2, 40, 3), "slow": range(10, 200, 9)}
    full = sf.sweep("sel", strategy="sma_cross", grid=grid)
    for where, order_by, descending, top in [
        ({"trades": (30, None)}, "sharpe", True, 20),
        ({"max_drawdown": (None, 40.0), "fast": (5, 20)}, "pnl", False, 7),
        (None, "profit_factor", True, None),
        ({"sqn": (None, None)}, None, None, 5),
    ]:
        opts: dict = {"where": where, "order_by": order_by, "top": top}
        if descending is not None:
            opts["descending"] = descending
        got = sf.sweep("sel", strategy="sma_cross", grid=grid, **{k: v for k, v in opts.items() if v is not None})
        want = full
        for col, (lo, hi) in (where or {}).items():
            if lo is not None:
                want = want.filter(pl.col(col) >= lo)
            if hi is not None:
                want = want.filter(pl.col(col) <= hi)
        if order_by is not None:
            desc = True if descending is None else descending
            want = want.sort([order_by, "combo"], descending=[desc, False], nulls_last=True)
        if top is not None:
            want = want.head(top)
        assert got.equals(want), (where, order_by, top)
    # A keyed universe: per series.
    frame = pl.concat([pl.DataFrame({"sym": s, "close": walk(1_500, seed=k)}) for k, s in enumerate(["B", "A"])])
    sf.put("u", frame, key="sym")
    top = sf.sweep("u", strategy="donchian", grid={"n": range(5, 60, 5)}, order_by="pnl", top=3)
    assert top["series"].to_list() == ["B"] * 3 + ["A"] * 3
    for name in ("A", "B"):
        part = top.filter(pl.col("series") == name)
        assert part["pnl"].to_list() == sorted(part["pnl"].to_list(), reverse=True)
    with pytest.raises(sweepflight.InvalidRequest, match="unknown result column"):
        sf.sweep("sel", strategy="sma_cross", grid=grid, order_by="half")
    with pytest.raises(sweepflight.InvalidRequest, match="top"):
        sf.sweep("sel", strategy="sma_cross", grid=grid, top=0)


def test_trades_equity_and_blocks_of_the_chosen_combos(sf: sweepflight.Client, tmp_path) -> None:
    close = walk(1_600, seed=7)
    sf.put("walk-trades", close)
    grid = {"fast": [3, 8], "slow": [20, 45]}
    options = {"side": "long", "stop_loss": 0.01, "rows": (400, 1_500), "warmup": 150}
    chosen = {"order_by": "pnl", "top": 2}
    best = sf.sweep("walk-trades", strategy="sma_cross", grid=grid, **options, **chosen)
    trades = sf.trades("walk-trades", strategy="sma_cross", grid=grid, **options, **chosen)
    assert trades.columns == [
        *("combo", "trade", "side", "entry_row", "exit_row", "entry_price", "exit_price", "pnl", "exit_reason")
    ]
    assert sorted(set(trades["combo"])) == sorted(best["combo"])
    begin = 400 - 150
    x = close[begin:1_500].tolist()
    combos = list(itertools.product(grid["fast"], grid["slow"]))
    for combo in sorted(best["combo"]):
        want = trade_list(x, signals(x, "sma_cross", combos[combo]), 400 - begin, 0.0009, "long", 0.01, None)
        got = trades.filter(pl.col("combo") == combo).sort("trade")
        assert got.height == len(want) > 0
        for row, (side, entry_row, exit_row, entry, exit_, net) in zip(got.iter_rows(named=True), want, strict=True):
            assert (row["side"], row["entry_row"], row["exit_row"]) == (side, begin + entry_row, begin + exit_row)
            assert (row["entry_price"], row["exit_price"]) == (entry, exit_)
            assert row["pnl"] == pytest.approx(net, abs=1e-6)
    # The equity: one row per evaluated bar, ending at each combo's pnl.
    equity = sf.equity("walk-trades", strategy="sma_cross", grid=grid, **options, **chosen)
    assert equity.height == 2 * 1_100
    for row in best.iter_rows(named=True):
        curve = equity.filter(pl.col("combo") == row["combo"])
        assert curve["row"].to_list() == list(range(400, 1_500))
        assert curve["equity"][-1] == pytest.approx(row["pnl"], abs=1e-6)
        assert curve["position"][-1] == 0
    # Blocks of the same sweep sum to its pnl.
    blocked = sf.sweep("walk-trades", strategy="sma_cross", grid=grid, blocks=5, **options)
    for row in blocked.iter_rows(named=True):
        assert len(row["block_pnl"]) == 5
        assert sum(row["block_pnl"]) == pytest.approx(row["pnl"], abs=1e-6)
    # The same on sessions opened for trades and for equity.
    with sf.session(strategy="sma_cross", action="trades") as s:
        assert s.trades("walk-trades", grid=grid, **options, **chosen).equals(trades)
        with pytest.raises(sweepflight.InvalidRequest, match="answers trades"):
            s.sweep("walk-trades", grid=grid)
    with sf.session(strategy="sma_cross", action="equity") as s:
        assert s.equity("walk-trades", grid=grid, **options, **chosen).equals(equity)
    # Pictures of them: PNG files that open as non-empty images.
    from matplotlib import image

    for name, fig in {
        "equity.png": sweepflight.plot_equity(equity, str(tmp_path / "equity.png")),
        "trades.png": sweepflight.plot_trades(
            close, trades.filter(pl.col("combo") == best["combo"][0]), str(tmp_path / "trades.png")
        ),
    }.items():
        pixels = image.imread(tmp_path / name)
        assert pixels.shape[0] > 100 and pixels.shape[1] > 100 and pixels.std() > 0, name
        assert fig.axes[0].lines, name
    with pytest.raises(sweepflight.InvalidRequest, match="--max-trade-combos"):
        sf.trades("walk-trades", strategy="sma_cross", grid={"fast": range(1, 40), "slow": range(1, 40)})
