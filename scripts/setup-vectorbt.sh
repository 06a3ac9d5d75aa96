#!/usr/bin/env bash
# Creates target/vbt-venv (once) with vectorbt and its Rust engine, the peer of benches/study.py's
# strategies section. Apart from .venv: vectorbt pins its own numpy and pandas. Idempotent;
# prints the environment's python.
set -euo pipefail
exec "$(dirname "$0")/peer-venv.sh" vbt-venv "vectorbt[rust]==1.2.0"
