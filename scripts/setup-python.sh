#!/usr/bin/env bash
# Creates .venv (once) and installs what the Python package, its tests and the
# benchmark drivers need. Idempotent: safe to call before every run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${SWEEPFLIGHT_VENV:-$root/.venv}"
py="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
stamp="$venv/.sweepflight-installed"
if [ ! -f "$stamp" ] || [ "$root/client-py/pyproject.toml" -nt "$stamp" ]; then
  log="$venv/pip-install.log"
  if ! { "$venv/bin/python" -m pip install --upgrade pip &&
         "$venv/bin/python" -m pip install -e "$root/client-py[dev]"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "setup-python: pip install failed (log above)" >&2
    exit 1
  fi
  touch "$stamp"
fi
echo "$venv/bin/python"
