"""The study's experiments: one function per section of docs/benchmarks.md, each measuring
and checking what its section reports, returning plain JSON-able results."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv
import pyarrow.flight as flight

from sweepflight import paper, reference

from .harness import (
    MB,
    OUT,
    ROOT,
    CheckFailed,
    Ctx,
    MiB,
    Op,
    Samples,
    check_numba,
    closes,
    fmt_s,
    gate,
    gate_table,
    get,
    interleaved,
    kernel_timer,
    one_timing,
    paper_range_grid,
    put,
    raw_echo,
    sweep,
    ticket,
    write_ipc,
    write_params,
)

# ---------------------------------------------------------------------------------------------
# sections


def exp_kernel(ctx: Ctx) -> dict[str, Any]:
    """The 80-combo paper sweep in-process: numba (1 thread, prange) vs Rust (1 thread, all)."""
    close = paper.series().to_numpy()
    params = reference.params_for(paper.lengths())
    for par in (False, True):
        gate(*reference.sweep(close, params, parallel=par), f"numba parallel={par}")

    def numba(par: bool) -> Op:
        return lambda: (reference.sweep(close, params, parallel=par), None)[1]

    ops: dict[str, Op] = {
        "numba 1 thread": numba(False),
        "numba prange": numba(True),
        "Rust 1 thread": lambda: one_timing(ctx, "--threads", "1"),
        "Rust all cores": lambda: one_timing(ctx, "--threads", "0"),
    }
    samples = interleaved(ctx.n(1, 7), ops, warmup=0)
    peak = ctx.json_out(ctx.bin("peak-rate"), "--runs", str(ctx.n(1, 5)))
    info = kernel_timer(ctx, "--runs", "0", "--threads", "1")
    return {"samples": samples, "multiply_adds": info["multiply_adds"], "peak": peak, "cores": os.cpu_count()}


def exp_scaling(ctx: Ctx) -> dict[str, Any]:
    """How a cold all-cores sweep grows with combos (150k bars) and with bars (80 combos)."""
    bars_axis = [150_000, 300_000] if ctx.quick else [150_000, 1_500_000, 15_000_000]
    combos_axis = [300] if ctx.quick else [1_000, 10_000]
    runs = ctx.n(1, 3)
    paper_params = write_params(OUT / "paper-params.json", reference.params_for(paper.lengths()))
    cases: list[tuple[str, int, list[str]]] = [("paper", 150_000, [])]
    for n in combos_axis:
        p = write_params(OUT / f"grid-{n}.json", paper_range_grid(n, seed=n))
        cases.append(("combos", 150_000, ["--params", str(p)]))
    for b in bars_axis[1:]:
        s = write_ipc(OUT / f"series-{b}.arrow", pa.table({"close": paper.generate(b)}))
        cases.append(("bars", b, ["--series", str(s), "--params", str(paper_params), "--check", "1"]))
    rows = []
    for axis, _, args in cases:
        out = kernel_timer(ctx, "--runs", str(runs), "--threads", "0", *args)
        secs = Samples(next(iter(out["runs"].values()))).summary()
        rows.append(
            {"axis": axis, "bars": out["bars"], "combos": out["combos"], "multiply_adds": out["multiply_adds"], **secs}
        )
        print(f"  scaling {axis}: {out['combos']} combos x {out['bars']} bars: {fmt_s(secs['median'])}", flush=True)
    return {"rows": rows, "threads": os.cpu_count()}


def exp_long_windows(ctx: Ctx) -> dict[str, Any]:
    """Lookbacks of thousands of bars (certified lines): the hma_sar lengths rule from 1,000 to
    20,000 on a 1,000,000-bar series against the paper grid on the same series, cold, all cores;
    the exact rule beside them on a 100,000-bar slice (on the whole series it would take
    minutes); the paper grid with and without certified lines; and, per kind of series, how
    many line comparisons the bounds left to the exact rule."""
    bars, cut = ctx.n(100_000, 1_000_000), ctx.n(20_000, 100_000)
    close = paper.generate(bars, seed=11)
    whole = write_ipc(OUT / f"long-{bars}.arrow", pa.table({"close": close}))
    sliced = write_ipc(OUT / f"long-{cut}.arrow", pa.table({"close": close[:cut]}))
    lengths = np.linspace(1_000, ctx.n(5_000, 20_000), ctx.n(20, 80)).round().astype(int)
    long_params = write_params(OUT / "long-params.json", reference.params_for(lengths))
    paper_params = write_params(OUT / "paper-params.json", reference.params_for(paper.lengths()))
    cases: dict[str, list[str]] = {
        f"long grid, {bars:,} bars": ["--series", str(whole), "--params", str(long_params)],
        f"paper grid, {bars:,} bars": ["--series", str(whole), "--params", str(paper_params)],
        f"long grid, {cut:,} bars": ["--series", str(sliced), "--params", str(long_params)],
        f"long grid, {cut:,} bars, exact rule": [
            *("--series", str(sliced), "--params", str(long_params)),
            "--exact-lines",
        ],
        "paper sweep (paper series)": [],
        "paper sweep, exact rule": ["--exact-lines"],
    }
    # Each case checked once (two combos against the oracle, or where that would take minutes
    # the exact rule's sweep; the paper sweep against the gate), then timed.
    for label, args in cases.items():
        kernel_timer(ctx, "--runs", "0", "--threads", "0", "--check", "2", *args)
        print(f"  long windows: {label} checked", flush=True)

    def timed(args: list[str]) -> Op:
        return lambda: float(
            next(iter(kernel_timer(ctx, "--runs", "1", "--threads", "0", "--check", "0", *args)["runs"].values()))[0]
        )

    # The two paper-series sweeps take the same path (their windows are all under 256) and
    # last ~50 ms each, so more rounds tell their ratio from the machine's noise.
    paper_pair = {"paper sweep (paper series)", "paper sweep, exact rule"}
    runs = interleaved(
        ctx.n(1, 3), {label: timed(args) for label, args in cases.items() if label not in paper_pair}, warmup=0
    )
    runs |= interleaved(ctx.n(3, 15), {label: timed(cases[label]) for label in sorted(paper_pair)}, warmup=1)

    # The comparisons the bounds could not decide, per kind of series.
    rng = np.random.default_rng(30)
    random_grid = write_params(
        OUT / "long-random-params.json", rng.integers(256, ctx.n(5_000, 20_001), size=(ctx.n(20, 200), 6))
    )
    fx = write_ipc(OUT / f"long-fx-{bars}.arrow", pa.table({"close": fx_series(bars, seed=30)}))
    flat = close.copy()
    flat[(np.arange(bars) // 10_000) % 2 == 1] = 100.0
    flat_file = write_ipc(OUT / f"long-flat-{bars}.arrow", pa.table({"close": flat}))
    kinds = {
        f"the long grid, {bars:,} bars": ["--series", str(whole), "--params", str(long_params)],
        "the long grid, the paper series (150,000 bars)": ["--params", str(long_params)],
        f"{ctx.n(20, 200)} random combos, every window 256-20,000, {bars:,} bars": [
            "--series",
            str(whole),
            "--params",
            str(random_grid),
        ],
        f"the long grid, FX-like series to 5 decimals, {bars:,} bars": [
            *("--series", str(fx)),
            *("--params", str(long_params)),
        ],
        f"the long grid, constant every other 10,000 bars, {bars:,} bars": [
            "--series",
            str(flat_file),
            "--params",
            str(long_params),
        ],
    }
    counts = {}
    for label, args in kinds.items():
        out = kernel_timer(ctx, "--runs", "0", "--threads", "0", "--check", "1", *args)
        counts[label] = out["certified"]
        print(f"  long windows: {label}: {out['certified']}", flush=True)
    return {
        "bars": bars,
        "cut": cut,
        "lengths": [int(lengths[0]), int(lengths[-1]), len(lengths)],
        "runs": runs,
        "counts": counts,
    }


def exp_server(ctx: Ctx) -> dict[str, Any]:
    """The 80-combo paper sweep as one params-only call (cold: no cache; the first sweep of a
    new dataset with the default cache; warm) and as 80 one-combo calls (chatty), against the
    kernel in-process, all cores."""
    cold_srv, warm_srv = ctx.server("--cache-bytes", "0"), ctx.server()
    cold, warm = flight.connect(cold_srv.addr), flight.connect(warm_srv.addr)
    table = paper.table()
    lengths = paper.lengths()
    request = {"dataset": "paper", "lengths": lengths}
    for c in (cold, warm):
        put(c, "paper", table)
        gate_table(sweep(c, request), "one params-only call")

    def chatty() -> float:
        put(warm, "paper", table)  # a new version: its cache starts empty and fills as we go
        t0 = time.perf_counter()
        rows = [sweep(warm, {"dataset": "paper", "lengths": [n]}) for n in lengths]
        took = time.perf_counter() - t0
        gate_table(pa.concat_tables(rows), "chatty calls")
        return took

    fresh_srv = ctx.server()
    fresh = flight.connect(fresh_srv.addr)

    def cold_default() -> float:
        # What a user gets: the default cache, a dataset swept for the first time.
        put(fresh, "paper", table)
        t0 = time.perf_counter()
        sweep(fresh, request)
        return time.perf_counter() - t0

    ops: dict[str, Op] = {
        "in-process, all cores": lambda: one_timing(ctx, "--threads", "0"),
        "one call, cold cache": lambda: (sweep(cold, request), None)[1],
        "one call, first sweep, default cache": cold_default,
        "one call, warm cache": lambda: (sweep(warm, request), None)[1],
        "chatty: 80 one-combo calls": chatty,
    }
    samples = interleaved(ctx.n(2, 15), ops)
    # A user's sequence on a new server with the default cache: each of five new datasets of the
    # paper series swept five times in a row (the cache keeps a series' lines from its second
    # sweep on, filled at idle moments); each call's time by its place in the sequence.
    seq_srv = ctx.server()
    seq = flight.connect(seq_srv.addr)
    sequence: list[list[float]] = []
    for d in range(ctx.n(2, 5)):
        name = f"paper-{d}"
        put(seq, name, table)
        calls = []
        for _ in range(5):
            t0 = time.perf_counter()
            gate_table(sweep(seq, {"dataset": name, "lengths": lengths}), "a call of the sequence")
            calls.append(time.perf_counter() - t0)
        sequence.append(calls)
    return {"samples": samples, "sequence": sequence}


def exp_architectures(ctx: Ctx) -> dict[str, Any]:
    """The study's other ways across the boundary, each sweeping the 80 paper combos, against
    the preloaded params-only call; and the serialization tax of the series itself."""
    srv = ctx.server("--cache-bytes", "0")
    c = flight.connect(srv.addr)
    table = paper.table()
    close = table["close"].to_numpy()
    lengths = paper.lengths()
    put(c, "paper", table)

    def exchange(ls: list[int]) -> pa.Table:
        cmd = json.dumps({"op": "sweep", "lengths": ls}).encode()
        writer, reader = c.do_exchange(flight.FlightDescriptor.for_command(cmd))
        writer.begin(table.schema)
        writer.write_table(table)
        writer.done_writing()
        out = reader.read_all()
        writer.close()
        return out

    schema = table.schema.with_metadata({"sweepflight.sweep": json.dumps({"lengths": lengths})})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        w.write_table(table.replace_schema_metadata(schema.metadata))
    stdin_bytes = sink.getvalue().to_pybytes()
    js = ctx.spawn(ctx.bin("json-sweep"), "127.0.0.1:0")
    import http.client

    host, port = js.addr.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))

    def json_service() -> pa.Table:
        body = json.dumps({"close": close.tolist(), "lengths": lengths})
        conn.request("POST", "/sweep", body=body, headers={"content-type": "application/json"})
        return pa.table(json.loads(conn.getresponse().read()))

    paths: dict[str, Callable[[], pa.Table]] = {
        "preloaded, one params-only call": lambda: sweep(c, {"dataset": "paper", "lengths": lengths}),
        "stateless chunky: series + params per call (DoExchange)": lambda: exchange(lengths),
        "stateless chatty: 80 calls, each re-shipping the series": lambda: pa.concat_tables(
            [exchange([n]) for n in lengths]
        ),
        "spawn a process per sweep (Arrow IPC on stdio)": lambda: pa.ipc.open_stream(
            subprocess.run([ctx.bin("sweep-stdio")], input=stdin_bytes, capture_output=True, check=True).stdout
        ).read_all(),
        "JSON over HTTP, series in every request": json_service,
    }
    for name, f in paths.items():
        gate_table(f(), name)
    ops: dict[str, Op] = {name: (lambda f=f: (f(), None)[1]) for name, f in paths.items()}
    ops["in-process, all cores"] = lambda: one_timing(ctx, "--threads", "0")
    samples = interleaved(ctx.n(1, 7), ops)
    conn.close()

    import pickle

    def arrow_roundtrip() -> None:
        s = pa.BufferOutputStream()
        with pa.ipc.new_stream(s, table.schema) as w:
            w.write_table(table)
        pa.ipc.open_stream(s.getvalue()).read_all()

    ser = interleaved(
        ctx.n(3, 15),
        {
            "raw bytes": lambda: (np.frombuffer(close.tobytes(), dtype=np.float64), None)[1],
            "Arrow IPC stream": lambda: arrow_roundtrip(),
            "pickle": lambda: (pickle.loads(pickle.dumps(close, protocol=5)), None)[1],
            "JSON": lambda: (np.array(json.loads(json.dumps(close.tolist()))), None)[1],
        },
    )
    return {"samples": samples, "serialization": ser}


def exp_peer(ctx: Ctx) -> dict[str, Any]:
    """sweepflight vs the peer (benches/peer.py), same pyarrow client, Unix sockets, interleaved:
    the 1-combo params-only call, puts and DoGets, the 80-combo sweep; the Rust client's put,
    a raw echo as yardstick, a durable put against dd, and peak memory during the largest put."""
    ours_p, peer_p = ctx.server(), ctx.peer()
    ours, peer = flight.connect(ours_p.addr), flight.connect(peer_p.addr)
    both = {"sweepflight": ours, "peer": peer}
    raw_p = ctx.spawn(ctx.bin("raw-echo"), "--unix", str(OUT / f"raw-{os.getpid()}.sock"))
    echo = raw_echo(raw_p.addr.removeprefix("unix://"))
    out: dict[str, Any] = {}

    # The params-only call: one combo on a 64-bar dataset, so compute is ~0.
    tiny = pa.table({"close": closes(64)})
    small_call = {"dataset": "tiny", "lengths": [6]}
    for c in both.values():
        put(c, "tiny", tiny)
    want = sweep(ours, small_call)
    if not sweep(peer, small_call)["pnl"].equals(want["pnl"]):
        raise CheckFailed("the peer and sweepflight disagree on the 1-combo call")
    out["call"] = interleaved(
        ctx.n(50, 2000), {k: (lambda c=c: (sweep(c, small_call), None)[1]) for k, c in both.items()}, warmup=20
    )

    # The 80-combo paper sweep: ours with its default cache (what a user gets), the peer numba.
    request = {"dataset": "paper", "lengths": paper.lengths()}
    for name, c in both.items():
        put(c, "paper", paper.table())
        gate_table(sweep(c, request), f"{name} paper sweep")
    out["sweep"] = interleaved(ctx.n(1, 5), {k: (lambda c=c: (sweep(c, request), None)[1]) for k, c in both.items()})

    # Bulk data: puts then DoGets of each size; at 1.2 MB the raw echo of the same bytes too.
    def bulk(size: int, table: pa.Table) -> dict[str, dict[str, float]]:
        rounds = ctx.n(3, 100 if size < 10 * MB else 10 if size < 500 * MB else 4)
        body = table["close"].to_numpy().tobytes()
        ops: dict[str, Op] = {f"put {k}": (lambda c=c: (put(c, "bulk", table), None)[1]) for k, c in both.items()}
        if size < 10 * MB:
            ops["raw echo"] = lambda: (echo(body), None)[1]
        else:
            # The Rust client (upload-timer: one untimed warm-up put, then one timed).
            ops["put sweepflight, Rust client"] = lambda: float(
                ctx.json_out(ctx.bin("upload-timer"), ours_p.addr, str(size), "1")["secs"][0]
            )
        row = interleaved(rounds, ops)
        tickets = {k: ticket(c, "bulk") for k, c in both.items()}
        for k, c in both.items():
            if not get(c, tickets[k])["close"].equals(table["close"]):
                raise CheckFailed(f"DoGet from {k} did not return what was put")
        gets: dict[str, Op] = {f"get {k}": (lambda k=k, c=c: (get(c, tickets[k]), None)[1]) for k, c in both.items()}
        row.update(interleaved(rounds, gets))
        print(f"  peer: {size / MB:g} MB done", flush=True)
        return row

    sizes = [1_200_000, 8_000_000] if ctx.quick else [1_200_000, 80_000_000, 800_000_000]
    out["bulk"] = {}
    for size in sizes:
        table = pa.table({"close": 100 + (np.arange(size // 8) % 1000) * 0.01})
        out["bulk"][str(size)] = bulk(size, table)
    list(ours.do_action(flight.Action("drop", b"bulk")))

    # Peak resident memory during the largest put (`table`, the last size), each server fresh
    # with nothing else stored; and that put's time: the puts above replace a dataset, whose
    # predecessor's memory a server can reuse, while this one has only fresh pages.
    size = sizes[-1]
    out["peak_rss"] = {"dataset_bytes": size}
    for name, proc in (("sweepflight", ctx.server()), ("peer", ctx.peer())):
        c = flight.connect(proc.addr)
        before = proc.status("VmRSS")
        proc.reset_peak()
        t0 = time.perf_counter()
        put(c, "bulk", table)
        secs = time.perf_counter() - t0
        out["peak_rss"][name] = {"before": before, "peak": proc.status("VmHWM"), "secs": secs}
        c.close()
        proc.stop()

    # Durable puts against writing and fsyncing the same number of bytes with dd, same disk.
    out["durable"] = durable_against_dd(ctx, table, size, "durable put", "durable-data")
    out["durable_bytes"] = {"put": size, "dd": size // MB * MB}
    return out


def durable_against_dd(ctx: Ctx, table: pa.Table, size: int, label: str, data: str) -> dict[str, dict[str, float]]:
    """Puts of `table` (`size` bytes) to a server with a data directory `data` under the study's
    output, interleaved with dd writing and fsyncing as many bytes on the same disk."""
    durable_p = ctx.server("--data-dir", str(OUT / data))
    durable = flight.connect(durable_p.addr)
    dd_file = OUT / f"{data}.dd"

    def dd() -> None:
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={dd_file}", "bs=1000000", f"count={size // MB}", "conv=fsync", "status=none"],
            check=True,
        )

    runs = interleaved(
        ctx.n(2, 8),
        {label: lambda: (put(durable, "bulk", table), None)[1], "dd + fsync": lambda: (dd(), None)[1]},
    )
    dd_file.unlink()
    durable_p.stop()
    return runs


def exp_universe(ctx: Ctx) -> dict[str, Any]:
    """A keyed universe: its put against an unkeyed put of the same bytes, and the 80 paper
    combos over every series in one call against the kernel in-process, series one at a time
    and all of them concatenated (the same work in one sweep)."""
    count, bars = (10, 20_000) if ctx.quick else (200, 150_000)
    keys = [f"S{i:03d}" for i in range(count)]
    close = np.concatenate([closes(bars, seed=100 + i) for i in range(count)])
    key = pa.DictionaryArray.from_arrays(pa.array(np.repeat(np.arange(count, dtype=np.int16), bars)), pa.array(keys))
    table = pa.table({"symbol": key, "close": close})
    timer_file = write_ipc(OUT / "universe.arrow", pa.table({"key": pa.array(np.repeat(keys, bars)), "close": close}))

    srv = ctx.server("--cache-bytes", "0")
    c = flight.connect(srv.addr)
    puts = interleaved(
        ctx.n(2, 5),
        {
            "keyed put": lambda: (put(c, "universe", table, key="symbol"), None)[1],
            "unkeyed put, same bytes": lambda: (put(c, "flat", table), None)[1],
        },
    )
    meta = put(c, "universe", table, key="symbol")
    if meta.get("series") != count:
        raise CheckFailed(f"keyed put reported {meta.get('series')} series, not {count}")
    lengths = paper.lengths()
    request = {"dataset": "universe", "lengths": lengths}
    result = sweep(c, request)
    first = result.slice(0, len(lengths))
    if result.num_rows != count * len(lengths) or first["series"][0].as_py() != keys[0]:
        raise CheckFailed("the universe sweep's rows are not series-major")
    check_numba(close[:bars], reference.params_for(lengths), first, "the universe sweep (first series)")
    params = write_params(OUT / "paper-params.json", reference.params_for(lengths))

    # One kernel-timer run times both in-process variants: the op records the concatenated
    # sweep's time aside and returns the one-at-a-time time.
    whole = Samples()

    def in_process() -> float:
        out = kernel_timer(ctx, "--runs", "1", "--threads", "0", "--series", str(timer_file), "--params", str(params))
        runs = {k.split()[0]: v[0] for k, v in out["runs"].items()}
        whole.xs.append(runs["whole"])
        return float(runs["per-key"])

    sweeps = interleaved(
        ctx.n(1, 3),
        {
            "one call, every series": lambda: (sweep(c, request), None)[1],
            "in-process, one series at a time": in_process,
        },
        warmup=0,
    )
    sweeps["in-process, concatenated"] = whole.summary()
    return {
        "series": count,
        "bars": bars,
        "combos": len(lengths),
        "close_bytes": close.nbytes,
        "table_bytes": table.nbytes,
        "puts": puts,
        "sweeps": sweeps,
    }


def sma_cross_trades(x: list[float], fast: int, slow: int) -> int:
    """A plain sma_cross oracle (strategies.md): fresh oldest-first sums, the paper's
    stop-and-reverse; the number of booked trades."""

    def sma(n: int) -> list[float]:
        out = [float("nan")] * len(x)
        for i in range(n - 1, len(x)):
            s = 0.0
            for v in x[i - n + 1 : i + 1]:
                s += v
            out[i] = s / n
        return out

    a, b = sma(fast), sma(slow)
    pos, trades = 0, 0
    for i in range(1, len(x)):
        if any(v != v for v in (a[i - 1], a[i], b[i - 1], b[i])):
            continue
        s = 1 if a[i] > b[i] and a[i - 1] <= b[i - 1] else -1 if a[i] < b[i] and a[i - 1] >= b[i - 1] else 0
        if s and s != pos:
            trades += pos != 0
            pos = s
    return trades + (pos != 0)


def vectorbt_python(ctx: Ctx) -> str | None:
    """The python of vectorbt's own environment (scripts/setup-vectorbt.sh makes it once); None
    in a quick run, which times sweepflight only."""
    if ctx.quick:
        return None
    script = str(ROOT / "scripts" / "setup-vectorbt.sh")
    return subprocess.run([script], check=True, capture_output=True, text=True).stdout.strip()


def cold_call(
    c: flight.FlightClient,
    srv: Any,
    close: np.ndarray | pa.Table,
    request: dict[str, Any],
    growth: list[int],
    calls: int = 1,
    key: str | None = None,
) -> Op:
    """A cold `sweep` call: `request` on the series (closes, or a table of bars) put anew as a
    dataset of its own (nothing cached for it), timed around the call only (`calls` calls in a
    row, the later ones with whatever the first left in the cache: what a user's loop gets);
    the server's peak resident memory over the call above what it held before goes into
    `growth`; the dataset is dropped after."""
    count = 0
    table = close if isinstance(close, pa.Table) else pa.table({"close": close})

    def op() -> float:
        nonlocal count
        count += 1
        name = f"cold-{id(growth)}-{count}"
        put(c, name, table, key)
        before = srv.status("VmRSS")
        srv.reset_peak()
        t0 = time.perf_counter()
        for _ in range(calls):
            sweep(c, {**request, "dataset": name})
        dt = time.perf_counter() - t0
        growth.append(srv.status("VmHWM") - before)
        list(c.do_action(flight.Action("drop", name.encode())))
        return dt

    return op


def exp_strategies(ctx: Ctx) -> dict[str, Any]:
    """vectorbt's canonical example (an SMA-crossover grid of windows 10..39 taken in pairs, 435
    combos, stop-and-reverse on the paper series) with both its engines against one cold
    sweepflight call on the same grid, and each strategy's cost per combo against the paper
    sweep's (cold, all cores, kernel-timer)."""
    bars = 20_000 if ctx.quick else 150_000
    close = paper.series()[:bars]
    pairs = VBT_PAIRS
    srv = ctx.server()
    c = flight.connect(srv.addr)
    put(c, "paper", pa.table({"close": close}))
    request = {"dataset": "paper", "strategy": "sma_cross", "params": pairs}
    ours = sweep(c, request)
    trades = ours["trades"].to_pylist()
    for k in (0, 217, 434):
        want = sma_cross_trades(close.tolist(), *pairs[k])
        if trades[k] != want:
            raise CheckFailed(f"sma_cross {pairs[k]}: {trades[k]} trades, the plain oracle {want}")
    # Cold: each call on a dataset put anew (the indicator sweep keeps nothing between calls
    # anyway); the server's peak resident memory over the call, above what it held before.
    growth: list[int] = []
    ops: dict[str, Op] = {"sweepflight, one call": cold_call(c, srv, close, request, growth)}
    vbt_python = vectorbt_python(ctx)
    peaks: dict[str, list[int]] = {}
    agreement: dict[str, int] = {}
    if vbt_python:
        npy = OUT / "paper-close.npy"
        np.save(npy, close)

        def vbt(engine: str) -> Op:
            def op() -> float:
                out = ctx.json_out(vbt_python, str(ROOT / "benches" / "vbt_peer.py"), engine, str(npy))
                peaks.setdefault(engine, []).append(int(out["peak_rss"]))
                theirs = {(a, b): t for a, b, t in out["combos"]}
                if len(theirs) != len(pairs):
                    raise CheckFailed(f"vectorbt ({engine}) answered {len(theirs)} combos, not {len(pairs)}")
                agreement[engine] = sum(theirs[(a, b)] == t for (a, b), t in zip(pairs, trades, strict=True))
                return float(out["seconds"])

            return op

        ops["vectorbt 1.2.0, rust engine"] = vbt("rust")
        ops["vectorbt 1.2.0, numba engine"] = vbt("numba")
    calls = interleaved(ctx.n(2, 3), ops, warmup=0)

    # Per combo, each strategy against the paper sweep: kernel-timer, all cores, cold.
    grids = {
        "sma_cross": pairs,
        "ema_cross": pairs,
        "donchian": [[n] for n in range(5, 205)],
        "rsi_revert": [[n, 20.0 + k, 80.0 - k] for n in range(2, 42) for k in range(10)],
    }
    series_file = write_ipc(OUT / "strategy-close.arrow", pa.table({"close": close}))

    def timer(strategy: str | None) -> Op:
        args = ["--runs", "1", "--threads", "0", "--series", str(series_file)]
        if strategy is None:
            args += ["--params", str(write_params(OUT / "paper-params.json", reference.params_for(paper.lengths())))]
        else:
            path = OUT / f"{strategy}-params.json"
            path.write_text(json.dumps(grids[strategy]))
            args += ["--strategy", strategy, "--params", str(path), "--check", "3"]
        return lambda: float(next(iter(kernel_timer(ctx, *args)["runs"].values()))[0])

    kernel_ops: dict[str, Op] = {"hma_sar (the 80 paper combos)": timer(None)}
    kernel_ops.update({s: timer(s) for s in grids})
    kernel = interleaved(ctx.n(1, 5), kernel_ops)
    counts = {"hma_sar (the 80 paper combos)": 80, **{s: len(g) for s, g in grids.items()}}

    # What the per-bar metrics (sharpe, sortino) cost: the paper sweep and a 10,000-combo
    # sma_cross grid with and without them, in the same rounds.
    big = [[f, s] for f in range(2, 102) for s in range(20, 520, 5)]
    big_file = OUT / "sma-10k-params.json"
    big_file.write_text(json.dumps(big))
    paper_params = str(write_params(OUT / "paper-params.json", reference.params_for(paper.lengths())))

    def metrics_op(grid: str, on: bool) -> Op:
        args = ["--runs", "1", "--threads", "0", "--series", str(series_file)]
        args += (
            ["--params", paper_params] if grid == "paper" else ["--strategy", "sma_cross", "--params", str(big_file)]
        )
        args += [] if on else ["--no-bar-metrics"]
        return lambda: float(next(iter(kernel_timer(ctx, *args)["runs"].values()))[0])

    metric_cost = interleaved(
        ctx.n(1, 7),
        {
            f"{g}, metrics {'on' if on else 'off'}": metrics_op(g, on)
            for g in ("paper", "sma_cross 10,000")
            for on in (True, False)
        },
    )
    return {
        "bars": bars,
        "combos": len(pairs),
        "calls": calls,
        "server_growth": growth,
        "vectorbt_peak_rss": peaks,
        "vectorbt_trade_agreement": agreement,
        "kernel": kernel,
        "kernel_combos": counts,
        "metric_cost": metric_cost,
    }


def action_table(c: flight.FlightClient, kind: str, request: dict[str, Any]) -> pa.Table:
    """An action whose reply is one Arrow IPC stream over its Result bodies."""
    results = c.do_action(flight.Action(kind, json.dumps(request).encode()))
    return pa.ipc.open_stream(b"".join(r.body.to_pybytes() for r in results)).read_all()


def best_rows(t: pa.Table, k: int) -> pa.Table:
    """The first k rows by pnl, largest first, ties by combo (the server's order)."""
    return t.sort_by([("pnl", "descending"), ("combo", "ascending")]).slice(0, k)


def exp_judging(ctx: Ctx) -> dict[str, Any]:
    """Judging on the server: `top: 100` over an sma_cross grid of 10^7 combos on 2,000 bars
    against the same grid in chunks of ~100,000 combos without `top` (throughput, and the
    server's memory growth), and `trades` of 100 combos on the paper series against their
    sweep."""
    bars = 2_000
    close = closes(bars, seed=11)
    side = ctx.n(400, 3_200)
    fast, slow = list(range(1, side + 1)), list(range(1, side + 1))
    combos = side * side
    srv = ctx.server()
    c = flight.connect(srv.addr)
    put(c, "s", pa.table({"close": close}))
    ranked = {
        "dataset": "s",
        "strategy": "sma_cross",
        "grid": {"fast": fast, "slow": slow},
        "order_by": "pnl",
        "top": 100,
    }
    per_chunk = max(1, 100_000 // side)
    growth: dict[str, list[int]] = {"top": [], "chunks": []}
    best: dict[str, pa.Table] = {}

    def measured(label: str, run: Callable[[], pa.Table]) -> Op:
        def op() -> float:
            before = srv.status("VmRSS")
            srv.reset_peak()
            t0 = time.perf_counter()
            best[label] = run()
            dt = time.perf_counter() - t0
            growth[label].append(srv.status("VmHWM") - before)
            return dt

        return op

    def with_top() -> pa.Table:
        return sweep(c, ranked)

    def in_chunks() -> pa.Table:
        kept = []
        for i in range(0, side, per_chunk):
            part = {"dataset": "s", "strategy": "sma_cross", "grid": {"fast": fast[i : i + per_chunk], "slow": slow}}
            t = sweep(c, part)
            offset = i * side
            t = t.set_column(0, "combo", pc.add(t["combo"], offset))
            kept.append(best_rows(t, 100))
        return best_rows(pa.concat_tables(kept), 100)

    top_runs = interleaved(
        ctx.n(1, 3), {"top": measured("top", with_top), "chunks": measured("chunks", in_chunks)}, warmup=0
    )
    if best["top"]["combo"].to_pylist() != best["chunks"]["combo"].to_pylist():
        raise CheckFailed("top 100 of the grid differs from the best 100 of its chunks")
    for k in (0, 57):
        a, b = fast[best["top"]["combo"][k].as_py() // side], slow[best["top"]["combo"][k].as_py() % side]
        want = sma_cross_trades(close.tolist(), a, b)
        if best["top"]["trades"][k].as_py() != want:
            raise CheckFailed(f"sma_cross ({a}, {b}): {best['top']['trades'][k]} trades, the plain oracle {want}")

    # trades of 100 combos on the paper series against their sweep.
    paper_close = paper.series()[: ctx.n(20_000, 150_000)]
    put(c, "paper", pa.table({"close": paper_close}))
    pairs = VBT_PAIRS[:100]
    body = {"dataset": "paper", "strategy": "sma_cross", "params": pairs}
    swept = sweep(c, body)
    booked = action_table(c, "trades", body)
    if booked.num_rows != sum(swept["trades"].to_pylist()):
        raise CheckFailed(
            f"trades answered {booked.num_rows} trades, the sweep counted {sum(swept['trades'].to_pylist())}"
        )

    def call(kind: str) -> Op:
        def op() -> None:
            action_table(c, kind, body)

        return op

    detail = interleaved(ctx.n(2, 7), {"sweep, 100 combos": call("sweep"), "trades, 100 combos": call("trades")})
    return {
        "bars": bars,
        "combos": combos,
        "per_chunk": per_chunk * side,
        "top": top_runs,
        "growth": growth,
        "paper_bars": len(paper_close),
        "trades_booked": booked.num_rows,
        "detail": detail,
    }


def exp_walk_forward(ctx: Ctx) -> dict[str, Any]:
    """Walk-forward in one call against the same work as separate `sweep` calls per fold (the
    in-sample sweep of the universe with `rows` and `top: 1`, then each series' chosen combo on
    its test rows), answers checked equal; and `sweepflight.stats.pbo` on a sweep's 16 blocks."""
    from sweepflight import stats

    series, folds = ctx.n(4, 20), 10
    train, test = ctx.n(1_000, 5_000), ctx.n(200, 1_000)
    bars = train + folds * test
    fast, slow = list(range(2, 42, 4)), list(range(20, 20 + 3 * ctx.n(20, 100), 3))
    combos = len(fast) * len(slow)
    frames = [pa.table({"sym": [f"S{k:02d}"] * bars, "close": closes(bars, seed=100 + k)}) for k in range(series)]
    srv = ctx.server()
    c = flight.connect(srv.addr)
    universe = pa.concat_tables(frames)
    base = {"dataset": "u", "strategy": "sma_cross", "grid": {"fast": fast, "slow": slow}}
    names = [f"S{k:02d}" for k in range(series)]
    got: dict[str, list[tuple[str, int, int | None, float | None]]] = {}

    def fresh() -> float:
        # A new version of the dataset each time: both ways start with a cold cache, as the
        # first walk-forward of a series does (a repeat would find its lines cached).
        put(c, "u", universe, key="sym")
        return time.perf_counter()

    def one_call() -> float:
        t0 = fresh()
        t = action_table(c, "walk_forward", {**base, "folds": {"train": train, "test": test}, "select": {"by": "pnl"}})
        got["one call"] = list(
            zip(
                t["series"].to_pylist(),
                t["fold"].to_pylist(),
                t["combo"].to_pylist(),
                t["pnl"].to_pylist(),
                strict=True,
            )
        )
        return time.perf_counter() - t0

    def by_hand() -> float:
        t0 = fresh()
        rows = []
        for k in range(folds):
            a, b = k * test, k * test + train
            best = sweep(c, {**base, "rows": [a, b], "order_by": "pnl", "top": 1})
            for name, combo in zip(best["series"].to_pylist(), best["combo"].to_pylist(), strict=True):
                pair = [fast[combo // len(slow)], slow[combo % len(slow)]]
                out = sweep(
                    c,
                    {
                        "dataset": "u",
                        "strategy": "sma_cross",
                        "params": [pair],
                        "series": [name],
                        "rows": [b, b + test],
                    },
                )
                rows.append((name, k, combo, out["pnl"][0].as_py()))
        got["by hand"] = sorted(rows, key=lambda r: (names.index(r[0]), r[1]))
        return time.perf_counter() - t0

    runs = interleaved(ctx.n(1, 5), {"one walk_forward call": one_call, "sweep calls per fold": by_hand})
    if got["one call"] != got["by hand"]:
        raise CheckFailed("walk_forward differs from its folds run by hand through sweep")
    # PBO of a real sweep: 1,000 combos x 16 blocks.
    fresh()
    blocked = sweep(c, {**base, "series": ["S00"], "blocks": 16})
    import polars as pl

    frame = pl.from_arrow(blocked)
    assert isinstance(frame, pl.DataFrame)
    pbo_runs = interleaved(ctx.n(1, 5), {"pbo, 1,000 combos x 16 blocks": lambda: stats.pbo(frame) and None})
    return {
        "series": series,
        "folds": folds,
        "train": train,
        "test": test,
        "combos": combos,
        "calls_by_hand": folds * (1 + series),
        "runs": runs,
        "pbo_combos": blocked.num_rows,
        "pbo": pbo_runs,
    }


def fx_series(rows: int, seed: int = 5) -> np.ndarray:
    """A price series as an FX feed writes it: a random walk around 1.1, to 5 decimals."""
    walk = 1.1 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0, 1e-4, rows)))
    return np.round(walk, 5)


#: The client of the shaped-link put: runs in the client's network namespace, puts the series
#: uncompressed and compressed in alternating rounds, prints the seconds of each as JSON.
LINK_CLIENT = """
import json, random, sys, time
import numpy as np, pyarrow as pa, pyarrow.flight as flight
uri, rows, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
walk = 1.1 * np.exp(np.cumsum(np.random.default_rng(5).normal(0, 1e-4, rows)))
table = pa.table({"close": np.round(walk, 5)})
c = flight.connect(uri)
out = {k: [] for k in ("none", "lz4", "zstd")}
order = list(out)
for r in range(rounds + 1):
    random.Random(r).shuffle(order)
    for k in order:
        opts = flight.FlightCallOptions(write_options=pa.ipc.IpcWriteOptions(compression=None if k == "none" else k))
        t0 = time.perf_counter()
        w, rd = c.do_put(flight.FlightDescriptor.for_path("fx"), table.schema, options=opts)
        w.write_table(table, max_chunksize=1 << 20)
        w.done_writing(); rd.read(); w.close()
        if r:
            out[k].append(time.perf_counter() - t0)
print(json.dumps(out))
"""


def shaped_link(ctx: Ctx, rows: int, rounds: int) -> dict[str, Any]:
    """Puts over a veth pair between two network namespaces, each end shaped to 1 Gbit/s by
    `tc` (token bucket): the server in one namespace, a pyarrow client in the other. What the
    machine does not allow (no root, no `ip netns`) is recorded as the reason."""
    ns, (a, b) = ("sfsrv", "sfcli"), ("veth-sfs", "veth-sfc")
    sh = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True)  # noqa: E731
    try:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
            sh("ip", "netns", "add", n)
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        sh("ip", "link", "set", a, "netns", ns[0])
        sh("ip", "link", "set", b, "netns", ns[1])
        for n, dev, addr in ((ns[0], a, "10.77.0.1/24"), (ns[1], b, "10.77.0.2/24")):
            sh("ip", "netns", "exec", n, "ip", "addr", "add", addr, "dev", dev)
            sh("ip", "netns", "exec", n, "ip", "link", "set", dev, "up")
            sh("ip", "netns", "exec", n, "ip", "link", "set", "lo", "up")
            sh(
                "ip",
                "netns",
                "exec",
                n,
                "tc",
                "qdisc",
                "add",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                "1gbit",
                "burst",
                "512kb",
                "latency",
                "50ms",
            )
    except (OSError, subprocess.CalledProcessError) as e:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        err = e.stderr.decode().strip() if isinstance(e, subprocess.CalledProcessError) and e.stderr else str(e)
        return {"possible": False, "why": err or "ip netns failed"}
    try:
        srv = ctx.spawn(
            "ip", "netns", "exec", ns[0], ctx.bin("sweepflight-server"), "--in-memory", "--listen", "10.77.0.1:0"
        )
        out = subprocess.run(
            ["ip", "netns", "exec", ns[1], sys.executable, "-c", LINK_CLIENT, srv.addr, str(rows), str(rounds)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        secs = json.loads(out)
        return {"possible": True, "rows": rows, "puts": {k: Samples(v).summary() for k, v in secs.items()}}
    finally:
        ctx.close()
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def exp_jobs(ctx: Ctx) -> dict[str, Any]:
    """Jobs and compression: a job's `status` call against the 1-combo params-only call; how
    long `cancel` of a running sweep takes to answer (its memory back, checked); puts of an FX
    price series compressed (LZ4, ZSTD) and not, on a Unix socket and over a link shaped to
    1 Gbit/s."""
    srv = ctx.server()
    c = flight.connect(srv.addr)
    put(c, "paper", pa.table({"close": paper.series()}))

    def act(kind: str, body: dict[str, Any]) -> dict[str, Any]:
        results = c.do_action(flight.Action(kind, json.dumps(body).encode()))
        answer: dict[str, Any] = json.loads(b"".join(r.body.to_pybytes() for r in results))
        return answer

    done = act("submit", {"dataset": "paper", "lengths": [20]})["job"]
    while act("status", {"job": done})["state"] != "done":
        time.sleep(0.001)
    # The headline's params-only call: one combo on a 64-bar dataset, so compute is ~0.
    put(c, "tiny", pa.table({"close": closes(64)}))
    one = {"dataset": "tiny", "lengths": [6]}
    calls = interleaved(
        ctx.n(50, 2_000),
        {
            "status of a job": lambda: act("status", {"job": done}) and None,
            "1-combo sweep call": lambda: sweep(c, one) and None,
        },
        warmup=20,
    )
    # Cancel: a long sweep running, cancelled; the reply means its memory is back.
    long = {
        "dataset": "paper",
        "strategy": "sma_cross",
        "grid": {"fast": list(range(1, 200)), "slow": list(range(2, 300))},
    }
    cancels = Samples()
    for _ in range(ctx.n(1, 5)):
        job = act("submit", long)["job"]
        while act("status", {"job": job})["combos_done"] == 0:
            time.sleep(0.005)
        t0 = time.perf_counter()
        status = act("cancel", {"job": job})
        cancels.xs.append(time.perf_counter() - t0)
        stats = act("stats", {})
        if status["state"] != "cancelled" or stats["sweep_reserved_bytes"] != 0:
            raise CheckFailed(f"cancel answered {status['state']} with {stats['sweep_reserved_bytes']} bytes reserved")
    # Compressed puts on the Unix socket: every byte stored checked once.
    rows = ctx.n(1_000_000, 10_000_000)
    fx = pa.table({"close": fx_series(rows)})

    def put_with(codec: str | None) -> Op:
        def op() -> None:
            opts = flight.FlightCallOptions(write_options=pa.ipc.IpcWriteOptions(compression=codec))
            w, rd = c.do_put(flight.FlightDescriptor.for_path("fx"), fx.schema, options=opts)
            w.write_table(fx, max_chunksize=1 << 20)
            w.done_writing()
            rd.read()
            w.close()

        return op

    def encode_only(codec: str) -> Op:
        # What the client alone spends: the same IPC stream compressed into memory.
        def op() -> None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, fx.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as w:
                w.write_table(fx, max_chunksize=1 << 20)

        return op

    puts = interleaved(
        ctx.n(1, 5),
        {
            "uncompressed": put_with(None),
            "lz4": put_with("lz4"),
            "zstd": put_with("zstd"),
            "lz4, the client's compression alone": encode_only("lz4"),
            "zstd, the client's compression alone": encode_only("zstd"),
        },
    )
    stored = c.do_get(ticket(c, "fx")).read_all()
    if not stored["close"].equals(fx["close"]):
        raise CheckFailed("a compressed put stored other values")
    sizes = {}
    for codec in ("lz4", "zstd"):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, fx.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as w:
            w.write_table(fx, max_chunksize=1 << 20)
        sizes[codec] = sink.getvalue().size
    link = {"possible": False, "why": "not run in --quick"} if ctx.quick else shaped_link(ctx, rows, 5)
    return {
        "calls": calls,
        "cancel": cancels.summary() | {"max": max(cancels.xs)},
        "rows": rows,
        "bytes": rows * 8,
        "compressed_bytes": sizes,
        "puts": puts,
        "link": link,
    }


def exp_overload(ctx: Ctx) -> dict[str, Any]:
    """Many concurrent sweeps on distinct long series under a small sweep memory budget: peak
    and settled resident memory, time against the same sweeps one after another, results."""
    count, bars = (4, 100_000) if ctx.quick else (16, 1_000_000)
    budget, cache = (64 * MiB, 32 * MiB) if ctx.quick else (512 * MiB, 256 * MiB)
    lengths = list(range(100, 1001, 100)) if ctx.quick else list(range(200, 4001, 200))
    srv = ctx.server("--sweep-memory-bytes", str(budget), "--cache-bytes", str(cache), "--max-queued-sweeps", "64")
    conns = [flight.connect(srv.addr) for _ in range(count)]
    tables = [pa.table({"close": closes(bars, seed=500 + i)}) for i in range(count)]
    datasets = sum(t.nbytes for t in tables)

    def fresh() -> None:
        # New versions: the cache holds nothing of them, so every phase starts cold.
        for i, t in enumerate(tables):
            put(conns[i], f"s{i}", t)

    def one(i: int) -> pa.Table:
        return sweep(conns[i], {"dataset": f"s{i}", "lengths": lengths})

    alone: list[pa.Table] = []
    seq, conc = Samples(), Samples()
    peaks = []
    for r in range(ctx.n(1, 2)):
        fresh()
        t0 = time.perf_counter()
        results = [one(i) for i in range(count)]
        seq.xs.append(time.perf_counter() - t0)
        if not alone:
            alone = results
            check_numba(tables[0]["close"].to_numpy(), reference.params_for(lengths), alone[0], "a sweep run alone")
        elif any(not a.equals(b) for a, b in zip(alone, results, strict=True)):
            raise CheckFailed(f"sequential round {r} differs from the first")
        fresh()
        srv.reset_peak()
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            results = list(pool.map(one, range(count)))
        conc.xs.append(time.perf_counter() - t0)
        peaks.append(srv.status("VmHWM"))
        if any(not a.equals(b) for a, b in zip(alone, results, strict=True)):
            raise CheckFailed("a concurrent sweep's result differs from the same sweep run alone")
    settle = 10.0
    time.sleep(settle)
    return {
        "sweeps": count,
        "bars": bars,
        "lengths": [lengths[0], lengths[-1], len(lengths)],
        "budget": budget,
        "cache": cache,
        "datasets": datasets,
        "sequential": seq.summary(),
        "concurrent": conc.summary(),
        "peak_rss": max(peaks),
        "settled_rss": srv.status("VmRSS"),
        "settle_secs": settle,
    }


def exp_ray(ctx: Ctx) -> dict[str, Any]:
    """sweepflight.ray.Cluster on this machine: 2 servers x 1 thread against 1 x 1 thread on a
    large grid, the driver's cost per chunk, and a sweep with one server killed mid-way."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    import sweepflight.ray as sfray

    combos, bars = (400, 20_000) if ctx.quick else (20_000, 150_000)
    chunk = 100 if ctx.quick else sfray.CLUSTER_CHUNK_COMBOS
    grid = paper_range_grid(combos, seed=7)
    close = closes(bars, seed=3)
    server_bin = ctx.bin("sweepflight-server")
    args = ["--cache-bytes", "0"]
    t0 = time.perf_counter()
    # Both clusters live side by side (their runs alternate): room for three servers.
    ray.init(num_cpus=2, resources={"sweepflight": 3}, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t0
    out: dict[str, Any] = {
        "combos": combos,
        "bars": bars,
        "chunk": chunk,
        "chunks": len(sfray.chunk_bounds(combos, chunk, 2)),
        "ray_init": ray_start,
    }
    try:
        clusters = {}
        for n in (1, 2):
            t0 = time.perf_counter()
            clusters[n] = sfray.Cluster(
                n, threads_per_server=1, server_args=args, chunk_combos=chunk, server_bin=server_bin
            )
            out[f"start_{n}"] = time.perf_counter() - t0
            clusters[n].put("walk", pa.table({"close": close}))
        want = clusters[1].sweep("walk", params=grid, progress=False, as_arrow=True)
        idx = np.linspace(0, combos - 1, 8).astype(int)
        check_numba(close, grid[idx], want.take(pa.array(idx)), "a Cluster sweep")

        # The driver's own cost: CPU time of this process (its Python and gRPC threads) during
        # an undisturbed 2-server sweep: dispatching chunks, receiving and concatenating.
        driver_cpu = Samples()

        def timed(n: int, kill: bool = False) -> float:
            killer = None
            if kill:
                pid = clusters[n].server_pids()[0]
                killer = threading.Timer(
                    out.get("two_servers", {}).get("median", 1.0) * 0.4, os.kill, (pid, signal.SIGKILL)
                )
                killer.start()
            t0, cpu0 = time.perf_counter(), time.process_time()
            got = clusters[n].sweep("walk", params=grid, progress=False, as_arrow=True)
            took = time.perf_counter() - t0
            if n == 2 and not kill:
                driver_cpu.xs.append(time.process_time() - cpu0)
            if killer is not None:
                killer.join()
            if not got.equals(want):
                raise CheckFailed(f"a Cluster sweep on {n} servers (kill={kill}) differs from one server's")
            return took

        runs = interleaved(ctx.n(1, 3), {"one_server": lambda: timed(1), "two_servers": lambda: timed(2)}, warmup=0)
        out.update(runs)
        killed = Samples([timed(2, kill=True) for _ in range(ctx.n(1, 3))])
        out["two_servers_one_killed"] = killed.summary()
        out["driver_cpu"] = driver_cpu.summary()
        for cl in clusters.values():
            cl.close()
    finally:
        ray.shutdown()
    return out


SMA_FORMS = {
    "long": "cross_above(sma(close, fast), sma(close, slow))",
    "short": "cross_below(sma(close, fast), sma(close, slow))",
}
HMA_FORMS = {
    "long": "cross_below(hma(close, half, full, sqrt), hma3(close, p3, p2, p))",
    "short": "cross_above(hma(close, half, full, sqrt), hma3(close, p3, p2, p))",
}
#: vectorbt's canonical sma_cross grid: windows 10..39 taken in pairs, fast < slow (435 pairs).
VBT_PAIRS = [[a, b] for a in range(10, 40) for b in range(a + 1, 40)]
#: The Bollinger-and-RSI grid (n in 10..49, k in 1.0..3.25 by 0.25: 400 combos), and the same
#: with twice the k values (1.0 to 3.375 by 0.125: 800 distinct combos, no new array).
BOLLINGER_GRID = {"n": list(range(10, 50)), "k": [1.0 + 0.25 * j for j in range(10)]}
BOLLINGER_GRID_K2 = {"n": list(range(10, 50)), "k": [1.0 + 0.125 * j for j in range(20)]}
BOLLINGER = {
    "long": "close < sma(close, n) - k * std(close, n) and rsi(close, 14) < 35",
    "short": "close > sma(close, n) + k * std(close, n) and rsi(close, 14) > 65",
    "exit_long": "close > sma(close, n)",
    "exit_short": "close < sma(close, n)",
}


def bollinger_trades(x: list[float], n: int, k: float, fee: float = 0.0009) -> tuple[int, float]:
    """The Bollinger-and-RSI strategy with exits, plainly from the contract (docs/language.md's
    sma, std and rsi; strategies.md's loop with exits): (trades, pnl)."""
    nan = float("nan")
    size = len(x)
    mean, dev = [nan] * size, [nan] * size
    for i in range(n - 1, size):
        s = 0.0
        for v in x[i - n + 1 : i + 1]:
            s += v
        m = s / n
        q = 0.0
        for v in x[i - n + 1 : i + 1]:
            q += (v - m) * (v - m)
        mean[i], dev[i] = m, (q / n) ** 0.5
    rsi = [nan] * size
    if size > 14:
        g = sum_ = 0.0
        for j in range(1, 15):
            d = x[j] - x[j - 1]
            g += d if d > 0 else 0.0
            sum_ += -d if d < 0 else 0.0
        gg, ll = g / 14, sum_ / 14

        def value(a: float, b: float) -> float:
            return 50.0 if a == 0 and b == 0 else 100.0 if b == 0 else 100.0 - 100.0 / (1.0 + a / b)

        rsi[14] = value(gg, ll)
        for j in range(15, size):
            d = x[j] - x[j - 1]
            gg = (gg * 13.0 + (d if d > 0 else 0.0)) / 14
            ll = (ll * 13.0 + (-d if d < 0 else 0.0)) / 14
            rsi[j] = value(gg, ll)
    pos, entry, trades, pnl = 0, 0.0, 0, 0.0

    def book(exit_price: float) -> None:
        nonlocal trades, pnl
        ret = pos * (exit_price / entry - 1.0)
        pnl += ((1.0 + ret) * (1.0 - fee) - 1.0) * 100.0
        trades += 1

    for i in range(size):
        c = x[i]
        band = k * dev[i]
        long = c < mean[i] - band and rsi[i] < 35
        short = c > mean[i] + band and rsi[i] > 65
        if (pos > 0 and c > mean[i]) or (pos < 0 and c < mean[i]):
            book(c)
            pos = 0
        s = 1 if long and not short else -1 if short and not long else 0
        if s != 0 and s != pos:
            if pos != 0:
                book(c)
            pos, entry = s, c
    if pos != 0:
        book(x[-1])
    return trades, pnl


def exp_formulas(ctx: Ctx) -> dict[str, Any]:
    """Strategies of your own (protocol v1.3): each built-in written as formulas against the
    built-in (cold calls on a server, results equal first); the Bollinger-and-RSI strategy with
    exits over 400 combos against the same strategy written for vectorbt (numba engine, warm)
    with both sides' memory; and the same grid with twice the k values (no new array)."""
    bars = 20_000 if ctx.quick else 150_000
    close = paper.series()[:bars]
    srv = ctx.server()
    c = flight.connect(srv.addr)
    put(c, "paper", pa.table({"close": close}))
    pairs = VBT_PAIRS
    windows = reference.params_for(paper.lengths()).tolist()
    ks = BOLLINGER_GRID["k"]
    requests = {
        "sma_cross, built-in (435 pairs)": {"strategy": "sma_cross", "params": pairs},
        "sma_cross as formulas": {"strategy": SMA_FORMS, "params": pairs},
        "hma_sar, built-in (80 paper combos)": {"lengths": paper.lengths()},
        "hma_sar as formulas": {"strategy": HMA_FORMS, "params": windows},
        "Bollinger + RSI, 400 combos": {"strategy": BOLLINGER, "grid": BOLLINGER_GRID},
        "the same, twice the k values (800)": {"strategy": BOLLINGER, "grid": BOLLINGER_GRID_K2},
    }
    # Results first: each formula form equal to its built-in, column for column; two Bollinger
    # combos against the plain Python oracle on the first 20,000 bars.
    answers = {name: sweep(c, {"dataset": "paper", **r}) for name, r in requests.items()}
    for built, formula in (
        ("sma_cross, built-in (435 pairs)", "sma_cross as formulas"),
        ("hma_sar, built-in (80 paper combos)", "hma_sar as formulas"),
    ):
        a, b = answers[built], answers[formula]
        if a.column("pnl") != b.column("pnl") or a.column("trades") != b.column("trades"):
            raise CheckFailed(f"{formula} differs from {built}")
    if not ctx.quick:
        gate_table(answers["hma_sar as formulas"], "hma_sar as formulas")
    head = close[:20_000].tolist()
    for n, k in ((10, 1.0), (49, 3.25)):
        got = sweep(c, {"dataset": "paper", "strategy": BOLLINGER, "params": [[n, k]], "rows": [0, 20_000]})
        want = bollinger_trades(head, n, k)
        if got["trades"][0].as_py() != want[0] or abs(got["pnl"][0].as_py() - want[1]) > 1e-6:
            raise CheckFailed(f"Bollinger ({n}, {k}): {got['trades'][0]} trades, the plain oracle {want[0]}")
    plan = json.loads(
        b"".join(
            r.body.to_pybytes()
            for r in c.do_action(
                flight.Action(
                    "explain", json.dumps({"dataset": "paper", **requests["Bollinger + RSI, 400 combos"]}).encode()
                )
            )
        )
    )
    growth: dict[str, list[int]] = {name: [] for name in requests}
    ops: dict[str, Op] = {name: cold_call(c, srv, close, r, growth[name]) for name, r in requests.items()}
    peaks: list[int] = []
    vbt_trades: list[int] = []
    vbt = vectorbt_bollinger(ctx, close, ks, peaks, vbt_trades)
    if vbt:
        ops[VBT_BOLLINGER] = vbt
    calls = interleaved(ctx.n(2, 5), ops, warmup=0)
    return {
        "bars": bars,
        "calls": calls,
        "server_growth": growth,
        "vectorbt_peak_rss": peaks,
        "vectorbt_trades": vbt_trades,
        "our_trades": int(pc.sum(answers["Bollinger + RSI, 400 combos"]["trades"]).as_py()),
        "explain_arrays": plan["arrays"],
    }


#: The name of vectorbt's Bollinger-and-RSI timing in the sections that run it.
VBT_BOLLINGER = "Bollinger + RSI, vectorbt 1.2.0 (numba engine, warm)"


def vectorbt_bollinger(ctx: Ctx, close: np.ndarray, ks: list[float], peaks: list[int], trades: list[int]) -> Op | None:
    """The Bollinger-and-RSI grid (n in 10..49, the k values `ks`) written for vectorbt 1.2
    (`benches/vbt_formulas.py`, numba engine, warm) as an operation timing one run and noting its
    peak RSS and trades; None where vectorbt is not run (a quick run)."""
    vbt_python = vectorbt_python(ctx)
    if not vbt_python:
        return None
    npy = OUT / "paper-close.npy"
    np.save(npy, close)

    def vbt() -> float:
        script = str(ROOT / "benches" / "vbt_formulas.py")
        out = ctx.json_out(vbt_python, script, "numba", str(npy), ",".join(map(str, ks)))
        if out["combos"] != 40 * len(ks):
            raise CheckFailed(f"vectorbt answered {out['combos']} combos, not {40 * len(ks)}")
        peaks.append(int(out["peak_rss"]))
        trades.append(int(out["trades"]))
        return float(out["seconds"])

    return vbt


def backtesting_python(ctx: Ctx) -> str | None:
    """The python of backtesting.py's own environment (scripts/setup-backtesting.sh makes it
    once); None in a quick run."""
    if ctx.quick:
        return None
    script = str(ROOT / "scripts" / "setup-backtesting.sh")
    return subprocess.run([script], check=True, capture_output=True, text=True).stdout.strip()


def paper_bars(bars: int) -> pa.Table:
    """The paper closes made into bars: each open a quarter of the way from the close before it
    to its own close (so a next-open fill is neither price), highs and lows half the bar's move
    beyond both."""
    close = np.asarray(paper.series()[:bars])
    prev = np.concatenate([[close[0]], close[:-1]])
    o = prev + 0.25 * (close - prev)
    wick = np.abs(close - o) * 0.5
    return pa.table(
        {"open": o, "high": np.maximum(o, close) + wick, "low": np.minimum(o, close) - wick, "close": close}
    )


def exp_bars(ctx: Ctx) -> dict[str, Any]:
    """Real bars (protocol v1.3): backtesting.py's own README example (SmaCross 10 / 20 on its
    GOOG data, next-open fills) against `sma_cross` with `fill: next_open`, trade for trade; the
    cost of next-open fills with stops on highs and lows and a trailing stop against the default
    execution (vectorbt's 435 pairs, cold); a stop formula over 10 values of m against a fixed
    stop swept 10 times; OHLCV puts against close-only puts of the same bytes, and a durable
    one against dd + fsync."""
    out: dict[str, Any] = {}
    bt_python = backtesting_python(ctx)
    srv = ctx.server()
    c = flight.connect(srv.addr)
    if bt_python:
        csv_path = OUT / "goog.csv"
        theirs = ctx.json_out(bt_python, str(ROOT / "benches" / "bt_peer.py"), str(csv_path))
        goog = pa.csv.read_csv(csv_path)
        put(c, "goog", goog)
        request = {"dataset": "goog", "strategy": "sma_cross", "params": [[10, 20]], "fill": "next_open", "fee": 0}
        results = c.do_action(flight.Action("trades", json.dumps(request).encode()))
        t = pa.ipc.open_stream(b"".join(r.body.to_pybytes() for r in results)).read_all()
        ours = [
            [s, e, x, ep, xp]
            for s, e, x, ep, xp in zip(
                *(t[k].to_pylist() for k in ("side", "entry_row", "exit_row", "entry_price", "exit_price")), strict=True
            )
        ]
        same = sum(a == b for a, b in zip(ours, theirs["trades"], strict=False))
        # Every trade but the last equal, bar for bar and price for price; the last one closes at
        # the end: at the last bar's open in backtesting.py, at its close in the contract.
        if len(ours) != len(theirs["trades"]) or same < len(ours) - 1:
            raise CheckFailed(f"backtesting.py's SmaCross: {same} of {len(ours)} trades equal")
        last_ours, last_theirs = ours[-1], theirs["trades"][-1]
        if last_ours[:4] != last_theirs[:4] or last_ours[4] != goog["Close"][-1].as_py():
            raise CheckFailed(f"the last trade: {last_ours} against {last_theirs}")
        out["backtesting"] = {
            "bars": theirs["bars"],
            "trades": len(ours),
            "equal": same,
            "last": {"ours": last_ours, "theirs": last_theirs, "last_open": goog["Open"][-1].as_py()},
            "seconds": theirs["seconds"],
        }
    bars = 20_000 if ctx.quick else 150_000
    table = paper_bars(bars)
    put(c, "bars", table)
    pairs = VBT_PAIRS
    real = {"fill": "next_open", "stops": "high_low", "trailing_stop": 0.02}
    ms = [0.5 * k for k in range(1, 11)]
    requests = {
        "sma_cross, 435 pairs, default execution": {"strategy": "sma_cross", "params": pairs},
        "the same, next_open + high_low + 2% trailing stop": {"strategy": "sma_cross", "params": pairs, **real},
        "stop formula m * atr(14) / close, 10 values of m (4,350 combos)": {
            "strategy": "sma_cross",
            "params": [[a, b, m] for a, b in pairs for m in ms],
            "stop_loss": "m * atr(14) / close",
        },
    }
    # Results first: a stop formula that is a constant per m equals the fixed stop it names,
    # combo for combo; the options change the trades.
    fixed = sweep(c, {"dataset": "bars", "strategy": "sma_cross", "params": pairs, "stop_loss": 0.02})
    as_formula = sweep(
        c,
        {
            "dataset": "bars",
            "strategy": "sma_cross",
            "params": [[a, b, 2.0] for a, b in pairs],
            "stop_loss": "0.01 * m",
        },
    )
    if fixed.column("pnl") != as_formula.column("pnl") or fixed.column("trades") != as_formula.column("trades"):
        raise CheckFailed("a stop formula of 0.02 differs from the fixed stop of 0.02")
    answers = {name: sweep(c, {"dataset": "bars", **r}) for name, r in requests.items()}
    a, b = (
        answers["sma_cross, 435 pairs, default execution"],
        answers["the same, next_open + high_low + 2% trailing stop"],
    )
    if a.column("pnl").equals(b.column("pnl")):
        raise CheckFailed("next-open fills and stops did not change a single pnl")
    growth: dict[str, list[int]] = {name: [] for name in requests}
    ops: dict[str, Op] = {name: cold_call(c, srv, table, r, growth[name]) for name, r in requests.items()}
    fixed_name = "fixed 2% stop, swept 10 times (4,350 combo runs)"
    growth[fixed_name] = []
    ops[fixed_name] = cold_call(
        c, srv, table, {"strategy": "sma_cross", "params": pairs, "stop_loss": 0.02}, growth[fixed_name], calls=10
    )
    out["bars"] = bars
    # Nine rounds: on a shared VM one slow round in five moved a ratio by a third.
    out["calls"] = interleaved(ctx.n(2, 9), ops, warmup=0)
    out["server_growth"] = growth
    list(c.do_action(flight.Action("drop", b"bars")))

    # Puts: 5 columns of OHLCV against one close column of the same bytes.
    rows = 200_000 if ctx.quick else 10_000_000
    rng = np.random.default_rng(3)
    close = 100 + np.cumsum(rng.normal(0, 0.01, rows))
    ohlcv = pa.table(
        {"open": close, "high": close + 0.5, "low": close - 0.5, "close": close, "volume": np.full(rows, 1000.0)}
    )
    closes = pa.table({"close": np.tile(close, 5)})
    size = ohlcv.nbytes
    out["put"] = interleaved(
        ctx.n(2, 8),
        {
            "OHLCV put (5 columns)": lambda: (put(c, "bulk", ohlcv), None)[1],
            "close-only put (the same bytes)": lambda: (put(c, "bulk", closes), None)[1],
        },
    )
    out["put_bytes"] = size
    list(c.do_action(flight.Action("drop", b"bulk")))
    out["durable"] = durable_against_dd(ctx, ohlcv, size, "durable OHLCV put", "durable-bars")
    return out


def rotation_universe(
    series: int, bars: int, gappy: bool = False, seed: int = 11
) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """A daily universe of random walks, keyed by `symbol` with a date `time`: aligned, or (with
    `gappy`) its series starting late, ending early and missing days, as real listings do. Also
    the aligned arrays (rows x series) the vectorbt peer reads."""
    rng = np.random.default_rng(seed)
    days = np.datetime64("2004-01-05") + np.arange(bars).astype("timedelta64[D]")
    close = 50 * np.exp(np.cumsum(rng.normal(0.0002, 0.02, (bars, series)), axis=0))
    open_ = close * np.exp(rng.normal(0, 0.003, (bars, series)))
    keep = np.ones((bars, series), dtype=bool)
    if gappy:
        first = rng.integers(0, bars // 4, series)
        last = bars - rng.integers(0, bars // 4, series) * (rng.random(series) < 0.3)
        rows = np.arange(bars)[:, None]
        keep = (rows >= first) & (rows < last) & (rng.random((bars, series)) > 0.02)
    cols = {
        "symbol": np.repeat(np.array([f"S{k:04d}" for k in range(series)]), keep.sum(axis=0)),
        "time": np.concatenate([days[keep[:, s]] for s in range(series)]),
        "open": np.concatenate([open_[keep[:, s], s] for s in range(series)]),
        "close": np.concatenate([close[keep[:, s], s] for s in range(series)]),
    }
    return pa.table(cols), {"close": close, "open": open_}


#: The rotation of the portfolios section (docs/portfolios.md): momentum ranked, trend filtered.
ROTATION = {"rank": "roc(close, n)", "filter": "close > sma(close, m)", "longs": "k", "rebalance": "r"}


def exp_portfolios(ctx: Ctx) -> dict[str, Any]:
    """Portfolio strategies (protocol v1.4): a momentum rotation over a 500-series x 5,040-bar
    daily universe, 468 combos (rank roc(close, n), n in 20..260 by 20; filter close >
    sma(close, m), m in 50, 100, 200; longs in 5, 10, 20, 50; rebalance every 5, 21, 63 rows) in
    one cold call, against the same rotations written for vectorbt 1.2 (benches/vbt_portfolio.py:
    pandas indicators, numpy top-k, from_orders a dozen combos a call), its total returns
    compared with ours combo by combo first; the same on a gappy universe, twice the series,
    twice the bars, twice the longs values; and one combo, warm (a researcher iterating)."""
    series, bars = (40, 600) if ctx.quick else (500, 5040)
    grid: dict[str, list[int]] = {
        "n": list(range(20, 261, 20)) if not ctx.quick else [20, 60],
        "m": [50, 100, 200] if not ctx.quick else [50],
        "k": [5, 10, 20, 50] if not ctx.quick else [5, 10],
        "r": [5, 21, 63],
    }
    combos = int(np.prod([len(v) for v in grid.values()]))
    aligned, arrays = rotation_universe(series, bars)
    gappy, _ = rotation_universe(series, bars, gappy=True)
    wide, _ = rotation_universe(2 * series, bars, seed=12)
    long_, _ = rotation_universe(series, 2 * bars, seed=13)
    srv = ctx.server()
    c = flight.connect(srv.addr)
    body = {"strategy": ROTATION, "grid": grid}
    more_k = {**grid, "k": [5, 10, 20, 50, 7, 15, 30, 40] if not ctx.quick else [5, 10, 7, 15]}
    runs = {
        f"aligned, {combos} combos": (aligned, body),
        "gappy (late starts, early ends, missing days)": (gappy, body),
        "twice the series": (wide, body),
        "twice the bars": (long_, body),
        "twice the longs values (same arrays)": (aligned, {"strategy": ROTATION, "grid": more_k}),
    }
    # Results first: every combo's total return against vectorbt's on the aligned universe.
    put(c, "aligned", aligned, "symbol")
    ours = sweep(c, {"dataset": "aligned", **body})
    if ours.num_rows != combos:
        raise CheckFailed(f"the rotation answered {ours.num_rows} combos, not {combos}")
    vbt_python = vectorbt_python(ctx)
    vbt: dict[str, Any] = {}
    if vbt_python:
        npz = OUT / "rotation-universe.npz"
        np.savez(npz, **arrays)
        vbt = ctx.json_out(vbt_python, str(ROOT / "benches" / "vbt_portfolio.py"), str(npz), json.dumps(grid))
        theirs = np.asarray(vbt["total_return"])
        mine = ours["total_return"].to_numpy()
        rel = np.abs(mine - theirs) / np.maximum(np.abs(theirs), 1e-9)
        # Equal weights make two new holdings' buys the same value: the contract breaks that tie
        # by series order, vectorbt by its order values computed as size x price, whose last
        # bits differ by series; when cash cuts the last buy of a rebalance short, a different
        # series' buy is the one cut, a difference in the last digits of the book. The kernel's
        # tests compare the accounting with vectorbt's to 1e-9 on weights without ties.
        vbt["max_relative_difference"] = float(rel.max())
        vbt["combos_within_1e-9"] = int((rel <= 1e-9).sum())
        del vbt["total_return"]
        if rel.max() > 1e-5:
            raise CheckFailed(f"the rotation differs from vectorbt's by {rel.max():.3g} (relative)")
    growth: dict[str, list[int]] = {name: [] for name in runs}
    ops: dict[str, Op] = {
        name: cold_call(c, srv, table, r, growth[name], key="symbol") for name, (table, r) in runs.items()
    }
    calls = interleaved(ctx.n(1, 3), ops, warmup=0)
    # One combo, warm: the dataset swept before (its arrays kept from the second call on).
    one = {"dataset": "aligned", "strategy": ROTATION, "params": [[120, 200, 10, 21]]}
    for _ in range(3):
        sweep(c, one)
    warm = Samples()
    for _ in range(ctx.n(5, 30)):
        t0 = time.perf_counter()
        sweep(c, one)
        warm.xs.append(time.perf_counter() - t0)
    return {
        "series": series,
        "bars": bars,
        "combos": combos,
        "calls": calls,
        "server_growth": growth,
        "one_combo_warm": warm.summary(),
        "vectorbt": vbt,
    }


def weekly_sma_of_closes(times: np.ndarray, close: np.ndarray, n: int) -> np.ndarray:
    """`weekly(sma(close, n))` written here from the definition (the check of the timeframes
    section): ISO weeks of the UTC times, each week's last close, their n-week mean as the
    language computes a mean (a fresh sum, oldest first, one division), each week's value at the
    bars of the next week, NaN in the first."""
    iso = pd.DatetimeIndex(times).isocalendar()
    keys = (iso["year"] * 100 + iso["week"]).to_numpy()
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    ends = np.concatenate([starts[1:], [len(keys)]])
    weekly = close[ends - 1]
    means = np.full(len(weekly), np.nan)
    for i in range(n - 1, len(weekly)):
        total = 0.0
        for v in weekly[i + 1 - n : i + 1]:
            total += float(v)
        means[i] = total / n
    of_bar = np.repeat(np.arange(len(starts)), ends - starts)
    return np.where(of_bar == 0, np.nan, means[np.maximum(of_bar - 1, 0)])


def exp_timeframes(ctx: Ctx) -> dict[str, Any]:
    """Higher timeframes (protocol v1.4): sma_cross over vectorbt's 435 pairs as formulas on the
    paper series with an hourly time column, beside the same with `and close > weekly(sma(close,
    10))` on both sides and beside the built-in, cold calls on a server (the filtered results
    first checked equal to the same strategy reading the weekly values, computed here from the
    definition, as an input column); and the kernel's own timing (timeframe-timer): the period
    bars of a 10,000,000-bar series beside one SMA over it."""
    bars = 20_000 if ctx.quick else 150_000
    close = np.asarray(paper.series()[:bars])
    times = np.datetime64("2000-01-03T00:00", "us") + np.arange(bars).astype("timedelta64[h]")
    table = pa.table({"time": pa.array(times, pa.timestamp("us", tz="UTC")), "close": close})
    srv = ctx.server()
    c = flight.connect(srv.addr)
    pairs = VBT_PAIRS
    weekly = "close > weekly(sma(close, 10))"
    filtered = {k: f"{v} and {weekly}" for k, v in SMA_FORMS.items()}
    requests = {
        "sma_cross, built-in (435 pairs)": {"strategy": "sma_cross", "params": pairs},
        "sma_cross as formulas": {"strategy": SMA_FORMS, "params": pairs},
        "the same and close > weekly(sma(close, 10))": {"strategy": filtered, "params": pairs},
    }
    # Results first: the weekly filter equal to its values computed here and read as a column.
    put(c, "hourly", table.append_column("wk", pa.array(weekly_sma_of_closes(times, close, 10))))
    got = sweep(c, {"dataset": "hourly", **requests["the same and close > weekly(sma(close, 10))"]})
    sent = {k: f"{v} and close > wk" for k, v in SMA_FORMS.items()}
    want = sweep(c, {"dataset": "hourly", "strategy": {**sent, "inputs": ["wk"]}, "params": pairs})
    if got.column("pnl") != want.column("pnl") or got.column("trades") != want.column("trades"):
        raise CheckFailed("the weekly filter differs from its values computed from the definition")
    if pc.sum(got["trades"]).as_py() == 0:
        raise CheckFailed("the filtered strategy never trades")
    growth: dict[str, list[int]] = {name: [] for name in requests}
    ops: dict[str, Op] = {name: cold_call(c, srv, table, r, growth[name]) for name, r in requests.items()}
    calls = interleaved(ctx.n(2, 7), ops, warmup=0)
    long_bars = 200_000 if ctx.quick else 10_000_000
    timer = ctx.json_out(ctx.bin("timeframe-timer"), "--runs", str(ctx.n(1, 7)), "--bars", str(long_bars))
    kernel = {k: Samples(list(v)).summary() for k, v in timer["runs"].items()}
    return {"bars": bars, "calls": calls, "server_growth": growth, "kernel": kernel, "kernel_bars": timer["bars"]}


def exp_shapes(ctx: Ctx) -> dict[str, Any]:
    """Fast paths by shape (#49): each built-in beside its formula form with one more condition,
    cold calls on a server holding the paper series: `and close > 0` (true at every bar, so the
    results must equal the built-in's, checked first), and for hma_sar and sma_cross `and
    rsi(close, 14) < 70` (checked equal to the same condition written `70 > rsi(close, 14)`,
    another node of the same meaning); the Bollinger-and-RSI strategy with exits beside twice its
    k values and beside vectorbt's numba engine on the same grid (warm), in the same run; and
    the machine's peak multiply-add rate (`peak-rate`) for the per-combo-bar floor."""
    bars = 20_000 if ctx.quick else 150_000
    close = paper.series()[:bars]
    srv = ctx.server()
    c = flight.connect(srv.addr)
    put(c, "paper", pa.table({"close": close}))
    windows = reference.params_for(paper.lengths()).tolist()
    grids: dict[str, list[list[float]]] = {
        "hma_sar": windows,
        "sma_cross": VBT_PAIRS,
        "ema_cross": VBT_PAIRS,
        "donchian": [[n] for n in range(2, 201)],
        "rsi_revert": [[n, lo, hi] for n in range(2, 31) for lo in (20, 25, 30, 35) for hi in (65, 70, 75, 80)],
        # Long windows: the SMA lines of 256 bars and more are certified lines.
        "sma_cross, long windows": [[f, 256 * k] for f in (20, 50, 100, 200) for k in range(1, 17)],
    }
    strategy_of = {"sma_cross, long windows": "sma_cross"}
    # Each built-in's formula form, as the server's `strategies` action gives it.
    listed = json.loads(b"".join(r.body.to_pybytes() for r in c.do_action(flight.Action("strategies", b""))))
    forms: dict[str, dict[str, str]] = {e["name"]: e["formulas"] for e in listed if "formulas" in e}

    def more(name: str, condition: str) -> dict[str, str]:
        return {k: f"{v} and {condition}" for k, v in forms[strategy_of.get(name, name)].items()}

    requests: dict[str, dict[str, Any]] = {}
    equal: list[tuple[str, str]] = []
    mirrored: list[tuple[str, str]] = []
    for name, grid in grids.items():
        built = f"{name}, built-in ({len(grid)} combos)"
        strategy = strategy_of.get(name, name)
        requests[built] = {"lengths": paper.lengths()} if name == "hma_sar" else {"strategy": strategy, "params": grid}
        always = f"{name} as formulas and close > 0"
        requests[always] = {"strategy": more(name, "close > 0"), "params": grid}
        equal.append((built, always))
        if name in ("hma_sar", "sma_cross"):
            rsi = f"{name} as formulas and rsi(close, 14) < 70"
            requests[rsi] = {"strategy": more(name, "rsi(close, 14) < 70"), "params": grid}
            mirrored.append((name, rsi))
    requests["Bollinger + RSI, 400 combos"] = {"strategy": BOLLINGER, "grid": BOLLINGER_GRID}
    requests["the same, twice the k values (800)"] = {"strategy": BOLLINGER, "grid": BOLLINGER_GRID_K2}
    answers = {name: sweep(c, {"dataset": "paper", **r}) for name, r in requests.items()}
    for built, always in equal:
        a, b = answers[built], answers[always]
        if a.column("pnl") != b.column("pnl") or a.column("trades") != b.column("trades"):
            raise CheckFailed(f"{always} differs from {built}")
    for name, rsi in mirrored:
        other = {k: f"{v} and 70 > rsi(close, 14)" for k, v in forms[name].items()}
        again = sweep(c, {"dataset": "paper", "strategy": other, "params": grids[name]})
        if again.column("pnl") != answers[rsi].column("pnl"):
            raise CheckFailed(f"{rsi} differs from the same condition written 70 > rsi(close, 14)")
    growth: dict[str, list[int]] = {name: [] for name in requests}
    ops: dict[str, Op] = {name: cold_call(c, srv, close, r, growth[name]) for name, r in requests.items()}
    peaks: list[int] = []
    vbt_trades: list[int] = []
    vbt = vectorbt_bollinger(ctx, close, BOLLINGER_GRID["k"], peaks, vbt_trades)
    if vbt:
        ops[VBT_BOLLINGER] = vbt
    calls = interleaved(ctx.n(2, 7), ops, warmup=0)
    peak = ctx.json_out(ctx.bin("peak-rate"), "--runs", str(ctx.n(1, 5)))
    return {
        "bars": bars,
        "calls": calls,
        "server_growth": growth,
        "vectorbt_peak_rss": peaks,
        "peak": peak,
        "cores": os.cpu_count(),
    }


SECTIONS: dict[str, Callable[[Ctx], dict[str, Any]]] = {
    "kernel": exp_kernel,
    "scaling": exp_scaling,
    "long_windows": exp_long_windows,
    "server": exp_server,
    "architectures": exp_architectures,
    "peer": exp_peer,
    "universe": exp_universe,
    "strategies": exp_strategies,
    "judging": exp_judging,
    "walk_forward": exp_walk_forward,
    "jobs": exp_jobs,
    "overload": exp_overload,
    "ray": exp_ray,
    "formulas": exp_formulas,
    "bars": exp_bars,
    "portfolios": exp_portfolios,
    "timeframes": exp_timeframes,
    "shapes": exp_shapes,
}
