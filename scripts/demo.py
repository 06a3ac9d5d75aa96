"""The main job: start sweepflight-server with its defaults, push the paper series, sweep the
80 paper combos as one params-only call, print the results and the equivalence check.

Run through scripts/demo.sh, which builds the server and the Python environment first.
"""

from __future__ import annotations

import argparse
import csv
import os
import pathlib
import subprocess
import sys
import time

import polars as pl

import sweepflight
from sweepflight import paper

REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "kernel" / "testdata" / "reference-80.csv"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--server", required=True, help="path of the sweepflight-server binary")
    ap.add_argument("--started", type=float, default=None, help="the Unix time the demo began (for its total)")
    args = ap.parse_args()

    env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    # The server's defaults: 127.0.0.1:8815, datasets persisted under ./sweepflight-data.
    server = subprocess.Popen([args.server], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line:
            raise SystemExit(f"server exited with code {server.wait()}")
        uri = line.split()[-1]
        print(f"server: {uri}")
        with sweepflight.connect(uri) as sf:
            t0 = time.perf_counter()
            put = sf.put("paper", paper.series())
            t_put = time.perf_counter() - t0
            print(f"push: {put.rows:,} bars ({put.bytes / 1e6:.1f} MB) in {t_put * 1e3:.1f} ms, version {put.version}")

            timings = []
            for _ in range(3):
                t0 = time.perf_counter()
                df = sf.sweep("paper", lengths=paper.lengths())
                timings.append(time.perf_counter() - t0)
            print(
                f"sweep (80 combos x 150,000 bars, one params-only call): first {timings[0] * 1e3:.1f} ms, "
                f"then {timings[1] * 1e3:.1f} / {timings[2] * 1e3:.1f} ms (cache warm)"
            )

        shown = df.select("combo", "full", "pnl", "trades", "win_rate", "max_drawdown", "sharpe", "total_return")
        with pl.Config(tbl_rows=10, tbl_cols=10, tbl_width_chars=120, float_precision=3):
            print(shown.head(8))
        best = df.sort("pnl", descending=True).row(0, named=True)
        print(f"best combo: L = {best['full']}, PnL {best['pnl']:.2f} pp on {best['trades']:,} trades")
        print(
            "What this shows: the paper series is a random walk, so no rule can profit on it; every\n"
            "combo trades often (1,700 to 57,000 times here) and pays the 0.09% round-trip fee each\n"
            "time, so every PnL is negative (pnl sums the trades' returns in percentage points).\n"
            "total_return compounds them as a book that reinvests everything: thousands of small\n"
            "losses compound to -100% (wiped out). The point is the call itself: 80 combos over 150,000\n"
            "bars, bit-exact with the study's numba kernel, in one params-only call to data already\n"
            "on the server. Real bars, your own strategies: README.md and docs/strategies.md."
        )

        with REFERENCE.open() as f:
            ref = list(csv.DictReader(f))
        ok = all(
            int(r["trades"]) == t and abs(float(r["pnl_pct_pts"]) - p) <= 1e-6
            for r, t, p in zip(ref, df["trades"], df["pnl"], strict=True)
        )
        print(
            f"equivalence check against the numba reference (80 combos): {'PASS' if ok else 'FAIL'}; "
            f"combo 0 = {df['pnl'][0]:.2f} pp / {df['trades'][0]:,} trades"
        )
        if args.started is not None:
            print(f"from the start of scripts/demo.sh to this result: {time.time() - args.started:.0f} s")
        return 0 if ok else 1
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
