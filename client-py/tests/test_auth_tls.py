"""--token and grpc+tls with plain pyarrow and with the sweepflight client."""

from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pyarrow.flight as flight
import pytest

import sweepflight

from .conftest import Server


def make_certs(d: pathlib.Path) -> None:
    """A test CA and a server certificate for localhost / 127.0.0.1, with openssl."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)  # noqa: E731
    run(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=sweepflight-test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory) -> tuple[Server, pathlib.Path]:
    d = tmp_path_factory.mktemp("tls")
    make_certs(d)
    s = Server(
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        str(d / "server.pem"),
        "--tls-key",
        str(d / "server.key"),
        "--token",
        "s3cret",
    )
    yield s, d
    s.stop()


@pytest.fixture(scope="module")
def token_server() -> Server:
    s = Server("--listen", "127.0.0.1:0", "--token", "s3cret")
    yield s
    s.stop()


def test_plain_pyarrow_basic_token_handshake(token_server: Server) -> None:
    client = flight.connect(token_server.uri)
    with pytest.raises(flight.FlightUnauthenticatedError):
        list(client.list_flights())
    with pytest.raises(flight.FlightUnauthenticatedError):
        client.authenticate_basic_token(b"user", b"wrong")
    header = client.authenticate_basic_token(b"user", b"s3cret")
    assert header == (b"authorization", b"Bearer s3cret")
    options = flight.FlightCallOptions(headers=[header])
    assert list(client.list_flights(options=options)) == []
    assert next(iter(client.do_action(flight.Action("echo", b"ok"), options=options))).body.to_pybytes() == b"ok"


def test_client_token_and_unauthenticated(token_server: Server) -> None:
    with sweepflight.connect(token_server.uri, token="s3cret") as sf:
        sf.put("x", np.array([100.0, 101.0, 99.5]))
        assert sf.sweep("x", lengths=[1]).height == 1
    with sweepflight.connect(token_server.uri) as anon:
        with pytest.raises(sweepflight.Unauthenticated) as e:
            anon.datasets()
        assert e.value.code == "UNAUTHENTICATED"
    with (
        sweepflight.connect(token_server.uri, token="wrong") as bad,
        pytest.raises(sweepflight.Unauthenticated, match="invalid token"),
    ):
        bad.echo(b"x")


def test_tls(tls_server) -> None:
    server, d = tls_server
    assert server.uri.startswith("grpc+tls://127.0.0.1:")
    ca = (d / "ca.pem").read_bytes()
    plain = flight.connect(server.uri, tls_root_certs=ca)
    header = plain.authenticate_basic_token(b"user", b"s3cret")
    assert list(plain.list_flights(options=flight.FlightCallOptions(headers=[header]))) == []
    with sweepflight.connect(server.uri, token="s3cret", tls_root_certs=str(d / "ca.pem")) as sf:
        sf.put("paper", sweepflight.paper.series())
        df = sf.sweep("paper", lengths=[6])
        assert df["trades"][0] == 57_029
    # Without trusting the CA the connection fails.
    with pytest.raises(sweepflight.SweepflightError):
        sweepflight.connect(server.uri, token="s3cret").datasets()
