"""Fixtures: the real sweepflight-server binary on 127.0.0.1 port 0 or a Unix socket."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import numpy as np
import pytest

from sweepflight import paper, reference

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def paper_reference() -> tuple[np.ndarray, np.ndarray]:
    """The numba reference's (pnl, trades) for the 80 paper combos, computed once a session:
    every gate compares against it, and each run of the reference takes seconds."""
    pnl, trades = reference.sweep(paper.series(), reference.params_for(paper.lengths()))
    return pnl, trades


def server_binary() -> pathlib.Path:
    """The server binary: $SWEEPFLIGHT_SERVER_BIN, else target/debug (built if missing)."""
    env = os.environ.get("SWEEPFLIGHT_SERVER_BIN")
    if env:
        return pathlib.Path(env)
    path = ROOT / "target" / "debug" / "sweepflight-server"
    if not path.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "sweepflight-server"], cwd=ROOT, check=True)
    return path


class Server:
    """A running server process; `uri` is what it printed on its first stdout line."""

    def __init__(self, *args: str) -> None:
        # Tests that do not ask for a data directory must not write one into the cwd.
        storage = [] if "--data-dir" in args else ["--in-memory"]
        self.proc = subprocess.Popen(
            [str(server_binary()), *args, *storage],
            stdout=subprocess.PIPE,
            env={**os.environ, "RUST_LOG": "warn"},
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"server exited with {self.proc.wait()}")
        self.uri = line.split()[-1]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run_fresh_python(code: str, *args: str, grpc_experiments: str | None, timeout: float) -> str:
    """Runs `code` in a fresh interpreter (gRPC reads its configuration once per process) with
    GRPC_EXPERIMENTS set to `grpc_experiments` (None: unset, so the package picks); returns its
    stdout and fails the test if it fails or outlives `timeout` seconds."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    if grpc_experiments is not None:
        env["GRPC_EXPERIMENTS"] = grpc_experiments
    env["PYTHONPATH"] = str(ROOT / "client-py")
    try:
        out = subprocess.run(
            [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"still running after {timeout} s; stdout: {e.stdout!r}")
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server("--listen", "127.0.0.1:0")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def unix_server() -> Iterator[Server]:
    with tempfile.TemporaryDirectory() as d:
        s = Server("--unix", os.path.join(d, "sweepflight.sock"))
        yield s
        s.stop()
