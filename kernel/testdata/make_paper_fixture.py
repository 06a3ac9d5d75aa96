"""Writes kernel/testdata/paper-close.arrow: the paper series as an Arrow IPC file.

    python kernel/testdata/make_paper_fixture.py          # regenerate
    python kernel/testdata/make_paper_fixture.py --check  # fail if the committed file drifted

One float64 column `close`, 150,000 rows, from sweepflight.paper.series() (numpy default_rng(42)).
The Rust equivalence gate asserts the sha256 of the values' little-endian bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import sys

import pyarrow as pa

from sweepflight import paper

HERE = pathlib.Path(__file__).resolve().parent
FIXTURE = HERE / "paper-close.arrow"


def table() -> pa.Table:
    return pa.table({"close": pa.array(paper.series(), type=pa.float64())})


def values_sha256(t: pa.Table) -> str:
    return hashlib.sha256(t.column("close").to_numpy().astype("<f8").tobytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = ap.parse_args()
    want = table()
    if args.check:
        got = pa.ipc.open_file(FIXTURE).read_all()
        if not got.equals(want):
            print(f"{FIXTURE} differs from the generated series", file=sys.stderr)
            return 1
        print(f"{FIXTURE.name}: up to date, values sha256 {values_sha256(got)}")
        return 0
    with pa.OSFile(str(FIXTURE), "wb") as sink, pa.ipc.new_file(sink, want.schema) as writer:
        writer.write_table(want)
    print(f"wrote {FIXTURE} ({len(want)} rows), values sha256 {values_sha256(want)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
