"""The wire contract as this client writes and reads it.

The one definition is the Rust crate ``sweepflight-protocol``; its golden file
``protocol/golden/protocol.json`` holds the bodies, descriptors, commands and result schema it
produces, and ``tests/test_protocol_golden.py`` checks that the functions here write and expect
the same.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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
#: The columns a result always has.
REQUIRED_COLUMNS = 9
#: The six windows of a combo, in wire order.
WINDOWS = ("half", "full", "sqrt", "p3", "p2", "p")


def sweep_body(
    dataset: str,
    *,
    lengths: Sequence[int] | None = None,
    params: Sequence[Sequence[int]] | None = None,
    fee: float | None = None,
    series: Sequence[str] | None = None,
    rows: tuple[int, int] | None = None,
) -> bytes:
    """The JSON body of a ``sweep`` action (and of a ``session`` message)."""
    body: dict[str, Any] = {"dataset": dataset}
    if lengths is not None:
        body["lengths"] = list(lengths)
    if params is not None:
        body["params"] = [list(p) for p in params]
    if fee is not None:
        body["fee"] = fee
    if series is not None:
        body["series"] = list(series)
    if rows is not None:
        body["rows"] = [rows[0], rows[1]]
    return json.dumps(body, separators=(",", ":")).encode()


def put_descriptor(name: str, key: str | None = None) -> flight.FlightDescriptor:
    """A DoPut's descriptor: PATH ``[name]``, or for a keyed universe CMD ``{"dataset", "key"}``."""
    if key is None:
        return flight.FlightDescriptor.for_path(name)
    return flight.FlightDescriptor.for_command(json.dumps({"dataset": name, "key": key}).encode())


def result_schema(keyed: bool) -> pa.Schema:
    """The result schema the server sends: ``series`` first when ``keyed``."""
    fields = [pa.field(n, t, nullable=False) for n, t in RESULT_COLUMNS]
    if keyed:
        fields.insert(0, pa.field(SERIES_COLUMN, pa.string(), nullable=False))
    return pa.schema(fields)


def check_result_schema(schema: pa.Schema) -> bool:
    """Checks a result's schema against the contract; True if it is keyed.

    Raises:
        ValueError: naming the first column that is missing or of another type.
    """
    names = schema.names
    keyed = bool(names) and names[0] == SERIES_COLUMN
    rest = list(schema)[1:] if keyed else list(schema)
    for i, (name, typ) in enumerate(RESULT_COLUMNS):
        if i < len(rest) and rest[i].name == name:
            if rest[i].type != typ:
                raise ValueError(f"result column {name!r} has type {rest[i].type}, expected {typ}")
        elif i < REQUIRED_COLUMNS:
            raise ValueError(f"result column {i + int(keyed)} should be {name!r} ({typ})")
    return keyed
