"""sweepflight: push a price series once, then run backtest parameter sweeps on it over Arrow Flight.

- ``sweepflight.connect(uri, token=None, tls_root_certs=None) -> Client``: the client
  (``put``, ``sweep``, ``datasets``, ``info``, ``get``, ``drop``, ``echo``).
- Errors: ``SweepflightError`` and its subclasses ``InvalidRequest``, ``NotFound``,
  ``Unauthenticated``, ``ResourceExhausted``, ``Unimplemented``, ``Unavailable``,
  ``Cancelled``, ``ServerError``.
- ``sweepflight.paper``: the paper's price series and length grid.
- ``sweepflight.reference``: the numba reference kernel (needs numba).
- ``sweepflight.plot_sweep(df, path=None)``: PnL and trades against L (needs matplotlib).
"""

from . import paper
from .client import DEFAULT_FEE, DEFAULT_URI, Client, DatasetInfo, PutSummary, connect
from .errors import (
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
from .plot import plot_sweep

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
