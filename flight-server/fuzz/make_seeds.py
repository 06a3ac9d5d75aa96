"""Writes the fuzz targets' seed inputs into seeds/ (run once; the seeds are committed).

put_stream inputs are Flight messages framed as in sweepflight_server::fuzzing::frame:
u16 LE header length, u32 LE body length, header (IPC flatbuffer), body.
"""

import pathlib
import struct

import pyarrow as pa

HERE = pathlib.Path(__file__).parent


def framed(table: pa.Table, chunk: int) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=chunk)
    out = b""
    for m in pa.ipc.MessageReader.open_stream(sink.getvalue()):
        header = m.metadata.to_pybytes()
        body = m.body.to_pybytes() if m.body is not None else b""
        out += struct.pack("<HI", len(header), len(body)) + header + body
    return out


def main() -> None:
    puts = {
        "float64": pa.table({"close": [100.0, 101.5, 99.25, 102.0, 103.0]}),
        "int_with_time": pa.table({"t": pa.array([1, 2, 3], pa.int64()), "close": pa.array([5, 6, 7], pa.int32())}),
        "float32_nan": pa.table({"close": pa.array([1.0, float("nan")], pa.float32())}),
        "nulls": pa.table({"close": pa.array([1.0, None, 3.0])}),
    }
    for name, table in puts.items():
        (HERE / "seeds" / "put_stream" / name).write_bytes(framed(table, 2))
    requests = {
        "lengths": b'{"dataset": "paper", "lengths": [6, 8, 10]}',
        "params": b'{"dataset": "p", "params": [[1, 2, 3, 4, 5, 6]], "fee": 0.001}',
        "exchange": b'{"op": "sweep", "lengths": [6]}',
        "session": b'{"op": "session"}',
        "ticket": b'{"kind": "dataset", "v": 1, "name": "paper"}',
        "name": b"paper.v2_x-1",
        # Execution options (protocol v1.3): the target runs these on a few OHLC bars.
        "options": b'{"dataset": "d", "strategy": "sma_cross", "grid": {"fast": [3, 5], "slow": [8, 20]}, '
        b'"fill": "next_open", "stops": "high_low", "trailing_stop": 0.02, "stop_loss": 0.05, '
        b'"take_profit": 0.04, "slippage": 0.001, "side": "long"}',
        "stop_formula": b'{"dataset": "d", "strategy": "sma_cross", "grid": {"fast": [3], "slow": [8], "m": [1, 2]}, '
        b'"stop_loss": "m * atr(14) / close", "trailing_stop": "0.01 * m", "fill": "next_open"}',
        "formula_options": b'{"dataset": "d", "strategy": {"long": "close > sma(close, n)", "exit_long": "close < low"}, '
        b'"grid": {"n": [3, 9]}, "stops": "high_low", "take_profit": 0.01, "warmup": "auto"}',
    }
    for name, body in requests.items():
        (HERE / "seeds" / "requests" / name).write_bytes(body)


if __name__ == "__main__":
    main()
