#!/usr/bin/env bash
# Runs every test of the project: formatting and lints (Rust and Python), the Rust test suite
# (the equivalence gate, the property tests, the server's integration suites against in-process
# servers and the binary), the golden and fixture drift checks, the Python tests against the
# real server (Ray cluster tests included), the README example in a fresh venv holding only
# the client package, and a benchmark smoke test. Each step prints its
# time; CI runs exactly this (.ci/run).
set -euo pipefail
# Steps that run in the background stop with the script if it fails before waiting for them.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
# A CI run builds once from clean: incremental artifacts would only cost time and disk.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

started=$SECONDS
last=$SECONDS
step() {
  printf '\n== %s   (previous step %ss, total %ss)\n' "$*" $((SECONDS - last)) $((SECONDS - started))
  last=$SECONDS
}

step "python environment (in the background, beside fmt and clippy) and cargo fmt --check"
# Installing the Python packages mostly waits on unpacking, so it runs while clippy keeps the
# cores busy: on a clean 2-core CI machine that hides most of the minute it takes.
mkdir -p target
scripts/setup-python.sh > target/setup-python.out 2> target/setup-python.err &
python_setup=$!
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings

step "ruff (lint and format) and mypy (strict, the package)"
wait "$python_setup" || { cat target/setup-python.err >&2; exit 1; }
py=$(cat target/setup-python.out)
"$py" -m ruff check client-py benches scripts kernel/testdata
"$py" -m ruff format --check client-py benches scripts kernel/testdata
(cd client-py && "$py" -m mypy)

step "cargo build (every binary and test target in one feature resolution, so nothing is built twice)"
# Binaries and tests together: the timing tools the smoke test runs get the same dependency
# features as the test build and reuse it (built apart they would rebuild ~40 crates).
cargo build --workspace --all-features --bins --tests

step "cargo test (the debug binaries are reused by the Python tests and the smoke test)"
cargo test --workspace --all-features

step "fixture drift check"
"$py" kernel/testdata/make_paper_fixture.py --check

step "server wheel (maturin, dev profile) building in the background, beside pytest without the Ray tests"
# The wheel rebuilds the server crate in its own feature resolution (a minute and a half of
# compiling on 2 cores); only the Ray tests need it, so the other Python tests run meanwhile.
"$py" -m maturin build --quiet --profile dev -m flight-server/Cargo.toml -o target/wheels \
  > target/wheel.log 2>&1 &
wheel=$!
"$py" -m pytest -q client-py/tests --ignore=client-py/tests/test_ray.py

step "pytest: the Ray cluster tests, with the server from the wheel installed into the environment"
wait "$wheel" || { cat target/wheel.log >&2; exit 1; }
"$py" -m pip install --quiet --force-reinstall --no-deps target/wheels/sweepflight_server-*.whl
"$py" -m pytest -q client-py/tests/test_ray.py

step "docs/benchmarks.md is the rendering of docs/benchmarks.json"
"$py" benches/study.py --check-doc

step "benchmark smoke test (benches/study.py --quick on the debug build: gates every result), beside a fresh venv with only pip install ./client-py running the README example"
# The fresh install mostly waits on pip; it runs beside the smoke test, which checks results,
# not times.
scripts/fresh-install.sh target/debug/sweepflight-server > target/fresh-install.log 2>&1 &
fresh_install=$!
"$py" benches/study.py --quick --profile debug --no-build > target/study-quick.log 2>&1 || { cat target/study-quick.log; exit 1; }
tail -n 4 target/study-quick.log
wait "$fresh_install" || { cat target/fresh-install.log >&2; exit 1; }
tail -n 2 target/fresh-install.log

step "done"
