"""sweepflight's benchmark suite: the IPC-tax study's measurements, re-run on our stack.

    .venv/bin/python benches/study.py            # full run, rewrites docs/benchmarks.md
    .venv/bin/python benches/study.py --quick    # smoke test with small counts (CI)

Everything is measured side by side in one run: where two things are compared, their samples
are taken in alternating rounds so machine noise hits both alike. Every implementation's sweep
result passes the equivalence gate (80 paper combos vs the reference CSV) before its timings
count. Raw numbers go to docs/benchmarks.json; docs/benchmarks.md is generated from them
(`--check-doc` verifies it still is).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import pathlib
import platform
import random
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "client-py"))
from sweepflight import paper, reference  # noqa: E402

REFERENCE = ROOT / "kernel" / "testdata" / "reference-80.csv"
RELEASE = ROOT / "target" / "release"
OUT = ROOT / "bench-out"
DOC = ROOT / "docs" / "benchmarks.md"
RAW = ROOT / "docs" / "benchmarks.json"


# ---------------------------------------------------------------------------------------------
# statistics


@dataclass
class Samples:
    """Seconds per operation."""

    xs: list[float] = field(default_factory=list)

    def add(self, x: float) -> None:
        self.xs.append(x)

    def pct(self, q: float) -> float:
        s = sorted(self.xs)
        return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]

    @property
    def median(self) -> float:
        return statistics.median(self.xs)

    def summary(self) -> dict:
        return {"n": len(self.xs), "median": self.median, "p50": self.pct(0.5), "p99": self.pct(0.99), "min": min(self.xs)}


def fmt_s(x: float) -> str:
    return f"{x * 1e3:.1f} ms" if x >= 1e-3 else f"{x * 1e6:.0f} us"


# ---------------------------------------------------------------------------------------------
# the gate


def expected() -> tuple[np.ndarray, np.ndarray]:
    data = np.genfromtxt(REFERENCE, delimiter=",", names=True)
    return data["pnl_pct_pts"], data["trades"].astype(np.int64)


def gate(pnl: np.ndarray, trades: np.ndarray, label: str) -> None:
    want_pnl, want_trades = expected()
    ok = np.array_equal(np.asarray(trades), want_trades) and np.all(np.abs(np.asarray(pnl) - want_pnl) <= 1e-6)
    if not ok:
        raise SystemExit(f"equivalence gate FAILED for {label}: timings do not count")


# ---------------------------------------------------------------------------------------------
# processes


def build() -> None:
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "-p", "sweepflight-server", "-p", "sweepflight-benches"],
        cwd=ROOT,
        check=True,
    )


class Proc:
    """A server process; its first stdout line ends with the address it serves."""

    def __init__(self, *cmd: str, env: dict[str, str] | None = None) -> None:
        env = {**os.environ, "RUST_LOG": "warn", **(env or {})}
        self.p = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, text=True, env=env)
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"{cmd[0]} exited with {self.p.wait()}")
        self.addr = line.split()[-1]

    def stop(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise SystemExit(f"{self.p.args[0]} did not stop within 30 s of SIGTERM")


def flight_server(tmp: pathlib.Path, transport: str, *flags: str, env: dict[str, str] | None = None) -> Proc:
    where = ["--unix", str(tmp / f"sf-{time.monotonic_ns()}.sock")] if transport == "unix" else ["--listen", "127.0.0.1:0"]
    storage = [] if "--data-dir" in flags else ["--in-memory"]
    return Proc(str(RELEASE / "sweepflight-server"), *where, *storage, *flags, env=env)


def put(client: flight.FlightClient, name: str, table: pa.Table) -> dict:
    writer, reader = client.do_put(flight.FlightDescriptor.for_path(name), table.schema)
    writer.write_table(table)
    writer.done_writing()
    meta = json.loads(reader.read().to_pybytes())
    writer.close()
    return meta


def sweep_call(client: flight.FlightClient, body: bytes) -> pa.Table:
    results = client.do_action(flight.Action("sweep", body))
    return pa.ipc.open_stream(b"".join(r.body.to_pybytes() for r in results)).read_all()


def interleaved(rounds: int, warmup: int, ops: dict[str, Callable[[], None]]) -> dict[str, Samples]:
    """Times each op once per round, in a fresh random order each round, after `warmup` untimed
    rounds.

    Random rather than rotated: rotating a fixed list keeps each op behind the same neighbour
    in almost every round, and a call right after another kind of call (say a DoAction on a
    different connection) can pay for it (+90 us for a small sweep on this VM); a fixed
    neighbour would charge that to one row only.
    """
    out = {k: Samples() for k in ops}
    order = list(ops)
    shuffle = random.Random(0).shuffle
    for r in range(warmup + rounds):
        shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            ops[k]()
            dt_ = time.perf_counter() - t0
            if r >= warmup:
                out[k].add(dt_)
    return out


# ---------------------------------------------------------------------------------------------
# experiments


def kernel_rust(threads: int) -> float:
    """One timed in-process sweep by kernel-timer (which gates its own result first)."""
    res = subprocess.run(
        [str(RELEASE / "kernel-timer"), "--runs", "1", "--threads", str(threads)],
        check=True, capture_output=True, text=True,
    )
    return next(iter(json.loads(res.stdout).values()))[0]


def exp_kernel(runs: int) -> dict:
    """numba (1 thread, prange) vs the Rust kernel (1 thread, all threads), alternating."""
    close = paper.series()
    params = reference.params_for(paper.lengths())
    for par in (False, True):
        gate(*reference.sweep(close, params, parallel=par), f"numba parallel={par}")
    samples = {k: Samples() for k in ("numba-1t", "numba-prange", "rust-1t", "rust-all")}
    for r in range(runs):
        for k in samples:
            if k.startswith("numba"):
                t0 = time.perf_counter()
                reference.sweep(close, params, parallel=k == "numba-prange")
                samples[k].add(time.perf_counter() - t0)
            else:
                samples[k].add(kernel_rust(1 if k == "rust-1t" else 0))
    return {k: v.summary() for k, v in samples.items()}


#: Runs of the preloaded experiment per run of the kernel experiment.
PRELOADED_RUNS_PER_RUN = 3


def exp_preloaded(tmp: pathlib.Path, runs: int) -> dict:
    """The 80-combo sweep as one params-only call vs the in-process kernel (all threads).

    The server runs with --cache-bytes 0 so every call recomputes everything, like the
    in-process run; the warm-cache numbers are a separate row.
    """
    close = pa.table({"close": paper.series()})
    body = json.dumps({"dataset": "paper", "lengths": paper.lengths()}).encode()
    clients, servers = {}, []
    for transport in ("unix", "tcp"):
        for cache in ("cold", "warm"):
            s = flight_server(tmp, transport, *(["--cache-bytes", "0"] if cache == "cold" else []))
            servers.append(s)
            c = flight.connect(s.addr)
            put(c, "paper", close)
            t = sweep_call(c, body)
            gate(t["pnl"].to_numpy(), t["trades"].to_numpy(), f"flight {transport} {cache}")
            clients[f"{transport}-{cache}"] = c
    ops: dict[str, Callable[[], None]] = {"in-process": lambda: None}
    for k, c in clients.items():
        ops[k] = (lambda c=c: sweep_call(c, body))
    # in-process timing comes from kernel-timer's own clock, not the Python stopwatch.
    samples = {k: Samples() for k in ops}
    for r in range(runs + 1):
        for k, op in ops.items():
            if k == "in-process":
                x = kernel_rust(0)
            else:
                t0 = time.perf_counter()
                op()
                x = time.perf_counter() - t0
            if r > 0:
                samples[k].add(x)
    for s in servers:
        s.stop()
    return {k: v.summary() for k, v in samples.items()}


def raw_echo_client(path: str) -> Callable[[bytes], bytes]:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)

    def call(payload: bytes) -> bytes:
        s.sendall(struct.pack("<I", len(payload)) + payload)
        want = len(payload) + 4
        got = bytearray()
        while len(got) < want:
            got += s.recv(max(65536, want - len(got)))
        return bytes(got[4:])

    return call


def session_call(client: flight.FlightClient, body: bytes) -> Callable[[], None]:
    """One params-only sweep per message on an open `session` exchange."""
    writer, reader = client.do_exchange(flight.FlightDescriptor.for_command(b'{"op": "session"}'))
    meta = pa.py_buffer(body)

    def call() -> None:
        writer.write_metadata(meta)
        chunk = reader.read_chunk()
        assert chunk.data.num_rows == 1

    return call


#: The gRPC client settings the floor is measured under, each in Python processes of its own
#: (gRPC reads GRPC_EXPERIMENTS once per process): what importing sweepflight sets, and gRPC's
#: own defaults (an empty value, which the package leaves alone).
FLOOR_SETTINGS = {"sweepflight": "-event_engine_client", "grpc-default": ""}
#: Each setting's rounds are split over this many processes, alternating between settings, so
#: a slow spell of the machine does not land on one setting only.
FLOOR_PARTS = 2
#: Sequential calls per CPU-time measurement.
CPU_CALLS = 2000


#: Where the floor's processes run, for the product setting, besides wherever the scheduler
#: puts them: indexes into this process's allowed CPUs, (servers, Python client). Unpinned, the
#: raw echo and the Flight calls each land on one CPU or two by chance, and the two costs differ
#: 3-4x on this VM (docs/benchmarks.md), so only a placement held fixed for every row of a
#: process compares like with like.
FLOOR_PLACEMENTS = {"one CPU": (0, 0), "two CPUs": (0, 1)}


#: The guest kernel's halt-polling time (cpuidle-haltpoll): how long an idle vCPU keeps
#: polling for work before it halts. Waking a halted vCPU is a trip through the hypervisor,
#: which the floor's calls pay several times each.
HALTPOLL = pathlib.Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
#: The halt-polling time the floor is also measured with, where the knob can be set.
FLOOR_HALTPOLL_NS = 200_000


def halt_poll_ns() -> int | None:
    """The guest's halt-polling time, or None if this kernel has no such knob."""
    try:
        return int(HALTPOLL.read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def halt_polling(ns: int | None) -> Iterator[None]:
    """Sets the guest's halt-polling time for the block (None: leaves it), then restores it."""
    old = halt_poll_ns()
    if ns is None or old is None:
        yield
        return
    HALTPOLL.write_text(str(ns))
    try:
        yield
    finally:
        HALTPOLL.write_text(str(old))


def exp_floor(tmp: pathlib.Path, rounds: int, tune_vm: bool) -> dict:
    """The params-only floor under each gRPC client setting, unpinned; the product setting under
    each fixed placement and (if `tune_vm` and the knob is writable) unpinned with the guest's
    halt polling on; plus a Rust client's view."""
    product = next(iter(FLOOR_SETTINGS))
    placements = FLOOR_PLACEMENTS if len(os.sched_getaffinity(0)) >= 2 else {}
    poll = FLOOR_HALTPOLL_NS if tune_vm and halt_poll_ns() is not None and os.access(HALTPOLL, os.W_OK) else None
    # (gRPC setting, placement, halt-polling time to set)
    runs = [(s, None, None) for s in FLOOR_SETTINGS] + [(product, p, None) for p in placements]
    runs += [(product, None, poll)] if poll is not None else []
    samples: dict[tuple, dict[str, Samples]] = {r: {} for r in runs}
    cpu: dict[str, list[dict]] = {s: [] for s in FLOOR_SETTINGS}
    for part in range(FLOOR_PARTS):
        for run in runs:
            setting, placement, ns = run
            out = tmp / f"floor-{part}.json"
            with halt_polling(ns):
                subprocess.run(
                    [sys.executable, __file__, "--floor-child", str(max(1, rounds // FLOOR_PARTS)), str(out), placement or ""],
                    env={**os.environ, "GRPC_EXPERIMENTS": FLOOR_SETTINGS[setting]},
                    check=True,
                )
            got = json.loads(out.read_text())
            for op, xs in got["samples"].items():
                samples[run].setdefault(op, Samples()).xs.extend(xs)
            if placement is None and ns is None:
                cpu[setting].append(got["cpu"])
    summary = {r: {op: v.summary() for op, v in ops.items()} for r, ops in samples.items()}
    return {
        "grpc_experiments": FLOOR_SETTINGS,
        "calls": {s: summary[s, None, None] for s in FLOOR_SETTINGS},
        "placed": {p: summary[product, p, None] for p in placements},
        "halt_polling": {"ns": poll, "calls": summary[product, None, poll]} if poll is not None else None,
        "cpu_us_per_call": {s: mean_dicts(parts) for s, parts in cpu.items()},
        "rust_client": rust_floor(tmp, rounds),
    }


def pin(pid: int, cpu: int) -> None:
    """Pins every thread of process `pid` to `cpu` (threads started later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), {cpu})


def mean_dicts(parts: list[dict]) -> dict:
    """Element-wise mean of equally shaped {op: {key: number}} dicts."""
    return {op: {k: statistics.mean(p[op][k] for p in parts) for k in parts[0][op]} for op in parts[0]}


def placement_cpus(placement: str | None) -> tuple[int | None, int | None]:
    """(servers' CPU, client's CPU) for a key of FLOOR_PLACEMENTS; (None, None) unpinned."""
    if placement is None:
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    server, client = FLOOR_PLACEMENTS[placement]
    return cpus[server], cpus[client]


def tiny_table() -> pa.Table:
    """The floor's dataset: 64 bars, so a 1-combo sweep's compute is ~0."""
    return pa.table({"close": 100 + np.random.default_rng(1).random(64)})


def floor_child(tmp: pathlib.Path, rounds: int, placement: str | None) -> dict:
    """One process's share of the floor: raw echo and Flight calls interleaved, then (unpinned
    only) CPU time.

    Runs in a process whose GRPC_EXPERIMENTS the parent chose; with a `placement` (a key of
    FLOOR_PLACEMENTS) every server and this whole process are pinned before the first call.
    Returns raw samples (seconds).
    """
    server_cpu, client_cpu = placement_cpus(placement)
    if placement:
        pin(os.getpid(), client_cpu)
    raw = Proc(str(RELEASE / "raw-echo"), "--unix", str(tmp / f"raw-{os.getpid()}.sock"))
    servers = {t: flight_server(tmp, t) for t in ("unix", "tcp")}
    if placement:
        for proc in (raw, *servers.values()):
            pin(proc.p.pid, server_cpu)
    tiny = tiny_table()
    body = json.dumps({"dataset": "tiny", "lengths": [6]}).encode()
    echo = raw_echo_client(raw.addr.removeprefix("unix://"))
    ops: dict[str, Callable[[], None]] = {FLOOR_RAW: lambda: echo(b"x" * 8)}
    for t, s in servers.items():
        c = flight.connect(s.addr)
        put(c, "tiny", tiny)
        assert sweep_call(c, body).num_rows == 1
        ops[f"{t}-echo-8B"] = (lambda c=c: list(c.do_action(flight.Action("echo", b"x" * 8))))
        ops[f"{t}-sweep-1combo-64bars"] = (lambda c=c: sweep_call(c, body))
        ops[f"{t}-session-sweep-1combo-64bars"] = session_call(c, body)
    # The project's Python client: small sweeps go on its open session, the result becomes a
    # pyarrow Table.
    import sweepflight

    sf = sweepflight.connect(servers["unix"].addr)
    assert sf.sweep("tiny", lengths=[6], as_arrow=True).num_rows == 1
    ops["unix-client-sweep-1combo-64bars"] = lambda: sf.sweep("tiny", lengths=[6], as_arrow=True)
    out = interleaved(rounds, warmup=max(50, rounds // 20), ops=ops)
    server_pid = servers["unix"].p.pid
    cpu = {} if placement else {op: cpu_per_call(ops[op], server_pid) for op in FLOOR_SWEEPS}
    sf.close()
    raw.stop()
    for s in servers.values():
        s.stop()
    return {"samples": {k: v.xs for k, v in out.items()}, "cpu": cpu}


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """CPU time so far of each thread of process `pid`, in nanoseconds (schedstat)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = int(pathlib.Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return out


def cpu_per_call(op: Callable[[], None], server_pid: int) -> dict:
    """CPU microseconds per call of `op`, run CPU_CALLS times back to back: this process's
    calling thread, its other threads (gRPC's), and the whole server process."""
    me = os.getpid()
    before, server_before = thread_cpu_ns(me), thread_cpu_ns(server_pid)
    t0 = time.perf_counter()
    for _ in range(CPU_CALLS):
        op()
    wall = time.perf_counter() - t0
    after, server_after = thread_cpu_ns(me), thread_cpu_ns(server_pid)
    spent = {tid: ns - before.get(tid, 0) for tid, ns in after.items()}
    per_call = lambda ns: ns / CPU_CALLS / 1e3  # noqa: E731
    return {
        "wall": wall / CPU_CALLS * 1e6,
        "caller": per_call(spent.pop(me)),
        "client_other_threads": per_call(sum(spent.values())),
        "server": per_call(sum(ns - server_before.get(t, 0) for t, ns in server_after.items())),
    }


def rust_floor(tmp: pathlib.Path, rounds: int) -> dict:
    """The same small calls from the Rust client (`sweepflight-client`), with a raw echo from the
    same process: unpinned over each transport, then over Unix with the placements of the Python
    tables. Splits the server's share of the floor from pyarrow's."""
    placements = FLOOR_PLACEMENTS if len(os.sched_getaffinity(0)) >= 2 else {}
    # (transport, placement, tokio workers: None for the default, one per CPU)
    runs = [("unix", None, None), ("tcp", None, None), *(("unix", p, None) for p in placements)]
    # One CPU again with a single tokio worker: the default's second worker is woken each call.
    runs += [("unix", p, 1) for p in list(placements)[:1]]
    out = {}
    for transport, placement, workers in runs:
        server_cpu, probe_cpu = placement_cpus(placement)
        raw = Proc(str(RELEASE / "raw-echo"), "--unix", str(tmp / "raw-rust.sock"))
        server = flight_server(tmp, transport, env={"TOKIO_WORKER_THREADS": str(workers)} if workers else None)
        put(flight.connect(server.addr), "tiny", tiny_table())
        if placement:
            for proc in (raw, server):
                pin(proc.p.pid, server_cpu)
        probe = subprocess.run(
            [str(RELEASE / "flight-probe"), server.addr, str(rounds), raw.addr.removeprefix("unix://")],
            check=True, capture_output=True, text=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, {probe_cpu})) if placement else None,
        )
        server.stop()
        raw.stop()
        calls = {}
        for name, r in json.loads(probe.stdout).items():
            p50, p99 = r["p50_us"] / 1e6, r["p99_us"] / 1e6
            calls[name] = {"n": r["n"], "median": p50, "p50": p50, "p99": p99, "min": None}
        label = ", ".join([transport, placement or "unpinned", *([f"{workers} tokio worker"] if workers else [])])
        # The yardstick first, as in the Python tables.
        out[label] = {FLOOR_RAW: calls.pop(FLOOR_RAW), **calls}
    return out


def exp_architectures(tmp: pathlib.Path, runs: int, kernel: dict, preloaded: dict) -> dict:
    """The study's ways of crossing the boundary, each sweeping the 80 paper combos.

    (a), (b) and (c) come from the kernel and preloaded experiments of this run. The others are
    timed here, one pass per round, in rotating order. Every path's result passes the gate once
    before its timings count.
    """
    close = paper.series()
    lengths = paper.lengths()
    table = pa.table({"close": close})
    srv = flight_server(tmp, "unix")
    c = flight.connect(srv.addr)
    version = [0]

    def fresh_dataset() -> None:
        # A new version has no cached WMAs: every chatty pass starts cold.
        version[0] += 1
        put(c, "paper", table)

    def chatty_preloaded() -> tuple[list, list]:
        rows = [sweep_call(c, json.dumps({"dataset": "paper", "lengths": [L]}).encode()) for L in lengths]
        return [r["pnl"][0].as_py() for r in rows], [r["trades"][0].as_py() for r in rows]

    def exchange(ls: list) -> pa.Table:
        cmd = json.dumps({"op": "sweep", "lengths": ls}).encode()
        writer, reader = c.do_exchange(flight.FlightDescriptor.for_command(cmd))
        writer.begin(table.schema)
        writer.write_table(table)
        writer.done_writing()
        out = reader.read_all()
        writer.close()
        return out

    def stateless_chatty() -> tuple[list, list]:
        rows = [exchange([L]) for L in lengths]
        return [r["pnl"][0].as_py() for r in rows], [r["trades"][0].as_py() for r in rows]

    stdio_input = pa.BufferOutputStream()
    schema = table.schema.with_metadata({"sweepflight.sweep": json.dumps({"lengths": lengths})})
    with pa.ipc.new_stream(stdio_input, schema) as w:
        w.write_table(table.replace_schema_metadata(schema.metadata))
    stdio_bytes = stdio_input.getvalue().to_pybytes()

    def spawn() -> pa.Table:
        out = subprocess.run([str(RELEASE / "sweep-stdio")], input=stdio_bytes, capture_output=True, check=True).stdout
        return pa.ipc.open_stream(out).read_all()

    js = Proc(str(RELEASE / "json-sweep"), "127.0.0.1:0")
    import http.client

    host, port = js.addr.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))

    def json_service() -> dict:
        body = json.dumps({"close": close.tolist(), "lengths": lengths})
        conn.request("POST", "/sweep", body=body, headers={"content-type": "application/json"})
        return json.loads(conn.getresponse().read())

    paths: dict[str, tuple[Callable[[], object], Callable[[object], tuple]]] = {
        "d-preloaded-chatty": (chatty_preloaded, lambda r: r),
        "e-stateless-chunky": (lambda: exchange(lengths), lambda t: (t["pnl"].to_numpy(), t["trades"].to_numpy())),
        "f-stateless-chatty": (stateless_chatty, lambda r: r),
        "g-spawn-per-sweep": (spawn, lambda t: (t["pnl"].to_numpy(), t["trades"].to_numpy())),
        "h-json-service": (json_service, lambda d: (d["pnl"], d["trades"])),
    }
    for name, (op, unpack) in paths.items():
        fresh_dataset()
        pnl, trades = unpack(op())
        gate(np.asarray(pnl), np.asarray(trades), name)
    samples = {k: Samples() for k in paths}
    for r in range(runs):
        for name, (op, _) in list(paths.items())[r % len(paths):] + list(paths.items())[: r % len(paths)]:
            fresh_dataset()
            t0 = time.perf_counter()
            op()
            samples[name].add(time.perf_counter() - t0)
    conn.close()
    js.stop()
    srv.stop()
    out = {
        "a-numba-1t": kernel["numba-1t"],
        "a-numba-prange": kernel["numba-prange"],
        "b-rust-1t": kernel["rust-1t"],
        "b-rust-all": kernel["rust-all"],
        "c-preloaded-chunky-unix": preloaded["unix-cold"],
        "c-preloaded-chunky-tcp": preloaded["tcp-cold"],
    }
    out.update({k: v.summary() for k, v in samples.items()})
    return out


def exp_echo_curve(tmp: pathlib.Path, quick: bool) -> dict:
    """Payloads of 1 .. 150k float64 through DoAction echo, DoExchange echo and raw echo."""
    raw = Proc(str(RELEASE / "raw-echo"), "--unix", str(tmp / "raw-curve.sock"))
    srv = flight_server(tmp, "unix")
    c = flight.connect(srv.addr)
    echo = raw_echo_client(raw.addr.removeprefix("unix://"))
    sizes = [1, 10, 100, 1_000, 10_000, 100_000, 150_000]
    out: dict = {}
    for n in sizes:
        payload = np.random.default_rng(n).random(n)
        body = payload.tobytes()
        batch = pa.record_batch({"x": payload})
        count = 20 if quick else (1000 if n <= 10_000 else 300)

        def action() -> None:
            got = next(iter(c.do_action(flight.Action("echo", body)))).body
            assert got.size == len(body)

        def exchange() -> None:
            writer, reader = c.do_exchange(flight.FlightDescriptor.for_command(b'{"op": "echo"}'))
            writer.begin(batch.schema)
            writer.write_batch(batch)
            writer.done_writing()
            got = reader.read_all()
            writer.close()
            assert got.num_rows == n

        def rawcall() -> None:
            assert len(echo(body)) == len(body)

        res = interleaved(count, warmup=max(5, count // 20), ops={"do_action": action, "do_exchange": exchange, "raw_unix": rawcall})
        out[str(n)] = {k: v.summary() for k, v in res.items()}
    raw.stop()
    srv.stop()
    fits = {}
    for transport in ("do_action", "do_exchange", "raw_unix"):
        x = np.array([n * 8 for n in sizes], dtype=float)
        y = np.array([out[str(n)][transport]["p50"] for n in sizes])
        slope, floor = np.polyfit(x, y, 1)
        fits[transport] = {"floor_us": floor * 1e6, "gb_per_s": (1 / slope) / 1e9 if slope > 0 else float("inf")}
    return {"sizes": sizes, "points": out, "fits": fits}


def exp_serialization(quick: bool) -> dict:
    """Encode + decode of the 150k-float series in four formats."""
    import pickle

    arr = paper.series()
    table = pa.table({"close": arr})

    def arrow_roundtrip() -> None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        pa.ipc.open_stream(sink.getvalue()).read_all()

    ops = {
        "raw bytes": lambda: np.frombuffer(arr.tobytes(), dtype=np.float64),
        "Arrow IPC stream": arrow_roundtrip,
        "pickle": lambda: pickle.loads(pickle.dumps(arr, protocol=5)),
        "JSON (tolist + json.dumps/loads)": lambda: np.array(json.loads(json.dumps(arr.tolist()))),
    }
    res = interleaved(3 if quick else 15, warmup=2, ops=ops)
    raw = res["raw bytes"].median
    return {k: {**v.summary(), "ratio_to_raw": v.median / raw} for k, v in res.items()}


def exp_load(tmp: pathlib.Path, quick: bool) -> dict:
    """Open-loop fixed-rate params-only calls from the Rust load generator, up to saturation."""
    srv = flight_server(tmp, "tcp")
    c = flight.connect(srv.addr)
    put(c, "tiny", tiny_table())
    rates = [250, 1000] if quick else [500, 1000, 2000, 4000, 8000, 16000]
    out = []
    for rate in rates:
        n = 500 if quick else max(10_000, rate * 3)
        res = subprocess.run([str(RELEASE / "load-gen"), srv.addr, str(rate), str(n)], check=True, capture_output=True, text=True)
        row = json.loads(res.stdout)
        out.append(row)
        if row["achieved_rate"] < 0.8 * rate:
            break  # saturated: higher offered rates only queue
    srv.stop()
    return {"rows": out}


def exp_upload(tmp: pathlib.Path, quick: bool) -> dict:
    """DoPut of 1.2 MB, 80 MB and 800 MB series from the Python and Rust clients."""
    import sweepflight

    sizes = [1_200_000, 80_000_000] if quick else [1_200_000, 80_000_000, 800_000_000]
    srv = flight_server(tmp, "unix")
    # The same puts to a server with a data directory: written, fsynced and renamed into place
    # before the PutResult.
    durable_srv = flight_server(tmp, "unix", "--data-dir", str(tmp / "upload-data"))
    durable = sweepflight.connect(durable_srv.addr)
    raw = Proc(str(RELEASE / "raw-echo"), "--unix", str(tmp / "raw-up.sock"))
    echo = raw_echo_client(raw.addr.removeprefix("unix://"))
    out: dict = {}
    with sweepflight.connect(srv.addr) as sf:
        for size in sizes:
            runs = 2 if quick or size >= 800_000_000 else 5
            arr = 100 + np.arange(size // 8) % 1000 * 0.01

            def python_put(arr: np.ndarray = arr) -> None:
                assert sf.put("upload", arr).rows == len(arr)

            if size <= 1_200_000:
                # The small put's target is a ratio to a raw echo of the same bytes, and this
                # machine's speed at moving megabytes drifts by 3x within minutes: measure the
                # two side by side, round by round.
                body = arr.tobytes()
                both = interleaved(20 if quick else 200, 5, {"python": python_put, "raw": lambda: echo(body)})
                py, raw_echo = both["python"], both["raw"]
            else:
                py = Samples()
                for r in range(runs + 1):
                    t0 = time.perf_counter()
                    python_put()
                    if r:
                        py.add(time.perf_counter() - t0)
            rs = subprocess.run([str(RELEASE / "upload-timer"), srv.addr, str(size), str(runs)], check=True, capture_output=True, text=True)
            rust = Samples(json.loads(rs.stdout)["secs"])
            dur = Samples()
            for r in range(runs + 1):
                t0 = time.perf_counter()
                assert durable.put("upload", arr).rows == len(arr)
                if r:
                    dur.add(time.perf_counter() - t0)
            durable.drop("upload")
            row = {"python": py.summary(), "rust": rust.summary(), "python_durable": dur.summary()}
            if size <= 1_200_000:
                row["raw_echo"] = raw_echo.summary()
            out[str(size)] = row
            sf.drop("upload")
    durable.close()
    durable_srv.stop()
    raw.stop()
    srv.stop()
    return out


# ---------------------------------------------------------------------------------------------
# report


def environment() -> dict:
    def cmd(*a: str) -> str:
        try:
            return subprocess.run(a, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    cpu = "?"
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    import numba

    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "rustc": cmd("rustc", "--version"),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
        "numba": numba.__version__,
        "git": cmd("git", "-C", str(ROOT), "describe", "--always", "--dirty"),
        "guest halt polling (cpuidle-haltpoll)": "n/a" if (ns := halt_poll_ns()) is None else f"{ns} ns",
        # Set by importing sweepflight (client-py/sweepflight/_grpc.py) unless already set; the
        # floor section also measures gRPC's defaults.
        "GRPC_EXPERIMENTS (Python)": os.environ.get("GRPC_EXPERIMENTS", "(unset)") or "(empty)",
    }


def render(res: dict) -> str:
    env = res["environment"]
    k = res["kernel"]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `.venv/bin/python benches/study.py` (do not edit by hand). Raw numbers:",
        "`docs/benchmarks.json` of the same run. Every ratio below was measured side by side in",
        "this one run; absolute numbers hold for this machine only.",
        "",
        "| environment | |",
        "| --- | --- |",
        *[f"| {key} | {val} |" for key, val in env.items()],
        "",
        "Before any timing counts, every implementation's 80-combo paper sweep passed the",
        "equivalence gate (trades equal, |dPnL| <= 1e-6 vs `kernel/testdata/reference-80.csv`).",
        "",
        "## Kernel: the 80-combo paper sweep in-process",
        "",
        "numba is the paper's kernel (`sweepflight.reference`); Rust is `sweepflight-kernel` via",
        "`kernel-timer` (timed inside the process, around the sweep call only, no cache).",
        "",
        "| implementation | n | median | p50 | p99 | speed-up vs numba 1 thread |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    base = k["numba-1t"]["median"]
    for name, s in k.items():
        lines.append(f"| {name} | {s['n']} | {fmt_s(s['median'])} | {fmt_s(s['p50'])} | {fmt_s(s['p99'])} | {base / s['median']:.1f}x |")
    lines += [
        "",
        f"Paper (Apple M2 Max): numba 1 thread 2.0 s, naive Rust port 2.27 s, numba prange on 12 cores 0.23 s. "
        f"Targets: Rust 1 thread >= 5x numba 1 thread: **{'met' if base / k['rust-1t']['median'] >= 5 else 'NOT met'}** "
        f"({base / k['rust-1t']['median']:.1f}x); all cores <= 0.3 s: "
        f"**{'met' if k['rust-all']['median'] <= 0.3 else 'NOT met'}** ({fmt_s(k['rust-all']['median'])}).",
    ]
    p = res["preloaded"]
    ip = p["in-process"]["median"]
    lines += [
        "",
        "## Preloaded chunky: the 80-combo sweep as one params-only Flight call",
        "",
        "pyarrow client, series pushed once; the call carries ~400 bytes of JSON. `cold`: server",
        "started with `--cache-bytes 0`, so each call recomputes every WMA, like the in-process run.",
        "`warm`: default cache, the shared WMAs of the series come from memory.",
        "",
        "| path | n | median | p50 | p99 | ratio to in-process |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in p.items():
        lines.append(f"| {name} | {s['n']} | {fmt_s(s['median'])} | {fmt_s(s['p50'])} | {fmt_s(s['p99'])} | {s['median'] / ip:.3f}x |")
    ratio = p["unix-cold"]["median"] / ip
    lines += [
        "",
        f"Target: Unix socket, cold, within 1.02x of in-process: **{'met' if ratio <= 1.02 else 'NOT met'}** ({ratio:.3f}x).",
    ]

    lines += render_floor(res) + render_architectures(res) + render_echo(res) + render_serialization(res) + render_load(res) + render_upload(res)
    return "\n".join(lines)


FLOOR_TARGET = 5.0
FLOOR_RAW = "raw-unix-echo-8B"
FLOOR_SWEEPS = {
    "unix-sweep-1combo-64bars": "a `sweep` DoAction",
    "unix-session-sweep-1combo-64bars": "a message on an open `session` exchange",
    "unix-client-sweep-1combo-64bars": "the `sweepflight` client (session, result as a pyarrow Table)",
}


def floor_table(columns: dict[str, dict]) -> list[str]:
    """One row per call, a `n | p50 | p99 | p50 / raw` group per column (a run's calls)."""
    lines = [
        "| call | " + " | ".join(f"{col}: n | p50 | p99 | p50 / raw" for col in columns) + " |",
        "| --- |" + " ---: | ---: | ---: | ---: |" * len(columns),
    ]
    for op in next(iter(columns.values())):
        cells = []
        for calls in columns.values():
            c, raw = calls[op], calls[FLOOR_RAW]["p50"]
            cells.append(f"{c['n']} | {fmt_s(c['p50'])} | {fmt_s(c['p99'])} | {c['p50'] / raw:.2f}x")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return lines


def floor_verdict(label: str, calls: dict) -> str:
    """The target, judged for each way of making a params-only sweep, in one run's calls."""
    raw = calls[FLOOR_RAW]["p50"]
    verdicts = "; ".join(
        f"{what} {met((r := calls[op]['p50'] / raw) <= FLOOR_TARGET)} ({r:.2f}x)" for op, what in FLOOR_SWEEPS.items()
    )
    return f"- {label}: {verdicts}."


def render_floor(res: dict) -> list[str]:
    f = res["floor"]
    settings = list(f["calls"])
    product, default = settings[0], settings[1]
    raw = {s: f["calls"][s][FLOOR_RAW]["p50"] for s in settings}
    session = "unix-session-sweep-1combo-64bars"
    lines = [
        "",
        "## The params-only floor",
        "",
        "Python client throughout, one call in flight; in each process the calls of all rows are",
        "interleaved round by round. `raw-unix-echo-8B`: 8 bytes through a std-only length-prefixed",
        "Unix-socket echo server (`benches/src/bin/raw-echo.rs`), the study's baseline (its floor:",
        "14 us on the M2 Max). gRPC reads its settings once per process, so each client setting runs",
        f"in processes of its own ({FLOOR_PARTS} per setting, alternating), each measuring its own raw echo:",
        "",
        *[f"- `{s}`: `GRPC_EXPERIMENTS={e}`" + (" (what importing `sweepflight` sets: gRPC's client reads replies on the "
          "calling thread)" if e else " (gRPC's defaults: a pool thread reads each reply, then wakes the caller)")
          for s, e in f["grpc_experiments"].items()],
        "",
        "Processes where the scheduler puts them:",
        "",
        *floor_table(f["calls"]),
        "",
        f"Read the ratios with care: the raw echo is measured in the same process as the Flight calls, and with "
        f"gRPC's defaults it is itself slower or faster ({fmt_s(raw[default])} vs {fmt_s(raw[product])} here). Our "
        f"reading, not measured directly: gRPC's pool threads are often still running when the echo starts, so its "
        f"wake-ups cross CPUs more often (the next table shows what crossing costs). "
        f"In absolute terms the `{product}` setting is faster on the session row ({fmt_s(f['calls'][product][session]['p50'])} "
        f"vs {fmt_s(f['calls'][default][session]['p50'])}). The target is judged on `{product}`, what users of the "
        "client get; the other line is for reference.",
    ]
    placed = f.get("placed") or {}
    if placed:
        one, two = (placed[p][FLOOR_RAW]["p50"] for p in FLOOR_PLACEMENTS)
        lines += [
            "",
            f"The `{product}` setting again, with the placement held fixed: every server pinned to one CPU, the Python",
            f"process to the same CPU or to the other one ({FLOOR_PARTS} processes each, alternating with the ones above).",
            "Unpinned, the raw echo and the Flight calls each land on one CPU or two as the scheduler's wake-up",
            f"heuristics happen to decide, and here the two cost very differently (raw echo {fmt_s(one)} on one CPU,",
            f"{fmt_s(two)} across two), so an unpinned ratio can set a raw echo of one placement against Flight calls",
            "of the other. With the placement fixed every row pays the same kind of wake-up:",
            "",
            *floor_table(placed),
        ]
    hp = f.get("halt_polling")
    polled = f"halt polling {hp['ns'] // 1000} us" if hp else ""
    if hp:
        shipped = res["environment"].get("guest halt polling (cpuidle-haltpoll)", "?")
        lines += [
            "",
            f"The `{product}` setting unpinned again, with the guest kernel's halt polling on. This VM ships with",
            f"`guest_halt_poll_ns` at {shipped} (environment table): an idle vCPU halts at once, and waking it is a trip",
            f"through the hypervisor. For these processes ({FLOOR_PARTS}, alternating with the ones above) it was set to",
            f"{hp['ns'] // 1000} us, so an idle vCPU polls that long for work before halting, and restored afterwards:",
            "",
            *floor_table({polled: hp["calls"]}),
        ]
    lines += [
        "",
        f"Target: a params-only 1-combo sweep p50 within {FLOOR_TARGET:.0f}x of the raw echo p50 (Unix socket):",
        "",
        *[floor_verdict(f"`{s}`, unpinned", f["calls"][s]) for s in settings],
        *[floor_verdict(f"`{product}`, {p}", calls) for p, calls in placed.items()],
        *([floor_verdict(f"`{product}`, unpinned, {polled}", hp["calls"])] if hp else []),
        "",
        f"CPU time per call, {CPU_CALLS} calls back to back after the interleaved rounds (schedstat, unpinned, mean of",
        "the processes): the Python process's calling thread, its other threads (gRPC's), and the whole server. This",
        "is time the guest kernel saw each thread on a CPU, which on this VM includes the cost of waking idle vCPUs.",
        "",
        "| call | setting | wall | caller thread | client's other threads | server |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for op in FLOOR_SWEEPS:
        for s in settings:
            c = f["cpu_us_per_call"][s][op]
            lines.append(
                f"| {op} | {s} | {c['wall']:.0f} us | {c['caller']:.0f} us | {c['client_other_threads']:.0f} us | {c['server']:.0f} us |"
            )
    lines += [
        "",
        "The same calls from the Rust client (`sweepflight-client` on a current-thread tokio runtime,",
        "`benches/src/bin/flight-probe.rs`), interleaved round by round with a raw echo from the same",
        "process; a session sweep is `Client::session` then `Session::sweep`. Pinned as above (the",
        "server and the raw echo on one CPU, the probe on the same or the other); the last column is",
        "a server with one tokio worker instead of one per CPU (`TOKIO_WORKER_THREADS=1`):",
        "",
        *floor_table(f["rust_client"]),
    ]
    return [*lines, ""]


def met(ok: bool) -> str:
    return "**met**" if ok else "**NOT met**"


def render_architectures(res: dict) -> list[str]:
    a = res["architectures"]
    base_a, base_b = a["a-numba-1t"]["median"], a["b-rust-all"]["median"]
    lines = [
        "## Architectures: every way across the boundary, 80-combo paper sweep",
        "",
        "(a) numba in-process; (b) the Rust kernel in-process; (c) Flight preloaded chunky: one",
        "params-only call, server without WMA cache; (d) preloaded chatty: 80 single-combo calls",
        "(the dataset re-put before each pass, so its cache starts cold and fills as the pass goes);",
        "(e) stateless chunky: DoExchange shipping the series with the params; (f) stateless chatty:",
        "80 DoExchange calls, each re-shipping the series; (g) spawn per sweep: `sweep-stdio` reads an",
        "Arrow IPC stream (series + params) on stdin and writes the result on stdout; (h) a JSON",
        "service: the series as a JSON array in an HTTP request body. (c)-(g) over a Unix socket,",
        "(h) over TCP; Python drives every path.",
        "",
        "![architectures](img/architectures.png)",
        "",
        "| path | n | median | p99 | ratio to (a) numba 1t | ratio to (b) Rust all cores |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, s in a.items():
        lines.append(f"| {name} | {s['n']} | {fmt_s(s['median'])} | {fmt_s(s['p99'])} | {s['median'] / base_a:.3f}x | {s['median'] / base_b:.3f}x |")
    c = res["preloaded"]["unix-cold"]["median"] / res["preloaded"]["in-process"]["median"]
    d = a["d-preloaded-chatty"]["median"] / base_b
    lines += [
        "",
        f"Targets: (c) within 1.02x of (b) {met(c <= 1.02)} ({c:.3f}x, measured in the preloaded experiment above, "
        f"alternating with the in-process run); (d) within 1.05x of (b) {met(d <= 1.05)} ({d:.3f}x).",
        "",
    ]
    return lines


def render_echo(res: dict) -> list[str]:
    e = res["echo_curve"]
    lines = [
        "## Echo curve",
        "",
        "Payloads of n float64 (8n bytes) echoed by the server: DoAction `echo` (bytes in the action",
        "body), DoExchange `echo` (one record batch of n rows), and the raw length-prefixed Unix-socket",
        "echo. Unix socket, Python client, one call in flight, the three interleaved per round. The",
        "study's marks: a 14 us floor and 2.04 ms for the full 1.2 MB payload (M2 Max).",
        "",
        "![echo curve](img/echo-curve.png)",
        "",
        "| n floats | bytes | DoAction p50 / p99 | DoExchange p50 / p99 | raw p50 / p99 | samples each |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in e["sizes"]:
        p = e["points"][str(n)]
        cell = lambda k: f"{fmt_s(p[k]['p50'])} / {fmt_s(p[k]['p99'])}"  # noqa: E731
        lines.append(f"| {n:,} | {n * 8:,} | {cell('do_action')} | {cell('do_exchange')} | {cell('raw_unix')} | {p['raw_unix']['n']} |")
    lines += ["", "Least-squares fit of p50 = floor + bytes / throughput:", "", "| transport | floor | throughput |", "| --- | ---: | ---: |"]
    for k, f in e["fits"].items():
        lines.append(f"| {k} | {f['floor_us']:.0f} us | {f['gb_per_s']:.2f} GB/s |")
    lines.append("")
    return lines


def render_serialization(res: dict) -> list[str]:
    lines = [
        "## Serialization tax: the 150,000-float series, encode + decode",
        "",
        "| format | n | median | ratio to raw bytes |",
        "| --- | ---: | ---: | ---: |",
    ]
    for k, s in res["serialization"].items():
        lines.append(f"| {k} | {s['n']} | {fmt_s(s['median'])} | {s['ratio_to_raw']:.0f}x |")
    lines += ["", "The study measured JSON at 1348x raw bytes.", ""]
    return lines


def render_load(res: dict) -> list[str]:
    lines = [
        "## Latency under load",
        "",
        "`load-gen` (Rust, one HTTP/2 connection, one task per request) sends 1-combo sweeps on a",
        "64-bar dataset open-loop at a fixed rate; latency runs from each request's intended send",
        "time (no coordinated omission), recorded in an HdrHistogram. The load generator and the",
        "server share the machine's 2 cores. The last row is past saturation if achieved < offered.",
        "",
        "| offered /s | achieved /s | n | errors | p50 | p90 | p99 | p99.9 | max |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in res["load"]["rows"]:
        us = lambda k: fmt_s(r[k] / 1e6)  # noqa: E731
        lines.append(
            f"| {r['offered_rate']:.0f} | {r['achieved_rate']:.0f} | {r['n']} | {r['errors']} | {us('p50_us')} | {us('p90_us')} | {us('p99_us')} | {us('p999_us')} | {us('max_us')} |"
        )
    lines.append("")
    return lines


def render_upload(res: dict) -> list[str]:
    lines = [
        "## Upload throughput (DoPut over a Unix socket)",
        "",
        "`sweepflight` Python client (`put` of a numpy array) and Rust client (`put_closes`), each",
        "stored, validated and acknowledged by a server started `--in-memory`; \"durable\": the Python put",
        "to a server with a data directory (the file is written, fsynced and renamed into place before",
        "the PutResult). Median of the runs after one warm-up. At 1.2 MB the Python put alternates round",
        "by round with a raw Unix-socket echo of the same bytes, the target's yardstick.",
        "",
        "| series | Python median | Python GB/s | Rust median | Rust GB/s | Python durable | durable GB/s | n Python / others |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    up = res["upload"]
    for size, row in up.items():
        b = int(size)
        py, rs = row["python"]["median"], row["rust"]["median"]
        d = row.get("python_durable", {}).get("median")
        durable = f"{fmt_s(d)} | {b / d / 1e9:.2f}" if d else "- | -"
        lines.append(
            f"| {b / 1e6:.1f} MB | {fmt_s(py)} | {b / py / 1e9:.2f} | {fmt_s(rs)} | {b / rs / 1e9:.2f} | {durable} | {row['python']['n']} / {row['rust']['n']} |"
        )
    small = up["1200000"]
    ratio = small["python"]["median"] / small["raw_echo"]["median"]
    lines += ["", f"Target: a 1.2 MB DoPut within 1.5x of a raw 1.2 MB echo ({fmt_s(small['raw_echo']['median'])}): {met(ratio <= 1.5)} ({ratio:.2f}x)."]
    if "800000000" in up:
        g = 800e6 / max(up["800000000"]["python"]["median"], 1e-9) / 1e9
        gr = 800e6 / max(up["800000000"]["rust"]["median"], 1e-9) / 1e9
        lines.append(f"Target: >= 1 GB/s for the 800 MB series: Python {met(g >= 1)} ({g:.2f} GB/s), Rust {met(gr >= 1)} ({gr:.2f} GB/s).")
    lines.append("")
    return lines


def plots(res: dict, outdir: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    e = res["echo_curve"]
    fig, ax = plt.subplots(figsize=(8, 5))
    x = [n * 8 for n in e["sizes"]]
    for k, label in [("do_action", "DoAction echo"), ("do_exchange", "DoExchange echo"), ("raw_unix", "raw Unix-socket echo")]:
        ax.plot(x, [e["points"][str(n)][k]["p50"] * 1e6 for n in e["sizes"]], marker="o", label=f"{label} (p50)")
    ax.axhline(14, color="grey", linestyle=":", label="study: 14 us floor (M2 Max)")
    ax.scatter([1.2e6], [2040], marker="*", s=160, color="black", zorder=5, label="study: 2.04 ms at 1.2 MB")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("payload bytes")
    ax.set_ylabel("round trip, microseconds")
    ax.set_title("Echo curve (Unix socket, Python client)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(outdir / "echo-curve.png", dpi=110)
    plt.close(fig)

    a = res["architectures"]
    names = list(a)
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.barh(names[::-1], [a[k]["median"] for k in names[::-1]], color=["tab:blue" if k[0] in "abc" else "tab:orange" for k in names[::-1]])
    ax.set_xscale("log")
    ax.set_xlabel("seconds for the 80-combo paper sweep (median, log scale)")
    ax.set_title("Crossing the process boundary: 80-combo sweep")
    for i, k in enumerate(names[::-1]):
        ax.text(a[k]["median"], i, f" {fmt_s(a[k]['median'])}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(outdir / "architectures.png", dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small counts; does not rewrite docs/benchmarks.md")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--check-doc", action="store_true", help="only check docs/benchmarks.md is the rendering of docs/benchmarks.json")
    ap.add_argument("--floor-child", nargs=3, metavar=("ROUNDS", "OUT", "PLACEMENT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_child:
        rounds, out = int(args.floor_child[0]), pathlib.Path(args.floor_child[1])
        with tempfile.TemporaryDirectory() as d:
            out.write_text(json.dumps(floor_child(pathlib.Path(d), rounds, args.floor_child[2] or None)))
        return 0
    if args.check_doc:
        if render(json.loads(RAW.read_text())) != DOC.read_text():
            print(f"{DOC} is not the rendering of {RAW}: rerun benches/study.py", file=sys.stderr)
            return 1
        print(f"{DOC.name} matches {RAW.name}")
        return 0
    runs, rounds = (2, 200) if args.quick else (7, 5000)

    build()
    OUT.mkdir(exist_ok=True)
    res: dict = {"environment": environment(), "quick": args.quick}
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        print("kernel ...", flush=True)
        res["kernel"] = exp_kernel(runs)
        print("preloaded ...", flush=True)
        # The preloaded target is 2%, and with 7 runs the ratio of medians moved by +-5% from
        # one run of this script to the next; the calls are ~0.2 s, so take more.
        res["preloaded"] = exp_preloaded(tmp, PRELOADED_RUNS_PER_RUN * runs)
        print("floor ...", flush=True)
        # The full run also measures the floor with the VM's halt polling on (set, then restored);
        # the quick smoke test leaves the machine's settings alone.
        res["floor"] = exp_floor(tmp, rounds, tune_vm=not args.quick)
        print("architectures ...", flush=True)
        res["architectures"] = exp_architectures(tmp, runs, res["kernel"], res["preloaded"])
        print("echo curve ...", flush=True)
        res["echo_curve"] = exp_echo_curve(tmp, args.quick)
        print("serialization ...", flush=True)
        res["serialization"] = exp_serialization(args.quick)
        print("load ...", flush=True)
        res["load"] = exp_load(tmp, args.quick)
        print("upload ...", flush=True)
        res["upload"] = exp_upload(tmp, args.quick)
    raw = OUT / "results-quick.json" if args.quick or args.no_doc else RAW
    raw.write_text(json.dumps(res, indent=2) + "\n")
    doc = render(res)
    print(doc)
    if not (args.quick or args.no_doc):
        plots(res, DOC.parent / "img")
        DOC.write_text(doc)
    else:
        plots(res, OUT / "img")
    return 0


if __name__ == "__main__":
    sys.exit(main())
