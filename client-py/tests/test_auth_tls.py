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


def test_the_operations_recipe_works_from_python_and_the_cli(tmp_path: pathlib.Path) -> None:
    """docs/operations.md's TLS recipe, run as written (the openssl lines), then a server on
    its files and both clients trusting ca.pem."""
    import os
    import re

    from .conftest import ROOT

    text = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"## Auth and TLS\n\n```sh\n(.*?)```", text, flags=re.S)
    assert block is not None
    script = "\n".join(line for line in block.group(1).splitlines() if not line.startswith("sweepflight-server"))
    subprocess.run(["bash", "-euc", script], cwd=tmp_path, check=True, capture_output=True)
    server = Server(
        "--listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")
    )
    try:
        uri = server.uri.replace("grpc://", "grpc+tls://").replace("127.0.0.1", "localhost")
        with sweepflight.connect(uri, tls_root_certs=str(tmp_path / "ca.pem")) as sf:
            sf.put("x", np.linspace(100, 110, 500))
            assert sf.sweep("x", lengths=[6]).height == 1
        cli = ROOT / "target" / "debug" / "sweepflight"
        if not cli.exists():
            subprocess.run(["cargo", "build", "-q", "-p", "sweepflight-client"], cwd=ROOT, check=True)
        out = subprocess.run(
            [str(cli), "--uri", uri, "--tls-ca", str(tmp_path / "ca.pem"), "ls"],
            capture_output=True,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "SWEEPFLIGHT_TOKEN"},
        )
        assert out.returncode == 0, out.stderr
        assert "x" in out.stdout
    finally:
        server.stop()
