"""Starts sweepflight-server, pushes the paper series, sweeps the 80 paper combos, prints.

Run through scripts/demo.sh, which builds the server and the Python environment first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.flight as flight

from sweepflight import paper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--server", required=True, help="path of the sweepflight-server binary")
    ap.add_argument("--listen", default=None, help="address to serve on (default: the server's own, 127.0.0.1:8815)")
    args = ap.parse_args()

    cmd = [args.server] + (["--listen", args.listen] if args.listen else [])
    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line:
            raise SystemExit(f"server exited with code {server.wait()}")
        uri = line.split()[-1]
        print(f"server: {uri}")
        client = flight.connect(uri)

        close = paper.series()
        table = pa.table({"close": close})
        t0 = time.perf_counter()
        writer, reader = client.do_put(flight.FlightDescriptor.for_path("paper"), table.schema)
        writer.write_table(table)
        writer.done_writing()
        put = json.loads(reader.read().to_pybytes())
        writer.close()
        t_put = time.perf_counter() - t0
        print(f"push: {put['rows']:,} bars ({put['bytes'] / 1e6:.1f} MB) in {t_put * 1e3:.1f} ms, "
              f"stored durably as version {put['version']} (./sweepflight-data)")

        body = json.dumps({"dataset": "paper", "lengths": paper.lengths()}).encode()
        timings = []
        for _ in range(3):
            t0 = time.perf_counter()
            results = client.do_action(flight.Action("sweep", body))
            result = pa.ipc.open_stream(b"".join(r.body.to_pybytes() for r in results)).read_all()
            timings.append(time.perf_counter() - t0)
        print(f"sweep request: {len(body)} bytes of JSON; reply: {result.num_rows} rows")
        print(f"sweep (80 combos x 150,000 bars): first {timings[0] * 1e3:.1f} ms, "
              f"then {timings[1] * 1e3:.1f} / {timings[2] * 1e3:.1f} ms (WMA cache warm)")

        df = pl.from_arrow(result)
        with pl.Config(tbl_rows=12, tbl_cols=14, tbl_width_chars=140):
            print(df.head(10))
            best = df.sort("pnl", descending=True).head(1)
            print(f"best combo: L = {best['full'][0]}, PnL {best['pnl'][0]:.2f} pp on {best['trades'][0]} trades")

        ref = np.genfromtxt("kernel/testdata/reference-80.csv", delimiter=",", names=True)
        ok = (df["trades"].to_numpy() == ref["trades"]).all() and np.abs(df["pnl"].to_numpy() - ref["pnl_pct_pts"]).max() <= 1e-6
        print(f"equivalence gate vs the numba reference (80 combos): {'PASS' if ok else 'FAIL'}; "
              f"combo 0 = {df['pnl'][0]:.2f} / {df['trades'][0]:,} trades")
        return 0 if ok else 1
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
