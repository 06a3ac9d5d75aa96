"""sweepflight.ray on a multi-node Ray cluster on this machine (ray.cluster_utils): a head with no
CPUs and worker nodes that advertise the `sweepflight` resource, the server binary from the
wheel (`pip install ./flight-server`, done by scripts/test.sh), Ray on loopback.

Cases: a replicated sweep (explicit combos, a strategy's grid, selections merged from the
chunks' own) and a sharded universe sweep equal one server's answer; a server process killed
mid-sweep, and a node removed mid-sweep with another added, both finish with the same answer;
a caller's error is not retried.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

# Ray binds the machine's interface address unless told to stay on loopback.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import numpy as np
import polars as pl
import pytest
import ray
from ray.cluster_utils import Cluster as RayCluster

import sweepflight
import sweepflight.ray as sfray

from .conftest import Server

NODE = {"num_cpus": 1, "resources": {"sweepflight": 1}}


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    cluster = RayCluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    for _ in range(2):
        cluster.add_node(**NODE)
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def walk(n: int, seed: int) -> np.ndarray:
    return 100 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0, 0.001, n)))


def grid(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(1, 60, n) for _ in range(6)])


def universe() -> pl.DataFrame:
    parts = [pl.DataFrame({"symbol": f"S{k}", "close": walk(3_000, k)}) for k in range(7)]
    return pl.concat(parts)


def ohlc(close: np.ndarray) -> pl.DataFrame:
    """Bars around `close`: each open the close before, highs and lows beyond both."""
    opens = np.concatenate([close[:1], close[:-1]])
    return pl.DataFrame(
        {
            "open": opens,
            "high": np.maximum(opens, close) * 1.001,
            "low": np.minimum(opens, close) * 0.999,
            "close": close,
        }
    )


def single_server(*calls: tuple[str, object, dict]) -> list[pl.DataFrame]:
    """Each call's answer from one ordinary server: (dataset, data, sweep kwargs)."""
    server = Server("--listen", "127.0.0.1:0")
    try:
        with sweepflight.connect(server.uri) as sf:
            out = []
            for name, (data, key), kwargs in calls:
                sf.put(name, data, key=key)
                out.append(sf.sweep(name, **kwargs))
            return out
    finally:
        server.stop()


@pytest.mark.parametrize(("combos", "size", "servers"), [(20_000, 2_000, 2), (7_000, 250, 3), (1, 2_000, 2), (0, 5, 2)])
def test_chunks_cover_the_grid_and_shrink_at_the_end(combos: int, size: int, servers: int) -> None:
    bounds = sfray.chunk_bounds(combos, size, servers)
    assert bounds[0][0] == 0 and bounds[-1][1] == combos
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [end - start for start, end in bounds]
    assert max(sizes) <= size and sizes == sorted(sizes, reverse=True)
    if combos >= 4 * size * servers:
        # The tail is cut fine: the last chunk is at most a sixteenth of a full one.
        assert sizes[0] == size and sizes[-1] <= size // 16


def test_replicated_and_sharded_sweeps_equal_one_server(ray_cluster: RayCluster) -> None:
    close, params = walk(20_000, 1), grid(3_000)
    frame = universe()
    sma = {"strategy": "sma_cross", "grid": {"fast": range(2, 30), "slow": range(10, 200, 7)}, "side": "long"}
    # Selections merged from the chunks' own: ranked with nulls, ranked with many ties (trade
    # counts), filtered only, and per series of a sharded universe.
    ranked = {**sma, "order_by": "sharpe", "top": 15, "where": {"trades": (3, None)}}
    tied = {**sma, "order_by": "trades", "descending": False, "top": 30}
    filtered = {**sma, "where": {"pnl": (0, None)}}
    per_series = {"lengths": range(4, 60), "order_by": "pnl", "top": 3, "series": ["S5", "S0", "S3"]}
    # A strategy of your own, and a constraint: their grids travel whole (the server numbers them).
    mine = {
        "strategy": {"long": "close < sma(close, n) - k * std(close, n)", "exit_long": "close > sma(close, n)"},
        "grid": {"n": [10, 20, 30], "k": [1.0, 2.0]},
    }
    constrained = {**sma, "constraint": "fast < slow"}
    # Real bars with the v1.3 execution options, a stop formula among them.
    bars = ohlc(close)
    real = {
        "strategy": "sma_cross",
        "grid": {"fast": range(2, 30), "slow": range(10, 200, 7), "m": [1.0, 2.0]},
        "fill": "next_open",
        "stops": "high_low",
        "trailing_stop": 0.01,
        "stop_loss": "m * atr(14) / close",
        "slippage": 0.0005,
    }
    # A portfolio over the universe with dates.
    days = pl.date_range(pl.date(2010, 1, 1), pl.date(2020, 1, 1), "1d", eager=True)[:3_000]
    timed = frame.with_columns(pl.Series("time", np.tile(days.to_numpy(), 7)))
    rotation = {
        "strategy": sweepflight.Portfolio(
            rank=sweepflight.roc(sweepflight.close, sweepflight.param("n")),
            longs=sweepflight.param("k"),
            rebalance=sweepflight.param("r"),
        ),
        "grid": {"n": range(5, 105, 5), "k": [1, 2, 3, 4, 5], "r": [1, 5, 21]},
        "fill": "close",  # closes only: filled at the decision's close
    }
    best = {**rotation, "order_by": "total_return", "top": 10}
    want = single_server(
        ("g", (close, None), {"params": params}),
        ("s", (close, None), sma),
        ("u", (frame, "symbol"), {"lengths": [6, 20, 45], "rows": (100, 2_500)}),
        ("v", (frame, "symbol"), {"lengths": [8, 30], "series": ["S5", "S0", "S3"]}),
        ("s", (close, None), ranked),
        ("s", (close, None), tied),
        ("s", (close, None), filtered),
        ("u", (frame, "symbol"), per_series),
        ("s", (close, None), mine),
        ("s", (close, None), constrained),
        ("b", (bars, None), real),
        ("p", (timed, "symbol"), rotation),
        ("p", (timed, "symbol"), best),
    )
    want_grid, want_sma, want_universe, want_subset = want[:4]
    with sfray.Cluster(threads_per_server=1, chunk_combos=250) as cluster:
        assert len(cluster.addresses) == 2
        assert all(a.startswith("grpc://127.0.0.1:") for a in cluster.addresses)
        cluster.put("g", close)
        got = cluster.sweep("g", params=params, progress=False)
        assert got.equals(want_grid)
        assert sweepflight.request_of(got) is not None
        # A strategy's grid is cut into slices of its product: the same rows as one server.
        cluster.put("s", close)
        assert cluster.sweep("s", **sma).equals(want_sma)  # type: ignore[arg-type]
        summary = cluster.put("u", frame, key="symbol", shard=True)
        assert (summary.rows, summary.series) == (21_000, 7)
        assert cluster.sweep("u", lengths=[6, 20, 45], rows=(100, 2_500)).equals(want_universe)
        cluster.put("v", frame, key="symbol", shard=True)
        assert cluster.sweep("v", lengths=[8, 30], series=["S5", "S0", "S3"]).equals(want_subset)
        for options, expected in zip((ranked, tied, filtered), want[4:7], strict=True):
            assert expected.height > 0
            assert cluster.sweep("s", **options).equals(expected), options  # type: ignore[arg-type]
        assert cluster.sweep("u", **per_series).equals(want[7])  # type: ignore[arg-type]
        assert cluster.sweep("s", **mine).equals(want[8])  # type: ignore[arg-type]
        assert want[9]["combo"].to_list() != list(range(want[9].height))  # gaps
        assert cluster.sweep("s", **constrained).equals(want[9])  # type: ignore[arg-type]
        cluster.put("b", bars)
        assert want[10].height == 28 * 28 * 2  # seven chunks of 250
        assert cluster.sweep("b", **real).equals(want[10])  # type: ignore[arg-type]
        # A portfolio: the universe replicated, the combos split (300 combos, two chunks); a
        # sharded universe refused (a portfolio ranks every series together).
        cluster.put("p", timed, key="symbol")
        assert cluster.sweep("p", **rotation).equals(want[11])  # type: ignore[arg-type]
        assert cluster.sweep("p", **best).equals(want[12])  # type: ignore[arg-type]
        cluster.put("q", timed, key="symbol", shard=True)
        with pytest.raises(sweepflight.InvalidRequest, match="a portfolio ranks every series together"):
            cluster.sweep("q", **rotation)  # type: ignore[arg-type]


def test_walk_forward_and_background_jobs_equal_one_server(ray_cluster: RayCluster) -> None:
    close, frame = walk(20_000, 2), universe()
    sma = {"strategy": "sma_cross", "grid": {"fast": [3, 8, 15], "slow": [40, 90]}, "warmup": 100}
    server = Server("--listen", "127.0.0.1:0")
    try:
        with sweepflight.connect(server.uri) as sf:
            sf.put("w", close)
            sf.put("u", frame, key="symbol")
            want_rolling = sf.walk_forward("w", folds={"train": 3_000, "test": 1_000}, select="sharpe", **sma)  # type: ignore[arg-type]
            want_explicit = sf.walk_forward("w", folds=[(0, 5_000, 5_000, 9_000), (100, 900, 2_000, 2_500)], **sma)  # type: ignore[arg-type]
            want_universe = sf.walk_forward(
                "u", folds={"train": 1_000, "test": 500, "anchored": True}, series=["S6", "S1", "S4"], **sma
            )  # type: ignore[arg-type]
            want_sweep = sf.sweep("w", **sma)  # type: ignore[arg-type]
    finally:
        server.stop()
    with sfray.Cluster(threads_per_server=1, chunk_combos=2) as cluster:
        cluster.put("w", close)
        cluster.put("u", frame, key="symbol", shard=True)
        got = cluster.walk_forward("w", folds={"train": 3_000, "test": 1_000}, select="sharpe", **sma)  # type: ignore[arg-type]
        assert got.height == 17 and got.equals(want_rolling)
        got = cluster.walk_forward("w", folds=[(0, 5_000, 5_000, 9_000), (100, 900, 2_000, 2_500)], **sma)  # type: ignore[arg-type]
        assert got.equals(want_explicit)
        job = cluster.submit(
            "u",
            action="walk_forward",
            folds={"train": 1_000, "test": 500, "anchored": True},
            series=["S6", "S1", "S4"],
            **sma,
        )  # type: ignore[arg-type]
        assert job.result(timeout=120).equals(want_universe)
        assert job.progress == 1.0 and job.done()
        background = cluster.submit("w", **sma)  # type: ignore[arg-type]
        assert background.result(timeout=120).equals(want_sweep)
        # A cancelled cluster job takes no more chunks and raises Cancelled.
        long = cluster.submit("w", strategy="sma_cross", grid={"fast": range(1, 60), "slow": range(2, 90)})
        long.cancel()
        with pytest.raises(sweepflight.Cancelled):
            long.result(timeout=120)


def test_a_caller_error_is_not_retried(ray_cluster: RayCluster) -> None:
    # One combo per chunk: every server's worker takes chunks.
    with sfray.Cluster(threads_per_server=1, chunk_combos=1) as cluster:
        cluster.put("g", walk(1_000, 2))
        started = time.monotonic()
        with pytest.raises(sweepflight.InvalidRequest, match="lengths"):
            cluster.sweep("g", lengths=[0, 5])
        with pytest.raises(sweepflight.NotFound):
            cluster.sweep("nope", lengths=[5])
        with pytest.raises(sweepflight.InvalidRequest, match="not keyed"):
            cluster.sweep("g", lengths=[5], series=["A"])
        with pytest.raises(sweepflight.InvalidRequest, match="unknown result column"):
            cluster.sweep("g", lengths=[5, 6], order_by="sharp", top=1)

        # A limit on one server (here: a busy one) ends the whole sweep at once, without
        # leaving the other server's worker waiting for a chunk that will never finish.
        def busy(*args: object, **kwargs: object) -> None:
            raise sweepflight.ResourceExhausted("server busy: 64 sweeps already waiting")

        cluster._servers[0].client.run = busy  # type: ignore[method-assign]
        with pytest.raises(sweepflight.ResourceExhausted, match="busy"):
            cluster.sweep("g", params=grid(200), progress=False)
        assert time.monotonic() - started < 10


def sweep_while(cluster: sfray.Cluster, name: str, params: np.ndarray, disturb: Callable[[], None]) -> pl.DataFrame:
    """Runs the sweep in a thread and calls `disturb()` once it is under way."""
    out: dict[str, object] = {}
    t = threading.Thread(target=lambda: out.update(df=cluster.sweep(name, params=params, progress=False)))
    t.start()
    time.sleep(1.0)
    disturb()
    t.join(timeout=240)
    assert not t.is_alive(), "the sweep did not finish"
    df = out.get("df")
    assert isinstance(df, pl.DataFrame)
    return df


def test_a_killed_server_is_restarted_and_its_chunks_redone(ray_cluster: RayCluster) -> None:
    close, params = walk(60_000, 3), grid(6_000, seed=1)
    (want,) = single_server(("k", (close, None), {"params": params}))
    with sfray.Cluster(threads_per_server=1, chunk_combos=200) as cluster:
        cluster.put("k", close)
        before = cluster.addresses
        victim = cluster.server_pids()[0]
        got = sweep_while(cluster, "k", params, lambda: os.kill(victim, signal.SIGKILL))
        assert got.equals(want)
        assert cluster.addresses[0] != before[0], "the killed server came back on a new port"


def test_a_removed_node_is_replaced_and_the_sweep_completes(ray_cluster: RayCluster) -> None:
    close, params = walk(60_000, 4), grid(6_000, seed=2)
    (want,) = single_server(("n", (close, None), {"params": params}))
    with sfray.Cluster(threads_per_server=1, chunk_combos=200) as cluster:
        cluster.put("n", close)
        nodes = ray.get([s.actor.node_id.remote() for s in cluster._servers])
        victim = next(n for n in ray_cluster.list_all_nodes() if n.node_id == nodes[0])

        def swap_node() -> None:
            ray_cluster.add_node(**NODE)
            ray_cluster.remove_node(victim)

        got = sweep_while(cluster, "n", params, swap_node)
        assert got.equals(want)
        # The sweep may end (its chunks redone elsewhere) while the removed node's actor is still
        # restarting on the new one: Ray answers "temporarily unavailable" until it is up.
        deadline = time.monotonic() + 120
        while True:
            try:
                moved = ray.get(cluster._servers[0].actor.node_id.remote())
                break
            except ray.exceptions.ActorUnavailableError:
                assert time.monotonic() < deadline, "the actor did not come back on a new node"
                time.sleep(0.5)
        assert moved != nodes[0]
