"""An opt-in gRPC setting for faster small calls: :func:`tune_grpc`.

pyarrow.flight runs on gRPC's C++ core, which reads its configuration once, when the first
channel is created. By default its client reads each reply on an EventEngine pool thread and
then wakes the calling thread, so every message pays two thread hand-offs. With the
``event_engine_client`` experiment off, the thread that waits for a reply polls the socket
itself: on the benchmark VM a params-only call was faster and cost the client less CPU
(docs/perf-notes.md). It is a process-wide setting that every gRPC user in the process (and its
children, which inherit the environment) gets, so the package never applies it by itself.
"""

from __future__ import annotations

import os

#: What :func:`tune_grpc` sets ``GRPC_EXPERIMENTS`` to.
LOW_LATENCY_EXPERIMENTS = "-event_engine_client"


def tune_grpc() -> bool:
    """Sets ``GRPC_EXPERIMENTS=-event_engine_client`` for this process, unless it is already set.

    Call it before the first client (of any gRPC library) is created in the process; later it
    has no effect. Returns True if it set the variable.
    """
    if "GRPC_EXPERIMENTS" in os.environ:
        return False
    os.environ["GRPC_EXPERIMENTS"] = LOW_LATENCY_EXPERIMENTS
    return True
