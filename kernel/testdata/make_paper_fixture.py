"""Checks kernel/testdata/paper-close.arrow, the pinned paper series, against its formula.

    python kernel/testdata/make_paper_fixture.py --check  # fail if the pinned file drifted
    python kernel/testdata/make_paper_fixture.py          # rewrite it from this machine's numpy

One float64 column `close`, 150,000 rows: `100 * exp(cumsum(normal(0, 0.0008)))` from numpy's
default_rng(42). numpy's `exp` differs by CPU (its AVX-512 path and the others disagree by 1-2 ulp
on ~4% of these values), and the published figures are those of the AVX-512 values, so the file is
pinned (the Rust gate and `sweepflight.paper.PINNED`, a symlink to it, assert its sha256) and
the check accepts the formula on this machine within 2 ulp. Rewriting it only makes sense on a
machine whose numpy `exp` takes the AVX-512 path.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import sys

import numpy as np
import pyarrow as pa

from sweepflight import paper

HERE = pathlib.Path(__file__).resolve().parent
FIXTURE = HERE / "paper-close.arrow"


#: Largest ulp distance between the pinned values and this machine's numpy `exp`.
MAX_ULPS = 2


def table() -> pa.Table:
    return pa.table({"close": pa.array(paper.generate(), type=pa.float64())})


def values_sha256(t: pa.Table) -> str:
    return hashlib.sha256(t.column("close").to_numpy().astype("<f8").tobytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    args = ap.parse_args()
    want = table()
    if args.check:
        got = pa.ipc.open_file(FIXTURE).read_all()
        if values_sha256(got) != paper.SHA256 or got.schema != want.schema:
            print(f"{FIXTURE}: sha256 {values_sha256(got)}, pinned {paper.SHA256}", file=sys.stderr)
            return 1
        pinned = got.column("close").to_numpy().view(np.int64)
        ulps = int(np.abs(pinned - want.column("close").to_numpy().view(np.int64)).max())
        if ulps > MAX_ULPS:
            print(f"{FIXTURE} is {ulps} ulp from the formula (at most {MAX_ULPS})", file=sys.stderr)
            return 1
        print(f"{FIXTURE.name}: pinned values sha256 {paper.SHA256}, formula on this CPU within {ulps} ulp")
        return 0
    with pa.OSFile(str(FIXTURE), "wb") as sink, pa.ipc.new_file(sink, want.schema) as writer:
        writer.write_table(want)
    print(f"wrote {FIXTURE} ({len(want)} rows), values sha256 {values_sha256(want)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
