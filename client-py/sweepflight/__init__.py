"""sweepflight: push a price series once, then run backtest parameter sweeps on it over Arrow Flight.

- ``sweepflight.connect(uri, token=None, tls_root_certs=None) -> Client``: the client
  (``put``, ``sweep``, ``datasets``, ``info``, ``get``, ``drop``, ``echo``).
- Errors: ``SweepflightError`` and its subclasses ``InvalidRequest``, ``NotFound``,
  ``Unauthenticated``, ``ResourceExhausted``, ``Unimplemented``, ``Unavailable``,
  ``Cancelled``, ``ServerError``.
- ``sweepflight.paper``: the paper's price series and length grid.
- ``sweepflight.reference``: the numba reference kernel (needs numba).
- ``sweepflight.plot_sweep(df, path=None)``: PnL and trades against L (needs matplotlib).

Importing the package sets ``GRPC_EXPERIMENTS=-event_engine_client`` for this process unless
``GRPC_EXPERIMENTS`` is already set: gRPC's client then reads replies on the calling thread,
which makes small calls faster (see ``sweepflight._grpc``).
"""

from . import _grpc

# Before pyarrow.flight creates any channel: gRPC reads its configuration once.
_grpc.apply_defaults()

from . import paper  # noqa: E402
from .client import DEFAULT_FEE, DEFAULT_URI, Client, DatasetInfo, PutSummary, connect  # noqa: E402
from .errors import (  # noqa: E402
    Cancelled,
    InvalidRequest,
    NotFound,
    ResourceExhausted,
    ServerError,
    SweepflightError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from .plot import plot_sweep  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Cancelled",
    "Client",
    "DEFAULT_FEE",
    "DEFAULT_URI",
    "DatasetInfo",
    "InvalidRequest",
    "NotFound",
    "PutSummary",
    "ResourceExhausted",
    "ServerError",
    "SweepflightError",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "connect",
    "paper",
    "plot_sweep",
]
