"""The sweepflight client: push a series once, sweep it with parameters only.

    import sweepflight

    with sweepflight.connect("grpc://127.0.0.1:8815") as sf:
        sf.put("paper", sweepflight.paper.series())
        df = sf.sweep("paper", lengths=sweepflight.paper.lengths())

It speaks the wire contract (docs/protocol.md) with pyarrow.flight; anything it does can be done
with plain pyarrow too.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_str
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from .errors import Cancelled, InvalidRequest, ServerError, Unavailable, translated

#: The paper's fee: 0.09% per round trip.
DEFAULT_FEE = 0.0009
#: The server's default address.
DEFAULT_URI = "grpc://127.0.0.1:8815"
#: Target size of one uploaded message; well under the server's 64 MiB default limit.
UPLOAD_MESSAGE_BYTES = 8 << 20
#: Combos per sweep call when a grid is split into chunks.
DEFAULT_CHUNK_COMBOS = 50_000
#: A sweep of more chunks than this shows a progress bar unless told otherwise.
PROGRESS_MIN_CHUNKS = 4
#: Sweeps of at most this many combos go as one message on an open ``session`` exchange: for
#: small sweeps a DoAction's per-call setup costs more than the sweep (docs/benchmarks.md).
SESSION_MAX_COMBOS = 4096


@dataclass(frozen=True)
class PutSummary:
    """What the server stored."""

    dataset: str
    rows: int
    bytes: int
    version: int


@dataclass(frozen=True)
class DatasetInfo:
    """A stored dataset, as ListFlights / GetFlightInfo describe it."""

    name: str
    rows: int
    bytes: int
    version: int | None
    schema: pa.Schema


def connect(
    uri: str = DEFAULT_URI,
    token: str | None = None,
    tls_root_certs: bytes | str | None = None,
) -> "Client":
    """Connects to a sweepflight server.

    Args:
        uri: ``grpc://HOST:PORT``, ``grpc+unix:///path/to.sock`` or ``grpc+tls://HOST:PORT``.
        token: sent as ``authorization: Bearer TOKEN`` on every call, for servers started
            with ``--token``.
        tls_root_certs: PEM bytes (or a path to a PEM file) of the CA to trust for
            ``grpc+tls://``.
    """
    return Client(uri, token=token, tls_root_certs=tls_root_certs)


class Client:
    """A connection to one server. Usable as a context manager; methods are not thread-safe
    with respect to one another's progress bars, but the underlying Flight client is."""

    def __init__(self, uri: str = DEFAULT_URI, token: str | None = None, tls_root_certs: bytes | str | None = None) -> None:
        if isinstance(tls_root_certs, str):
            with open(tls_root_certs, "rb") as f:
                tls_root_certs = f.read()
        kwargs: dict[str, Any] = {}
        if tls_root_certs is not None:
            kwargs["tls_root_certs"] = tls_root_certs
        self.uri = uri
        with translated():
            self._flight = flight.FlightClient(uri, **kwargs)
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self._options = flight.FlightCallOptions(headers=headers)
        self._session: _Session | None = None
        self._session_lock = threading.Lock()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection."""
        with self._session_lock:
            self._end_session()
        self._flight.close()

    def put(
        self,
        name: str,
        data: Any,
        close: str = "close",
        chunk_rows: int | None = None,
    ) -> PutSummary:
        """Stores ``data`` as dataset ``name``, replacing any dataset of that name.

        Args:
            name: 1-128 characters from ``A-Z a-z 0-9 . _ -``.
            data: a polars DataFrame or LazyFrame, a pandas DataFrame or Series, a pyarrow
                Table, RecordBatch or RecordBatchReader, or a 1-D numpy array (the closes).
            close: the column of ``data`` holding the close price; it is stored as ``close``.
            chunk_rows: rows per uploaded message; by default messages of about 8 MiB.

        Raises:
            InvalidRequest: bad name, no such column, bad values (the server names the row).
            ResourceExhausted: the dataset is larger than the server allows.
        """
        schema, batches = _as_batches(data, close)
        descriptor = flight.FlightDescriptor.for_path(name)
        with translated():
            writer, reader = self._flight.do_put(descriptor, schema, options=self._options)
            try:
                for batch in batches:
                    rows = chunk_rows or _rows_per_message(batch)
                    for start in range(0, max(batch.num_rows, 1), rows):
                        writer.write_batch(batch.slice(start, rows))
                writer.done_writing()
                meta = json.loads(reader.read().to_pybytes())
            finally:
                writer.close()
        return PutSummary(meta["dataset"], meta["rows"], meta["bytes"], meta["version"])

    def sweep(
        self,
        name: str,
        lengths: Iterable[int] | None = None,
        params: Sequence[Sequence[int]] | np.ndarray | None = None,
        fee: float = DEFAULT_FEE,
        progress: bool | None = None,
        as_arrow: bool = False,
        chunk_combos: int = DEFAULT_CHUNK_COMBOS,
    ) -> pl.DataFrame | pa.Table:
        """Runs every combo on dataset ``name``; one row per combo, in request order.

        Give exactly one of ``lengths`` (each ``L`` expands by the paper rule) or ``params``
        (rows ``[half, full, sqrt, p3, p2, p]``). Grids larger than ``chunk_combos`` go as
        several calls in sequence, with a tqdm progress bar if ``progress`` is true (or, when
        it is None, if there are more than a few chunks); the result equals one big call.

        Raises:
            InvalidRequest: both or neither of lengths/params, bad values, bad fee.
            NotFound: no dataset called ``name``.
        """
        key, items = _combos(lengths, params)
        chunk_combos = max(1, int(chunk_combos))
        if len(items) <= chunk_combos and not progress:
            # The common case, kept short: for a params-only sweep the client's own Python is
            # a fair share of the round trip.
            result = self._sweep_call(name, key, items, fee)
        else:
            result = self._sweep_chunks(name, key, items, fee, chunk_combos, progress)
        return result if as_arrow else pl.from_arrow(result)

    def _sweep_chunks(
        self, name: str, key: str, items: list, fee: float, chunk_combos: int, progress: bool | None
    ) -> pa.Table:
        """A grid as calls of ``chunk_combos`` each, stitched into one table."""
        starts = range(0, len(items), chunk_combos)
        show = progress if progress is not None else len(starts) > PROGRESS_MIN_CHUNKS
        bar = _progress(len(items), name) if show else None
        tables = []
        try:
            for start in starts or [0]:
                table = self._sweep_call(name, key, items[start : start + chunk_combos], fee)
                if start:
                    table = table.set_column(0, table.schema.field(0), pc.add(table["combo"], start))
                tables.append(table)
                if bar is not None:
                    bar.update(table.num_rows)
        finally:
            if bar is not None:
                bar.close()
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def _sweep_call(self, name: str, key: str, items: list, fee: float) -> pa.Table:
        """One sweep call: ``items`` are the ``lengths`` or ``params`` (``key``) of its combos."""
        encoded = _sweep_body(name, key, items, fee)
        if len(items) <= SESSION_MAX_COMBOS:
            return self._session_sweep(encoded)
        action = flight.Action("sweep", encoded)
        with translated():
            results = self._flight.do_action(action, options=self._options)
            stream = b"".join(r.body.to_pybytes() for r in results)
        return pa.ipc.open_stream(stream).read_all()

    def _session_sweep(self, body: bytes) -> pa.Table:
        """One sweep as a message on the open session, opening one if needed.

        The server ends a session on a bad request (its status is raised here) and at shutdown
        (the stream just ends); either way the next call opens a fresh one. A session found
        ended before this request was answered is reopened once.
        """
        with self._session_lock:
            for attempt in range(2):
                reused = self._session is not None
                if self._session is None:
                    with translated():
                        self._session = _Session(self._flight, self._options)
                try:
                    with translated():
                        batch = self._session.sweep(body)
                except (Unavailable, Cancelled):
                    # A session left over from before a server restart; sweeps are idempotent.
                    self._end_session()
                    if reused and not attempt:
                        continue
                    raise
                except BaseException:
                    self._end_session()
                    raise
                if batch is not None:
                    return pa.Table.from_batches([batch])
                self._end_session()
        raise ServerError("the server ended the sweep session without an answer")

    def _end_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def datasets(self) -> list[DatasetInfo]:
        """Every stored dataset, by name."""
        with translated():
            return [_info(i) for i in self._flight.list_flights(options=self._options)]

    def info(self, name: str) -> DatasetInfo:
        """One dataset's description.

        Raises:
            NotFound: no dataset called ``name``.
        """
        with translated():
            return _info(self._flight.get_flight_info(flight.FlightDescriptor.for_path(name), options=self._options))

    def get(self, name: str, as_arrow: bool = False) -> pl.DataFrame | pa.Table:
        """The stored rows of dataset ``name`` (a polars DataFrame, or a pyarrow Table).

        Raises:
            NotFound: no dataset called ``name``.
        """
        with translated():
            info = self._flight.get_flight_info(flight.FlightDescriptor.for_path(name), options=self._options)
            table = self._flight.do_get(info.endpoints[0].ticket, options=self._options).read_all()
        return table if as_arrow else pl.from_arrow(table)

    def drop(self, name: str) -> dict:
        """Removes dataset ``name``; returns ``{"dataset": name, "version": v}``.

        Raises:
            NotFound: no dataset called ``name``.
        """
        with translated():
            results = list(self._flight.do_action(flight.Action("drop", name.encode()), options=self._options))
        return json.loads(results[0].body.to_pybytes()) if results else {"dataset": name}

    def echo(self, data: bytes) -> bytes:
        """Sends ``data`` and returns what the server sent back (a round-trip probe)."""
        with translated():
            results = list(self._flight.do_action(flight.Action("echo", data), options=self._options))
        return b"".join(r.body.to_pybytes() for r in results)


def _rows_per_message(batch: pa.RecordBatch) -> int:
    per_row = max(1, batch.nbytes // max(batch.num_rows, 1))
    return max(1, UPLOAD_MESSAGE_BYTES // per_row)


def _as_batches(data: Any, close: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Any supported input as a schema and a stream of record batches with a `close` column."""
    if isinstance(data, pl.LazyFrame):
        data = data.collect()
    if isinstance(data, pl.DataFrame):
        data = data.to_arrow()
    elif isinstance(data, np.ndarray):
        if data.ndim != 1:
            raise InvalidRequest(f"a numpy array must be 1-D closes, got shape {data.shape}")
        data = pa.table({close: data})
    elif type(data).__module__.startswith("pandas"):
        import pandas as pd

        if isinstance(data, pd.Series):
            data = pa.table({close: pa.Array.from_pandas(data)})
        elif isinstance(data, pd.DataFrame):
            data = pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        schema = _renamed(data.schema, close)
        return schema, (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in data.to_batches())
    if isinstance(data, pa.RecordBatchReader):
        schema = _renamed(data.schema, close)
        return schema, (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in data)
    raise InvalidRequest(
        f"cannot upload {type(data).__name__}: give a polars/pandas frame, a pyarrow Table, "
        "RecordBatch or RecordBatchReader, a pandas Series or a 1-D numpy array"
    )


def _renamed(schema: pa.Schema, close: str) -> pa.Schema:
    if close not in schema.names:
        raise InvalidRequest(f"no column {close!r} in the data (columns: {schema.names})")
    if close == "close":
        return schema
    if "close" in schema.names:
        raise InvalidRequest(f"the data has both {close!r} and 'close'; rename one")
    return schema.set(schema.get_field_index(close), schema.field(close).with_name("close"))


class _Session:
    """An open ``session`` exchange: each sweep body goes out as one message's app_metadata and
    comes back as one record batch carrying the same app_metadata."""

    def __init__(self, client: flight.FlightClient, options: flight.FlightCallOptions) -> None:
        descriptor = flight.FlightDescriptor.for_command(b'{"op": "session"}')
        self._writer, self._reader = client.do_exchange(descriptor, options=options)

    def sweep(self, body: bytes) -> pa.RecordBatch | None:
        """The reply to ``body``, or None if the server had ended the session."""
        try:
            self._writer.write_metadata(pa.py_buffer(body))
            chunk = self._reader.read_chunk()
        except StopIteration:
            return None
        if chunk.app_metadata is None or chunk.app_metadata.to_pybytes() != body:
            raise ServerError("sweep session reply does not match its request")
        return chunk.data

    def close(self) -> None:
        try:
            self._writer.done_writing()
            self._writer.close()
        except (flight.FlightError, pa.ArrowException, OSError):
            pass  # the server may already have ended it


def _combos(lengths: Iterable[int] | None, params: Any) -> tuple[str, list]:
    if (lengths is None) == (params is None):
        raise InvalidRequest("give exactly one of lengths= and params=")
    if lengths is not None:
        return "lengths", [_int(v, "lengths") for v in lengths]
    rows = np.asarray(params).tolist() if isinstance(params, np.ndarray) else [list(p) for p in params]
    return "params", [[_int(v, "params") for v in row] for row in rows]


def _sweep_body(name: str, key: str, items: list, fee: float) -> bytes:
    """The `sweep` body: the same bytes as ``json.dumps`` of the request, which it falls back to
    for anything but the usual types.

    Written out directly because a params-only round trip is short enough for the client's own
    Python to be a fair share of it: with this (and plain ints passed straight through `_int`) a
    one-combo ``sweep`` took 5-15 us less, 53-199 us instead of 58-214 us, in four A/B runs on
    the benchmark VM, though ``json.dumps`` costs ~3 us in a warm loop.
    """
    if type(name) is str and type(fee) is float and math.isfinite(fee):
        # `items` are plain ints (or lists of them) from `_combos`: their repr is their JSON.
        return f'{{"dataset": {_json_str(name)}, "{key}": {items!r}, "fee": {fee!r}}}'.encode()
    return json.dumps({"dataset": name, key: items, "fee": fee}).encode()


def _int(v: Any, what: str) -> int:
    if type(v) is int:
        return v
    if isinstance(v, (bool, np.bool_)) or not float(v).is_integer() or math.isinf(float(v)):
        raise InvalidRequest(f"{what} must hold integers, got {v!r}")
    return int(v)


def _info(i: flight.FlightInfo) -> DatasetInfo:
    meta = json.loads(i.app_metadata) if getattr(i, "app_metadata", b"") else {}
    return DatasetInfo(i.descriptor.path[0].decode(), i.total_records, i.total_bytes, meta.get("version"), i.schema)


def _progress(total: int, name: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"sweep {name}", unit="combo")
