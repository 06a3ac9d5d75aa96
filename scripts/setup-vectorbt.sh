#!/usr/bin/env bash
# Creates target/vbt-venv (once) with vectorbt and its Rust engine, the peer of benches/study.py's
# strategies section. Apart from .venv: vectorbt pins its own numpy and pandas. Idempotent;
# prints the environment's python.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/vbt-venv"
py="${PYTHON:-python3}"
if [ ! -f "$venv/.installed" ]; then
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "vectorbt[rust]==1.2.0" >&2
  touch "$venv/.installed"
fi
echo "$venv/bin/python"
