"""Times the 80-combo paper sweep, numba vs the Rust kernel, side by side in one run.

    .venv/bin/python benches/kernel_vs_numba.py [--runs 5] [--json out.json]

numba (single thread, the paper's rung; and prange on all cores) and the Rust kernel (1 thread
and all threads, via the `kernel-timer` binary) each sweep the paper series `--runs` times after
one untimed warm-up; every implementation's result is checked against the reference CSV before
its timings count. Prints medians, p50/p99 with sample counts, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

from sweepflight import paper, reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "kernel" / "testdata" / "reference-80.csv"


def expected() -> tuple[np.ndarray, np.ndarray]:
    data = np.genfromtxt(REFERENCE, delimiter=",", names=True)
    return data["pnl_pct_pts"], data["trades"].astype(np.int64)


def gate(pnl: np.ndarray, trades: np.ndarray, label: str) -> None:
    want_pnl, want_trades = expected()
    if not (np.array_equal(trades, want_trades) and np.all(np.abs(pnl - want_pnl) <= 1e-6)):
        raise SystemExit(f"{label}: equivalence gate FAILED")


def time_numba(runs: int, parallel: bool) -> list[float]:
    close = paper.series()
    params = reference.params_for(paper.lengths())
    pnl, trades = reference.sweep(close, params, parallel=parallel)  # warm-up (JIT) + gate
    gate(pnl, trades, f"numba parallel={parallel}")
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        reference.sweep(close, params, parallel=parallel)
        out.append(time.perf_counter() - t0)
    return out


def time_rust(runs: int) -> dict[str, list[float]]:
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "-p", "sweepflight-benches", "--bin", "kernel-timer"],
        cwd=ROOT, check=True,
    )
    # kernel-timer gates its own result against the same CSV before timing.
    res = subprocess.run(
        [str(ROOT / "target" / "release" / "kernel-timer"), "--runs", str(runs), "--threads", "1", "--threads", "0"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )
    return json.loads(res.stdout)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=pathlib.Path)
    args = ap.parse_args()

    rust = time_rust(args.runs)
    all_threads = [k for k in rust if k != "threads=1"][0]
    rows = {
        "numba 1 thread": time_numba(args.runs, parallel=False),
        f"numba prange ({os.cpu_count()} cores)": time_numba(args.runs, parallel=True),
        "rust 1 thread": rust["threads=1"],
        f"rust {all_threads}": rust[all_threads],
    }
    base = statistics.median(rows["numba 1 thread"])
    print(f"{'implementation':<28} {'n':>3} {'median s':>9} {'p50 s':>8} {'p99 s':>8} {'speed-up vs numba 1t':>21}")
    for name, xs in rows.items():
        med = statistics.median(xs)
        print(f"{name:<28} {len(xs):>3} {med:>9.4f} {pct(xs, .5):>8.4f} {pct(xs, .99):>8.4f} {base / med:>20.1f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
