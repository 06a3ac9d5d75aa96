"""Jobs, walk-forward and compressed replies from Python against the real server: a job's
result equals the direct call's, progress never falls, Ctrl-C and ``timeout=`` cancel the work
on the server, a job can be picked up by ID from another connection, walk-forward equals its
folds run by hand through ``sweep``, its stitched equity ends where the folds' test PnL adds
up, and the protocol's docs examples hold."""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Iterator

import numpy as np
import polars as pl
import pyarrow.flight as flight
import pytest

import sweepflight
from sweepflight import paper
from sweepflight.errors import translated

from .conftest import Server

#: A grid long enough to interrupt (seconds of kernel time on the paper series).
LONG = {"fast": range(1, 200), "slow": range(2, 300)}


@pytest.fixture(scope="module")
def sf(server: Server) -> Iterator[sweepflight.Client]:
    with sweepflight.connect(server.uri) as client:
        client.put("paper", paper.series())
        yield client


def idle(sf: sweepflight.Client) -> dict[str, object]:
    """The server's stats once no sweep runs (cancel answers once the memory is back; the
    running count drops when the worker returns)."""
    for _ in range(500):
        stats = sf.stats()
        if stats["sweeps_running"] == 0:
            return stats
        time.sleep(0.01)
    raise AssertionError(f"sweeps still running: {stats}")


def test_a_job_returns_what_its_call_returns(sf: sweepflight.Client) -> None:
    grid = {"fast": [5, 10, 20], "slow": [50, 100, 200]}
    direct = sf.sweep("paper", strategy="sma_cross", grid=grid)
    job = sf.submit("paper", strategy="sma_cross", grid=grid)
    assert job.action == "sweep" and job.id
    seen = []
    while not job.done():
        seen.append(job.progress)
    got = job.result()
    assert got.equals(direct)
    assert sweepflight.request_of(got) == sweepflight.request_of(direct)
    assert seen == sorted(seen)
    status = job.status()
    assert (status["state"], status["progress"]) == ("done", 1.0)
    assert status["combos_done"] == status["combos_total"] == 9
    # From another connection, by ID.
    with sweepflight.connect(sf.uri) as other:
        again = other.job(job.id)
        assert again.action == "sweep"
        assert again.result().equals(direct)
    # Trades and equity as jobs.
    chosen = {"strategy": "sma_cross", "grid": grid, "order_by": "sharpe", "top": 2}
    assert sf.submit("paper", action="trades", **chosen).result().equals(sf.trades("paper", **chosen))
    assert sf.submit("paper", action="equity", **chosen).result().equals(sf.equity("paper", **chosen))


def test_ctrl_c_cancels_the_sweep_on_the_server(sf: sweepflight.Client) -> None:
    before = sf.stats()["sweeps_cancelled"]

    def interrupt_once_running() -> None:
        # The main thread is interrupted while it waits on the running job, as Ctrl-C would
        # (an interrupt during the submit call is the next test's).
        with sweepflight.connect(sf.uri) as other:
            for _ in range(3_000):
                if any(j["state"] == "running" and j["combos_done"] > 0 for j in other.stats()["jobs"]):
                    break
                time.sleep(0.01)
        _thread.interrupt_main()

    timer = threading.Thread(target=interrupt_once_running)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sf.sweep("paper", strategy="sma_cross", grid=LONG)
    timer.join()
    assert time.monotonic() - started < 30
    stats = idle(sf)
    assert stats["sweeps_cancelled"] == before + 1
    assert stats["sweep_reserved_bytes"] == 0
    assert [j["state"] for j in stats["jobs"] if j["state"] != "done"] == ["cancelled"]


def test_ctrl_c_or_the_timeout_during_the_submit_call_still_cancel_the_job(
    sf: sweepflight.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cancelled() -> int:
        stats = idle(sf)
        assert stats["sweep_reserved_bytes"] == 0
        assert not [j for j in stats["jobs"] if j["state"] in ("queued", "running")], stats
        return sum(j["state"] == "cancelled" for j in stats["jobs"])

    before = cancelled()
    submit_body = sweepflight.client._protocol.submit_body

    # The interrupt comes while the submit body is made, before the job's ID is back: it is
    # held, the job is cancelled once its ID arrives, then the interrupt goes on.
    def interrupted(action: str, body: bytes) -> bytes:
        _thread.interrupt_main()
        return submit_body(action, body)

    with monkeypatch.context() as m:
        m.setattr(sweepflight.client._protocol, "submit_body", interrupted)
        with pytest.raises(KeyboardInterrupt):
            sf.submit("paper", strategy="sma_cross", grid=LONG)
    assert cancelled() == before + 1
    # The caller's time runs out during the submit call: the call still gets the job's ID
    # (it is never cut short below SUBMIT_MIN_TIMEOUT), and the wait cancels the job.
    now = sweepflight.client._clock
    late = [0.0]

    def slow(action: str, body: bytes) -> bytes:
        late[0] = 1_000.0
        return submit_body(action, body)

    with monkeypatch.context() as m:
        m.setattr(sweepflight.client, "_clock", lambda: now() + late[0])
        m.setattr(sweepflight.client._protocol, "submit_body", slow)
        with pytest.raises(sweepflight.DeadlineExceeded):
            sf.sweep("paper", strategy="sma_cross", grid=LONG, timeout=30)
    assert cancelled() == before + 2


def test_timeout_bounds_a_job_and_cancels_it(sf: sweepflight.Client) -> None:
    with pytest.raises(sweepflight.DeadlineExceeded):
        sf.sweep("paper", strategy="sma_cross", grid=LONG, timeout=0.3)
    assert idle(sf)["sweep_reserved_bytes"] == 0
    job = sf.submit("paper", strategy="sma_cross", grid=LONG)
    with pytest.raises(sweepflight.FailedPrecondition), translated():
        # Not done yet: DoGet of a running job.
        sf._flight.do_get(flight.Ticket(f'{{"job":"{job.id}"}}'.encode())).read_all()
    cancelled = job.cancel()
    assert cancelled["state"] == "cancelled"
    assert cancelled["combos_done"] < cancelled["combos_total"]
    with pytest.raises(sweepflight.Cancelled):
        job.result()


def test_a_job_whose_time_runs_out_during_a_poll_is_cancelled(
    sf: sweepflight.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a loaded machine the last poll's own deadline can pass before the server answers.
    job = sf.submit("paper", strategy="sma_cross", grid=LONG)

    def late(**_: object) -> dict[str, object]:
        raise sweepflight.DeadlineExceeded("the poll ran out of time")

    monkeypatch.setattr(job, "status", late)
    with pytest.raises(sweepflight.DeadlineExceeded, match="cancelled"):
        job.result(timeout=30)
    monkeypatch.undo()
    assert job.status()["state"] == "cancelled"
    assert idle(sf)["sweep_reserved_bytes"] == 0


def test_a_failed_job_raises_what_the_call_raises(sf: sweepflight.Client) -> None:
    # More rows than the equity of these combos may hold in the server's memory is decided
    # when the job runs; a bad body is refused at submit.
    with pytest.raises(sweepflight.InvalidRequest, match="unknown result column"):
        sf.submit("paper", lengths=[6], order_by="alpha")
    with pytest.raises(sweepflight.NotFound):
        sf.submit("nope", lengths=[6])
    with pytest.raises(sweepflight.NotFound):
        sf.job("0123456789")
    limit = sf.stats()["max_trade_combos"]
    job = sf.submit("paper", action="trades", lengths=range(6, 6 + limit + 1), where={"trades": (0, None)})
    with pytest.raises(sweepflight.InvalidRequest, match="--max-trade-combos"):
        job.result()
    assert job.status()["code"] == "INVALID_ARGUMENT"


def by_hand(
    sf: sweepflight.Client, name: str, folds: list[tuple[int, int, int, int]], by: str, **options: object
) -> list[tuple[int, float | None, float | None]]:
    """Each fold as a client would run it: the best combo in-sample, then its test run."""
    out = []
    for train_start, train_end, test_start, test_end in folds:
        best = sf.sweep(name, rows=(train_start, train_end), order_by=by, top=1, **options)  # type: ignore[arg-type]
        if best.height == 0 or best[by][0] is None:
            out.append((-1, None, None))
            continue
        row = best.row(0, named=True)
        test_options = {k: v for k, v in options.items() if k not in ("grid", "where")}
        test = sf.sweep(name, params=[[row["fast"], row["slow"]]], rows=(test_start, test_end), **test_options)  # type: ignore[arg-type]
        out.append((row["combo"], row[by], test["pnl"][0]))
    return out


def test_walk_forward_equals_the_folds_run_by_hand(sf: sweepflight.Client) -> None:
    options = {"strategy": "sma_cross", "grid": {"fast": [5, 10, 20], "slow": [50, 100, 200]}, "warmup": 200}
    wf = sf.walk_forward("paper", folds={"train": 40_000, "test": 20_000}, select="sharpe", **options)  # type: ignore[arg-type]
    assert wf.height == 5
    assert wf["fold"].to_list() == list(range(5))
    folds = [(k * 20_000, k * 20_000 + 40_000, k * 20_000 + 40_000, k * 20_000 + 60_000) for k in range(5)]
    assert list(zip(wf["train_start"], wf["train_end"], wf["test_start"], wf["test_end"], strict=True)) == folds
    want = by_hand(sf, "paper", folds, "sharpe", **options)
    got = list(zip(wf["combo"], wf["train_score"], wf["pnl"], strict=True))
    assert got == want
    # The session form answers each message as the action does, twice on one stream.
    with sf.session(strategy="sma_cross", action="walk_forward") as s:
        for _ in range(2):
            again = s.walk_forward("paper", folds={"train": 40_000, "test": 20_000}, select="sharpe", **options)  # type: ignore[arg-type]
            assert again.equals(wf)
        with pytest.raises(sweepflight.InvalidRequest, match="this session answers walk_forward"):
            s.sweep("paper", lengths=[6])
    # As a job, with explicit folds and ascending selection.
    job = sf.submit(
        "paper",
        action="walk_forward",
        folds=[(0, 50_000, 50_000, 150_000)],
        select={"by": "max_drawdown", "descending": False},
        **options,  # type: ignore[arg-type]
    )
    explicit = job.result()
    best = sf.sweep("paper", rows=(0, 50_000), order_by="max_drawdown", descending=False, top=1, **options)  # type: ignore[arg-type]
    assert explicit["combo"].to_list() == best["combo"].to_list()


def test_walk_forward_equity_stitches_the_test_runs(sf: sweepflight.Client, tmp_path: object) -> None:
    wf = sf.walk_forward(
        "paper", strategy="ema_cross", grid={"fast": [5, 12], "slow": [40, 90]}, folds={"train": 30_000, "test": 15_000}
    )
    curve = sf.walk_forward_equity(wf)
    chosen = wf.filter(pl.col("combo").is_not_null())
    # One row per test bar of each chosen fold; the stitched curve ends at the sum of the
    # folds' test PnL, each fold's own curve at its fold's.
    assert curve.height == int((chosen["test_end"] - chosen["test_start"]).sum())
    assert curve["equity"][-1] == pytest.approx(float(chosen["pnl"].sum()), abs=1e-6)
    last = curve.group_by("fold", maintain_order=True).agg(pl.col("fold_equity").last())
    assert np.allclose(last["fold_equity"].to_numpy(), chosen["pnl"].to_numpy(), atol=1e-6)
    import pathlib

    out = pathlib.Path(str(tmp_path)) / "wf.png"
    sweepflight.plot_walk_forward(curve, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5_000


def test_compressed_replies_carry_the_same_rows(sf: sweepflight.Client) -> None:
    plain = sf.sweep("paper", lengths=paper.lengths())
    for compression in ("zstd", "lz4"):
        assert sf.sweep("paper", lengths=paper.lengths(), compression=compression).equals(plain)  # type: ignore[arg-type]
        job = sf.submit("paper", lengths=paper.lengths(), compression=compression)  # type: ignore[arg-type]
        assert job.result().equals(plain)
    with pytest.raises(sweepflight.InvalidRequest, match="compression"):
        sf.sweep("paper", lengths=[6], compression="gzip")  # type: ignore[arg-type]


def test_walk_forward_refusals(sf: sweepflight.Client) -> None:
    with pytest.raises(sweepflight.InvalidRequest, match="folds"):
        sf.walk_forward("paper", lengths=[6], folds=None)  # type: ignore[arg-type]
    with pytest.raises(sweepflight.InvalidRequest, match="rows= is not a walk-forward option"):
        sf.walk_forward("paper", lengths=[6], folds={"train": 100, "test": 10}, rows=(0, 10))
    with pytest.raises(sweepflight.InvalidRequest, match="longest window"):
        sf.walk_forward(
            "paper", strategy="sma_cross", grid={"fast": [5], "slow": [500]}, folds={"train": 100, "test": 10}
        )
    with pytest.raises(sweepflight.InvalidRequest, match=r"select\.by"):
        sf.walk_forward("paper", lengths=[6], folds={"train": 1000, "test": 10}, select="alpha")
