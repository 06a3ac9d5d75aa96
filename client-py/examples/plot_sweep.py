"""Notebook-style: push the paper series, sweep the paper grid, plot PnL and trades against L.

    .venv/bin/python client-py/examples/plot_sweep.py [--uri grpc://127.0.0.1:8815] [--out sweep.png]

Needs a running sweepflight-server (scripts/demo.sh builds one: target/release/sweepflight-server).
"""

import argparse

import sweepflight
from sweepflight import paper

ap = argparse.ArgumentParser()
ap.add_argument("--uri", default=sweepflight.DEFAULT_URI)
ap.add_argument("--out", default="sweep.png")
args = ap.parse_args()

with sweepflight.connect(args.uri) as sf:
    sf.put("paper", paper.series())
    df = sf.sweep("paper", lengths=paper.lengths())

print(df.sort("pnl", descending=True).head(5))
sweepflight.plot_sweep(df, path=args.out, title="HMA/HMA3 stop-and-reverse on the paper series, 80 lengths")
print(f"wrote {args.out}")
