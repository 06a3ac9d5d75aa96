#!/usr/bin/env bash
# The main job: build the server, start it with its defaults, push the paper series from
# Python, run the 80-combo sweep as one params-only call, print results and timings, stop.
# Each step prints a line with its time; cargo's build is shown as it goes, the Python
# environment installs beside it (its log named on screen).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
started=$SECONDS
epoch=$(date +%s)
say() { printf '[demo %4ss] %s\n' $((SECONDS - started)) "$*"; }

mkdir -p target
say "python environment: creating .venv and installing the client in the background (log: target/demo-python.log)"
scripts/setup-python.sh >target/demo-python.out 2>target/demo-python.log &
python_setup=$!
say "server: cargo build --release -p sweepflight-server (a few minutes the first time on 2 cores; seconds after)"
cargo build --release -p sweepflight-server
say "server: built"
if ! wait "$python_setup"; then
  cat target/demo-python.log >&2
  say "python environment: failed (above)"
  exit 1
fi
py=$(cat target/demo-python.out)
say "python environment: ready ($py)"
"$py" scripts/demo.py --server target/release/sweepflight-server --started "$epoch" "$@"
say "done"
