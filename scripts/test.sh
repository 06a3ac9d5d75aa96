#!/usr/bin/env bash
# Runs every test of the project: formatting and lints, the Rust test suite (including the
# equivalence gate and the property tests), the fixture drift check, and the Python tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

step() { printf '\n== %s\n' "$*"; }

step "python environment"
py=$(scripts/setup-python.sh)

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings

step "cargo test"
cargo test --workspace --all-features

step "fixture drift check"
"$py" kernel/testdata/make_paper_fixture.py --check

step "pytest"
"$py" -m pytest -q client-py/tests

step "docs/benchmarks.md is the rendering of docs/benchmarks.json"
"$py" benches/study.py --check-doc

step "benchmark smoke test (benches/study.py --quick: builds release, gates every result)"
"$py" benches/study.py --quick > target/study-quick.log 2>&1 || { cat target/study-quick.log; exit 1; }
tail -n 4 target/study-quick.log
