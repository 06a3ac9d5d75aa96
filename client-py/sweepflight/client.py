"""The sweepflight client: push a series once, sweep it with parameters only.

    import sweepflight

    with sweepflight.connect("grpc://127.0.0.1:8815") as sf:
        sf.put("paper", sweepflight.paper.series())
        df = sf.sweep("paper", lengths=sweepflight.paper.lengths())

It speaks the wire contract (docs/protocol.md) with pyarrow.flight; anything it does can be done
with plain pyarrow too. A :class:`Client` is safe to share between threads; a :class:`Session`
is not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import numbers
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict, overload

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from . import _protocol
from .errors import DeadlineExceeded, InvalidRequest, ServerError, UnusableColumns, from_status, translated
from .expr import Expr, Portfolio, Strategy, wire_strategy

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: The server's default address.
DEFAULT_URI = "grpc://127.0.0.1:8815"
#: Target size of one uploaded message; well under the server's 64 MiB default limit.
UPLOAD_MESSAGE_BYTES = 8 << 20
#: Combos per sweep call when a grid is split into chunks.
DEFAULT_CHUNK_COMBOS = 50_000
#: A sweep of more chunks than this shows progress unless told otherwise.
PROGRESS_MIN_CHUNKS = 4
#: Runs (combos x series named) from which a sweep call goes as a job on the server: its
#: progress comes from the kernel, Ctrl-C and ``timeout=`` cancel it there. Smaller calls are
#: one DoAction (a few hundred microseconds; Ctrl-C waits for such a call to end).
JOB_MIN_RUNS = 2_000
#: Seconds a ``submit`` call gets at the least, whatever is left of the caller's timeout (see
#: ``Client._submit``).
SUBMIT_MIN_TIMEOUT = 5.0
#: The clock a call's ``timeout=`` is measured on (a name of its own, so tests can move it).
_clock = time.monotonic
#: Schema metadata key under which an Arrow result keeps its request (JSON).
REQUEST_METADATA = b"sweepflight.request"

#: Explicit combos: rows of values in the strategy's parameter order (six ints for hma_sar),
#: or a 2-D numpy array.
Params = Any


class SweepOptions(TypedDict, total=False):
    """The options of a sweep, the same for :meth:`Client.sweep`, :meth:`Session.sweep` and
    ``sweepflight.ray.Cluster.sweep`` (docs/protocol.md, strategies.md):

    - ``strategy``: ``"hma_sar"`` (default), ``"sma_cross"``, ``"ema_cross"``, ``"donchian"``,
      ``"rsi_revert"``, or a strategy of your own: a :class:`sweepflight.Strategy` of
      expressions, or a mapping of ``long`` / ``short`` / ``exit_long`` / ``exit_short`` to
      formula text (docs/strategies.md);
    - ``constraint``: a condition on the parameters (``"fast < slow"``, or an expression):
      grid combos that break it are skipped (the others keep their ``combo`` positions),
      samples redrawn;
    - ``grid``: one list per parameter name; the combos are their product, the first
      parameter outermost (``{"fast": range(5, 50), "slow": range(20, 200, 5)}``);
    - ``sample``: ``{"n": N, "seed": S, "ranges": {"fast": (lo, hi), ...}}``, N combos drawn
      by the server, the same for a seed;
    - ``fee``: fraction per round trip (server default 0.0009);
    - ``side``: ``"both"`` (default), ``"long"`` or ``"short"``;
    - ``stop_loss``, ``take_profit``: fractions of the entry (0.02 is 2%), or a formula giving
      each trade's fraction at the bar that decided it (``"m * atr(14) / close"``, or an
      expression): its parameters are swept like the strategy's, after them;
    - ``trailing_stop``: a fraction below the best price since entry (above, for a short), or a
      formula likewise;
    - ``fill``: ``"close"`` (default: at the signal's close) or ``"next_open"`` (at the next
      bar's open, as backtesting.py and backtrader fill; needs an ``open`` column);
    - ``stops``: ``"close"`` (default: stops checked on closes) or ``"high_low"`` (on each bar's
      high and low, filled at the stop price, or at the open when the bar gaps through it;
      needs ``open``, ``high``, ``low``);
    - ``slippage``: a fraction of each fill price paid (0.001 is 0.1%), in [0, 0.5);
    - ``warmup``: bars before ``rows`` the indicators warm up on (default 0), or ``"auto"``: the
      strategy's largest lookback over the call's combos;
    - ``periods_per_year``: annualises ``sharpe`` and ``sortino`` (252 for daily bars; default
      1: per-bar figures), or ``"auto"``: each series' own, from its time column;
    - ``series``: on a keyed dataset, these series only, in this order;
    - ``rows``: ``(start, end)``, only those rows of each series (0-based, end exclusive);
    - ``where``: ``{"trades": (30, None), "max_drawdown": (None, 25)}``, inclusive bounds on any
      numeric result column (None unbounded; a null value fails a real bound);
    - ``order_by``, ``descending`` (default True): rows ordered by a result column, ties by
      combo, nulls last; per series on a keyed dataset;
    - ``top``: only the first K rows (per series). The server selects: a grid with ``top`` may
      be larger than ``--max-combos`` (up to ``--max-grid-combos``), and is sent in one call;
    - ``blocks``: B (2 to 64) adds the ``block_pnl`` column, the equity's change over each of B
      equal blocks of the rows (the input of :func:`sweepflight.stats.pbo`);
    - ``compression``: ``"zstd"`` or ``"lz4"``: the server compresses the reply's Arrow buffers
      (pays on a slow link; costs CPU on both sides of a fast one);
    - ``ignore_time``: ``True`` sweeps a dataset whose bars are out of time order in row order,
      its time read as absent (without it the server refuses such a dataset: sort the bars by
      time before the put instead).
    """

    strategy: str | Mapping[str, Any] | Strategy | Portfolio
    constraint: str | Expr
    grid: Mapping[str, Iterable[float]]
    sample: Mapping[str, Any]
    fee: float
    side: Literal["both", "long", "short"]
    stop_loss: float | str | Expr
    take_profit: float | str | Expr
    trailing_stop: float | str | Expr
    fill: Literal["close", "next_open"]
    stops: Literal["close", "high_low"]
    slippage: float
    warmup: int | Literal["auto"]
    periods_per_year: float | Literal["auto"]
    series: Sequence[str]
    rows: tuple[int, int]
    where: Mapping[str, tuple[float | None, float | None]]
    order_by: str
    descending: bool
    top: int
    blocks: int
    compression: Literal["zstd", "lz4"]
    ignore_time: bool


@dataclasses.dataclass(frozen=True)
class PutSummary:
    """What the server stored."""

    dataset: str
    rows: int
    bytes: int
    version: int
    #: Number of series of a keyed put; ``None`` for a single series.
    series: int | None = None
    #: The bar columns the server recognised and can use, in the order open, high, low, close,
    #: volume, time.
    columns: tuple[str, ...] = ("close",)
    #: Recognised columns that break their rules, and why (the first bad row): stored, but a
    #: sweep that needs one is refused.
    unusable: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A stored dataset, as ListFlights / GetFlightInfo describe it."""

    name: str
    rows: int
    bytes: int
    version: int | None
    schema: pa.Schema
    #: The key column of a keyed dataset.
    key: str | None = None
    #: Its number of series.
    series: int | None = None
    #: The usable bar columns (see :class:`PutSummary`).
    columns: tuple[str, ...] = ("close",)
    #: Unusable bar columns and why.
    unusable: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class SweepRequest:
    """What a sweep result was computed from: kept with the result (see :func:`request_of`).
    Exactly one of ``lengths``, ``params``, ``grid`` and ``sample`` is set; the other fields are
    :class:`SweepOptions`, ``None`` where the server's default applies."""

    dataset: str
    lengths: tuple[int, ...] | None = None
    params: tuple[tuple[float, ...], ...] | None = None
    #: ``None``: the server's default, 0.0009.
    fee: float | None = None
    series: tuple[str, ...] | None = None
    rows: tuple[int, int] | None = None
    #: ``None``: hma_sar; a mapping: formulas of your own.
    strategy: str | dict[str, Any] | None = None
    constraint: str | None = None
    grid: dict[str, tuple[float, ...]] | None = None
    sample: dict[str, Any] | None = None
    side: str | None = None
    #: A fraction, or a formula's text.
    stop_loss: float | str | None = None
    take_profit: float | str | None = None
    trailing_stop: float | str | None = None
    fill: str | None = None
    stops: str | None = None
    slippage: float | None = None
    #: Bars of warm-up, or ``"auto"``: the strategy's largest lookback over the grid.
    warmup: int | Literal["auto"] | None = None
    #: A number, or ``"auto"``: each series' own, from its time column.
    periods_per_year: float | Literal["auto"] | None = None
    where: dict[str, tuple[float | None, float | None]] | None = None
    order_by: str | None = None
    descending: bool | None = None
    top: int | None = None
    blocks: int | None = None
    compression: str | None = None
    #: ``True``: bars out of time order run in row order, the time read as absent.
    ignore_time: bool | None = None

    @property
    def selects(self) -> bool:
        """True if the server filters, orders or cuts the rows (the call cannot be chunked)."""
        return self.where is not None or self.order_by is not None or self.top is not None

    @property
    def grid_goes_whole(self) -> bool:
        """True if a grid cannot be cut into explicit tuples: formulas number their parameters
        on the server, and a constraint's gaps keep their grid positions."""
        return self.grid is not None and (
            not isinstance(self.strategy, (str, type(None))) or self.constraint is not None or self.stop_formulas
        )

    @property
    def stop_formulas(self) -> bool:
        """True if a stop is a formula (its parameters join the strategy's on the server)."""
        return any(isinstance(s, str) for s in (self.stop_loss, self.take_profit, self.trailing_stop))

    @property
    def combos(self) -> int:
        """Number of combos (per series)."""
        if self.grid is not None:
            return math.prod(len(v) for v in self.grid.values())
        if self.sample is not None:
            return int(self.sample["n"])
        return len(self.lengths if self.lengths is not None else self.params or ())

    def fields(self) -> dict[str, Any]:
        """The request's fields but ``dataset``, as :func:`_protocol.sweep_body` takes them."""
        # By hand: dataclasses.asdict deep-copies every params tuple (tens of ms for a few
        # thousand combos).
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "dataset"}

    def body(self) -> bytes:
        """The JSON body on the wire."""
        return _protocol.sweep_body(self.dataset, **self.fields())

    def chunk(self, start: int, end: int) -> SweepRequest:
        """The same request for combos ``start..end`` only; a grid's chunk goes as the explicit
        tuples of that slice (the product in its order, only the slice built). A sample is
        drawn by the server and is not cut (``start`` must be 0)."""
        if self.lengths is not None:
            return dataclasses.replace(self, lengths=self.lengths[start:end])
        if self.grid is not None:
            if self.grid_goes_whole or not isinstance(self.strategy, (str, type(None))):
                if start == 0 and end >= self.combos:
                    return self
                raise InvalidRequest("a grid of formulas, or with a constraint, is sent whole (the server numbers it)")
            # A built-in's grid holds its parameters in wire order (as the request built it).
            product = itertools.product(*self.grid.values())
            return dataclasses.replace(self, grid=None, params=tuple(itertools.islice(product, start, end)))
        if self.sample is not None:
            if start != 0:
                raise InvalidRequest("a sample is drawn by the server and cannot be cut into chunks")
            return self
        return dataclasses.replace(self, params=(self.params or ())[start:end])


def request_of(result: pl.DataFrame | pa.Table) -> SweepRequest | None:
    """The request a sweep result answers: kept as the ``request`` attribute of a polars
    result and as schema metadata of an Arrow one (``None`` for other frames)."""
    if isinstance(result, pa.Table):
        raw = (result.schema.metadata or {}).get(REQUEST_METADATA)
        if raw is None:
            return None
        fields = json.loads(raw)
        for name in ("lengths", "series", "rows"):
            if fields.get(name) is not None:
                fields[name] = tuple(fields[name])
        if fields.get("params") is not None:
            fields["params"] = tuple(tuple(p) for p in fields["params"])
        if fields.get("grid") is not None:
            fields["grid"] = {k: tuple(v) for k, v in fields["grid"].items()}
        if fields.get("where") is not None:
            fields["where"] = {k: tuple(v) for k, v in fields["where"].items()}
        return SweepRequest(**fields)
    found = getattr(result, "request", None)
    return found if isinstance(found, SweepRequest) else None


def connect(
    uri: str | None = None,
    *,
    token: str | None = None,
    tls_root_certs: bytes | str | None = None,
    timeout: float | None = None,
) -> Client:
    """Connects to a sweepflight server; see :class:`Client`. Without an address: the one in
    ``$SWEEPFLIGHT_URI`` if set, else a private in-memory server started for this client
    (:func:`sweepflight.local`, stopped when the client closes)."""
    if uri is None:
        uri = os.environ.get("SWEEPFLIGHT_URI")
    if uri is None:
        from .server import local

        return local(timeout=timeout)
    return Client(uri, token=token, tls_root_certs=tls_root_certs, timeout=timeout)


class CallOptions(TypedDict, total=False):
    """How a call runs, beside what it computes (:class:`SweepOptions`). A :class:`Client`
    takes all three, ``sweepflight.ray.Cluster`` ``progress``, a :class:`Session` none:

    - ``progress``: show a progress bar (``None``: when the call is long enough to want one);
    - ``chunk_combos``: combos per call when a grid is sent in chunks;
    - ``timeout``: seconds the whole call may take.
    """

    progress: bool | None
    chunk_combos: int
    timeout: float | None


class CallArgs(SweepOptions, CallOptions, total=False):
    """The keyword arguments of a sweep call: :class:`SweepOptions` and :class:`CallOptions`."""


class _Calls:
    """The calls every way of reaching servers offers (:class:`Client`, :class:`Session`,
    ``sweepflight.ray.Cluster``), each defined once: one signature, one request built from
    the arguments (:func:`_request`), run by the subclass's hooks."""

    #: The :class:`CallOptions` this way of calling takes.
    _call_options: frozenset[str] = frozenset()

    def _builtins(self) -> Mapping[str, _protocol.Kinds]:
        """The built-ins' parameters, as the server's ``strategies`` action lists them."""
        raise NotImplementedError

    def _request(
        self, name: str, lengths: Iterable[int] | None, params: Params | None, options: Mapping[str, Any]
    ) -> SweepRequest:
        """A call's request from its arguments."""
        return _request(name, lengths, params, options, self._builtins)

    def _split(
        self, name: str, lengths: Iterable[int] | None, params: Params | None, options: Mapping[str, Any]
    ) -> tuple[SweepRequest, dict[str, Any]]:
        """The request, and the call options given (refused where this way takes none)."""
        call = {k: v for k, v in options.items() if k in CallOptions.__annotations__}
        refused = sorted(k for k, v in call.items() if v is not None and k not in self._call_options)
        if refused:
            raise InvalidRequest(f"{type(self).__name__} calls take no {refused[0]}=")
        sweep = {k: v for k, v in options.items() if k not in call}
        return self._request(name, lengths, params, sweep), {k: v for k, v in call.items() if v is not None}

    @overload
    def sweep(
        self,
        name: str,
        lengths: Iterable[int] | None = ...,
        params: Params | None = ...,
        *,
        as_arrow: Literal[False] = ...,
        **options: Unpack[CallArgs],
    ) -> pl.DataFrame: ...

    @overload
    def sweep(
        self,
        name: str,
        lengths: Iterable[int] | None = ...,
        params: Params | None = ...,
        *,
        as_arrow: Literal[True],
        **options: Unpack[CallArgs],
    ) -> pa.Table: ...

    def sweep(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Params | None = None,
        *,
        as_arrow: bool = False,
        **options: Unpack[CallArgs],
    ) -> pl.DataFrame | pa.Table:
        """Runs every combo on dataset ``name``; one row per combo, in request order, with
        the strategy's parameter columns and the metrics.

        Give exactly one of ``lengths`` (hma_sar: each ``L`` expands by the paper rule),
        ``params`` (rows in the strategy's parameter order: ``[half, full, sqrt, p3, p2, p]``
        for hma_sar, ``[fast, slow]`` for sma_cross...), ``grid=`` or ``sample=``; the other
        options are :class:`SweepOptions` (strategy, side, stops, warm-up, fee, series, rows).
        For example::

            sf.sweep("eurusd", strategy="sma_cross", grid={"fast": range(5, 50),
                     "slow": range(20, 200, 5)}, side="long", stop_loss=0.02)

        On a keyed dataset every combo runs on every series (or on those listed in ``series``)
        and the result starts with a ``series`` column, ordered by series, then combo. Grids
        larger than ``chunk_combos`` go as several calls in sequence (a sample goes whole),
        with progress shown if ``progress`` is true (or, when it is None, if there are more
        than a few chunks); the result equals one big call, and the server's ``--max-combos``
        holds for the whole grid, chunked or not. ``timeout`` bounds the whole call. The result
        keeps its request: :func:`request_of`. ``progress``, ``chunk_combos`` and ``timeout``
        (:class:`CallOptions`) are how a :class:`Client` runs the call; a :class:`Session` takes
        none of them (one message each way), ``sweepflight.ray.Cluster`` ``progress`` only (it
        cuts the grid over its servers itself).

        Raises:
            InvalidRequest: not exactly one of lengths/params/grid/sample, bad values or
                options (the server names the combo and parameter).
            NotFound: no dataset called ``name``, or no such series in it.
            ResourceExhausted: the server is busy (its sweep queue is full).
        """
        request, call = self._split(name, lengths, params, options)
        return self._sweep(request, as_arrow, call)

    @overload
    def walk_forward(
        self,
        name: str,
        lengths: Iterable[int] | None = ...,
        params: Params | None = ...,
        *,
        folds: Folds,
        select: str | Mapping[str, Any] | None = ...,
        as_arrow: Literal[False] = ...,
        **options: Unpack[CallArgs],
    ) -> pl.DataFrame: ...

    @overload
    def walk_forward(
        self,
        name: str,
        lengths: Iterable[int] | None = ...,
        params: Params | None = ...,
        *,
        folds: Folds,
        select: str | Mapping[str, Any] | None = ...,
        as_arrow: Literal[True],
        **options: Unpack[CallArgs],
    ) -> pa.Table: ...

    def walk_forward(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Params | None = None,
        *,
        folds: Folds,
        select: str | Mapping[str, Any] | None = None,
        as_arrow: bool = False,
        **options: Unpack[CallArgs],
    ) -> pl.DataFrame | pa.Table:
        """Walk-forward in one call: for each series and fold, every combo runs on the train
        rows, the best by ``select`` (after ``where``; a null score is never chosen) is kept,
        and that combo runs on the test rows; ``warmup`` applies to both runs::

            wf = sf.walk_forward("eurusd", strategy="sma_cross", grid=grid,
                                 folds={"train": 5000, "test": 1000}, select="sharpe")

        ``folds``: ``{"train": N, "test": M, "step": P (default M), "anchored": False}`` (fold
        k trains on rows ``[k*P, k*P + N)``, anchored ``[0, k*P + N)``, and tests on the next M
        rows, while they fit in the series) or a list of ``(train_start, train_end, test_start,
        test_end)``. ``select``: a result column (largest first; default ``pnl``, a
        portfolio's ``total_return``), or ``{"by": column, "descending": False}``. The other
        options are :class:`SweepOptions` (not ``rows``, ``order_by``, ``top``, ``blocks``).
        One row per series and fold: the fold's rows, the chosen ``combo`` and parameters,
        ``train_score``, and the test run's ``pnl`` .. ``sqn`` (a portfolio's own metrics, one
        row per fold; null where no combo passed ``where``). Runs as a job: progress from the kernel, and
        Ctrl-C or ``timeout`` cancel it on the server. :meth:`walk_forward_equity` stitches
        the test runs' equity.

        Raises:
            InvalidRequest: bad folds or select, a train range shorter than the grid's longest
                window, or what :meth:`sweep` refuses.
            NotFound: no such dataset or series.
        """
        request, call = self._split(name, lengths, params, options)
        return self._walk_forward(_walk_forward(request, folds, select), as_arrow, call)

    def _sweep(self, request: SweepRequest, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        raise NotImplementedError

    def _walk_forward(self, wf: WalkForward, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        raise NotImplementedError


class _DetailCalls(_Calls):
    """:class:`_Calls` and the calls that keep a sweep's trades or equity (a :class:`Client`'s
    and a :class:`Session`'s: a cluster's servers each hold a part)."""

    def trades(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Params | None = None,
        **options: Unpack[CallArgs],
    ) -> pl.DataFrame:
        """The booked trades of the combos a sweep would return: all of them, or the rows its
        ``where``, ``order_by`` and ``top`` keep (the same arguments as :meth:`sweep`). One row
        per trade, ordered by series, combo, trade: [``series``], ``combo`` (its position in the
        request), ``trade``, ``side`` (+1 long, -1 short), ``entry_row``, ``exit_row`` (rows of
        the series), ``entry_price``, ``exit_price``, ``pnl`` (net, percentage points)::

            best = sf.trades("eurusd", strategy="sma_cross", grid=..., order_by="sharpe", top=5)

        Raises:
            InvalidRequest: as :meth:`sweep`, or more combos x series than the server's
                ``--max-trade-combos`` (default 1,000).
        """
        request, call = self._split(name, lengths, params, options)
        return self._labelled(_reply(self._detail("trades", request, call), _protocol.trades_schema), request)

    def equity(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Params | None = None,
        **options: Unpack[CallArgs],
    ) -> pl.DataFrame:
        """The mark-to-market equity of the combos :meth:`trades` would choose, one row per
        evaluated bar: [``series``], ``combo``, ``row`` (of the series), ``position`` (after the
        bar), ``equity`` (percentage points: booked nets plus the open trade's mark; strategies.md).

        Raises:
            InvalidRequest: as :meth:`trades`.
            ResourceExhausted: the curves do not fit the server's sweep memory.
        """
        request, call = self._split(name, lengths, params, options)
        return self._labelled(_reply(self._detail("equity", request, call), _protocol.equity_schema), request)

    def _detail(self, action: str, request: SweepRequest, call: Mapping[str, Any]) -> pa.Table:
        raise NotImplementedError

    def _labelled(self, frame: pl.DataFrame, request: SweepRequest) -> pl.DataFrame:
        """``frame`` with ``combo_labels`` (combo -> its parameters as text, for the plots'
        legends) where the request says them: a built-in's lengths, tuples or grid. A grid of
        formulas is numbered by the server (pass the sweep's frame to the plot instead)."""
        labels: dict[int, str] = {}
        if "combo" in frame.columns and frame.height:
            combos = frame["combo"].unique().to_list()
            labels = _combo_labels(request, self._builtins(), combos)
        frame.combo_labels = labels  # type: ignore[attr-defined]  # polars frames take attributes
        return frame


class Client(_DetailCalls):
    """A connection to one server. Usable as a context manager.

    Args:
        uri: ``grpc://HOST:PORT``, ``grpc+unix:///path/to.sock`` or ``grpc+tls://HOST:PORT``.
        token: sent as ``authorization: Bearer TOKEN`` on every call, for servers started
            with ``--token``.
        tls_root_certs: PEM bytes (or a path to a PEM file) of the CA to trust for
            ``grpc+tls://``.
        timeout: default deadline of every call, in seconds (``None``: no deadline). Each
            method also takes its own ``timeout=``.
    """

    _call_options = frozenset({"progress", "chunk_combos", "timeout"})

    def __init__(
        self,
        uri: str = DEFAULT_URI,
        *,
        token: str | None = None,
        tls_root_certs: bytes | str | None = None,
        timeout: float | None = None,
    ) -> None:
        if isinstance(tls_root_certs, str):
            with open(tls_root_certs, "rb") as f:
                tls_root_certs = f.read()
        kwargs: dict[str, Any] = {}
        if tls_root_certs is not None:
            kwargs["tls_root_certs"] = tls_root_certs
        if uri.startswith("grpc+unix://"):
            # gRPC's C core would send the socket path, percent-encoded, as the HTTP/2 authority,
            # which HTTP/2 servers may refuse (hyperium/h2#487, grpc/grpc#38142).
            kwargs["generic_options"] = [("grpc.default_authority", "localhost")]
        self.uri = uri
        self.timeout = timeout
        self._headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self._table: dict[str, _protocol.Kinds] | None = None
        #: The private server this client started (:func:`sweepflight.local`), stopped with it.
        self._local: Any = None
        with translated():
            self._flight = flight.FlightClient(uri, **kwargs)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection (and stops the server :func:`sweepflight.local` started)."""
        self._flight.close()
        if self._local is not None:
            self._local.stop()

    def _options(self, timeout: float | None) -> flight.FlightCallOptions:
        t = timeout if timeout is not None else self.timeout
        # pyarrow wants bytes here (pyarrow-stubs say str).
        return flight.FlightCallOptions(headers=self._headers, timeout=t)  # type: ignore[arg-type]

    def put(
        self,
        name: str,
        data: Any,
        *,
        key: str | None = None,
        close: str = "close",
        chunk_rows: int | None = None,
        timeout: float | None = None,
    ) -> PutSummary:
        """Stores ``data`` as dataset ``name``, replacing any dataset of that name.

        Args:
            name: 1-128 characters from ``A-Z a-z 0-9 . _ -``.
            data: anything that exports an Arrow C stream (``__arrow_c_stream__``: polars and
                pandas frames, pyarrow tables and readers, duckdb results, ...), a pyarrow
                RecordBatch or array, a polars LazyFrame, or a 1-D numpy array (the closes); or
                a universe as a dict of such frames by series name (``{"AAPL": df, ...}``:
                each becomes the series of that name, ``key`` naming the key column, default
                ``"symbol"``; a pandas frame's date index is kept as its time).
            key: store a universe: rows with the same value in this column (utf8, a dictionary
                of strings, or integers) form one series; series in order of first appearance.
            close: the column of ``data`` holding the close price; it is stored as ``close``.
            chunk_rows: rows per uploaded message; by default messages of about 8 MiB.
            timeout: deadline in seconds.

        Raises:
            InvalidRequest: bad name, no such column, bad values (the server names the row and,
                for a universe, the series), a bad key column.
            ResourceExhausted: the dataset is larger than the server allows, or its disk is full.
        """
        if isinstance(data, Mapping):
            key = key or "symbol"
            reader = _universe_of(data, key, close).to_reader()
        else:
            reader = _as_reader(data, close)
        with translated():
            writer, answer = self._flight.do_put(
                _protocol.put_descriptor(name, key), reader.schema, options=self._options(timeout)
            )
            try:
                for batch in reader:
                    rows = chunk_rows or _rows_per_message(batch)
                    for start in range(0, max(batch.num_rows, 1), rows):
                        writer.write_batch(batch.slice(start, rows))
                writer.done_writing()
                # A FlightMetadataReader (pyarrow-stubs call it a FlightStreamReader).
                meta = json.loads(answer.read().to_pybytes())  # type: ignore[attr-defined]
            finally:
                writer.close()
        summary = PutSummary(
            meta["dataset"],
            meta["rows"],
            meta["bytes"],
            meta["version"],
            meta.get("series"),
            tuple(meta.get("columns", ("close",))),
            dict(meta.get("unusable", {})),
        )
        if summary.unusable:
            reasons = "; ".join(f"{c}: {why}" for c, why in summary.unusable.items())
            warnings.warn(
                f"dataset {name!r} is stored, but these columns are unusable (a sweep that needs one is "
                f"refused): {reasons}",
                UnusableColumns,
                stacklevel=2,
            )
        return summary

    def _sweep(self, request: SweepRequest, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        return self.run(request, as_arrow=as_arrow, **call)

    def _walk_forward(self, wf: WalkForward, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        bar = _bar(call.get("progress"), "walk-forward")
        table = self._job_call("walk_forward", wf.body(), wf, call.get("timeout"), bar)
        return table if as_arrow else _walk_forward_frame(table, wf)

    def _detail(self, action: str, request: SweepRequest, call: Mapping[str, Any]) -> pa.Table:
        return self._table_call(action, request, call.get("timeout"))

    def run(
        self,
        request: SweepRequest,
        *,
        as_arrow: bool = False,
        progress: bool | None = None,
        chunk_combos: int = DEFAULT_CHUNK_COMBOS,
        timeout: float | None = None,
        job: bool | None = None,
    ) -> pl.DataFrame | pa.Table:
        """Runs a built :class:`SweepRequest` (what :meth:`sweep` does after checking its
        arguments; ``request_of(result)`` gives one back to run again). ``timeout`` bounds the
        whole call, every chunk of it. ``job``: run each chunk as a job (True), as one DoAction
        (False), or as a job from :data:`JOB_MIN_RUNS` runs or when progress is shown (None)."""
        chunk_combos = max(1, int(chunk_combos))
        if request.sample is not None or request.selects or request.grid_goes_whole:
            # A sample is drawn by the server; a selection ranks the whole grid: one call.
            chunk_combos = max(chunk_combos, request.combos)
        starts = range(0, request.combos, chunk_combos)
        limit = timeout if timeout is not None else self.timeout
        deadline = None if limit is None else _clock() + limit
        if len(starts) > 1:
            # Chunks are each within --max-combos; the grid as a whole must be too.
            self._check_combos(request, limit)
        show = progress if progress is not None else len(starts) > PROGRESS_MIN_CHUNKS
        bar = _Progress(request.combos, f"sweep {request.dataset}") if show else None
        tables = []
        try:
            for start in starts or [0]:
                left = None if deadline is None else deadline - _clock()
                if left is not None and left <= 0:
                    raise DeadlineExceeded(f"timeout of {limit} s passed after {start:,} of {request.combos:,} combos")
                chunk = request.chunk(start, start + chunk_combos)
                moved = None if bar is None else _Moved(bar, start, chunk.combos)
                table = self._sweep_call(chunk, left, moved, job)
                if start:
                    i = table.schema.get_field_index("combo")
                    table = table.set_column(i, table.schema.field(i), pc.add(table["combo"], start))
                tables.append(table)
                if bar is not None:
                    bar.to(start + chunk.combos)
        finally:
            if bar is not None:
                bar.close()
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        if len(tables) > 1 and table.schema.names[0] == _protocol.SERIES_COLUMN:
            table = _series_major(table, tables[0])
        return _result(table, request, as_arrow)

    def _check_combos(self, request: SweepRequest, timeout: float | None) -> None:
        """Refuses a grid past the server's ``--max-combos`` (series x combos), as one call of
        it would be refused."""
        limit = self.stats(timeout=timeout).get("max_combos")
        if limit is None:
            return  # an older server: each chunk is checked on its own
        series = (
            len(request.series) if request.series is not None else self.info(request.dataset, timeout=timeout).series
        )
        runs = request.combos * (series or 1)
        if runs > limit:
            raise InvalidRequest(
                f"{request.combos:,} combos x {series or 1} series = {runs:,}; this server allows at most "
                f"{limit:,} per call (--max-combos), chunked or not: split the grid, or rank it with top="
            )

    def _sweep_call(
        self,
        request: SweepRequest,
        timeout: float | None,
        moved: Callable[[float], None] | None = None,
        job: bool | None = None,
    ) -> pa.Table:
        """One sweep call: a DoAction, or for a large one (or when progress is shown) a job
        (progress from the kernel; Ctrl-C and the timeout cancel it on the server)."""
        runs = request.combos * (len(request.series) if request.series is not None else 1)
        if job if job is not None else (moved is not None or runs >= JOB_MIN_RUNS):
            table = self._job_call("sweep", request.body(), request, timeout, moved)
        else:
            table = self._table_call("sweep", request, timeout)
        _check(table.schema)
        return table

    def _table_call(self, action: str, request: SweepRequest, timeout: float | None) -> pa.Table:
        """An action whose reply is one Arrow IPC stream over its Result bodies."""
        with translated():
            results = self._flight.do_action(flight.Action(action, request.body()), options=self._options(timeout))
            stream = b"".join(r.body.to_pybytes() for r in results)
        return pa.ipc.open_stream(stream).read_all()

    def submit(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Params | None = None,
        *,
        action: Literal["sweep", "trades", "equity", "walk_forward"] = "sweep",
        folds: Folds | None = None,
        select: str | Mapping[str, Any] | None = None,
        timeout: float | None = None,
        **options: Unpack[SweepOptions],
    ) -> Job:
        """Starts a job on the server and returns at once: ``action`` (``sweep``, ``trades``,
        ``equity`` or ``walk_forward``, which takes ``folds=`` and ``select=``) with the same
        arguments as the method of that name. The job runs under the server's memory budget
        and queue like any call; come back to it with :meth:`Job.result` (or from another
        process with :meth:`Client.job` and its ID)::

            job = sf.submit("eurusd", strategy="sma_cross", grid=grid)
            print(job.progress)         # 0.0 .. 1.0, from the kernel
            df = job.result(progress=True)

        ``timeout`` bounds the submit call only (at least :data:`SUBMIT_MIN_TIMEOUT` seconds: a job
        whose ID never came back would run on unseen).

        Raises:
            InvalidRequest, NotFound: as the action would, at once (the body, dataset, series,
                rows and limits are checked before the job starts).
            ResourceExhausted: the server holds ``--max-jobs`` jobs already.
        """
        request = _request(name, lengths, params, options, self._builtins)
        if action == "walk_forward":
            wf = _walk_forward(request, folds, select)
            return self._submit(action, wf.body(), wf, timeout)
        if folds is not None or select is not None:
            raise InvalidRequest("folds= and select= belong to action='walk_forward'")
        if action not in ("sweep", "trades", "equity"):
            raise InvalidRequest(f"a job runs 'sweep', 'trades', 'equity' or 'walk_forward', got {action!r}")
        return self._submit(action, request.body(), request, timeout)

    def _job_call(
        self,
        action: str,
        body: bytes,
        request: Any,
        timeout: float | None,
        moved: Callable[[float], None] | None,
    ) -> pa.Table:
        """``body`` run as a job, waited for and fetched as Arrow; ``timeout`` bounds it all,
        the submit call included (past it the job is cancelled on the server)."""
        deadline = None if timeout is None else _clock() + timeout
        job = self._submit(action, body, request, timeout)
        return job._run(None if deadline is None else deadline - _clock(), moved)

    def _submit(self, action: str, body: bytes, request: Any, timeout: float | None) -> Job:
        """Submits ``body``; the job. A job whose ID never reached the client would run on
        unseen, so the call is not cut short by a nearly spent ``timeout`` (it gets at least
        :data:`SUBMIT_MIN_TIMEOUT`; a wait that follows cancels the job once the caller's time
        is up), and a Ctrl-C during it is held until the ID is back: the job is then
        cancelled and the interrupt delivered."""
        floor = None if timeout is None else max(timeout, SUBMIT_MIN_TIMEOUT)
        with _interrupts_held() as interrupted:
            with translated():
                results = list(
                    self._flight.do_action(
                        flight.Action("submit", _protocol.submit_body(action, body)), options=self._options(floor)
                    )
                )
            status = json.loads(b"".join(r.body.to_pybytes() for r in results))
            job = Job(self, status["job"], action, request)
        if interrupted():
            try:
                job.cancel(timeout=5.0)
            finally:
                signal.raise_signal(signal.SIGINT)
        return job

    def job(self, job_id: str, *, timeout: float | None = None) -> Job:
        """The job ``job_id`` (as :attr:`Job.id` gave it), from this or another process: its
        result keeps until it is fetched plus the server's ``--job-ttl``.

        Raises:
            NotFound: no such job (never submitted, or forgotten after it ended).
        """
        status = Job(self, job_id, "sweep", None).status(timeout=timeout)
        return Job(self, job_id, status.get("action", "sweep"), None)

    def walk_forward_equity(self, result: pl.DataFrame, *, timeout: float | None = None) -> pl.DataFrame:
        """The out-of-sample equity of a :meth:`walk_forward` result, stitched: each fold's
        chosen combo run again on its test rows (the ``equity`` action), joined in order, each
        fold starting where the last one ended. Rows: [``series``], ``fold``, ``row``,
        ``equity`` (stitched, percentage points), ``fold_equity`` (within the fold). Folds with
        no chosen combo add nothing (they are flat)."""
        wf = getattr(result, "request", None)
        if not isinstance(wf, WalkForward):
            raise InvalidRequest("walk_forward_equity takes the frame walk_forward() returned (it keeps its request)")
        names = [n for n, _ in _protocol.param_columns_of(result.to_arrow().schema, before="train_score")]
        keyed = _protocol.SERIES_COLUMN in result.columns
        parts: list[pl.DataFrame] = []
        offset: dict[str | None, float] = {}
        for row in result.iter_rows(named=True):
            series = row[_protocol.SERIES_COLUMN] if keyed else None
            base = offset.get(series, 0.0)
            if row["combo"] is None:
                continue
            fields = {k: v for k, v in wf.request.fields().items() if k not in _NOT_FOR_THE_TEST_RUN}
            fields.update(
                lengths=None,
                grid=None,
                sample=None,
                params=(tuple(row[n] for n in names),),
                rows=(row["test_start"], row["test_end"]),
                series=(series,) if keyed else None,
            )
            test = dataclasses.replace(wf.request, **fields)
            curve = _frame(self._table_call("equity", test, timeout))
            curve = curve.with_columns(
                pl.lit(row["fold"]).alias("fold"),
                pl.col("equity").alias("fold_equity"),
                (pl.col("equity") + base).alias("equity"),
            )
            offset[series] = base + float(curve["fold_equity"][-1])
            keep = ([_protocol.SERIES_COLUMN] if keyed else []) + ["fold", "row", "equity", "fold_equity"]
            parts.append(curve.select(keep))
        if not parts:
            schema: dict[str, Any] = {_protocol.SERIES_COLUMN: pl.String} if keyed else {}
            schema.update(fold=pl.Int64, row=pl.Int64, equity=pl.Float64, fold_equity=pl.Float64)
            return pl.DataFrame(schema=schema)
        return pl.concat(parts)

    def session(
        self,
        *,
        keyed: bool = False,
        strategy: str | Mapping[str, Any] | Strategy | Portfolio | None = None,
        action: Literal["sweep", "trades", "equity", "walk_forward"] = "sweep",
        timeout: float | None = None,
    ) -> Session:
        """Opens a ``session``: many small sweeps on one open stream, a message each way
        instead of a gRPC call each (for tight loops of params-only sweeps). A session serves
        unkeyed datasets, or keyed ones if ``keyed``, one ``strategy`` (default hma_sar) and
        one ``action``: its calls are :meth:`Session.sweep` (default), :meth:`Session.trades`,
        :meth:`Session.equity` or :meth:`Session.walk_forward`. Use it as a context manager::

            with sf.session() as s:
                for L in range(6, 200):
                    df = s.sweep("paper", lengths=[L])

        ``timeout`` bounds the whole session.
        """
        try:
            wired = wire_strategy(strategy) or _protocol.DEFAULT_STRATEGY
        except (TypeError, ValueError) as e:
            raise InvalidRequest(str(e)) from None
        return Session(self, keyed, wired, self._options(timeout), action)

    def datasets(self, *, timeout: float | None = None) -> list[DatasetInfo]:
        """Every stored dataset, by name."""
        with translated():
            return [_info(i) for i in self._flight.list_flights(options=self._options(timeout))]

    def info(self, name: str, *, timeout: float | None = None) -> DatasetInfo:
        """One dataset's description (with its key and series count if keyed).

        Raises:
            NotFound: no dataset called ``name``.
        """
        with translated():
            d = flight.FlightDescriptor.for_path(name)
            return _info(self._flight.get_flight_info(d, options=self._options(timeout)))

    @overload
    def get(self, name: str, *, as_arrow: Literal[False] = ..., timeout: float | None = ...) -> pl.DataFrame: ...

    @overload
    def get(self, name: str, *, as_arrow: Literal[True], timeout: float | None = ...) -> pa.Table: ...

    def get(self, name: str, *, as_arrow: bool = False, timeout: float | None = None) -> pl.DataFrame | pa.Table:
        """The stored rows of dataset ``name`` (a keyed one series after series).

        Raises:
            NotFound: no dataset called ``name``.
        """
        options = self._options(timeout)
        with translated():
            info = self._flight.get_flight_info(flight.FlightDescriptor.for_path(name), options=options)
            table = self._flight.do_get(info.endpoints[0].ticket, options=options).read_all()
        return table if as_arrow else _frame(table)

    def drop(self, name: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Removes dataset ``name``; returns ``{"dataset": name, "version": v}``.

        Raises:
            NotFound: no dataset called ``name``.
        """
        with translated():
            results = list(self._flight.do_action(flight.Action("drop", name.encode()), options=self._options(timeout)))
        answer: dict[str, Any] = json.loads(results[0].body.to_pybytes()) if results else {"dataset": name}
        return answer

    def _builtins(self) -> Mapping[str, _protocol.Kinds]:
        # The server's table, asked once: a built-in's parameters are the server's to say.
        if self._table is None:
            self._table = _protocol.builtins_of(self.strategies())
        return self._table

    def strategies(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """The strategies the server runs: name, parameters (name and JSON type) and what each
        does."""
        with translated():
            results = list(self._flight.do_action(flight.Action("strategies", b""), options=self._options(timeout)))
        found: list[dict[str, Any]] = json.loads(b"".join(r.body.to_pybytes() for r in results))
        return found

    def explain(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Params | None = None,
        *,
        timeout: float | None = None,
        **options: Unpack[SweepOptions],
    ) -> dict[str, Any]:
        """The plan of a sweep, nothing run (the ``explain`` action): the strategy's parameters
        with their kinds, its formulas as canonical text, the combos after the constraint, the
        lookback (``warmup="auto"``'s), the distinct arrays the call computes, and the columns
        it reads. Takes what :meth:`sweep` takes::

            plan = sf.explain("paper", strategy=my_strategy, grid={"n": range(10, 50), "k": ks})
            plan["arrays"], plan["params"]
        """
        request = _request(name, lengths, params, options, self._builtins)
        with translated():
            results = list(
                self._flight.do_action(flight.Action("explain", request.body()), options=self._options(timeout))
            )
        plan: dict[str, Any] = json.loads(b"".join(r.body.to_pybytes() for r in results))
        return plan

    def stats(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The server's state: datasets, bytes, cache, sweeps running / queued / refused, memory."""
        with translated():
            results = list(self._flight.do_action(flight.Action("stats", b""), options=self._options(timeout)))
        answer: dict[str, Any] = json.loads(results[0].body.to_pybytes())
        return answer

    def echo(self, data: bytes, *, timeout: float | None = None) -> bytes:
        """Sends ``data`` and returns what the server sent back (a round-trip probe)."""
        with translated():
            results = list(self._flight.do_action(flight.Action("echo", data), options=self._options(timeout)))
        return b"".join(r.body.to_pybytes() for r in results)


#: A walk-forward's folds: ``{"train": N, "test": M, "step": P, "anchored": bool}`` or a
#: list of ``(train_start, train_end, test_start, test_end)``.
Folds = Mapping[str, Any] | Sequence[Sequence[int]]

#: Options of a walk-forward's sweep that its test runs do not take (the folds choose the rows
#: and the combo; the selection chose it).
_NOT_FOR_THE_TEST_RUN = ("where", "order_by", "descending", "top", "blocks", "compression")


@dataclasses.dataclass(frozen=True)
class WalkForward:
    """What a walk-forward result was computed from (kept as its ``request`` attribute)."""

    request: SweepRequest
    folds: dict[str, Any] | tuple[tuple[int, int, int, int], ...]
    by: str = "pnl"
    descending: bool = True

    def body(self) -> bytes:
        """The ``walk_forward`` body on the wire."""
        return _protocol.walk_forward_body(
            self.request.dataset, self.folds, (self.by, self.descending), **self.request.fields()
        )


def _walk_forward(request: SweepRequest, folds: Folds | None, select: str | Mapping[str, Any] | None) -> WalkForward:
    """A walk-forward request from a call's arguments, checked as far as the client can."""
    for name in ("rows", "order_by", "descending", "top", "blocks"):
        if getattr(request, name) is not None:
            raise InvalidRequest(f"{name}= is not a walk-forward option: the folds choose the rows, select= the combo")
    if folds is None:
        raise InvalidRequest(
            'walk_forward needs folds={"train": N, "test": M} or a list of'
            " (train_start, train_end, test_start, test_end)"
        )
    spelled: dict[str, Any] | tuple[tuple[int, int, int, int], ...]
    if isinstance(folds, Mapping):
        unknown = sorted(set(folds) - {"train", "test", "step", "anchored"})
        if unknown or "train" not in folds or "test" not in folds:
            raise InvalidRequest(f'folds= takes {{"train", "test", "step"?, "anchored"?}}, got {dict(folds)!r}')
        spelled = {
            k: (bool(v) if k == "anchored" else _int(v, f"folds {k}")) for k, v in folds.items() if v is not None
        }
    else:
        rows = [tuple(_int(x, "folds") for x in f) for f in folds]
        if any(len(f) != 4 for f in rows):
            raise InvalidRequest("each fold is (train_start, train_end, test_start, test_end)")
        spelled = tuple((f[0], f[1], f[2], f[3]) for f in rows)
    # A portfolio's result has no pnl: it is judged by its total return unless told.
    default = "total_return" if isinstance(request.strategy, Mapping) and "rank" in request.strategy else "pnl"
    if select is None or isinstance(select, str):
        by, descending = select or default, True
    elif isinstance(select, Mapping):
        by, descending = str(select.get("by", default)), bool(select.get("descending", True))
    else:
        raise InvalidRequest(f'select= is a result column or {{"by": column, "descending": bool}}, got {select!r}')
    return WalkForward(request, spelled, by, descending)


def _walk_forward_frame(table: pa.Table, wf: WalkForward) -> pl.DataFrame:
    keyed = table.schema.names[:1] == [_protocol.SERIES_COLUMN]
    try:
        params = _protocol.param_columns_of(table.schema, before="train_score")
        portfolio = "turnover" in table.schema.names and "pnl" not in table.schema.names
        expected = _protocol.walk_forward_schema(keyed, params=params, portfolio=portfolio)
        _protocol.check_schema(table.schema, expected)
    except ValueError as e:
        raise ServerError(f"unexpected walk-forward reply from the server: {e}") from None
    frame = _frame(table)
    frame.request = wf  # type: ignore[attr-defined]  # polars frames take attributes
    return frame


class Job:
    """A job on the server (:meth:`Client.submit`): work the caller does not wait for.

    ``status()`` answers ``{"job", "action", "state", "progress", "combos_done",
    "combos_total", "error"?, "code"?}``; ``state`` is ``queued``, ``running``, ``done``,
    ``failed`` or ``cancelled``. :meth:`result` waits (polling with a growing interval, a
    progress bar if asked) and fetches the result; Ctrl-C while it waits cancels the job on the
    server and raises ``KeyboardInterrupt``.
    """

    def __init__(self, client: Client, job_id: str, action: str, request: Any) -> None:
        self._client, self.id, self.action, self._request = client, job_id, action, request

    def __repr__(self) -> str:
        return f"Job({self.id!r}, action={self.action!r})"

    def _call(self, kind: str, timeout: float | None) -> dict[str, Any]:
        c = self._client
        with translated():
            results = list(
                c._flight.do_action(flight.Action(kind, _protocol.job_ref(self.id)), options=c._options(timeout))
            )
        answer: dict[str, Any] = json.loads(b"".join(r.body.to_pybytes() for r in results))
        return answer

    def status(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The job's state and progress, as the server reports them.

        Raises:
            NotFound: the job is unknown or was forgotten (``--job-ttl`` after it ended).
        """
        return self._call("status", timeout)

    @property
    def progress(self) -> float:
        """The share of its work done, 0 to 1 (from the kernel; never falls)."""
        return float(self.status()["progress"])

    @property
    def state(self) -> str:
        """``queued``, ``running``, ``done``, ``failed`` or ``cancelled``."""
        return str(self.status()["state"])

    def done(self) -> bool:
        """True once the job has ended (done, failed or cancelled)."""
        return self.state in ("done", "failed", "cancelled")

    def cancel(self, *, timeout: float | None = None) -> dict[str, Any]:
        """Stops the job (or drops its result); answers once its memory is free on the server.
        Its status after."""
        return self._call("cancel", timeout)

    def wait(self, *, timeout: float | None = None, progress: bool | None = None) -> dict[str, Any]:
        """Waits until the job has ended; its last status. ``timeout`` (seconds) cancels it on
        the server when it passes (then DeadlineExceeded); so does Ctrl-C (then
        KeyboardInterrupt)."""
        return self._wait(timeout, _bar(progress, f"{self.action} {self.id}"))

    def _wait(self, timeout: float | None, moved: Callable[[float], None] | None) -> dict[str, Any]:
        deadline = None if timeout is None else _clock() + timeout
        started, delay = _clock(), 0.001
        try:
            while True:
                left = None if deadline is None else deadline - _clock()
                if left is not None and left <= 0:
                    self.cancel(timeout=5.0)
                    raise DeadlineExceeded(f"timeout of {timeout} s passed; job {self.id} cancelled")
                try:
                    status = self.status(timeout=left)
                except DeadlineExceeded:
                    # The time ran out during the poll itself (a loaded machine): the job is
                    # cancelled all the same, never left running unseen.
                    self.cancel(timeout=5.0)
                    raise DeadlineExceeded(f"timeout of {timeout} s passed; job {self.id} cancelled") from None
                if moved is not None:
                    moved(float(status["progress"]))
                if status["state"] in ("done", "failed", "cancelled"):
                    return status
                # Polls a tenth of the time waited so far (1 ms .. 0.1 s): a short job costs a
                # few polls, a long one ten a second.
                delay = min(0.1, max(0.001, (_clock() - started) / 10))
                time.sleep(delay if left is None else min(delay, left))
        except KeyboardInterrupt:
            # Stop the work on the server, then let the interrupt go on.
            try:
                self.cancel(timeout=5.0)
            finally:
                raise

    def _run(self, timeout: float | None, moved: Callable[[float], None] | None) -> pa.Table:
        """Waits, then fetches the result as Arrow (the job's error if it failed)."""
        status = self._wait(timeout, moved)
        if status["state"] == "failed":
            raise from_status(status.get("code", "UNKNOWN"), status.get("error", "the job failed"))
        if status["state"] == "cancelled":
            raise from_status("CANCELLED", f"job {self.id} was cancelled")
        c = self._client
        with translated():
            ticket = flight.Ticket(_protocol.job_ref(self.id))
            return c._flight.do_get(ticket, options=c._options(timeout)).read_all()

    def result(
        self, *, as_arrow: bool = False, timeout: float | None = None, progress: bool | None = None
    ) -> pl.DataFrame | pa.Table:
        """Waits for the job (see :meth:`wait`) and fetches its result: what its action
        returns (a sweep's rows keep their request when the job was submitted here).

        Raises:
            the error the job failed with (InvalidRequest, ResourceExhausted, ...); Cancelled if
            it was cancelled; DeadlineExceeded past ``timeout``.
        """
        table = self._run(timeout, _bar(progress, f"{self.action} {self.id}"))
        if self.action == "sweep":
            _check(table.schema)
            if isinstance(self._request, SweepRequest):
                return _result(table, self._request, as_arrow)
        elif self.action in ("trades", "equity") and not as_arrow:
            return _reply(table, _protocol.trades_schema if self.action == "trades" else _protocol.equity_schema)
        elif self.action == "walk_forward" and isinstance(self._request, WalkForward) and not as_arrow:
            return _walk_forward_frame(table, self._request)
        return table if as_arrow else _frame(table)


class Session(_DetailCalls):
    """An open ``session`` exchange (see :meth:`Client.session`): each sweep goes out as one
    message's app_metadata and comes back as one record batch carrying the same app_metadata.

    Sweeps are answered in order, one at a time; a session is not for sharing between threads.
    A refused request (unknown dataset, bad body) ends the session with its error; open a new
    one to go on.
    """

    def __init__(
        self,
        client: Client,
        keyed: bool,
        strategy: str | dict[str, Any],
        options: flight.FlightCallOptions,
        action: str = "sweep",
    ) -> None:
        if action not in ("sweep", "trades", "equity", "walk_forward"):
            raise InvalidRequest(f"a session's action is 'sweep', 'trades', 'equity' or 'walk_forward', got {action!r}")
        self._action, self._strategy = action, strategy
        self._client_builtins = client._builtins
        command = _protocol.session_command(keyed, strategy, action)
        with translated():
            self._writer, self._reader = client._flight.do_exchange(
                flight.FlightDescriptor.for_command(command), options=options
            )
        self._open = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sweep(self, request: SweepRequest, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        table = self._call("sweep", request.body())
        _check(table.schema)
        return _result(table, request, as_arrow)

    def _walk_forward(self, wf: WalkForward, as_arrow: bool, call: Mapping[str, Any]) -> pl.DataFrame | pa.Table:
        # Answered on the stream, not as a job: no progress bar, no cancel but closing.
        table = self._call("walk_forward", wf.body())
        return table if as_arrow else _walk_forward_frame(table, wf)

    def _detail(self, action: str, request: SweepRequest, call: Mapping[str, Any]) -> pa.Table:
        return self._call(action, request.body())

    def _request(
        self, name: str, lengths: Iterable[int] | None, params: Params | None, options: Mapping[str, Any]
    ) -> SweepRequest:
        """A call's request, of the session's strategy unless it names one."""
        return _request(name, lengths, params, {"strategy": self._strategy, **options}, self._builtins)

    def _builtins(self) -> Mapping[str, _protocol.Kinds]:
        return self._client_builtins()

    def _call(self, action: str, body: bytes) -> pa.Table:
        """One message out (``body``), its reply back, on a session opened for ``action``."""
        if action != self._action:
            raise InvalidRequest(f"this session answers {self._action}; open one with action={action!r}")
        if not self._open:
            raise InvalidRequest("this session is closed; open a new one")
        try:
            with translated():
                self._writer.write_metadata(pa.py_buffer(body))
                chunk = self._reader.read_chunk()
        except StopIteration:
            self._open = False
            raise ServerError("the server ended the sweep session (shutting down?)", "CANCELLED") from None
        except BaseException:
            self._open = False
            raise
        if chunk.app_metadata is None or chunk.app_metadata.to_pybytes() != body:
            raise ServerError("sweep session reply does not match its request")
        if chunk.data is None:
            raise ServerError("sweep session reply has no record batch")
        return pa.Table.from_batches([chunk.data])

    def close(self) -> None:
        """Ends the session."""
        if not self._open:
            return
        self._open = False
        try:
            self._writer.done_writing()
            self._writer.close()
        except (flight.FlightError, pa.ArrowException, OSError):
            pass  # the server may already have ended it


@contextlib.contextmanager
def _interrupts_held() -> Iterator[Callable[[], bool]]:
    """Holds Ctrl-C (SIGINT) for the block, on the main thread (the only one it reaches);
    yields whether one came. The caller delivers it after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    came: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield lambda: bool(came)
    finally:
        signal.signal(signal.SIGINT, previous)


def _request(
    name: str,
    lengths: Iterable[int] | None,
    params: Params | None,
    options: Mapping[str, Any],
    builtins: Callable[[], Mapping[str, _protocol.Kinds]],
) -> SweepRequest:
    """A request from a sweep call's arguments, checked as far as the client can (the server
    checks every combo). ``builtins`` gives the built-ins' parameters (the server's
    ``strategies``, asked once per client), read only for a built-in by name."""
    known = SweepOptions.__annotations__
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InvalidRequest(f"unknown sweep option {unknown[0]!r}; options are {', '.join(known)}")
    try:
        strategy = wire_strategy(options.get("strategy"))
    except (TypeError, ValueError) as e:
        raise InvalidRequest(str(e)) from None
    constraint = options.get("constraint")
    stop_texts = {k: str(v) for k in _STOPS if isinstance(v := options.get(k), (str, Expr))}
    if isinstance(strategy, dict) or stop_texts:
        # Formulas (of the strategy or of a stop): the server numbers and types their
        # parameters; values go as given.
        kinds = None
    else:
        table = builtins()
        kinds = table.get(strategy or _protocol.DEFAULT_STRATEGY)
        if kinds is None:
            raise InvalidRequest(f"unknown strategy {strategy!r}; known: {', '.join(table)}")
    grid, sample = options.get("grid"), options.get("sample")
    if sum(x is not None for x in (lengths, params, grid, sample)) != 1:
        raise InvalidRequest("give exactly one of lengths=, params=, grid= and sample=")
    series, rows = options.get("series"), options.get("rows")
    if isinstance(series, str):
        raise InvalidRequest("series= takes a list of series names, not one string")
    if grid is not None:
        if not isinstance(grid, Mapping):
            raise InvalidRequest("grid= takes a mapping of parameter name to values")
        if kinds is None:
            grid = {str(n): tuple(_value(v, f"grid[{n!r}]", float) for v in vs) for n, vs in grid.items()}
        else:
            names = [n for n, _ in kinds]
            extra = sorted(set(grid) - set(names))
            if extra:
                takes = ", ".join(names)
                raise InvalidRequest(f"grid= has unknown parameter {extra[0]!r}; {strategy or 'hma_sar'} takes {takes}")
            grid = {n: tuple(_value(v, f"grid[{n!r}]", t) for v in grid[n]) for n, t in kinds if n in grid}
    fee, warmup = options.get("fee"), options.get("warmup")
    stops = {k: options.get(k) for k in ("stop_loss", "take_profit", "trailing_stop", "slippage")}
    ppy = options.get("periods_per_year")
    return SweepRequest(
        dataset=name,
        lengths=tuple(_int(v, "lengths") for v in lengths) if lengths is not None else None,
        params=_params_of(params, kinds or ()) if params is not None else None,
        fee=float(fee) if fee is not None else None,
        series=tuple(str(s) for s in series) if series is not None else None,
        rows=(_int(rows[0], "rows"), _int(rows[1], "rows")) if rows is not None else None,
        strategy=strategy,
        constraint=str(constraint) if constraint is not None else None,
        grid=grid,
        sample=_sample(sample) if sample is not None else None,
        side=options.get("side"),
        stop_loss=stop_texts.get("stop_loss", _float(stops["stop_loss"], "stop_loss")),
        take_profit=stop_texts.get("take_profit", _float(stops["take_profit"], "take_profit")),
        trailing_stop=stop_texts.get("trailing_stop", _float(stops["trailing_stop"], "trailing_stop")),
        fill=_choice(options.get("fill"), "fill", ("close", "next_open")),
        stops=_choice(options.get("stops"), "stops", ("close", "high_low")),
        slippage=_float(stops["slippage"], "slippage"),
        warmup=warmup if warmup is None or warmup == "auto" else _int(warmup, "warmup"),
        periods_per_year=ppy if ppy is None or ppy == "auto" else _float(ppy, "periods_per_year"),
        where=_bounds(options["where"]) if options.get("where") is not None else None,
        order_by=str(options["order_by"]) if options.get("order_by") is not None else None,
        descending=bool(options["descending"]) if options.get("descending") is not None else None,
        top=_int(options["top"], "top") if options.get("top") is not None else None,
        blocks=_int(options["blocks"], "blocks") if options.get("blocks") is not None else None,
        compression=_compression(options.get("compression")),
        ignore_time=_flag(options.get("ignore_time"), "ignore_time"),
    )


#: The stops a body may give as a number or a formula.
_STOPS = ("stop_loss", "take_profit", "trailing_stop")


def _float(v: Any, what: str) -> float | None:
    if v is None or (what in _STOPS and isinstance(v, (str, Expr))):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidRequest(f"{what}= takes a number, got {v!r}")
    return float(v)


def _flag(v: Any, what: str) -> bool | None:
    if v is None or v is False:
        return None
    if v is True or type(v).__name__ == "bool_":
        return True if bool(v) else None
    raise InvalidRequest(f"{what}= takes True or False, got {v!r}")


def _choice(v: Any, what: str, names: tuple[str, ...]) -> str | None:
    if v is None or v in names:
        return None if v is None else str(v)
    raise InvalidRequest(f"{what}= is one of {', '.join(repr(n) for n in names)}, got {v!r}")


def _compression(c: Any) -> str | None:
    if c is None or c in ("zstd", "lz4"):
        return None if c is None else str(c)
    raise InvalidRequest(f"compression= is 'zstd' or 'lz4', got {c!r}")


def _bounds(where: Mapping[str, Any]) -> dict[str, tuple[float | None, float | None]]:
    if not isinstance(where, Mapping):
        raise InvalidRequest("where= takes a mapping of column to (lo, hi), e.g. {'trades': (30, None)}")
    out: dict[str, tuple[float | None, float | None]] = {}
    for name, pair in where.items():
        if isinstance(pair, (str, bytes)) or len(pair) != 2:
            raise InvalidRequest(f"where[{name!r}] must be (lo, hi), each a number or None")
        lo, hi = pair
        out[str(name)] = (None if lo is None else float(lo), None if hi is None else float(hi))
    return out


def _sample(sample: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(sample, Mapping) or "ranges" not in sample:
        raise InvalidRequest('sample= takes {"n": N, "seed": S, "ranges": {name: (lo, hi), ...}}')
    ranges = {k: list(v) for k, v in sample["ranges"].items()}
    n, seed = _int(sample.get("n"), "sample n"), _int(sample.get("seed", 0), "sample seed")
    return {"n": n, "seed": seed, "ranges": ranges}


def _params_of(params: Params, kinds: Sequence[tuple[str, type]]) -> tuple[tuple[float, ...], ...]:
    kind = getattr(getattr(params, "dtype", None), "kind", None)
    if kind in ("i", "u") and getattr(params, "ndim", 0) == 2:
        # An integer numpy array's tolist() holds only Python ints: no check per value (20,000
        # combos: ~5 ms instead of ~70 ms, paid by every chunked or cluster sweep).
        return tuple(map(tuple, _rows_of(params, kinds)))
    # A tuple of the wrong length goes as it is: the server names its position and arity.
    # Without kinds (formulas), each value goes as given: an int as an int.
    last = len(kinds) - 1
    return tuple(
        tuple(_value(v, "params", kinds[min(k, last)][1] if kinds else float) for k, v in enumerate(row))
        for row in _rows_of(params, kinds)
    )


def _rows_of(params: Params, kinds: Sequence[tuple[str, type]]) -> list[Sequence[Any]]:
    # A numpy array (or anything with tolist) becomes nested lists of plain values.
    tolist = getattr(params, "tolist", None)
    rows: list[Any] = tolist() if callable(tolist) else list(params)
    if any(isinstance(r, (str, bytes)) or not isinstance(r, Iterable) for r in rows):
        names = ", ".join(n for n, _ in kinds)
        raise InvalidRequest(f"params= takes one row of values per combo, [[{names}], ...]; got {params!r:.80}")
    return [r if isinstance(r, (list, tuple)) else list(r) for r in rows]


def _value(v: Any, what: str, kind: type) -> float:
    """A parameter value: an integer where the strategy says int, a number where it says
    number (sent as given; the server checks ranges)."""
    if kind is int:
        return _int(v, what)
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        raise InvalidRequest(f"{what} must hold numbers, got {v!r}")
    try:
        # numpy's integers are Integral: they go as JSON integers, as a window needs (a float
        # 5.0 is not an integer on the wire).
        return int(v) if isinstance(v, numbers.Integral) else float(v)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{what} must hold numbers, got {v!r}") from None


def _int(v: Any, what: str) -> int:
    if type(v) is int:
        return v
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        raise InvalidRequest(f"{what} must hold integers, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise InvalidRequest(f"{what} must hold integers, got {v!r}") from None
    if not f.is_integer():
        raise InvalidRequest(f"{what} must hold integers, got {v!r}")
    return int(v)


def _check(schema: pa.Schema) -> None:
    try:
        _protocol.check_result_schema(schema)
    except ValueError as e:
        raise ServerError(f"unexpected result from the server: {e}") from None


def _combo_labels(request: SweepRequest, builtins: Mapping[str, _protocol.Kinds], combos: list[int]) -> dict[int, str]:
    """Each of ``combos`` (positions in ``request``'s combos) as ``name=value`` text, where the
    request alone says its values: hma_sar's lengths, or a built-in's tuples or grid (whose
    parameters are in the built-in's order)."""

    def text(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else f"{v:g}"

    strategy = request.strategy
    if not (strategy is None or isinstance(strategy, str)) or request.stop_formulas:
        return {}
    kinds = builtins.get(strategy or _protocol.DEFAULT_STRATEGY)
    if kinds is None:
        return {}
    names = [n for n, _ in kinds]
    out: dict[int, str] = {}
    for c in combos:
        if request.lengths is not None and c < len(request.lengths):
            out[c] = f"L={request.lengths[c]}"
        elif request.params is not None and c < len(request.params):
            out[c] = " ".join(f"{n}={text(v)}" for n, v in zip(names, request.params[c], strict=False))
        elif request.grid is not None and list(request.grid) == names[: len(request.grid)]:
            # The product, the first parameter outermost; a constraint keeps positions.
            lists = list(request.grid.values())
            rest, values = c, []
            for values_of in reversed(lists):
                values.append(values_of[rest % len(values_of)])
                rest //= len(values_of)
            if rest == 0:
                out[c] = " ".join(f"{n}={text(v)}" for n, v in zip(request.grid, reversed(values), strict=True))
    return out


def _reply(table: pa.Table, schema: Callable[[bool], pa.Schema]) -> pl.DataFrame:
    """A trades or equity reply, checked against its ``schema`` (keyed or not), or a
    portfolio's (its own columns), as polars."""
    try:
        names = table.schema.names
        if "shares" in names or "holdings" in names:
            _protocol.check_portfolio_reply(table.schema, "trades" if "shares" in names else "equity")
            return _frame(table)
        _protocol.check_schema(table.schema, schema(names[:1] == [_protocol.SERIES_COLUMN]))
    except ValueError as e:
        raise ServerError(f"unexpected reply from the server: {e}") from None
    return _frame(table)


def _result(table: pa.Table, request: SweepRequest, as_arrow: bool) -> pl.DataFrame | pa.Table:
    if as_arrow:
        meta = dict(table.schema.metadata or {})
        fields = {"dataset": request.dataset, **request.fields()}
        meta[REQUEST_METADATA] = json.dumps(fields).encode()
        return table.replace_schema_metadata(meta)
    frame = _frame(table)
    frame.request = request  # type: ignore[attr-defined]  # polars frames take attributes
    return frame


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _series_major(table: pa.Table, first: pa.Table) -> pa.Table:
    """Chunks of a keyed sweep come back series-major within each chunk; one call answers
    series-major over the whole grid. Sorts the concatenation (stably) into that order."""
    order = pc.unique(first[_protocol.SERIES_COLUMN])
    rank = pc.index_in(table[_protocol.SERIES_COLUMN], value_set=order)
    ranked = table.append_column("__rank", rank)
    return ranked.sort_by([("__rank", "ascending"), ("combo", "ascending")]).drop_columns(["__rank"])


def _rows_per_message(batch: pa.RecordBatch) -> int:
    per_row = max(1, batch.nbytes // max(batch.num_rows, 1))
    return max(1, UPLOAD_MESSAGE_BYTES // per_row)


def _universe_of(frames: Mapping[Any, Any], key: str, close: str) -> pa.Table:
    """A dict of frames by series name as one long table keyed by ``key``, series in the dict's
    order. Every frame must have the same columns and types: nothing is cast or dropped."""
    if not frames:
        raise InvalidRequest("a universe needs at least one series: the dict of frames is empty")
    tables: list[pa.Table] = []
    for name, frame in frames.items():
        if not isinstance(name, str):
            raise InvalidRequest(f"a dict of frames is keyed by series name (a str), got {name!r}")
        if type(frame).__module__.startswith("pandas") and hasattr(frame, "index"):
            # pyarrow keeps a date index as a column (its name, or `__index_level_0__`).
            table = _as_reader(pa.Table.from_pandas(frame), close).read_all()
        else:
            table = _as_reader(frame, close).read_all()
        if key in table.column_names:
            raise InvalidRequest(
                f"series {name!r} already has a column {key!r}: give key= another name for the series' names"
            )
        table = table.replace_schema_metadata(None)
        table = table.add_column(
            0, pa.field(key, pa.string(), nullable=False), pa.array([name] * len(table), pa.string())
        )
        if tables and table.schema != tables[0].schema:
            first = next(iter(frames))
            raise InvalidRequest(
                f"series {name!r} has columns {table.schema.names[1:]} of types "
                f"{[str(t) for t in table.schema.types[1:]]}, series {first!r} "
                f"{tables[0].schema.names[1:]} of {[str(t) for t in tables[0].schema.types[1:]]}: every "
                "series of a universe has the same columns and types"
            )
        tables.append(table)
    return pa.concat_tables(tables)


def _as_reader(data: Any, close: str) -> pa.RecordBatchReader:
    """Any supported input as a record batch reader with a ``close`` column."""
    if type(data).__name__ == "LazyFrame" and hasattr(data, "collect"):
        data = data.collect()
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        reader = data.to_reader()
    elif isinstance(data, pa.RecordBatchReader):
        reader = data
    elif isinstance(data, (pa.Array, pa.ChunkedArray)):
        reader = pa.Table.from_arrays([data], names=[close]).to_reader()
    elif hasattr(data, "__arrow_c_stream__"):
        try:
            reader = pa.RecordBatchReader.from_stream(data)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            # A stream of plain arrays (a polars or pandas Series): the closes themselves.
            reader = pa.Table.from_arrays([pa.chunked_array(data)], names=[close]).to_reader()
    elif hasattr(data, "__arrow_c_array__"):
        reader = pa.table({close: pa.array(data)}).to_reader()
    elif hasattr(data, "__array__") and hasattr(data, "ndim"):
        if data.ndim != 1:
            raise InvalidRequest(f"a numpy array must be 1-D closes, got shape {data.shape}")
        reader = pa.table({close: pa.array(data)}).to_reader()
    else:
        raise InvalidRequest(
            f"cannot upload {type(data).__name__}: give anything with an Arrow C stream (polars, pandas, "
            "pyarrow, duckdb), a pyarrow RecordBatch or array, or a 1-D numpy array"
        )
    schema = _renamed(reader.schema, close)
    if schema is reader.schema:
        return reader
    return pa.RecordBatchReader.from_batches(
        schema, (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in reader)
    )


def _renamed(schema: pa.Schema, close: str) -> pa.Schema:
    if close == "close" and close not in schema.names and any(n.lower() == "close" for n in schema.names):
        # yfinance's ``Close``: the server recognises it (ignoring case), as it does Open, High,
        # Low, Volume and a Date column.
        return schema
    if close not in schema.names:
        raise InvalidRequest(f"no column {close!r} in the data (columns: {schema.names})")
    if close == "close":
        return schema
    if "close" in schema.names:
        raise InvalidRequest(f"the data has both {close!r} and 'close'; rename one")
    return schema.set(schema.get_field_index(close), schema.field(close).with_name("close"))


def _info(i: flight.FlightInfo) -> DatasetInfo:
    meta = json.loads(i.app_metadata) if getattr(i, "app_metadata", b"") else {}
    path = i.descriptor.path
    if not path:
        raise ServerError("a dataset's FlightInfo without a PATH descriptor")
    return DatasetInfo(
        path[0].decode(),
        i.total_records,
        i.total_bytes,
        meta.get("version"),
        i.schema,
        meta.get("key"),
        meta.get("series"),
        tuple(meta.get("columns", ("close",))),
        dict(meta.get("unusable", {})),
    )


class _Progress:
    """Progress of a long sweep: tqdm's bar (notebook-aware) when tqdm is installed, else a
    line on stderr when it is a terminal."""

    def __init__(self, total: int, desc: str) -> None:
        self._total, self._done, self._desc = total, 0, desc
        self._bar: Any = None
        try:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="combo")
        except ImportError:
            self._tty = sys.stderr.isatty()

    def update(self, n: int) -> None:
        self._done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._tty:
            print(f"\r{self._desc}: {self._done:,}/{self._total:,} combos", end="", file=sys.stderr, flush=True)

    def to(self, done: int) -> None:
        """Moves the bar to ``done`` combos (never back)."""
        if done > self._done:
            self.update(done - self._done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._tty:
            print(file=sys.stderr)


class _Moved:
    """Moves a bar over one chunk of combos (``start`` .. ``start + combos``) as a job on it
    reports its share done."""

    def __init__(self, bar: _Progress, start: int, combos: int) -> None:
        self._bar, self._start, self._combos = bar, start, combos

    def __call__(self, fraction: float) -> None:
        self._bar.to(self._start + int(fraction * self._combos))


def _bar(progress: bool | None, desc: str) -> Callable[[float], None] | None:
    """A progress callback for one job (a bar of 100%) if ``progress`` is true."""
    if not progress:
        return None
    bar = _Progress(100, desc)

    def moved(fraction: float) -> None:
        bar.to(int(fraction * 100))
        if fraction >= 1.0:
            bar.close()

    return moved
