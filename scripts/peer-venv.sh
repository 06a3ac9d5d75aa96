#!/usr/bin/env bash
# peer-venv.sh NAME SPEC: creates target/NAME (once) with `pip install SPEC`, a benchmark peer's
# own environment, apart from .venv (each peer pins its own numpy and pandas). Idempotent;
# prints the environment's python. setup-vectorbt.sh and setup-backtesting.sh name theirs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/$1"
py="${PYTHON:-python3}"
if [ ! -f "$venv/.installed" ]; then
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "$2" >&2
  touch "$venv/.installed"
fi
echo "$venv/bin/python"
