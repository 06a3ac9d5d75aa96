"""Fixtures: the real sweepflight-server binary on 127.0.0.1 port 0 or a Unix socket."""

from __future__ import annotations

import os
import pathlib
import subprocess
import tempfile
from typing import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
