"""Process-wide gRPC settings, applied when ``sweepflight`` is imported.

pyarrow.flight runs on gRPC's C++ core, which reads its configuration once, when the first
channel is created. By default its client reads each reply on an EventEngine pool thread and
then wakes the calling thread, so every message pays two thread hand-offs and the pool's own
bookkeeping. With the ``event_engine_client`` experiment off, the thread that waits for a reply
polls the socket itself. For the small params-only calls this client is built for, that
shortens the round trip and saves client CPU on the 2-core VM the project benchmarks on (by how
much varies from run to run: docs/benchmarks.md, "The params-only floor"); uploads are
unaffected.

Only a process that has not chosen: if ``GRPC_EXPERIMENTS`` is set (to anything, even empty),
it is left alone, so ``GRPC_EXPERIMENTS= python ...`` runs with gRPC's own defaults. The setting
cannot reach a process whose gRPC already started, i.e. one that created a Flight client before
importing sweepflight.
"""

from __future__ import annotations

import os

#: What the package sets ``GRPC_EXPERIMENTS`` to when the process left it unset.
LOW_LATENCY_EXPERIMENTS = "-event_engine_client"


def apply_defaults() -> bool:
    """Sets ``GRPC_EXPERIMENTS`` unless the process already did; True if it was set here."""
    if "GRPC_EXPERIMENTS" in os.environ:
        return False
    os.environ["GRPC_EXPERIMENTS"] = LOW_LATENCY_EXPERIMENTS
    return True
