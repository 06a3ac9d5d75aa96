"""The sweepflight Python client against the real server: every method, every input type, a
chunked 20,000-combo sweep equal to one call, every error class; the request body it writes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import sweepflight
from sweepflight import paper, reference
from sweepflight.client import _sweep_body

from .conftest import Server


def walk(n: int, seed: int = 3) -> np.ndarray:
    return 100 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0, 0.001, n)))


@pytest.fixture(scope="module")
def sf(server) -> sweepflight.Client:
    with sweepflight.connect(server.uri) as client:
        yield client


def test_paper_sweep_passes_the_gate(sf: sweepflight.Client) -> None:
    summary = sf.put("paper", paper.series())
    assert summary == sweepflight.PutSummary("paper", 150_000, summary.bytes, summary.version)
    df = sf.sweep("paper", lengths=paper.lengths())
    assert isinstance(df, pl.DataFrame) and df.height == 80
    pnl, trades = reference.sweep(paper.series(), reference.params_for(paper.lengths()))
    assert df["trades"].to_list() == trades.tolist()
    assert np.abs(df["pnl"].to_numpy() - pnl).max() <= 1e-6
    table = sf.sweep("paper", params=reference.params_for(paper.lengths()), as_arrow=True)
    assert isinstance(table, pa.Table) and pl.from_arrow(table).equals(df)


def test_every_input_type_stores_the_same_closes(sf: sweepflight.Client) -> None:
    close = walk(3_000)
    ts = pd.date_range("2026-01-01", periods=len(close), freq="min")
    frame = pd.DataFrame({"ts": ts, "px": close, "volume": np.arange(len(close))})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    inputs = {
        "numpy": (close, "close"),
        "polars": (pl.from_pandas(frame), "px"),
        "lazy": (pl.from_pandas(frame).lazy(), "px"),
        "pandas-frame": (frame, "px"),
        "pandas-series": (pd.Series(close), "close"),
        "arrow-table": (table, "px"),
        "arrow-batch": (table.to_batches()[0], "px"),
        "arrow-reader": (pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=111)), "px"),
    }
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
    with_bar = sf.sweep("chunky", lengths=range(1, 2_001), chunk_combos=250, progress=True)
    assert with_bar.equals(sf.sweep("chunky", lengths=range(1, 2_001)))


def test_catalog_methods(sf: sweepflight.Client) -> None:
    sf.put("cat-a", walk(10))
    v2 = sf.put("cat-a", walk(20))
    assert v2.version >= 2 and v2.rows == 20
    info = sf.info("cat-a")
    assert (info.name, info.rows, info.version) == ("cat-a", 20, v2.version)
    assert info.schema.field("close").type == pa.float64()
    assert "cat-a" in [d.name for d in sf.datasets()]
    assert isinstance(sf.get("cat-a", as_arrow=True), pa.Table)
    assert sf.drop("cat-a") == {"dataset": "cat-a", "version": v2.version}
    assert "cat-a" not in [d.name for d in sf.datasets()]
    assert sf.echo(b"\x00\x01hello") == b"\x00\x01hello"


def test_error_classes(sf: sweepflight.Client) -> None:
    with pytest.raises(sweepflight.NotFound, match="`nope` not found") as e:
        sf.sweep("nope", lengths=[6])
    assert e.value.code == "NOT_FOUND" and isinstance(e.value, KeyError)
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
    with pytest.raises(sweepflight.InvalidRequest, match="fee"):
        sf.sweep("paper", lengths=[6], fee=-1)
    with pytest.raises(sweepflight.InvalidRequest, match="no column 'px'"):
        sf.put("x", pa.table({"close": [1.0]}), close="px")
    with pytest.raises(sweepflight.InvalidRequest, match="1-D"):
        sf.put("x", np.ones((2, 2)))
    with pytest.raises(sweepflight.InvalidRequest, match="cannot upload"):
        sf.put("x", {"close": [1.0]})
    assert issubclass(sweepflight.InvalidRequest, sweepflight.SweepflightError)
    # Small sweeps share one open session; a refused request ends it and the next call opens
    # a fresh one.
    assert sf.sweep("paper", lengths=[6]).height == 1


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
            # Same client: its open session died with the first server; the sweep goes
            # through on a new one, over the dataset the second server loaded from disk.
            assert client.sweep("kept", lengths=[6, 20]).equals(before)
            assert [(d.name, d.rows, d.version) for d in client.datasets()] == [("kept", 3_000, 1)]
        finally:
            second.stop()
    finally:
        client.close()


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
            # Chunking keeps each call under the server's limit.
            assert c.sweep("ok", lengths=range(1, 12), chunk_combos=10).height == 11
    finally:
        small.stop()
    with pytest.raises(sweepflight.Unavailable):
        sweepflight.connect(f"grpc+unix://{tmp_path}/nobody.sock").echo(b"x")


def test_plot_sweep(sf: sweepflight.Client, tmp_path) -> None:
    sf.put("plot", paper.series()[:20_000])
    df = sf.sweep("plot", lengths=paper.lengths())
    path = tmp_path / "sweep.png"
    fig = sweepflight.plot_sweep(df, path=str(path))
    assert path.stat().st_size > 10_000
    assert len(fig.axes) == 2


@pytest.mark.parametrize("name", ["paper", 'q"uote', "ünï", "a\\b\n", "日本"])
@pytest.mark.parametrize("key, items", [("lengths", [6, 50]), ("params", [[1, 2, 1, 1, 1, 1], [3, 4, 5, 6, 7, 8]]), ("lengths", [])])
@pytest.mark.parametrize("fee", [0.0009, 1e-05, 0.0, 1e300, 3, np.float64(0.001), float("nan"), float("inf")])
def test_the_written_out_sweep_body_is_json_dumps(name: str, key: str, items: list, fee: float) -> None:
    assert _sweep_body(name, key, items, fee) == json.dumps({"dataset": name, key: items, "fee": fee}).encode()
