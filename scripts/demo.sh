#!/usr/bin/env bash
# The main job: build the server, start it with its defaults, push the paper series from
# Python, run the 80-combo sweep as one params-only call, print results and timings, stop.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=$(scripts/setup-python.sh)
cargo build --release --quiet -p sweepflight-server
exec "$py" scripts/demo.py --server target/release/sweepflight-server "$@"
