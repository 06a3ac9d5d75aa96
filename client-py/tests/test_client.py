"""The sweepflight Python client against the real server: every method, every input type, a
chunked 20,000-combo sweep equal to one call, sessions, deadlines, every error class."""

from __future__ import annotations

import threading

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import sweepflight
from sweepflight import paper, reference

from .conftest import Server


def walk(n: int, seed: int = 3) -> np.ndarray:
    return 100 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0, 0.001, n)))


@pytest.fixture(scope="module")
def sf(server: Server) -> sweepflight.Client:
    with sweepflight.connect(server.uri) as client:
        yield client


def test_paper_sweep_passes_the_gate(sf: sweepflight.Client, paper_reference: tuple[np.ndarray, np.ndarray]) -> None:
    summary = sf.put("paper", paper.series())
    assert summary == sweepflight.PutSummary("paper", 150_000, summary.bytes, summary.version)
    df = sf.sweep("paper", lengths=paper.lengths())
    assert isinstance(df, pl.DataFrame) and df.height == 80
    pnl, trades = paper_reference
    assert df["trades"].to_list() == trades.tolist()
    assert np.abs(df["pnl"].to_numpy() - pnl).max() <= 1e-6
    table = sf.sweep("paper", params=reference.params_for(paper.lengths()), as_arrow=True)
    assert isinstance(table, pa.Table) and pl.from_arrow(table).equals(df)
    # The result keeps its request, as an attribute of a polars frame and as Arrow metadata.
    request = sweepflight.request_of(df)
    assert request is not None and request.dataset == "paper" and request.fee is None
    assert request.lengths == tuple(paper.lengths())
    arrow_request = sweepflight.request_of(table)
    assert arrow_request is not None and arrow_request.params == tuple(paper.combos())


def test_every_input_type_stores_the_same_closes(sf: sweepflight.Client) -> None:
    close = walk(3_000)
    ts = pd.date_range("2026-01-01", periods=len(close), freq="min")
    frame = pd.DataFrame({"ts": ts, "px": close, "volume": np.arange(len(close))})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    inputs = {
        "numpy": (close, "close"),
        "polars": (pl.from_pandas(frame), "px"),
        "lazy": (pl.from_pandas(frame).lazy(), "px"),
        "polars-series": (pl.Series("close", close), "close"),
        "pandas-frame": (frame, "px"),
        "pandas-series": (pd.Series(close, name="close"), "close"),
        "arrow-table": (table, "px"),
        "arrow-batch": (table.to_batches()[0], "px"),
        "arrow-array": (pa.array(close), "close"),
        "arrow-reader": (pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=111)), "px"),
    }
    # A duckdb relation exports an Arrow C stream too.
    con = duckdb.connect()
    con.register("frame", frame)
    inputs["duckdb"] = (con.sql("select * from frame"), "px")
    results = {}
    for name, (data, col) in inputs.items():
        s = sf.put(f"in-{name}", data, close=col, chunk_rows=700)
        assert s.rows == len(close), name
        stored = sf.get(f"in-{name}")
        assert np.array_equal(stored["close"].to_numpy(), close), name
        results[name] = sf.sweep(f"in-{name}", lengths=[6, 30])
    first = next(iter(results.values()))
    assert all(r.equals(first) for r in results.values())
    # Extra columns travel: the polars frame comes back with ts and volume, px renamed.
    back = sf.get("in-polars")
    assert back.columns == ["ts", "close", "volume"]
    assert back["volume"].to_list() == list(range(len(close)))


def test_chunked_sweep_equals_one_call(sf: sweepflight.Client) -> None:
    sf.put("chunky", walk(400, seed=9))
    rng = np.random.default_rng(0)
    params = np.column_stack([rng.integers(1, 40, 20_000) for _ in range(6)])
    one = sf.sweep("chunky", params=params, chunk_combos=50_000)
    chunked = sf.sweep("chunky", params=params, chunk_combos=3_000, progress=False)
    assert chunked.height == 20_000
    assert chunked["combo"].to_list() == list(range(20_000))
    assert chunked.equals(one)
    # Integer arrays of any width take a fast path; it must read them as plain lists would.
    head = params[:500]
    as_lists = sf.sweep("chunky", params=head.tolist())
    assert sf.sweep("chunky", params=head.astype(np.uint16)).equals(as_lists)
    assert sf.sweep("chunky", params=head.astype(np.int32)).equals(as_lists)
    with pytest.raises(sweepflight.InvalidRequest):
        sf.sweep("chunky", params=np.ones((2, 6), dtype=bool))
    with_bar = sf.sweep("chunky", lengths=range(1, 2_001), chunk_combos=250, progress=True)
    assert with_bar.equals(sf.sweep("chunky", lengths=range(1, 2_001)))


def test_catalog_methods(sf: sweepflight.Client) -> None:
    sf.put("cat-a", walk(10))
    v2 = sf.put("cat-a", walk(20))
    assert v2.version >= 2 and v2.rows == 20 and v2.series is None
    info = sf.info("cat-a")
    assert (info.name, info.rows, info.version, info.key) == ("cat-a", 20, v2.version, None)
    assert info.schema.field("close").type == pa.float64()
    assert "cat-a" in [d.name for d in sf.datasets()]
    assert isinstance(sf.get("cat-a", as_arrow=True), pa.Table)
    assert sf.drop("cat-a") == {"dataset": "cat-a", "version": v2.version}
    assert "cat-a" not in [d.name for d in sf.datasets()]
    assert sf.echo(b"\x00\x01hello") == b"\x00\x01hello"
    stats = sf.stats()
    assert stats["sweeps_completed"] >= 1 and stats["threads"] >= 1


def test_sessions_answer_like_sweep_and_end_on_a_refused_request(sf: sweepflight.Client) -> None:
    sf.put("sess", walk(2_000, seed=11))
    with sf.session() as s:
        for lengths in ([6], [8, 30], list(range(2, 40))):
            assert s.sweep("sess", lengths=lengths, fee=0.002).equals(sf.sweep("sess", lengths=lengths, fee=0.002))
        table = s.sweep("sess", params=[[1, 2, 1, 1, 1, 1]], as_arrow=True)
        assert isinstance(table, pa.Table) and table.num_rows == 1
        # One definition of a call for Client, Session and Cluster: a session takes none of
        # a client's call options (one message each way), and says so before sending.
        with pytest.raises(sweepflight.InvalidRequest, match="Session calls take no timeout="):
            s.sweep("sess", lengths=[6], timeout=5.0)
        with pytest.raises(sweepflight.InvalidRequest, match="unknown sweep option 'chunk'"):
            s.sweep("sess", lengths=[6], chunk=5)  # type: ignore[call-overload]
        assert s.sweep("sess", lengths=[6], progress=None).equals(sf.sweep("sess", lengths=[6], progress=False))
        with pytest.raises(sweepflight.NotFound):
            s.sweep("nope", lengths=[6])
        with pytest.raises(sweepflight.InvalidRequest, match="closed"):
            s.sweep("sess", lengths=[6])


def test_a_client_is_shared_by_threads(sf: sweepflight.Client) -> None:
    sf.put("threads", walk(3_000, seed=12))
    want = {L: sf.sweep("threads", lengths=[L]) for L in range(6, 14)}
    errors: list[BaseException] = []

    def work(L: int) -> None:
        try:
            for _ in range(5):
                assert sf.sweep("threads", lengths=[L]).equals(want[L])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(L,)) for L in want]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_error_classes(sf: sweepflight.Client) -> None:
    with pytest.raises(sweepflight.NotFound, match="`nope` not found") as e:
        sf.sweep("nope", lengths=[6])
    assert e.value.code == "NOT_FOUND" and not isinstance(e.value, KeyError)
    # The pyarrow exception stays reachable for callers who want gRPC's full text.
    assert isinstance(e.value.__cause__, KeyError) and not isinstance(e.value.__cause__, sweepflight.SweepflightError)
    with pytest.raises(sweepflight.NotFound):
        sf.info("nope")
    with pytest.raises(sweepflight.NotFound):
        sf.drop("nope")
    with pytest.raises(sweepflight.InvalidRequest, match="row 2: is <= 0"):
        sf.put("bad", np.array([1.0, 2.0, -3.0]))
    with pytest.raises(sweepflight.InvalidRequest, match="character"):
        sf.put("bad name", np.array([1.0]))
    with pytest.raises(sweepflight.InvalidRequest, match="exactly one"):
        sf.sweep("paper")
    with pytest.raises(sweepflight.InvalidRequest, match="lengths\\[0\\]"):
        sf.sweep("paper", lengths=[0])
    with pytest.raises(sweepflight.InvalidRequest, match="integers"):
        sf.sweep("paper", lengths=[6.5])
    with pytest.raises(sweepflight.InvalidRequest, match="fee"):
        sf.sweep("paper", lengths=[6], fee=-1)
    with pytest.raises(sweepflight.InvalidRequest, match="no column 'px'"):
        sf.put("x", pa.table({"close": [1.0]}), close="px")
    with pytest.raises(sweepflight.InvalidRequest, match="1-D"):
        sf.put("x", np.ones((2, 2)))
    with pytest.raises(sweepflight.InvalidRequest, match="cannot upload"):
        sf.put("x", {"close": [1.0]})
    with pytest.raises(sweepflight.Unimplemented), sweepflight.errors.translated():
        list(sf._flight.do_action(pa.flight.Action("dance", b"")))

    # An exception of the caller's own making passes through untranslated.
    def closes():
        yield pa.record_batch({"close": [1.0]})
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        sf.put("gen", pa.RecordBatchReader.from_batches(pa.schema({"close": pa.float64()}), closes()))
    assert issubclass(sweepflight.InvalidRequest, sweepflight.SweepflightError)


def test_deadlines(server: Server) -> None:
    with sweepflight.connect(server.uri, timeout=60) as c:
        c.put("slow", paper.series())
        # ~4,000 long combos: seconds of work, far past a 50 ms deadline.
        with pytest.raises(sweepflight.DeadlineExceeded) as e:
            c.sweep("slow", lengths=[150 + i % 50 for i in range(4_000)], timeout=0.05)
        assert e.value.code == "DEADLINE_EXCEEDED" and isinstance(e.value, TimeoutError)
        assert c.sweep("slow", lengths=[6])["trades"][0] == 57_029


def test_a_deadline_the_server_enforces_first_is_still_a_deadline() -> None:
    # The server's gRPC library answers an expired deadline with CANCELLED "Timeout expired"
    # when its timer fires before the caller's.
    server_side = pa.flight.FlightCancelledError("Flight cancelled call, with message: Timeout expired")
    assert isinstance(sweepflight.errors.translate(server_side), sweepflight.DeadlineExceeded)
    other = pa.flight.FlightCancelledError("Flight cancelled call, with message: the server is shutting down")
    error = sweepflight.errors.translate(other)
    assert isinstance(error, sweepflight.Cancelled) and not isinstance(error, sweepflight.DeadlineExceeded)


def test_datasets_persist_and_sweeps_survive_a_server_restart(tmp_path) -> None:
    sock, data = f"{tmp_path}/sf.sock", str(tmp_path / "data")
    first = Server("--unix", sock, "--data-dir", data)
    client = sweepflight.connect(f"grpc+unix://{sock}")
    try:
        client.put("kept", walk(3_000, seed=4))
        before = client.sweep("kept", lengths=[6, 20])
        first.stop()
        second = Server("--unix", sock, "--data-dir", data)
        try:
            assert client.sweep("kept", lengths=[6, 20]).equals(before)
            assert [(d.name, d.rows, d.version) for d in client.datasets()] == [("kept", 3_000, 1)]
        finally:
            second.stop()
    finally:
        client.close()


def test_unix_sockets_need_no_server_side_authority_fix(tmp_path) -> None:
    # The server's rewrite of gRPC core's percent-encoded :authority is off: our client sets a
    # valid authority itself, plain pyarrow does not and is refused.
    sock = f"{tmp_path}/sf.sock"
    server = Server("--unix", sock, "--no-unix-authority-fix")
    try:
        with sweepflight.connect(f"grpc+unix://{sock}") as c:
            assert c.echo(b"hi") == b"hi"
        plain = pa.flight.connect(f"grpc+unix://{sock}")
        with pytest.raises(pa.ArrowException):
            list(plain.do_action(pa.flight.Action("echo", b"hi")))
    finally:
        server.stop()


def test_limits_and_unreachable_servers(tmp_path) -> None:
    small = Server("--listen", "127.0.0.1:0", "--max-dataset-bytes", "10000", "--max-combos", "10")
    try:
        with sweepflight.connect(small.uri) as c:
            with pytest.raises(sweepflight.ResourceExhausted, match="max-dataset-bytes") as e:
                c.put("big", walk(5_000))
            assert e.value.code == "RESOURCE_EXHAUSTED"
            c.put("ok", walk(100))
            with pytest.raises(sweepflight.InvalidRequest, match="at most 10"):
                c.sweep("ok", lengths=range(1, 12), chunk_combos=100)
            # The server's limit holds whether or not the client chunks (it asks the server's
            # limits first); a grid within it goes in chunks as before.
            with pytest.raises(sweepflight.InvalidRequest, match=r"chunked or not"):
                c.sweep("ok", lengths=range(1, 12), chunk_combos=3)
            assert c.sweep("ok", lengths=range(1, 11), chunk_combos=3).height == 10
            assert c.stats()["max_combos"] == 10
    finally:
        small.stop()
    with pytest.raises(sweepflight.Unavailable):
        sweepflight.connect(f"grpc+unix://{tmp_path}/nobody.sock").echo(b"x")


def test_timeout_bounds_the_whole_chunked_call(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """``timeout=`` is the whole call's: each chunk gets what is left of it. The client's clock
    is replaced by one that moves 4 s per reading, so the test does not depend on speed."""
    import sweepflight.client as client_module

    with sweepflight.connect(server.uri) as c:
        c.put("t", walk(500))
        # Without a timeout nothing changes.
        assert c.sweep("t", lengths=range(1, 9), chunk_combos=2).height == 8
        now = [0.0]

        def clock() -> float:
            now[0] += 4.0
            return now[0]

        monkeypatch.setattr(client_module, "_clock", clock)
        with pytest.raises(sweepflight.DeadlineExceeded, match="after 4 of 8 combos"):
            c.sweep("t", lengths=range(1, 9), chunk_combos=2, timeout=10.0)
