"""``sweepflight.local()`` and ``sweepflight.connect()`` without an address: a private
in-memory server from the installed (or checkout-built) binary, on a free port, stopped when
the client closes and when the interpreter exits, however the client was left."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

import sweepflight
from sweepflight import paper
from sweepflight import server as server_module
from sweepflight.server import server_binary

from .conftest import Server, run_fresh_python
from .conftest import server_binary as built


@pytest.fixture(autouse=True)
def the_test_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEPFLIGHT_SERVER_BIN", str(built()))
    monkeypatch.delenv("SWEEPFLIGHT_URI", raising=False)


def gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_local_runs_the_paper_sweep_and_stops_with_the_client() -> None:
    with sweepflight.local(threads=2) as sf:
        assert sf.uri.startswith("grpc://127.0.0.1:")
        sf.put("paper", paper.series())
        df = sf.sweep("paper", lengths=paper.lengths())
        assert df.height == 80 and df["trades"][0] == 57_029
        pid = sf._local.proc.pid
    assert gone(pid)


def test_connect_without_an_address_starts_a_private_server_or_reads_the_environment(server: Server) -> None:
    a, b = sweepflight.connect(), sweepflight.connect()
    try:
        # Two private servers: a dataset put on one is not on the other.
        a.put("mine", paper.series()[:1000])
        assert a.uri != b.uri
        assert [d.name for d in b.datasets()] == []
    finally:
        a.close()
        b.close()
    os.environ["SWEEPFLIGHT_URI"] = server.uri
    try:
        with sweepflight.connect() as c:
            assert c.uri == server.uri and c._local is None
    finally:
        del os.environ["SWEEPFLIGHT_URI"]


def test_the_server_stops_when_the_interpreter_exits_without_close() -> None:
    out = run_fresh_python(
        "import sweepflight; sf = sweepflight.local(); print(sf._local.proc.pid)",
        grpc_experiments=None,
        timeout=60,
    )
    assert gone(int(out.strip()))


def test_no_binary_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv("SWEEPFLIGHT_SERVER_BIN")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(server_module, "_CHECKOUT", pathlib.Path("/nonexistent"))
    monkeypatch.setattr("sysconfig.get_path", lambda _: "/nonexistent")
    with pytest.raises(
        FileNotFoundError, match=r"pip install ./flight-server .* sweepflight.connect\('grpc://HOST:PORT'\)"
    ):
        server_binary()
    with pytest.raises(FileNotFoundError):
        sweepflight.local()
    monkeypatch.setenv("SWEEPFLIGHT_SERVER_BIN", "relative/nowhere/sweepflight-server")
    with pytest.raises(FileNotFoundError, match="no sweepflight-server binary at 'relative/nowhere"):
        sweepflight.local()
