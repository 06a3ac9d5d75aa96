"""The study's harness: statistics (samples in alternating rounds), the result checks every
timing must pass first, server processes, Flight calls, inputs and the timing tools."""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "client-py"))
from sweepflight import reference  # noqa: E402

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
    # Messages of about 8 MiB (1 Mi rows of one float64 column, fewer rows of wider tables):
    # under gRPC's and the server's message limits, as any client must send a large table, and
    # the size the Python client sends.
    width = max(1, table.nbytes // max(1, table.num_rows) // 8)
    writer.write_table(table, max_chunksize=max(1, (1 << 20) // width))
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
