"""Strategies of your own, written in Python: expressions over the bars that print as the
strategy language's canonical text (docs/language.md), accepted wherever a strategy is.

    from sweepflight import close, param, sma, std, rsi, Strategy

    n, k = param("n"), param("k")
    band = k * std(close, n)
    strategy = Strategy(
        long=(close < sma(close, n) - band) & (rsi(close, 14) < 35),
        short=(close > sma(close, n) + band) & (rsi(close, 14) > 65),
        exit_long=close > sma(close, n),
        exit_short=close < sma(close, n),
    )
    sf.sweep("paper", strategy=strategy, grid={"n": range(10, 50), "k": [1.0, 1.5, 2.0]})

Operators build the tree as Python reads them: ``+ - * /`` and unary ``-``; comparisons give
conditions; ``&``, ``|`` and ``~`` are ``and``, ``or`` and ``not`` (Python's own ``and`` /
``or`` / ``not`` cannot be overloaded; mind that ``&`` binds tighter than ``<``, so compare in
parentheses, as with Polars). ``str(expr)`` is the canonical text; the server parses, checks
and binds it (parameters, their kinds, the windows), so a mistake is named by the server with
the formula's field and byte offset.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

# Binding strength of each node kind: or 1, and 2, not 3, comparisons 4, + - 5, * / 6, unary
# minus 7, atoms 8 (docs/language.md's grammar).
_STRENGTH = {"or": 1, "and": 2, "not": 3, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "neg": 7, "atom": 8}


def _number(v: float) -> str:
    """``v`` as Python's ``repr(float)``, an integer without ``.0`` (canonical text)."""
    if not math.isfinite(v):
        raise ValueError(f"a formula's numbers are finite, got {v!r}")
    text = repr(float(v))
    return text[:-2] if text.endswith(".0") else text


class Expr:
    """A formula node. Build them with the columns, :func:`param` and the functions."""

    __slots__ = ("_kind", "_text")

    def __init__(self, text: str, kind: str = "atom") -> None:
        self._text = text
        self._kind = kind

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Expr({self._text!r})"

    def __hash__(self) -> int:
        return hash(self._text)

    def __bool__(self) -> bool:
        raise TypeError("a formula has no truth value: use & | ~ for and / or / not, and compare in parentheses")

    def _wrap(self, paren: bool) -> str:
        return f"({self._text})" if paren else self._text

    def _binary(self, op: str, other: Any, reflected: bool = False) -> Expr:
        a, b = (_expr(other), self) if reflected else (self, _expr(other))
        own = _STRENGTH[op] if op in _STRENGTH else _STRENGTH["cmp"]
        kind = op if op in _STRENGTH else "cmp"
        if kind == "cmp":
            text = f"{a._wrap(_STRENGTH[a._kind] <= own)} {op} {b._wrap(_STRENGTH[b._kind] <= own)}"
        else:
            text = f"{a._wrap(_STRENGTH[a._kind] < own)} {op} {b._wrap(_STRENGTH[b._kind] <= own)}"
        return Expr(text, kind)

    def __add__(self, o: Any) -> Expr:
        return self._binary("+", o)

    def __radd__(self, o: Any) -> Expr:
        return self._binary("+", o, True)

    def __sub__(self, o: Any) -> Expr:
        return self._binary("-", o)

    def __rsub__(self, o: Any) -> Expr:
        return self._binary("-", o, True)

    def __mul__(self, o: Any) -> Expr:
        return self._binary("*", o)

    def __rmul__(self, o: Any) -> Expr:
        return self._binary("*", o, True)

    def __truediv__(self, o: Any) -> Expr:
        return self._binary("/", o)

    def __rtruediv__(self, o: Any) -> Expr:
        return self._binary("/", o, True)

    def __neg__(self) -> Expr:
        return Expr(f"-{self._wrap(_STRENGTH[self._kind] < _STRENGTH['neg'])}", "neg")

    def __lt__(self, o: Any) -> Expr:
        return self._binary("<", o)

    def __le__(self, o: Any) -> Expr:
        return self._binary("<=", o)

    def __gt__(self, o: Any) -> Expr:
        return self._binary(">", o)

    def __ge__(self, o: Any) -> Expr:
        return self._binary(">=", o)

    def __eq__(self, o: Any) -> Expr:  # type: ignore[override]
        return self._binary("==", o)

    def __ne__(self, o: Any) -> Expr:  # type: ignore[override]
        return self._binary("!=", o)

    def __and__(self, o: Any) -> Expr:
        return self._binary("and", o)

    def __rand__(self, o: Any) -> Expr:
        return self._binary("and", o, True)

    def __or__(self, o: Any) -> Expr:
        return self._binary("or", o)

    def __ror__(self, o: Any) -> Expr:
        return self._binary("or", o, True)

    def __invert__(self) -> Expr:
        return Expr(f"not {self._wrap(_STRENGTH[self._kind] < _STRENGTH['not'])}", "not")

    def cross_above(self, other: Any) -> Expr:
        """True where this crosses above ``other``: ``cross_above(self, other)``."""
        return _call("cross_above", self, other)

    def cross_below(self, other: Any) -> Expr:
        """True where this crosses below ``other``: ``cross_below(self, other)``."""
        return _call("cross_below", self, other)


def _expr(v: Any) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"a formula takes expressions and numbers, got {v!r}")
    if v < 0:
        return -Expr(_number(-v))
    return Expr(str(v) if isinstance(v, int) else _number(v))


def _call(name: str, *args: Any) -> Expr:
    return Expr(f"{name}({', '.join(str(_expr(a)) for a in args)})")


def param(name: str) -> Expr:
    """A parameter, bound per combo by ``params``, ``grid`` or ``sample``."""
    if not name.isidentifier() or name != name.lower():
        raise ValueError(f"a parameter name is lower case letters, digits and _, got {name!r}")
    return Expr(name)


def column(name: str) -> Expr:
    """Another column of the dataset (a model's predictions, a vendor's VWAP) read as a series:
    list it in the strategy's ``inputs=`` too (``Strategy(long=column("pred") > 0,
    inputs=["pred"])``). Without ``inputs`` the server reads the name as a parameter and
    asks for its values, saying the column was probably meant."""
    if not name.isidentifier() or name != name.lower() or not name.isascii():
        raise ValueError(f"a column a formula reads is named in lower case letters, digits and _, got {name!r}")
    return Expr(name)


#: The bars' columns.
open = Expr("open")
high = Expr("high")
low = Expr("low")
close = Expr("close")
volume = Expr("volume")


def lag(x: Any, n: Any) -> Expr:
    """``x`` ``n`` bars before."""
    return _call("lag", x, n)


def change(x: Any, n: Any) -> Expr:
    """``x[i] - x[i-n]``."""
    return _call("change", x, n)


def roc(x: Any, n: Any) -> Expr:
    """Rate of change over ``n`` bars, in percent."""
    return _call("roc", x, n)


def sum(x: Any, n: Any) -> Expr:
    """The sum of the last ``n`` values."""
    return _call("sum", x, n)


def sma(x: Any, n: Any) -> Expr:
    """Simple moving average."""
    return _call("sma", x, n)


def wma(x: Any, n: Any) -> Expr:
    """Linearly weighted moving average (newest heaviest)."""
    return _call("wma", x, n)


def std(x: Any, n: Any) -> Expr:
    """Population standard deviation of the last ``n`` values."""
    return _call("std", x, n)


def highest(x: Any, n: Any) -> Expr:
    """The largest of the last ``n`` values."""
    return _call("highest", x, n)


def lowest(x: Any, n: Any) -> Expr:
    """The smallest of the last ``n`` values."""
    return _call("lowest", x, n)


def ema(x: Any, n: Any) -> Expr:
    """Exponential moving average, ``alpha = 2 / (n + 1)``."""
    return _call("ema", x, n)


def rma(x: Any, n: Any) -> Expr:
    """Wilder's smoothing."""
    return _call("rma", x, n)


def rsi(x: Any, n: Any) -> Expr:
    """Wilder's RSI."""
    return _call("rsi", x, n)


def tr() -> Expr:
    """True range (reads high, low, close)."""
    return _call("tr")


def atr(n: Any) -> Expr:
    """Average true range: Wilder's smoothing of the true range."""
    return _call("atr", n)


def hma(x: Any, *windows: Any) -> Expr:
    """Hull moving average: ``hma(x, n)`` or ``hma(x, half, full, sqrt)``."""
    return _call("hma", x, *windows)


def hma3(x: Any, p3: Any, p2: Any, p: Any) -> Expr:
    """The paper's HMA3 line."""
    return _call("hma3", x, p3, p2, p)


def abs(x: Any) -> Expr:
    """Absolute value."""
    return _call("abs", x)


def sqrt(x: Any) -> Expr:
    """Square root."""
    return _call("sqrt", x)


def log(x: Any) -> Expr:
    """Natural logarithm."""
    return _call("log", x)


def min(a: Any, b: Any) -> Expr:
    """The smaller of two series (NaN if either is)."""
    return _call("min", a, b)


def max(a: Any, b: Any) -> Expr:
    """The larger of two series (NaN if either is)."""
    return _call("max", a, b)


def where(c: Any, a: Any, b: Any) -> Expr:
    """``a`` where condition ``c`` holds, else ``b``."""
    return _call("where", c, a, b)


def cross_above(a: Any, b: Any) -> Expr:
    """True where ``a`` crosses above ``b``."""
    return _call("cross_above", a, b)


def cross_below(a: Any, b: Any) -> Expr:
    """True where ``a`` crosses below ``b``."""
    return _call("cross_below", a, b)


def daily(x: Any) -> Expr:
    """``x`` computed on the bars gathered into UTC days, seen from the next day's bars on:
    nothing of a day is read before it has ended (``daily(close)`` is yesterday's close on
    intraday bars). Needs a time column of a timestamp or date type."""
    return _call("daily", x)


def weekly(x: Any) -> Expr:
    """``x`` computed on weekly bars (ISO weeks: open the week's first, high its largest, low
    its smallest, close its last, volume its sum), seen from the next week's bars on:
    ``close > weekly(sma(close, n))`` trades daily bars with last week's trend, never this
    week's unfinished one. Windows inside count weeks. Calls do not nest."""
    return _call("weekly", x)


def monthly(x: Any) -> Expr:
    """``x`` computed on monthly bars (UTC months), seen from the next month's bars on."""
    return _call("monthly", x)


#: The functions of the language, as the server's registry names them.
FUNCTIONS = (
    "lag", "change", "roc", "sum", "sma", "wma", "std", "highest", "lowest", "ema", "rma", "rsi",
    "tr", "atr", "hma", "hma3", "abs", "sqrt", "log", "min", "max", "where", "cross_above", "cross_below",
    "daily", "weekly", "monthly",
)  # fmt: skip

#: The fields of a strategy object.
FIELDS = ("long", "short", "exit_long", "exit_short")


class Strategy:
    """A strategy of your own: conditions to go long, short, and to exit (each optional, at
    least one of ``long`` / ``short``), as expressions or formula text."""

    def __init__(
        self,
        long: Expr | str | None = None,
        short: Expr | str | None = None,
        exit_long: Expr | str | None = None,
        exit_short: Expr | str | None = None,
        inputs: Sequence[str] = (),
    ) -> None:
        given = {"long": long, "short": short, "exit_long": exit_long, "exit_short": exit_short}
        self.formulas: dict[str, str] = {k: str(v) for k, v in given.items() if v is not None}
        if "long" not in self.formulas and "short" not in self.formulas:
            raise ValueError("a strategy needs long= or short= (or both)")
        #: Other dataset columns the formulas read as series (protocol v1.4).
        self.inputs: tuple[str, ...] = _inputs(inputs)

    def __repr__(self) -> str:
        given = [f"{k}={v!r}" for k, v in self.formulas.items()]
        if self.inputs:
            given.append(f"inputs={list(self.inputs)!r}")
        return f"Strategy({', '.join(given)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Strategy) and (other.formulas, other.inputs) == (self.formulas, self.inputs)

    def __hash__(self) -> int:
        return hash((tuple(self.formulas.items()), self.inputs))


#: The keys of a portfolio strategy object (protocol v1.4).
PORTFOLIO_FIELDS = ("rank", "filter", "weight", "longs", "shorts", "keep", "rebalance")

#: The words ``rebalance`` takes besides every K rows.
PERIODS = ("daily", "weekly", "monthly")


def _count(name: str, v: Any, words: bool = False) -> int | str:
    """A count or a period as the body carries it: an integer (a numpy integer too), a
    parameter (``param("k")`` or its name), or for ``rebalance`` a period word. A float is
    refused, never rounded."""
    if isinstance(v, Expr):
        v = str(v)
    if isinstance(v, str):
        if words and v in PERIODS:
            return v
        if v.isidentifier() and v == v.lower():
            return v
        extra = ', "daily", "weekly", "monthly"' if words else ""
        raise ValueError(f"{name}= takes an integer{extra} or a parameter name, got {v!r}")
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v)
    raise ValueError(f"{name}= takes an integer or a parameter (param('k')), got {v!r}")


class Portfolio:
    """A portfolio strategy (protocol v1.4, docs/portfolios.md): at each rebalance, rank every
    series of a universe by ``rank`` (higher first), keep those where ``filter`` holds, hold
    the best ``longs`` (and the worst ``shorts``) weighted by ``weight`` (equal without it),
    with the cash shared; swept like any strategy, one result per combo.

        from sweepflight import Portfolio, close, param, roc, sma
        momentum = Portfolio(
            rank=roc(close, param("n")),
            filter=close > sma(close, 200),
            longs=param("k"),
            rebalance="monthly",
        )
        sf.sweep("stocks", strategy=momentum, grid={"n": [126, 252], "k": [5, 10]})

    ``longs``, ``shorts`` and ``keep`` (a buffer: a held series stays while its rank is within
    ``keep``) are integers or parameters; ``rebalance`` every K rows (an integer or a
    parameter) or ``"daily"``, ``"weekly"``, ``"monthly"``."""

    def __init__(
        self,
        rank: Expr | str,
        *,
        rebalance: Expr | str | int,
        longs: Expr | str | int | None = None,
        shorts: Expr | str | int | None = None,
        filter: Expr | str | None = None,
        weight: Expr | str | None = None,
        keep: Expr | str | int | None = None,
        inputs: Sequence[str] = (),
    ) -> None:
        if longs is None and shorts is None:
            raise ValueError("a portfolio needs longs= or shorts= (how many series to hold)")
        self.formulas: dict[str, str] = {"rank": str(rank)}
        if filter is not None:
            self.formulas["filter"] = str(filter)
        if weight is not None:
            self.formulas["weight"] = str(weight)
        #: The counts and the period as the body carries them.
        self.counts: dict[str, int | str] = {}
        for name, v in (("longs", longs), ("shorts", shorts), ("keep", keep)):
            if v is not None:
                self.counts[name] = _count(name, v)
        self.counts["rebalance"] = _count("rebalance", rebalance, words=True)
        #: Other dataset columns the formulas read (a model's scores ranked directly).
        self.inputs: tuple[str, ...] = _inputs(inputs)

    def wire(self) -> dict[str, Any]:
        """The body's strategy object."""
        out: dict[str, Any] = {**self.formulas, **self.counts}
        if self.inputs:
            out["inputs"] = list(self.inputs)
        return out

    def __repr__(self) -> str:
        return f"Portfolio({', '.join(f'{k}={v!r}' for k, v in self.wire().items())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Portfolio) and other.wire() == self.wire()

    def __hash__(self) -> int:
        return hash(repr(self))


def _inputs(inputs: Any) -> tuple[str, ...]:
    if isinstance(inputs, str) or not all(isinstance(n, str) for n in inputs):
        raise ValueError(f"inputs= takes a list of column names, e.g. ['pred'], got {inputs!r}")
    return tuple(inputs)


def wire_strategy(strategy: Any) -> str | dict[str, Any] | None:
    """A call's ``strategy=`` as the body carries it: a built-in's name, or the object of
    formulas (from a :class:`Strategy` or a mapping of field to text or expression, with
    ``inputs`` a list of column names)."""
    if strategy is None or isinstance(strategy, str):
        return strategy
    if isinstance(strategy, Strategy):
        out: dict[str, Any] = dict(strategy.formulas)
        if strategy.inputs:
            out["inputs"] = list(strategy.inputs)
        return out
    if isinstance(strategy, Portfolio):
        return strategy.wire()
    if isinstance(strategy, Mapping) and "rank" in strategy:
        unknown = sorted(set(strategy) - {*PORTFOLIO_FIELDS, "inputs"})
        if unknown:
            raise ValueError(f"a portfolio's fields are {', '.join(PORTFOLIO_FIELDS)} and inputs; got {unknown[0]!r}")
        get = strategy.get
        return Portfolio(
            get("rank", ""),
            rebalance=get("rebalance", ""),
            longs=get("longs"),
            shorts=get("shorts"),
            filter=get("filter"),
            weight=get("weight"),
            keep=get("keep"),
            inputs=get("inputs", ()),
        ).wire()
    if isinstance(strategy, Mapping):
        unknown = sorted(set(strategy) - {*FIELDS, "inputs"})
        if unknown:
            raise ValueError(f"a strategy's fields are {', '.join(FIELDS)} and inputs; got {unknown[0]!r}")
        out = {str(k): str(v) for k, v in strategy.items() if k != "inputs"}
        if "inputs" in strategy:
            out["inputs"] = list(_inputs(strategy["inputs"]))
        return out
    raise TypeError(
        f"strategy= takes a built-in name, a Strategy, a Portfolio or a mapping of formulas, got {strategy!r}"
    )
