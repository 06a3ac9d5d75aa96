"""Importing the package changes nothing in the process; :func:`sweepflight.tune_grpc` is the
explicit opt-in, and it sets gRPC's experiment before the first channel (the CPU split it buys
is reported, not asserted: it depends on the machine's load).

Each case runs in a fresh interpreter: gRPC reads its configuration once per process.
"""

from __future__ import annotations

import json

from .conftest import Server, run_fresh_python

# Small sweeps through the client; then the CPU time each kind of thread spent on them.
PROBE = """
import json, os, sys
import numpy as np
import polars, pyarrow.flight  # polars sets its allocator's variable on import; not ours
before_import = dict(os.environ)
import sweepflight
assert dict(os.environ) == before_import, "importing sweepflight changed the environment"
if sys.argv[2] == "tune":
    assert sweepflight.tune_grpc()

def ticks_by_thread_name():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/comm") as f:
            name = f.read().strip()
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0) + int(fields[11]) + int(fields[12])
    return out

with sweepflight.connect(sys.argv[1]) as sf:
    sf.put("tiny", 100 + np.random.default_rng(1).random(64))
    with sf.session() as s:
        s.sweep("tiny", lengths=[6])
        before = ticks_by_thread_name()
        for _ in range(3000):
            assert s.sweep("tiny", lengths=[6], as_arrow=True).num_rows == 1
        after = ticks_by_thread_name()
print(json.dumps({
    "experiments": os.environ.get("GRPC_EXPERIMENTS"),
    "caller": after["python"] - before["python"],
    "pool": sum(v - before.get(k, 0) for k, v in after.items() if k.startswith("event_engine")),
}))
"""


def run_probe(uri: str, tune: bool) -> dict[str, object]:
    out = run_fresh_python(PROBE, uri, "tune" if tune else "leave", grpc_experiments=None, timeout=300)
    result: dict[str, object] = json.loads(out)
    return result


def test_import_changes_nothing_and_tune_grpc_sets_the_experiment(unix_server: Server) -> None:
    default = run_probe(unix_server.uri, tune=False)
    assert default["experiments"] is None
    tuned = run_probe(unix_server.uri, tune=True)
    assert tuned["experiments"] == "-event_engine_client"
    # Both answered all 3000 calls (the probe asserts each reply). Which threads' CPU time the
    # replies cost (gRPC's pool by default, the caller with the setting: docs/perf-notes.md) is
    # a measurement, not a test: it moves with the machine's load, so it is reported here and
    # never asserted.
    for probe in (default, tuned):
        assert isinstance(probe["caller"], int) and isinstance(probe["pool"], int), probe
    print(f"CPU ticks over 3000 calls: default {default}, tuned {tuned}")
