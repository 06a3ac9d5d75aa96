#!/usr/bin/env bash
# Creates target/bt-venv (once) with backtesting.py, the outside check of benches/study.py's bars
# section (its README example on its own GOOG data). Apart from .venv and the vectorbt
# environment: each peer pins what it needs. Idempotent; prints the environment's python.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/bt-venv"
py="${PYTHON:-python3}"
if [ ! -f "$venv/.installed" ]; then
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "backtesting==0.6.6" >&2
  touch "$venv/.installed"
fi
echo "$venv/bin/python"
