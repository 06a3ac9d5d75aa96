#!/usr/bin/env bash
# Creates target/bt-venv (once) with backtesting.py, the outside check of benches/study.py's bars
# section (its README example on its own GOOG data). Idempotent; prints the environment's python.
set -euo pipefail
exec "$(dirname "$0")/peer-venv.sh" bt-venv "backtesting==0.6.6"
