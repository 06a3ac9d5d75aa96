"""sweepflight's benchmark suite: the IPC-tax study re-run on our stack, against the peer.

    .venv/bin/python benches/study.py                  # full run (release build): rewrites docs/benchmarks.md
    .venv/bin/python benches/study.py --quick --profile debug   # smoke test (CI): small sizes, checks only
    .venv/bin/python benches/study.py --only peer,kernel        # some sections, output under target/study
    .venv/bin/python benches/study.py --check-doc      # docs/benchmarks.md is the rendering of its JSON

Sections: kernel (numba vs Rust, % of the machine's peak), scaling (combos and bars), server
(the paper sweep as one params-only call, cold and warm, and chatty), architectures (the
study's other ways across the boundary), peer (sweepflight vs the pyarrow Flight server a team
would write instead, benches/peer.py), universe, strategies (vectorbt's own example, each
strategy's cost, what the metrics cost), judging (a ranked grid of 10^7 combos, trades),
overload (the sweep memory budget) and ray.

Rules: wherever two things are compared, their samples are taken in alternating rounds, in a
fresh random order each round, so the machine's noise hits both alike. Every sweep result is
checked before its timings count: the 80 paper combos against the reference CSV (trades equal,
|dPnL| <= 1e-6), other grids against the kernel's oracle or the numba reference, concurrent
results against the same sweeps run alone. A failed check stops the run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime as dt
import json
import os
import pathlib
import platform
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "client-py"))
from sweepflight import paper, reference  # noqa: E402

REFERENCE_CSV = ROOT / "kernel" / "testdata" / "reference-80.csv"
DOC = ROOT / "docs" / "benchmarks.md"
RAW = ROOT / "docs" / "benchmarks.json"
IMG = ROOT / "docs" / "img"
OUT = ROOT / "target" / "study"
MB = 1_000_000
MiB = 1 << 20

# ---------------------------------------------------------------------------------------------
# statistics


@dataclass
class Samples:
    """Seconds per operation."""

    xs: list[float] = field(default_factory=list)

    def pct(self, q: float) -> float:
        s = sorted(self.xs)
        return s[min(len(s) - 1, round(q * (len(s) - 1)))]

    def summary(self) -> dict[str, float]:
        return {"n": len(self.xs), "median": statistics.median(self.xs), "p50": self.pct(0.5), "p99": self.pct(0.99)}


Op = Callable[[], "float | None"]


def interleaved(rounds: int, ops: dict[str, Op], warmup: int = 1) -> dict[str, dict[str, float]]:
    """Runs each op once per round in a fresh random order, after `warmup` untimed rounds. An
    op that returns a float has timed itself (a subprocess's own clock, or a part of the op)."""
    out = {k: Samples() for k in ops}
    order = list(ops)
    shuffle = random.Random(0).shuffle
    for r in range(warmup + rounds):
        shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            own = ops[k]()
            took = time.perf_counter() - t0 if own is None else own
            if r >= warmup:
                out[k].xs.append(took)
    return {k: v.summary() for k, v in out.items()}


def fmt_s(x: float) -> str:
    if x >= 1:
        return f"{x:.2f} s"
    return f"{x * 1e3:.1f} ms" if x >= 1e-3 else f"{x * 1e6:.0f} us"


def gbps(nbytes: float, secs: float) -> float:
    return nbytes / secs / 1e9


# ---------------------------------------------------------------------------------------------
# checks


class CheckFailed(SystemExit):
    pass


def gate(pnl: Any, trades: Any, label: str) -> None:
    """The equivalence gate on the 80 paper combos."""
    data = np.genfromtxt(REFERENCE_CSV, delimiter=",", names=True)
    ok = np.array_equal(np.asarray(trades), data["trades"].astype(np.int64)) and bool(
        np.all(np.abs(np.asarray(pnl, dtype=np.float64) - data["pnl_pct_pts"]) <= 1e-6)
    )
    if not ok:
        raise CheckFailed(f"equivalence gate FAILED for {label}: its timings do not count")


def gate_table(t: pa.Table, label: str) -> None:
    gate(t["pnl"].to_numpy(), t["trades"].to_numpy(), label)


def check_numba(close: np.ndarray, params: np.ndarray, t: pa.Table, label: str) -> None:
    """Results of `params` on `close` against the numba reference (trades equal, |dPnL| <= 1e-6)."""
    pnl, trades = reference.sweep(np.ascontiguousarray(close), np.asarray(params, dtype=np.int64))
    if not (np.array_equal(trades, t["trades"].to_numpy()) and np.all(np.abs(pnl - t["pnl"].to_numpy()) <= 1e-6)):
        raise CheckFailed(f"results of {label} differ from the numba reference: its timings do not count")


# ---------------------------------------------------------------------------------------------
# processes and calls


class Proc:
    """A server process whose first stdout line ends with the address it serves."""

    def __init__(self, *cmd: str, env: dict[str, str] | None = None) -> None:
        self.p = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "RUST_LOG": "warn", **(env or {})}
        )
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"{cmd[0]} exited with {self.p.wait()} before serving")
        self.addr = line.split()[-1]
        self.pid = self.p.pid

    def status(self, key: str) -> int:
        """A /proc/PID/status memory figure (VmRSS, VmHWM) in bytes."""
        for line in pathlib.Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(key)

    def reset_peak(self) -> None:
        """Resets VmHWM to the current resident size (Linux >= 4.0)."""
        pathlib.Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def stop(self) -> None:
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise SystemExit(f"{self.p.args[0]} did not stop within 60 s of SIGTERM") from None


@dataclass
class Ctx:
    """What every section needs: binaries, a scratch directory, the mode, open processes."""

    bins: pathlib.Path
    quick: bool
    procs: list[Proc] = field(default_factory=list)

    def bin(self, name: str) -> str:
        return str(self.bins / name)

    def n(self, quick: int, full: int) -> int:
        return quick if self.quick else full

    def spawn(self, *cmd: str, env: dict[str, str] | None = None) -> Proc:
        p = Proc(*cmd, env=env)
        self.procs.append(p)
        return p

    def server(self, *flags: str) -> Proc:
        """sweepflight-server on a fresh Unix socket, in memory unless given --data-dir."""
        sock = OUT / f"sf-{len(self.procs)}-{os.getpid()}.sock"
        storage = [] if "--data-dir" in flags else ["--in-memory"]
        return self.spawn(self.bin("sweepflight-server"), "--unix", str(sock), *storage, *flags)

    def peer(self) -> Proc:
        sock = OUT / f"peer-{len(self.procs)}-{os.getpid()}.sock"
        return self.spawn(sys.executable, str(ROOT / "benches" / "peer.py"), f"grpc+unix://{sock}")

    def json_out(self, *cmd: str) -> Any:
        return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    def close(self) -> None:
        for p in self.procs:
            if p.p.poll() is None:
                p.stop()
        self.procs.clear()
        # pyarrow's server and the raw echo leave their socket files behind.
        for sock in OUT.glob(f"*-{os.getpid()}.sock"):
            sock.unlink(missing_ok=True)


def put(c: flight.FlightClient, name: str, table: pa.Table, key: str | None = None) -> dict[str, Any]:
    d = (
        flight.FlightDescriptor.for_path(name)
        if key is None
        else flight.FlightDescriptor.for_command(json.dumps({"dataset": name, "key": key}).encode())
    )
    writer, reader = c.do_put(d, table.schema)
    # Messages of 1 Mi rows (8 MiB of closes): under gRPC's and the server's message limits,
    # as any client must send a large table.
    writer.write_table(table, max_chunksize=1 << 20)
    writer.done_writing()
    meta: dict[str, Any] = json.loads(reader.read().to_pybytes())
    writer.close()
    return meta


def sweep(c: flight.FlightClient, request: dict[str, Any]) -> pa.Table:
    results = c.do_action(flight.Action("sweep", json.dumps(request).encode()))
    return pa.ipc.open_stream(b"".join(r.body.to_pybytes() for r in results)).read_all()


def get(c: flight.FlightClient, ticket: flight.Ticket) -> pa.Table:
    return c.do_get(ticket).read_all()


def ticket(c: flight.FlightClient, name: str) -> flight.Ticket:
    return c.get_flight_info(flight.FlightDescriptor.for_path(name)).endpoints[0].ticket


def raw_echo(path: str) -> Callable[[bytes], int]:
    """A client of `raw-echo`: one length-prefixed message there and back."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)

    def call(payload: bytes) -> int:
        s.sendall(struct.pack("<I", len(payload)) + payload)
        want, got = len(payload) + 4, 0
        buf = bytearray(max(want, 1))
        view = memoryview(buf)
        while got < want:
            got += s.recv_into(view[got:], want - got)
        return got - 4

    return call


def closes(n: int, seed: int = 1) -> np.ndarray:
    """A positive random walk of n bars."""
    return 100 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0.0, 0.001, n)))


def paper_range_grid(n: int, seed: int) -> np.ndarray:
    """n random six-window combos within the paper grid's ranges of each window."""
    rng = np.random.default_rng(seed)
    lo_hi = [(3, 100), (6, 200), (2, 14), (1, 33), (2, 50), (3, 100)]
    return np.column_stack([rng.integers(lo, hi + 1, n) for lo, hi in lo_hi]).astype(np.int64)


def write_ipc(path: pathlib.Path, table: pa.Table) -> pathlib.Path:
    with pa.ipc.new_file(path, table.schema) as w:
        w.write_table(table, max_chunksize=1 << 20)
    return path


def write_params(path: pathlib.Path, params: np.ndarray) -> pathlib.Path:
    path.write_text(json.dumps(np.asarray(params).tolist()))
    return path


def kernel_timer(ctx: Ctx, *args: str) -> dict[str, Any]:
    """kernel-timer's JSON (it checks its own results before timing)."""
    out: dict[str, Any] = ctx.json_out(ctx.bin("kernel-timer"), *args)
    return out


def one_timing(ctx: Ctx, *args: str) -> float:
    """An in-process sweep timed by kernel-timer's own clock: the median of 3 runs in one
    process after its checked warm-up sweep. (A process's first sweeps pay for fresh memory
    pages, up to 2-3x on this VM with two threads; a server is a long-lived, warm process.)"""
    runs = kernel_timer(ctx, "--runs", "3", *args)["runs"]
    return float(statistics.median(next(iter(runs.values()))))


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


def exp_server(ctx: Ctx) -> dict[str, Any]:
    """The 80-combo paper sweep as one params-only call (cold and warm cache) and as 80 one-combo
    calls (chatty), against the kernel in-process, all cores."""
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

    ops: dict[str, Op] = {
        "in-process, all cores": lambda: one_timing(ctx, "--threads", "0"),
        "one call, cold cache": lambda: (sweep(cold, request), None)[1],
        "one call, warm cache": lambda: (sweep(warm, request), None)[1],
        "chatty: 80 one-combo calls": chatty,
    }
    return {"samples": interleaved(ctx.n(2, 15), ops)}


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
    data_dir = OUT / "durable-data"
    durable_p = ctx.server("--data-dir", str(data_dir))
    durable = flight.connect(durable_p.addr)
    dd_file = OUT / "dd.bin"

    def dd() -> None:
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={dd_file}", "bs=1000000", f"count={size // MB}", "conv=fsync", "status=none"],
            check=True,
        )

    out["durable"] = interleaved(
        ctx.n(2, 4),
        {"durable put": lambda: (put(durable, "bulk", table), None)[1], "dd + fsync": lambda: (dd(), None)[1]},
    )
    out["durable_bytes"] = {"put": size, "dd": size // MB * MB}
    dd_file.unlink()
    durable_p.stop()
    return out


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


def exp_strategies(ctx: Ctx) -> dict[str, Any]:
    """vectorbt's canonical example (an SMA-crossover grid of windows 10..39 taken in pairs, 435
    combos, stop-and-reverse on the paper series) with both its engines against one cold
    sweepflight call on the same grid, and each strategy's cost per combo against the paper
    sweep's (cold, all cores, kernel-timer)."""
    bars = 20_000 if ctx.quick else 150_000
    close = paper.series()[:bars]
    pairs = [[a, b] for a in range(10, 40) for b in range(a + 1, 40)]
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
    rounds = 0

    def one_call() -> float:
        nonlocal rounds
        rounds += 1
        name = f"paper-{rounds}"
        put(c, name, pa.table({"close": close}))
        before = srv.status("VmRSS")
        srv.reset_peak()
        t0 = time.perf_counter()
        sweep(c, {**request, "dataset": name})
        dt = time.perf_counter() - t0
        growth.append(srv.status("VmHWM") - before)
        list(c.do_action(flight.Action("drop", name.encode())))
        return dt

    ops: dict[str, Op] = {"sweepflight, one call": one_call}
    vbt_python = (
        None
        if ctx.quick
        else subprocess.run(
            [str(ROOT / "scripts" / "setup-vectorbt.sh")], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
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
    pairs = [[a, b] for a in range(10, 40) for b in range(a + 1, 40)][:100]
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


SECTIONS: dict[str, Callable[[Ctx], dict[str, Any]]] = {
    "kernel": exp_kernel,
    "scaling": exp_scaling,
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
}


# ---------------------------------------------------------------------------------------------
# environment


def environment(profile: str) -> dict[str, str]:
    def cmd(*a: str) -> str:
        try:
            return subprocess.run(a, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "?",
    )
    flags = pathlib.Path("/proc/cpuinfo").read_text()
    isa = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "baseline"
    import numba

    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu} ({isa})",
        "cores": str(os.cpu_count()),
        "memory": f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "rustc": cmd("rustc", "--version"),
        "build profile": profile,
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
        "numba": numba.__version__,
        "git": cmd("git", "-C", str(ROOT), "describe", "--always", "--dirty"),
    }


# ---------------------------------------------------------------------------------------------
# report


def met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def table_md(head: list[str], rows: list[list[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(head) - 1)
    sep = ["---" if a == "l" else "---:" for a in align]
    return [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join(sep) + " |",
        *["| " + " | ".join(r) + " |" for r in rows],
        "",
    ]


def sample_rows(samples: dict[str, dict[str, float]], base: str | None = None, base_label: str = "") -> list[list[str]]:
    rows = []
    for name, s in samples.items():
        row = [name, str(s["n"]), fmt_s(s["median"]), fmt_s(s["p50"]), fmt_s(s["p99"])]
        if base is not None:
            row.append(f"{s['median'] / samples[base]['median']:.3f}x")
        rows.append(row)
    return rows


SAMPLE_HEAD = ["", "n", "median", "p50", "p99"]


class Report:
    """docs/benchmarks.md from the results: the headline and targets first, details after."""

    def __init__(self, res: dict[str, Any]) -> None:
        self.r = res
        self.targets: list[list[str]] = []

    def target(self, issue: str, what: str, measured: str, ok: bool) -> None:
        self.targets.append([issue, what, measured, met(ok)])

    def render(self) -> str:
        details: list[str] = []
        for name in SECTIONS:
            if name in self.r:
                details += getattr(self, f"section_{name}")(self.r[name])
        env = self.r["environment"]
        head = [
            "# Benchmarks",
            "",
            "Generated by `benches/study.py` from `docs/benchmarks.json` of one run (do not edit by hand;",
            "`study.py --check-doc` checks it in CI). Every comparison below was measured side by side in",
            "that run, in alternating rounds; absolute numbers hold for this machine only. Every sweep",
            "result was checked before its time counted (the 80 paper combos against the reference, other",
            "grids against the kernel's oracle or the numba reference).",
            "",
        ]
        head += self.headline()
        head += ["## Targets", "", *table_md(["issue", "target", "measured", ""], self.targets, "llll")]
        head += ["## Environment", "", *table_md(["", ""], [[k, v] for k, v in env.items()], "ll")]
        return "\n".join(head + details).rstrip() + "\n"

    def headline(self) -> list[str]:
        p = self.r.get("peer")
        if p is None:
            return []
        call, sw = p["call"], p["sweep"]
        rows = [
            [
                "1-combo params-only call (p50)",
                fmt_s(call["sweepflight"]["p50"]),
                fmt_s(call["peer"]["p50"]),
                f"{call['sweepflight']['p50'] / call['peer']['p50']:.2f}x",
                "14 us (raw socket echo)",
            ],
        ]
        for size, row in p["bulk"].items():
            b = int(size)
            for op in ("put", "get"):
                ours, peer = row[f"{op} sweepflight"]["median"], row[f"{op} peer"]["median"]
                verb = "put (DoPut)" if op == "put" else "read back (DoGet)"
                study = "2.04 ms (1.2 MB echo)" if b == 1_200_000 and op == "put" else ""
                rows.append(
                    [
                        f"{verb} {b / MB:g} MB",
                        f"{fmt_s(ours)} ({gbps(b, ours):.2f} GB/s)",
                        f"{fmt_s(peer)} ({gbps(b, peer):.2f} GB/s)",
                        f"{ours / peer:.2f}x",
                        study,
                    ]
                )
        rows.append(
            [
                "80-combo paper sweep, one call",
                fmt_s(sw["sweepflight"]["median"]),
                fmt_s(sw["peer"]["median"]),
                f"{sw['sweepflight']['median'] / sw['peer']['median']:.3f}x",
                "numba 2.0 s, Rust port 2.27 s (in-process)",
            ]
        )
        return [
            "## Headline: sweepflight against the server a team would write instead",
            "",
            "The peer is `benches/peer.py`: pyarrow's `FlightServerBase` keeping uploads in a dict and",
            "the numba reference kernel behind the same `sweep` action. Both driven by the same pyarrow",
            "client over Unix sockets, calls interleaved; medians (the call: p50), time ratio ours/peer",
            "(below 1 is faster). The study's figures are from its own machine (Apple M2 Max).",
            "",
            *table_md(["", "sweepflight", "peer", "ours / peer", "the study"], rows, "lrrrl"),
            "![headline](img/headline.png)",
            "",
        ]

    def section_kernel(self, k: dict[str, Any]) -> list[str]:
        s = k["samples"]
        base = s["numba 1 thread"]["median"]
        peak = max(k["peak"].values())
        ma = k["multiply_adds"]
        rows = []
        for name, v in s.items():
            rate = ""
            if name.startswith("Rust"):
                threads = 1 if "1 thread" in name else k["cores"]
                rate = f"{ma / v['median'] / 1e9:.2f} G/s, {ma / v['median'] / (peak * threads):.0%} of peak"
            rows.append([*sample_rows({name: v})[0], f"{base / v['median']:.1f}x", rate])
        one, alls = s["Rust 1 thread"]["median"], s["Rust all cores"]["median"]
        self.target("#15", "paper sweep, 1 thread, cold: >= 30x numba 1 thread", f"{base / one:.1f}x", base / one >= 30)
        self.target("#15", "paper sweep, all cores, cold: <= 0.08 s", fmt_s(alls), alls <= 0.08)
        return [
            "## Kernel: the 80-combo paper sweep in-process",
            "",
            "numba is the paper's kernel (`sweepflight.reference`, `parallel=False` and `prange`), warm; Rust is",
            "`sweepflight-kernel` timed by `kernel-timer` around the sweep call (no cache; each sample the median",
            "of 3 runs in one process, after a checked warm-up). The multiply-add",
            f"count is the arithmetic the answer needs ({ma / 1e9:.3f} G: one pass per input, see",
            "docs/architecture.md); the peak is `peak-rate`, the same loop shape on L1-resident data:",
            f"{peak / 1e9:.1f} G multiply-adds/s per core (best instruction set).",
            "",
            *table_md([*SAMPLE_HEAD, "speed-up vs numba 1 thread", "rate"], rows, "lrrrrrl"),
        ]

    def section_scaling(self, sc: dict[str, Any]) -> list[str]:
        peak = max(self.r["kernel"]["peak"].values()) if "kernel" in self.r else None
        rows = []
        for r in sc["rows"]:
            rate = r["multiply_adds"] / r["median"]
            pct = f"{rate / (peak * sc['threads']):.0%}" if peak else "-"
            rows.append(
                [
                    f"{r['combos']:,} {'paper' if r['axis'] != 'combos' else 'random'} combos x {r['bars']:,} bars",
                    str(r["n"]),
                    fmt_s(r["median"]),
                    fmt_s(r["p99"]),
                    f"{r['multiply_adds'] / 1e9:.2f} G",
                    f"{rate / 1e9:.2f} G/s",
                    pct,
                ]
            )
        return [
            "## How cost grows: combos and bars",
            "",
            f"Cold sweeps in-process on all {sc['threads']} cores. Random combos draw each window within the",
            "paper grid's range for it (half 3-100, full 6-200, sqrt 2-14, p3 1-33, p2 2-50, p 3-100);",
            "longer series are the paper formula with more bars. Checked against the oracle bit for bit",
            "on combos spread over each grid. % of peak: of the peak rate times the cores.",
            "",
            *table_md(["sweep", "n", "median", "p99", "multiply-adds", "rate", "% of peak"], rows),
            "![scaling](img/scaling.png)",
            "",
        ]

    def section_server(self, sv: dict[str, Any]) -> list[str]:
        s = sv["samples"]
        base = "in-process, all cores"
        warm = s["one call, warm cache"]["median"]
        chatty = s["chatty: 80 one-combo calls"]["median"] / s[base]["median"]
        cold = s["one call, cold cache"]["median"] / s[base]["median"]
        self.target("#15", "preloaded, warm cache, one params-only call: <= 25 ms", fmt_s(warm), warm <= 0.025)
        self.target(
            "#15",
            "chatty (80 one-combo calls, cache filling): <= 1.05x one in-process sweep",
            f"{chatty:.2f}x",
            chatty <= 1.05,
        )
        return [
            "## The paper sweep through the server",
            "",
            "The series is put once; each call carries only its parameters (pyarrow client, Unix socket).",
            "Cold: a server with `--cache-bytes 0`, recomputing everything like the in-process run; warm:",
            "the default cache, holding the arrays of earlier calls. Chatty: 80 one-combo calls after a",
            "fresh put (a new version, so the cache starts empty and fills as the calls go).",
            "",
            *table_md([*SAMPLE_HEAD, "vs in-process"], sample_rows(s, base)),
            f"One cold call costs {cold:.3f}x the in-process sweep: the boundary, crossed once in binary with the",
            "data already on the far side, is noise on this machine.",
            "",
        ]

    def section_architectures(self, a: dict[str, Any]) -> list[str]:
        s = a["samples"]
        ser = a["serialization"]
        raw = ser["raw bytes"]["median"]
        srows = [[k, str(v["n"]), fmt_s(v["median"]), f"{v['median'] / raw:.0f}x"] for k, v in ser.items()]
        return [
            "## The study's ways across the boundary",
            "",
            "Each path sweeps the 80 paper combos on the 150,000-bar series (Python drives every path; Unix",
            "socket, except JSON over loopback TCP). No cache anywhere.",
            "",
            *table_md([*SAMPLE_HEAD, "vs in-process"], sample_rows(s, "in-process, all cores")),
            "![architectures](img/architectures.png)",
            "",
            "Serialization of the series alone (encode and decode, in-process); the study measured JSON",
            "at 1348x raw bytes:",
            "",
            *table_md(["format", "n", "median", "vs raw bytes"], srows),
        ]

    def section_peer(self, p: dict[str, Any]) -> list[str]:
        lines = [
            "## sweepflight and the peer, in detail",
            "",
            "Same pyarrow client, Unix sockets, interleaved. Puts and reads of a float64 `close` column;",
            "`raw echo` is the same bytes through a length-prefixed Unix-socket echo (`raw-echo`), the",
            "floor of any transport; the Rust client is `upload-timer` (`sweepflight-client` putting an",
            "Arrow batch built beforehand, as pyarrow puts a table; mimalloc as its allocator).",
            "",
            "The 1-combo params-only call (64 bars):",
            "",
            *table_md(SAMPLE_HEAD, sample_rows(p["call"])),
        ]
        for size, row in p["bulk"].items():
            b = int(size)
            lines += [f"{b / MB:g} MB:", ""]
            rows = [[*sample_rows({k: v})[0], f"{gbps(b, v['median']):.2f} GB/s"] for k, v in row.items()]
            lines += table_md([*SAMPLE_HEAD, "throughput"], rows)
        small, big = p["bulk"]["1200000"], list(p["bulk"].items())[-1]
        big_b, big_row = int(big[0]), big[1]
        c = p["call"]
        self.target(
            "#16",
            "1-combo params-only call faster than the peer's",
            f"{c['sweepflight']['p50'] / c['peer']['p50']:.2f}x its time",
            c["sweepflight"]["p50"] < c["peer"]["p50"],
        )
        r_echo = small["put sweepflight"]["median"] / small["raw echo"]["median"]
        self.target("#16", "1.2 MB put within 1.2x of a raw 1.2 MB echo", f"{r_echo:.2f}x", r_echo <= 1.2)
        faster = small["put sweepflight"]["median"] < small["put peer"]["median"]
        self.target(
            "#16",
            "1.2 MB put faster than the peer",
            f"{small['put sweepflight']['median'] / small['put peer']['median']:.2f}x its time",
            faster,
        )
        for size, row in p["bulk"].items():
            b = int(size)
            if b < 10 * MB:
                continue
            ours, peer = gbps(b, row["put sweepflight"]["median"]), gbps(b, row["put peer"]["median"])
            self.target(
                "#16",
                f"put {b / MB:g} MB: >= 2x the peer, >= 1.5 GB/s",
                f"{ours / peer:.2f}x, {ours:.2f} GB/s",
                ours >= 2 * peer and ours >= 1.5,
            )
            rust = gbps(b, row["put sweepflight, Rust client"]["median"])
            self.target(
                "#16",
                f"put {b / MB:g} MB: Rust client at least as fast as pyarrow",
                f"{rust:.2f} vs {ours:.2f} GB/s",
                rust >= ours,
            )
        g = big_row["get peer"]["median"] / big_row["get sweepflight"]["median"]
        self.target("#16", f"DoGet {big_b / MB:g} MB: >= 2x the peer", f"{g:.2f}x", g >= 2)
        d = p["durable"]
        dr = d["durable put"]["median"] / (
            d["dd + fsync"]["median"] * p["durable_bytes"]["put"] / p["durable_bytes"]["dd"]
        )
        self.target("#16", f"durable {big_b / MB:g} MB put within 1.3x of dd + fsync", f"{dr:.2f}x", dr <= 1.3)
        pr = p["peak_rss"]
        ratio = pr["sweepflight"]["peak"] / pr["dataset_bytes"]
        self.target(
            "#16", f"peak server RSS during a {big_b / MB:g} MB put <= 1.3x the dataset", f"{ratio:.2f}x", ratio <= 1.3
        )
        lines += [
            f"Durable put of {big_b / MB:g} MB (`--data-dir`, written as it arrives, fsynced and renamed before the",
            f"answer) against `dd` writing {p['durable_bytes']['dd'] / MB:g} MB from /dev/zero with `conv=fsync`",
            "to the same disk:",
            "",
            *table_md(SAMPLE_HEAD, sample_rows(d)),
            f"Peak resident memory of a fresh server during one {big_b / MB:g} MB put (VmHWM, reset before the put),",
            "and that put's time (one sample: the puts above replace a dataset and may reuse its predecessor's",
            "memory; this one has only fresh pages, which this VM hands out slowly, docs/perf-notes.md):",
            "",
            *table_md(
                ["server", "resident before", "peak", "peak / dataset", "put into fresh memory"],
                [
                    [
                        k,
                        f"{v['before'] / MB:.0f} MB",
                        f"{v['peak'] / MB:.0f} MB",
                        f"{v['peak'] / pr['dataset_bytes']:.2f}x",
                        fmt_s(v["secs"]) if "secs" in v else "not measured",
                    ]
                    for k, v in pr.items()
                    if k != "dataset_bytes"
                ],
            ),
        ]
        return lines

    def section_universe(self, u: dict[str, Any]) -> list[str]:
        s, puts = u["sweeps"], u["puts"]
        one = s["one call, every series"]["median"]
        per = s["in-process, one series at a time"]["median"]
        whole = s["in-process, concatenated"]["median"]
        kp = puts["keyed put"]["median"] / puts["unkeyed put, same bytes"]["median"]
        self.target(
            "#17",
            "universe sweep, one call: >= 0.95x the throughput of one series at a time in-process",
            f"{per / one:.2f}x",
            per / one >= 0.95,
        )
        self.target(
            "#17",
            "universe sweep, one call: <= 1.05x the kernel on the concatenated work",
            f"{one / whole:.2f}x",
            one / whole <= 1.05,
        )
        self.target("#17", "keyed put within 1.2x of an unkeyed put of the same bytes", f"{kp:.2f}x", kp <= 1.2)
        work = u["series"] * u["bars"] * u["combos"]
        rows = [[*sample_rows({k: v})[0], f"{work / v['median'] / 1e9:.2f} G"] for k, v in s.items()]
        return [
            "## Universes",
            "",
            f"{u['series']} series x {u['bars']:,} bars ({u['close_bytes'] / MB:.0f} MB of closes;",
            f"{u['table_bytes'] / MB:.0f} MB with the dictionary-encoded `symbol` key column) put as one keyed",
            "dataset, against the same table put",
            f"without a key. Then the {u['combos']} paper combos over every series in one call (server with",
            "`--cache-bytes 0`) against the kernel in-process on all cores: one series after another, and",
            "the series concatenated into one (the same arithmetic in one sweep).",
            "",
            *table_md(SAMPLE_HEAD, sample_rows(puts)),
            *table_md([*SAMPLE_HEAD, "bar-combos per second"], rows),
        ]

    def section_strategies(self, st: dict[str, Any]) -> list[str]:
        calls, kernel, counts = st["calls"], st["kernel"], st["kernel_combos"]
        ours = calls["sweepflight, one call"]["median"]
        growth = statistics.median(st["server_growth"])
        lines = [
            "## Strategies: vectorbt's canonical example, and what each strategy costs",
            "",
            "vectorbt's own SMA-crossover example, as a new user runs it: `vbt.MA.run_combs(close,",
            "window=np.arange(10, 40), r=2)` and `Portfolio.from_signals(..., direction='both',",
            f"upon_opposite_entry='reverse')` (stop-and-reverse), {st['combos']} combos on",
            f"{st['bars']:,} bars of the paper series, each run in a fresh process (`benches/vbt_peer.py`:",
            "one untimed call to compile and warm up, then the timed call; peak RSS of that process).",
            "Against it, one `sweep` call of `sma_cross` over the same combos on a sweepflight server",
            "holding the series (a new dataset each round, so nothing is cached), its memory growth the",
            "server's peak resident size during the call above what it held before.",
            "",
        ]
        rows = sample_rows(calls, base="sweepflight, one call", base_label="x sweepflight")
        lines += table_md([*SAMPLE_HEAD, "x sweepflight"], rows)
        peaks = st["vectorbt_peak_rss"]
        if peaks:
            fastest = min((k for k in calls if k.startswith("vectorbt")), key=lambda k: calls[k]["median"])
            engine = "rust" if "rust" in fastest else "numba"
            ratio = calls[fastest]["median"] / ours
            peak = statistics.median(peaks[engine])
            self.target(
                "#26",
                "vectorbt's 435-combo SMA grid: one cold call >= 100x faster than its faster engine",
                f"{ratio:.0f}x ({engine})",
                ratio >= 100,
            )
            self.target(
                "#26",
                "server memory growth <= 1/50 of vectorbt's peak RSS",
                f"{growth / MB:.1f} MB vs {peak / MB:,.0f} MB (1/{peak / max(growth, 1):.0f})",
                growth * 50 <= peak,
            )
            agree = ", ".join(f"{e}: {n}/{st['combos']}" for e, n in st["vectorbt_trade_agreement"].items())
            mem_rows = [[f"vectorbt ({e}) peak RSS", f"{statistics.median(v) / MB:,.0f} MB"] for e, v in peaks.items()]
            lines += [
                *table_md(
                    ["memory", ""],
                    [*mem_rows, ["sweepflight server growth during the call", f"{growth / MB:.1f} MB"]],
                    "lr",
                ),
                f"Trade counts per combo equal to vectorbt's: {agree} (its moving average is a running sum;",
                "ours sums each window afresh, so near-ties could differ; none did here).",
                "",
            ]
        else:
            lines += ["vectorbt was not run (a quick run): only sweepflight's call is timed.", ""]
        paper = "hma_sar (the 80 paper combos)"
        per = {k: v["median"] / counts[k] for k, v in kernel.items()}
        for s, bound in (("sma_cross", 0.5), ("ema_cross", 0.5), ("donchian", 1.0), ("rsi_revert", 1.0)):
            r = per[s] / per[paper]
            self.target(
                "#26", f"{s} per combo <= {bound:g}x the paper sweep's (cold, all cores)", f"{r:.2f}x", r <= bound
            )
        rows = [
            [*sample_rows({k: v})[0], str(counts[k]), fmt_s(per[k]), f"{per[k] / per[paper]:.2f}x"]
            for k, v in kernel.items()
        ]
        mc = st["metric_cost"]
        for g in ("paper", "sma_cross 10,000"):
            r = mc[f"{g}, metrics on"]["median"] / mc[f"{g}, metrics off"]["median"]
            self.target(
                "#27", f"all metrics on: <= 1.15x the same sweep without the per-bar ones ({g})", f"{r:.2f}x", r <= 1.15
            )
        lines += [
            "What the metrics cost (`kernel-timer --no-bar-metrics` leaves out the per-bar ones,",
            "`sharpe` and `sortino`: the moves' prefix sums and their use per trade; the per-trade",
            "metrics are a few adds per booked trade either way), all cores, the same rounds:",
            "",
            *table_md(SAMPLE_HEAD, sample_rows(mc)),
            "Each strategy's sweep in-process on all cores (`kernel-timer --strategy`, checked against",
            "the oracle on three combos first), cold: the paper grid; sma_cross and ema_cross on the 435",
            "pairs; donchian n = 5..204; rsi_revert n = 2..41 x 10 band pairs.",
            "",
            *table_md([*SAMPLE_HEAD, "combos", "per combo", "x paper"], rows),
        ]
        return lines

    def section_judging(self, j: dict[str, Any]) -> list[str]:
        top, growth = j["top"], j["growth"]
        rate = {k: j["combos"] / v["median"] for k, v in top.items()}
        ratio = rate["top"] / rate["chunks"]
        grown = max(growth["top"])
        self.target(
            "#27",
            f"`top: 100` over {j['combos']:,} sma_cross combos: server memory growth <= 100 MB",
            f"{grown / MB:.0f} MB",
            grown <= 100 * MB,
        )
        self.target(
            "#27",
            "... and >= 0.9x the combos/s of the same grid in chunks without `top`",
            f"{ratio:.2f}x",
            ratio >= 0.9,
        )
        d = j["detail"]
        tr = d["trades, 100 combos"]["median"] / d["sweep, 100 combos"]["median"]
        self.target("#27", "`trades` of 100 combos on the paper series <= 2x their sweep", f"{tr:.2f}x", tr <= 2.0)
        rows = [
            [*sample_rows({k: v})[0], f"{rate[k] / 1e6:.2f} M/s", f"{max(growth[k]) / MB:.0f} MB"]
            for k, v in top.items()
        ]
        return [
            "## Judging on the server: a ranked grid of millions, and trades",
            "",
            f"An sma_cross grid of {j['combos']:,} combos (fast and slow each 1..{int(j['combos'] ** 0.5)}) on",
            f"{j['bars']:,} bars: one `sweep` call with `order_by: pnl, top: 100` (the server runs it in",
            "steps of `--top-step-rows`, 25,000 result rows, keeping the best), against the same grid as calls of",
            f"{j['per_chunk']:,} combos without `top` whose best 100 the client keeps (the two answers are",
            "checked equal, and two of the best combos' trades against a plain oracle). Memory: the",
            "server's peak resident size during the call above what it held before, the largest round.",
            "",
            *table_md([*SAMPLE_HEAD, "combos/s", "server growth"], rows),
            f"`trades` of 100 sma_cross combos on {j['paper_bars']:,} bars of the paper series",
            f"({j['trades_booked']:,} trades, checked equal to the sweep's counts) against the `sweep` of",
            "the same combos, one server, the same rounds:",
            "",
            *table_md(SAMPLE_HEAD, sample_rows(d)),
        ]

    def section_walk_forward(self, w: dict[str, Any]) -> list[str]:
        r = w["runs"]
        ratio = r["one walk_forward call"]["median"] / r["sweep calls per fold"]["median"]
        self.target(
            "#28",
            f"{w['folds']} rolling folds x {w['combos']:,} combos x {w['series']} series in one call: "
            "<= 0.8x separate sweep calls per fold",
            f"{ratio:.2f}x",
            ratio <= 0.8,
        )
        pbo = w["pbo"]["pbo, 1,000 combos x 16 blocks"]["median"]
        self.target(
            "#28", f"`pbo` on a {w['pbo_combos']:,}-combo x 16-block result in the client: < 2 s", fmt_s(pbo), pbo < 2.0
        )
        return [
            "## Walk-forward in one call",
            "",
            f"A universe of {w['series']} series of {w['train'] + w['folds'] * w['test']:,} bars, an sma_cross grid of",
            f"{w['combos']:,} combos, {w['folds']} rolling folds (train {w['train']:,}, test {w['test']:,} bars): one",
            f"`walk_forward` call against the same work by hand ({w['calls_by_hand']} `sweep` calls: per fold, the",
            "universe's in-sample sweep with `rows` and `top: 1`, then each series' chosen combo on its test rows).",
            "Both answers are checked equal, fold by fold. Below, `sweepflight.stats.pbo` on a sweep's",
            f"`block_pnl` ({w['pbo_combos']:,} combos, 16 blocks: all 12,870 splits), in the client.",
            "",
            *table_md([*SAMPLE_HEAD, "vs by hand"], sample_rows(r, "sweep calls per fold")),
            *table_md(SAMPLE_HEAD, sample_rows(w["pbo"])),
        ]

    def section_jobs(self, j: dict[str, Any]) -> list[str]:
        calls = j["calls"]
        st = calls["status of a job"]["median"] / calls["1-combo sweep call"]["median"]
        self.target("#29", "a job's status call <= 2x the 1-combo params-only call", f"{st:.2f}x", st <= 2.0)
        cancel = j["cancel"]["max"]
        self.target(
            "#29",
            "cancel frees a running sweep's reserved memory within 1 s",
            f"{fmt_s(cancel)} (slowest of {j['cancel']['n']})",
            cancel <= 1.0,
        )
        puts = j["puts"]
        base = puts["uncompressed"]["median"]
        worst = max(puts["lz4"]["median"], puts["zstd"]["median"]) / base
        alone = max(puts[f"{k}, the client's compression alone"]["median"] for k in ("lz4", "zstd")) / base
        self.target(
            "#29",
            f"compressed {j['bytes'] / MB:.0f} MB put (LZ4, ZSTD) on a Unix socket: <= 1.5x uncompressed",
            f"{worst:.2f}x",
            worst <= 1.5,
        )
        link = j["link"]
        if link["possible"]:
            lp = link["puts"]
            gain = lp["zstd"]["median"] / lp["none"]["median"]
            self.target(
                "#29",
                "over a link shaped to 1 Gbit/s: a ZSTD put of a price series beats the uncompressed one",
                f"{gain:.2f}x its time",
                gain < 1.0,
            )
        else:
            self.target(
                "#29",
                "over a link shaped to 1 Gbit/s: a ZSTD put beats the uncompressed one",
                f"not measured: {link['why']}",
                False,
            )
        ratio = {k: j["bytes"] / v for k, v in j["compressed_bytes"].items()}
        out = [
            "## Jobs and compression",
            "",
            "A job's `status` call against the 1-combo params-only `sweep` call (pyarrow client, Unix socket,",
            "interleaved):",
            "",
            *table_md([*SAMPLE_HEAD, "vs the sweep call"], sample_rows(calls, "1-combo sweep call")),
            "`cancel` of a running sma_cross job of 59,302 combos on the paper series, once it reports",
            "progress: the reply comes once its memory is back (checked: `sweep_reserved_bytes` 0); median",
            f"{fmt_s(j['cancel']['median'])}, slowest {fmt_s(cancel)} of {j['cancel']['n']}.",
            "",
            f"Puts of an FX-like price series ({j['rows']:,} closes to 5 decimals, {j['bytes'] / MB:.0f} MB)",
            f"from pyarrow, its IPC bodies compressed (LZ4 to {ratio['lz4']:.2f}x smaller, ZSTD",
            f"{ratio['zstd']:.2f}x) or not; the stored values checked equal. The server decompresses each",
            "message straight into the dataset's column as it arrives; the last rows time pyarrow",
            "compressing the same stream into memory, with no server at all:",
            "",
            *table_md([*SAMPLE_HEAD, "vs uncompressed"], sample_rows(puts, "uncompressed")),
            f"The client's compression alone costs up to {alone:.2f}x the uncompressed put: on a Unix socket",
            "the codec, not the server, sets the compressed put's time.",
            "",
        ]
        if link["possible"]:
            out += [
                "The same puts between two network namespaces joined by a veth pair, each end shaped to 1 Gbit/s",
                "by `tc` (token bucket), the server in one, the pyarrow client in the other:",
                "",
                *table_md([*SAMPLE_HEAD, "vs uncompressed"], sample_rows(link["puts"], "none")),
            ]
        else:
            out += [f"The shaped-link puts were not measured here: {link['why']}.", ""]
        return out

    def section_overload(self, o: dict[str, Any]) -> list[str]:
        bound = o["datasets"] + o["cache"] + o["budget"] + 300 * MB
        settled_bound = o["datasets"] + o["cache"] + 300 * MB
        ratio = o["concurrent"]["median"] / o["sequential"]["median"]
        self.target(
            "#20",
            "16 concurrent long sweeps: peak RSS <= datasets + cache + budget + 300 MB",
            f"{o['peak_rss'] / MB:.0f} MB (bound {bound / MB:.0f})",
            o["peak_rss"] <= bound,
        )
        self.target("#20", "... total time within 1.1x of one after another", f"{ratio:.2f}x", ratio <= 1.1)
        self.target(
            "#20",
            f"... RSS {o['settle_secs']:.0f} s after <= datasets + cache + 300 MB",
            f"{o['settled_rss'] / MB:.0f} MB (bound {settled_bound / MB:.0f})",
            o["settled_rss"] <= settled_bound,
        )
        lo, hi, n = o["lengths"]
        return [
            "## Under load: the sweep memory budget",
            "",
            f"{o['sweeps']} sweeps of {n} lengths ({lo}-{hi}) on {o['sweeps']} distinct {o['bars']:,}-bar series,",
            "all at once (one client thread each) against one after another, on a server with",
            f"`--sweep-memory-bytes {o['budget'] // MiB}MiB --cache-bytes {o['cache'] // MiB}MiB`; each phase on",
            "freshly put versions (cold cache). Every concurrent result equals the same sweep run alone;",
            "the first was checked against the numba reference.",
            "",
            *table_md(SAMPLE_HEAD, sample_rows({"one after another": o["sequential"], "all at once": o["concurrent"]})),
            *table_md(
                ["memory", "bytes"],
                [
                    ["datasets", f"{o['datasets'] / MB:.0f} MB"],
                    ["peak resident (VmHWM) during the concurrent phase", f"{o['peak_rss'] / MB:.0f} MB"],
                    [f"resident {o['settle_secs']:.0f} s later", f"{o['settled_rss'] / MB:.0f} MB"],
                ],
                "lr",
            ),
        ]

    def section_ray(self, r: dict[str, Any]) -> list[str]:
        one, two = r["one_server"]["median"], r["two_servers"]["median"]
        killed = r["two_servers_one_killed"]["median"]
        chunks = r["chunks"]
        per_chunk = r["driver_cpu"]["median"] / chunks
        share = r["driver_cpu"]["median"] / two
        self.target("#18", "2 servers x 1 thread >= 1.8x 1 x 1 thread (Cluster)", f"{one / two:.2f}x", one / two >= 1.8)
        self.target(
            "#18",
            "driver cost per chunk <= 2% of the sweep",
            f"{fmt_s(per_chunk)} per chunk, {share:.1%}",
            share <= 0.02,
        )
        self.target(
            "#18",
            "one server killed mid-sweep: within 1.5x of undisturbed",
            f"{killed / two:.2f}x",
            killed / two <= 1.5,
        )
        return [
            "## Scale-out on Ray",
            "",
            f"`sweepflight.ray.Cluster` on this machine (`ray.init(num_cpus=2)`): a {r['combos']:,}-combo random grid",
            f"on a {r['bars']:,}-bar series in {chunks} chunks of up to {r['chunk']:,} (smaller toward the end),",
            "servers with `--threads 1 --cache-bytes 0`.",
            "Every result equals one server's; sampled combos were checked against the numba reference.",
            f"Ray start-up, apart: `ray.init` {fmt_s(r['ray_init'])}, a 1-server cluster {fmt_s(r['start_1'])},",
            f"a 2-server cluster {fmt_s(r['start_2'])}. Killed: one server SIGKILLed 40% of the way through;",
            "its actor restarts it,",
            "the driver puts the data again and resubmits the lost chunk.",
            "",
            *table_md(
                [*SAMPLE_HEAD, "vs 1 server"],
                sample_rows(
                    {
                        "1 server": r["one_server"],
                        "2 servers": r["two_servers"],
                        "2 servers, one killed": r["two_servers_one_killed"],
                    },
                    "1 server",
                ),
            ),
            "Driver cost: the driver process's CPU time during an undisturbed 2-server sweep (its Python and",
            f"gRPC threads: dispatch, receive, concatenate), {fmt_s(r['driver_cpu']['median'])} for {chunks} chunks",
            f"(n = {r['driver_cpu']['n']}), {fmt_s(per_chunk)} per chunk.",
            "",
        ]


def plots(res: dict[str, Any], outdir: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    if "peer" in res:
        p = res["peer"]
        labels, ratios = ["1-combo call"], [p["call"]["peer"]["p50"] / p["call"]["sweepflight"]["p50"]]
        for size, row in p["bulk"].items():
            for op in ("put", "get"):
                labels.append(f"{op} {int(size) / MB:g} MB")
                ratios.append(row[f"{op} peer"]["median"] / row[f"{op} sweepflight"]["median"])
        labels.append("80-combo sweep")
        ratios.append(p["sweep"]["peer"]["median"] / p["sweep"]["sweepflight"]["median"])
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.barh(labels[::-1], ratios[::-1], color=["tab:green" if x >= 1 else "tab:red" for x in ratios[::-1]])
        ax.axvline(1, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("speed-up over the peer (peer time / sweepflight time, log scale)")
        for i, x in enumerate(ratios[::-1]):
            ax.text(x, i, f" {x:.2f}x", va="center", fontsize=8)
        fig.tight_layout()
        fig.savefig(outdir / "headline.png", dpi=110)
        plt.close(fig)
    if "scaling" in res:
        rows = res["scaling"]["rows"]
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
        for ax, axis, key, label in (
            (axes[0], "combos", "combos", "combos (150k bars)"),
            (axes[1], "bars", "bars", "bars (80 paper combos)"),
        ):
            pts = sorted((r[key], r["median"]) for r in rows if r["axis"] in (axis, "paper"))
            ax.loglog([x for x, _ in pts], [y for _, y in pts], marker="o")
            ax.set_xlabel(label)
            ax.set_ylabel("seconds, all cores")
            ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(outdir / "scaling.png", dpi=110)
        plt.close(fig)
    if "architectures" in res:
        a = res["architectures"]["samples"]
        names = list(a)[::-1]
        fig, ax = plt.subplots(figsize=(9, 3.8))
        ax.barh(names, [a[k]["median"] for k in names])
        ax.set_xscale("log")
        ax.set_xlabel("seconds for the 80-combo paper sweep (median, log scale)")
        for i, k in enumerate(names):
            ax.text(a[k]["median"], i, f" {fmt_s(a[k]['median'])}", va="center", fontsize=8)
        fig.tight_layout()
        fig.savefig(outdir / "architectures.png", dpi=110)
        plt.close(fig)


# ---------------------------------------------------------------------------------------------
# main


def build(profile: str) -> pathlib.Path:
    subprocess.run(
        [
            "cargo",
            "build",
            "--quiet",
            "--profile",
            profile,
            "-p",
            "sweepflight-server",
            "-p",
            "sweepflight-benches",
            "--bins",
        ],
        cwd=ROOT,
        check=True,
    )
    return ROOT / "target" / ("debug" if profile == "dev" else profile)


@contextlib.contextmanager
def context(bins: pathlib.Path, quick: bool) -> Iterator[Ctx]:
    ctx = Ctx(bins, quick)
    try:
        yield ctx
    finally:
        ctx.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes and counts; writes under target/study only")
    ap.add_argument(
        "--profile", default="release", help="cargo profile of the binaries (release; debug/dev for smoke tests)"
    )
    ap.add_argument(
        "--only", help="comma-separated sections (" + ", ".join(SECTIONS) + "); writes under target/study only"
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the sections already in target/study/partial.json (of an interrupted run) and run the rest",
    )
    ap.add_argument(
        "--check-doc",
        action="store_true",
        help="only check docs/benchmarks.md is the rendering of docs/benchmarks.json",
    )
    ap.add_argument(
        "--no-build",
        action="store_true",
        help="use the binaries already in target/PROFILE (scripts/test.sh builds them with the tests)",
    )
    args = ap.parse_args()
    if args.check_doc:
        if Report(json.loads(RAW.read_text())).render() != DOC.read_text():
            print(f"{DOC} is not the rendering of {RAW}: run benches/study.py", file=sys.stderr)
            return 1
        print(f"{DOC.name} matches {RAW.name}")
        return 0
    profile = "dev" if args.profile == "debug" else args.profile
    only = args.only.split(",") if args.only else list(SECTIONS)
    if unknown := set(only) - set(SECTIONS):
        ap.error(f"unknown sections {sorted(unknown)}")
    official = not args.quick and not args.only and profile == "release"
    OUT.mkdir(parents=True, exist_ok=True)
    bins = ROOT / "target" / ("debug" if profile == "dev" else profile) if args.no_build else build(profile)
    res: dict[str, Any] = {"environment": environment(args.profile)}
    partial = OUT / "partial.json"
    if args.resume and partial.exists():
        res.update({k: v for k, v in json.loads(partial.read_text()).items() if k in only})
    for name in only:
        if name in res:
            print(f"{name}: kept from {partial}", flush=True)
            continue
        print(f"{name} ...", flush=True)
        t0 = time.perf_counter()
        with context(bins, args.quick) as ctx:
            res[name] = SECTIONS[name](ctx)
        partial.write_text(json.dumps(res, indent=1) + "\n")
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    doc = Report(res).render()
    if official:
        RAW.write_text(json.dumps(res, indent=1) + "\n")
        plots(res, IMG)
        DOC.write_text(doc)
    else:
        (OUT / "results.json").write_text(json.dumps(res, indent=1) + "\n")
        plots(res, OUT / "img")
        (OUT / "benchmarks.md").write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
