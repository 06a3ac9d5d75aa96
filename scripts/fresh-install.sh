#!/usr/bin/env bash
# What a newcomer does: a fresh venv with nothing but `pip install ./client-py`, then the
# README's example, against a real server (the debug build, on a free port). Fails if the
# package needs anything it does not declare, or if the README example breaks.
# Usage: scripts/fresh-install.sh [SERVER_BINARY]   (default target/debug/sweepflight-server)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
server=${1:-$root/target/debug/sweepflight-server}
work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$root/client-py"

"$server" --in-memory --listen 127.0.0.1:0 >"$work/server.out" 2>"$work/server.log" &
pid=$!
for _ in $(seq 100); do
  uri=$(grep -o 'grpc://[0-9.:]*' "$work/server.out" || true)
  [ -n "$uri" ] && break
  sleep 0.1
done
[ -n "$uri" ] || { cat "$work/server.log" >&2; echo "fresh-install: the server did not start" >&2; exit 1; }

# The README's runnable block, pointed at this server; run outside the repository so only
# the installed package can be imported.
awk '/^```python runnable/{f=1;next} /^```$/{f=0} f' "$root/README.md" |
  sed "s#grpc://127.0.0.1:8815#$uri#" >"$work/example.py"
grep -q "$uri" "$work/example.py" || { echo "fresh-install: no README example found" >&2; exit 1; }
(cd "$work" && "$work/venv/bin/python" example.py)
echo "fresh-install: installed packages: $("$work/venv/bin/python" -m pip list --format freeze \
  --disable-pip-version-check | grep -v -e '^pip=' -e '^setuptools=' | tr '\n' ' ')"
