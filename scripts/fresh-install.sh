#!/usr/bin/env bash
# What a newcomer does: a fresh venv with nothing but `pip install ./client-py`, then the
# README's example, which starts a real server of its own (the debug build, on a free port). Fails if the
# package needs anything it does not declare, or if the README example breaks.
# Usage: scripts/fresh-install.sh [SERVER_BINARY]   (default target/debug/sweepflight-server)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
server=$(realpath "${1:-$root/target/debug/sweepflight-server}")
work=$(mktemp -d)
cleanup() {
  rm -rf "$work"
}
trap cleanup EXIT

"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$root/client-py"

# The README's runnable blocks as a newcomer runs them: `sweepflight.local()` starts its own
# server, here this binary (a newcomer's comes from the sweepflight-server wheel); run outside
# the repository so only the installed package can be imported.
awk '/^```python runnable/{f=1;next} /^```$/{f=0} f' "$root/README.md" >"$work/example.py"
grep -q "sweepflight.local()" "$work/example.py" || { echo "fresh-install: no README example found" >&2; exit 1; }
(cd "$work" && SWEEPFLIGHT_SERVER_BIN="$server" "$work/venv/bin/python" example.py)
echo "fresh-install: installed packages: $("$work/venv/bin/python" -m pip list --format freeze \
  --disable-pip-version-check | grep -v -e '^pip=' -e '^setuptools=' | tr '\n' ' ')"
