"""The peer: the Flight server a research team would write instead of running sweepflight.

    python benches/peer.py grpc+unix:///tmp/peer.sock     # prints "peer listening on URI"

A pyarrow ``FlightServerBase`` that keeps each upload in a dict, serves it back with DoGet,
and answers the same ``sweep`` action body as sweepflight (``{"dataset", "lengths" | "params",
"fee"?}``) with the same result columns, computed by the numba reference kernel (single
thread, the paper's rung; it passes the equivalence gate). Nothing more: no validation beyond
what pyarrow does, no persistence, no cache. ``echo`` replies with its body, for the raw-call
yardstick.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "client-py"))
from sweepflight import paper, reference


class Peer(flight.FlightServerBase):
    """Uploads in a dict; the numba reference behind a ``sweep`` action."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.tables: dict[str, pa.Table] = {}

    def do_put(self, context: Any, descriptor: flight.FlightDescriptor, reader: Any, writer: Any) -> None:
        name = descriptor.path[0].decode()
        table = reader.read_all()
        self.tables[name] = table
        meta = {"dataset": name, "rows": table.num_rows, "bytes": table.nbytes, "version": 1}
        writer.write(pa.py_buffer(json.dumps(meta).encode()))

    def get_flight_info(self, context: Any, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        name = descriptor.path[0].decode()
        table = self.tables[name]
        endpoint = flight.FlightEndpoint(name.encode(), [])
        return flight.FlightInfo(table.schema, descriptor, [endpoint], table.num_rows, table.nbytes)

    def do_get(self, context: Any, ticket: flight.Ticket) -> flight.RecordBatchStream:
        return flight.RecordBatchStream(self.tables[ticket.ticket.decode()])

    def do_action(self, context: Any, action: flight.Action) -> list[bytes]:
        body = action.body.to_pybytes()
        if action.type == "echo":
            return [body]
        if action.type != "sweep":
            raise flight.FlightServerError(f"unknown action {action.type}")
        req = json.loads(body)
        close = np.ascontiguousarray(self.tables[req["dataset"]].column("close").to_numpy(), dtype=np.float64)
        if "lengths" in req:
            params = reference.params_for(req["lengths"])
        else:
            params = np.asarray(req["params"], dtype=np.int64).reshape(-1, 6)
        fee = float(req.get("fee", reference.DEFAULT_FEE))
        pnl, trades = reference.sweep(close, params, fee)
        n = len(params)
        table = pa.table(
            {
                "combo": pa.array(np.arange(n, dtype=np.int64)),
                **{w: pa.array(params[:, i]) for i, w in enumerate(("half", "full", "sqrt", "p3", "p2", "p"))},
                "pnl": pa.array(pnl),
                "trades": pa.array(trades),
            }
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return [sink.getvalue().to_pybytes()]


def main() -> None:
    location = sys.argv[1] if len(sys.argv) > 1 else "grpc://127.0.0.1:0"
    server = Peer(location)
    # Compile the numba kernel before announcing: the first call must not pay for it.
    reference.sweep(paper.series(1_000).to_numpy(), reference.params_for([6]))
    uri = location if server.port == 0 or "unix" in location else f"grpc://127.0.0.1:{server.port}"
    print(f"peer listening on {uri}", flush=True)
    server.serve()


if __name__ == "__main__":
    main()
