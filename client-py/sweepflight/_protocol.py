"""The wire contract as this client writes and reads it.

The one definition is the Rust crate ``sweepflight-protocol``; its golden file
``protocol/golden/protocol.json`` holds the bodies, descriptors, commands and result schema it
produces, and ``tests/test_protocol_golden.py`` checks that the functions here write and expect
the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

#: The DoExchange command that opens a ``session`` for unkeyed datasets.
SESSION_COMMAND = b'{"op": "session"}'
#: The same for keyed datasets (replies start with the ``series`` column).
KEYED_SESSION_COMMAND = b'{"op":"session","keyed":true}'
#: The first column of a keyed dataset's result.
SERIES_COLUMN = "series"
#: Every column of a v1 result, in order, with its Arrow type; the first nine are the contract's.
RESULT_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("combo", pa.int64()),
    ("half", pa.int64()),
    ("full", pa.int64()),
    ("sqrt", pa.int64()),
    ("p3", pa.int64()),
    ("p2", pa.int64()),
    ("p", pa.int64()),
    ("pnl", pa.float64()),
    ("trades", pa.int64()),
    ("wins", pa.int64()),
    ("win_rate", pa.float64()),
    ("max_drawdown", pa.float64()),
)
#: The six windows of a combo, in wire order.
WINDOWS = ("half", "full", "sqrt", "p3", "p2", "p")
#: The parameter columns of v1's result (hma_sar's windows), fixed by the v1 contract.
_HMA_SAR_PARAMS = list(RESULT_COLUMNS[1:7])
#: A built-in strategy's parameters in wire order (the order of ``params`` tuples, ``grid``
#: and result columns), each an ``int`` (a window: int64 column) or a ``float`` (float64). The
#: server's ``strategies`` action is the one source (the kernel's table):
#: :func:`builtins_of` reads its reply.
Kinds = tuple[tuple[str, type], ...]


def builtins_of(reply: Sequence[Mapping[str, Any]]) -> dict[str, Kinds]:
    """Each built-in's parameters, by name, from the ``strategies`` action's reply."""
    return {s["name"]: tuple((p["name"], int if p["type"] == "int" else float) for p in s["params"]) for s in reply}


def param_types(kinds: Kinds) -> list[tuple[str, pa.DataType]]:
    """The result columns of parameters ``kinds``: int64 windows, float64 numbers."""
    return [(n, pa.int64() if t is int else pa.float64()) for n, t in kinds]


#: The v1.2 metric columns after ``max_drawdown``: nullable float64 (null where undefined).
V12_METRIC_COLUMNS = (
    "avg_trade",
    "best_trade",
    "worst_trade",
    "profit_factor",
    "exposure",
    "avg_bars",
    "sharpe",
    "sortino",
    "sqn",
)
#: The last column of every reply with metrics (v1.3): the compounded return in percent.
TOTAL_RETURN_COLUMN = "total_return"
#: The column ``blocks`` adds to a sweep result.
BLOCK_PNL_COLUMN = "block_pnl"
#: The strategy of a body that names none.
DEFAULT_STRATEGY = "hma_sar"
#: The metric columns after the parameters, in order.
METRIC_COLUMNS = RESULT_COLUMNS[7:]


def sweep_body(dataset: str, **fields: Any) -> bytes:
    """The JSON body of a ``sweep`` action (and of a ``session`` message): ``dataset`` and each
    field that is not None (``strategy``, ``lengths`` | ``params`` | ``grid`` | ``sample``,
    ``fee``, ``side``, ``stop_loss``, ``take_profit``, ``trailing_stop``, ``fill``, ``stops``,
    ``slippage``, ``warmup``, ``series``, ``rows``...), as the Rust crate writes them. A
    ``strategy`` of hma_sar is left out, as v1 bodies have none."""
    body: dict[str, Any] = {"dataset": dataset}
    for name, value in fields.items():
        if value is None or (name == "strategy" and value == DEFAULT_STRATEGY):
            continue
        if name in ("lengths", "series", "rows"):
            value = list(value)
        elif name == "params":
            value = [list(p) for p in value]
        elif name in ("grid", "where"):
            value = {k: list(v) for k, v in value.items()}
        body[name] = value
    return json.dumps(body, separators=(",", ":")).encode()


def walk_forward_body(dataset: str, folds: Any, select: tuple[str, bool] = ("pnl", True), **fields: Any) -> bytes:
    """The JSON body of a ``walk_forward`` action: the sweep body of ``fields`` plus ``folds``
    (``{"train", "test", "step"?, "anchored"?}`` or a list of ``[train_start, train_end,
    test_start, test_end]``) and ``select`` (column, descending), as the Rust crate writes them
    (``step`` only when it is not ``test``, ``anchored`` only when true, ``select`` always with
    both keys)."""
    body = json.loads(sweep_body(dataset, **fields))
    if isinstance(folds, dict):
        spelled: Any = {"train": folds["train"], "test": folds["test"]}
        if folds.get("step") is not None and folds["step"] != folds["test"]:
            spelled["step"] = folds["step"]
        if folds.get("anchored"):
            spelled["anchored"] = True
    else:
        spelled = [list(f) for f in folds]
    body["folds"] = spelled
    body["select"] = {"by": select[0], "descending": bool(select[1])}
    return json.dumps(body, separators=(",", ":")).encode()


def submit_body(action: str, body: bytes) -> bytes:
    """A ``submit`` body: the action's body with ``"action"`` (left out for ``sweep``)."""
    if action == "sweep":
        return body
    fields = json.loads(body)
    fields["action"] = action
    return json.dumps(fields, separators=(",", ":")).encode()


def job_ref(job: str) -> bytes:
    """``{"job": ID}``: the body of ``status`` and ``cancel``, and a job's DoGet ticket."""
    return json.dumps({"job": job}, separators=(",", ":")).encode()


def walk_forward_schema(
    keyed: bool, params: list[tuple[str, pa.DataType]] | None = None, portfolio: bool = False
) -> pa.Schema:
    """The ``walk_forward`` reply: [``series``], ``fold``, ``train_start``, ``train_end``,
    ``test_start``, ``test_end``, ``combo`` and the parameters (``params``; hma_sar's windows
    by default),
    ``train_score``, then the test run's metrics (``pnl`` .. ``sqn``, or a portfolio's
    :data:`PORTFOLIO_METRIC_COLUMNS`); nullable from ``combo`` on."""
    fields: list[pa.Field[Any]] = [pa.field(n, pa.int64(), nullable=False) for n in WALK_FORWARD_FOLD_COLUMNS]
    columns = [RESULT_COLUMNS[0], *(params if params is not None else _HMA_SAR_PARAMS)]
    fields += [pa.field(n, t, nullable=True) for n, t in columns]
    fields.append(pa.field("train_score", pa.float64(), nullable=True))
    if portfolio:
        fields += [pa.field(n, t, nullable=True) for n, t in PORTFOLIO_METRIC_COLUMNS]
        return pa.schema(fields)
    fields += [pa.field(n, t, nullable=True) for n, t in METRIC_COLUMNS]
    fields += [pa.field(n, pa.float64(), nullable=True) for n in V12_METRIC_COLUMNS]
    fields.append(pa.field(TOTAL_RETURN_COLUMN, pa.float64(), nullable=True))
    if keyed:
        fields.insert(0, pa.field(SERIES_COLUMN, pa.string(), nullable=False))
    return pa.schema(fields)


#: The fold columns that start a walk-forward reply (after ``series``).
WALK_FORWARD_FOLD_COLUMNS = ("fold", "train_start", "train_end", "test_start", "test_end")


def session_command(
    keyed: bool = False, strategy: str | dict[str, Any] = DEFAULT_STRATEGY, action: str = "sweep"
) -> bytes:
    """The DoExchange command that opens a ``session`` for ``strategy`` (keyed datasets if
    ``keyed``) answering each message with ``action`` (``sweep``, ``trades``, ``equity`` or
    ``walk_forward``)."""
    if strategy == DEFAULT_STRATEGY and action == "sweep":
        return KEYED_SESSION_COMMAND if keyed else SESSION_COMMAND
    command: dict[str, Any] = {"op": "session"}
    if keyed:
        command["keyed"] = True
    if strategy != DEFAULT_STRATEGY:
        command["strategy"] = strategy
    if action != "sweep":
        command["action"] = action
    return json.dumps(command, separators=(",", ":")).encode()


def put_descriptor(name: str, key: str | None = None) -> flight.FlightDescriptor:
    """A DoPut's descriptor: PATH ``[name]``, or for a keyed universe CMD ``{"dataset", "key"}``."""
    if key is None:
        return flight.FlightDescriptor.for_path(name)
    return flight.FlightDescriptor.for_command(json.dumps({"dataset": name, "key": key}).encode())


def result_schema(keyed: bool, params: list[tuple[str, pa.DataType]] | None = None) -> pa.Schema:
    """The result schema the server sends for a strategy of parameter columns ``params``
    (:func:`param_types`; hma_sar's windows by default): ``series`` first when ``keyed``,
    ``combo``, the parameters, the metrics, ``total_return``."""
    columns = [RESULT_COLUMNS[0], *(params if params is not None else _HMA_SAR_PARAMS), *METRIC_COLUMNS]
    fields = [pa.field(n, t, nullable=False) for n, t in columns]
    fields += [pa.field(n, pa.float64(), nullable=True) for n in V12_METRIC_COLUMNS]
    fields.append(pa.field(TOTAL_RETURN_COLUMN, pa.float64(), nullable=False))
    if keyed:
        fields.insert(0, pa.field(SERIES_COLUMN, pa.string(), nullable=False))
    return pa.schema(fields)


def sweep_schema(
    keyed: bool, params: list[tuple[str, pa.DataType]] | None = None, blocks: int | None = None
) -> pa.Schema:
    """:func:`result_schema` with the ``block_pnl`` column before ``total_return`` when
    ``blocks`` is given."""
    schema = result_schema(keyed, params)
    if blocks is None:
        return schema
    block = pa.field(BLOCK_PNL_COLUMN, pa.list_(pa.field("item", pa.float64(), nullable=False), blocks), nullable=False)
    return schema.insert(len(schema) - 1, block)


def trades_schema(keyed: bool) -> pa.Schema:
    """The ``trades`` action's reply: [``series``], ``combo``, ``trade``, ``side``,
    ``entry_row``, ``exit_row``, ``entry_price``, ``exit_price``, ``pnl``, ``exit_reason``
    (v1.3; ``entry_time`` and ``exit_time`` follow on a dataset with a usable time column)."""
    i, f = pa.int64(), pa.float64()
    columns: list[tuple[str, pa.DataType]] = [("combo", i), ("trade", i), ("side", pa.int8())]
    columns += [("entry_row", i), ("exit_row", i), ("entry_price", f), ("exit_price", f), ("pnl", f)]
    columns.append((EXIT_REASON_COLUMN, pa.string()))
    return _keyed(keyed, columns)


#: Why a trade closed (v1.3): ``signal``, ``exit``, ``stop_loss``, ``trailing_stop``,
#: ``take_profit`` or ``end``.
EXIT_REASON_COLUMN = "exit_reason"


def equity_schema(keyed: bool) -> pa.Schema:
    """The ``equity`` action's reply: [``series``], ``combo``, ``row``, ``position``, ``equity``
    (then ``time`` on a dataset with a usable time column, v1.3)."""
    return _keyed(
        keyed, [("combo", pa.int64()), ("row", pa.int64()), ("position", pa.int8()), ("equity", pa.float64())]
    )


def check_portfolio_reply(schema: pa.Schema, kind: str) -> None:
    """Checks a portfolio's ``trades`` or ``equity`` reply (protocol v1.4): ``combo``, ``row``,
    ``time`` (where the dataset has one, its type), then the trades' [``series``], ``shares``,
    ``price``, ``value``, ``fee`` or the equity's ``equity``, ``cash``, ``holdings``.

    Raises:
        ValueError: naming the first column that differs.
    """
    i: pa.DataType = pa.int64()
    f: pa.DataType = pa.float64()
    rest: list[tuple[str, pa.DataType]] = (
        [(SERIES_COLUMN, pa.string()), ("shares", f), ("price", f), ("value", f), ("fee", f)]
        if kind == "trades"
        else [("equity", f), ("cash", f), ("holdings", i)]
    )
    if kind == "trades" and SERIES_COLUMN not in schema.names:
        rest = rest[1:]
    columns: list[tuple[str, pa.DataType]] = [("combo", i), ("row", i)]
    if "time" in schema.names:
        columns.append(("time", schema.field("time").type))
    check_schema(schema, pa.schema(columns + rest))


def _keyed(keyed: bool, columns: Sequence[tuple[str, pa.DataType]]) -> pa.Schema:
    fields = [pa.field(n, t, nullable=False) for n, t in columns]
    if keyed:
        fields.insert(0, pa.field(SERIES_COLUMN, pa.string(), nullable=False))
    return pa.schema(fields)


def check_schema(schema: pa.Schema, expected: pa.Schema) -> None:
    """Checks a reply's columns and types against ``expected`` (nullability aside).

    Raises:
        ValueError: naming the first column that differs.
    """
    got = [(f.name, f.type) for f in schema]
    for i, want in enumerate(expected):
        if i >= len(got) or got[i] != (want.name, want.type):
            have = f"{got[i][0]} {got[i][1]}" if i < len(got) else "nothing"
            raise ValueError(f"column {i} should be {want.name} {want.type}, got {have}")


def param_columns_of(schema: pa.Schema, before: str = "pnl") -> list[tuple[str, pa.DataType]]:
    """The parameter columns of a reply: those between ``combo`` and ``before`` (the reply
    carries its strategy's parameters, built-in or formulas, so nothing is guessed)."""
    names = schema.names
    if "combo" not in names or before not in names:
        return []
    return [(f.name, f.type) for f in list(schema)[names.index("combo") + 1 : names.index(before)]]


#: A portfolio's metric columns (protocol v1.4), in order, after its parameters.
PORTFOLIO_METRIC_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("total_return", pa.float64()),
    ("annual_return", pa.float64()),
    ("volatility", pa.float64()),
    ("sharpe", pa.float64()),
    ("sortino", pa.float64()),
    ("max_drawdown", pa.float64()),
    ("turnover", pa.float64()),
    ("fees", pa.float64()),
    ("rebalances", pa.int64()),
    ("avg_holdings", pa.float64()),
]


def check_result_schema(schema: pa.Schema) -> bool:
    """Checks a result's schema against the contract; True if it is keyed. A portfolio's result
    (one row per combo: ``combo``, its parameters, then :data:`PORTFOLIO_METRIC_COLUMNS`) is
    never keyed.

    Raises:
        ValueError: naming the first column that is missing or of another type.
    """
    names = schema.names
    if "pnl" not in names and "turnover" in names:
        params = param_columns_of(schema, before="total_return")
        check_schema(schema, pa.schema([RESULT_COLUMNS[0], *params, *PORTFOLIO_METRIC_COLUMNS]))
        return False
    keyed = bool(names) and names[0] == SERIES_COLUMN
    rest = list(schema)[1:] if keyed else list(schema)
    params = param_columns_of(schema)
    for name, typ in params:
        if typ not in (pa.int64(), pa.float64()):
            raise ValueError(f"parameter column {name!r} has type {typ}, expected int64 or float64")
    expected = [RESULT_COLUMNS[0], *params, *METRIC_COLUMNS]
    expected += [(n, pa.float64()) for n in V12_METRIC_COLUMNS]
    required = 1 + len(params) + 2
    for i, (name, typ) in enumerate(expected):
        if i < len(rest) and rest[i].name == name:
            if rest[i].type != typ:
                raise ValueError(f"result column {name!r} has type {typ}, expected {typ}")
        elif i < required:
            raise ValueError(f"result column {i + int(keyed)} should be {name!r} ({typ})")
    return keyed
