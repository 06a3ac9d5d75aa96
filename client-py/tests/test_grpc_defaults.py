"""The package's process-wide gRPC setting: set only when the process left it unset, and it
really moves reply reading from gRPC's pool threads to the calling thread.

Each case runs in a fresh interpreter: gRPC reads its configuration once per process.
"""

from __future__ import annotations

import json

from .conftest import Server, run_fresh_python

# Small sweeps through the client; then the CPU time each kind of thread spent on them.
PROBE = """
import json, os, sys
import numpy as np
import sweepflight

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
    sf.sweep("tiny", lengths=[6])
    before = ticks_by_thread_name()
    for _ in range(3000):
        assert sf.sweep("tiny", lengths=[6], as_arrow=True).num_rows == 1
    after = ticks_by_thread_name()
print(json.dumps({
    "experiments": os.environ.get("GRPC_EXPERIMENTS"),
    "caller": after["python"] - before["python"],
    "pool": sum(v - before.get(k, 0) for k, v in after.items() if k.startswith("event_engine")),
}))
"""


def run_probe(uri: str, experiments: str | None) -> dict:
    return json.loads(run_fresh_python(PROBE, uri, grpc_experiments=experiments, timeout=300))


def test_the_setting_moves_reply_reading_to_the_calling_thread(unix_server: Server) -> None:
    tuned = run_probe(unix_server.uri, None)
    assert tuned["experiments"] == "-event_engine_client"
    # gRPC's defaults, chosen by the process: the package leaves them alone.
    default = run_probe(unix_server.uri, "")
    assert default["experiments"] == ""
    # CPU ticks (1/100 s) over 3000 calls. With gRPC's defaults its pool threads read every
    # reply and burn about as much CPU as the caller; with the setting they sit idle.
    assert default["pool"] * 3 > default["caller"], default
    assert tuned["pool"] * 3 < tuned["caller"], tuned
