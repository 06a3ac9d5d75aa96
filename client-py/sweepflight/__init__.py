"""sweepflight: push a price series once, then run backtest parameter sweeps on it over Arrow
Flight.

- :func:`connect` -> :class:`Client`: ``put`` (any Arrow stream; ``key=`` for a universe),
  ``sweep`` (a polars frame, or ``as_arrow=True``), ``trades``, ``equity``, ``walk_forward``
  (and ``walk_forward_equity``), ``submit`` -> :class:`Job` (progress, result, cancel),
  ``session``, ``datasets``, ``info``, ``get``, ``drop``, ``stats``, ``echo``; ``timeout=`` on
  every call.
- Errors: :class:`SweepflightError` and one subclass per gRPC status (:mod:`sweepflight.errors`).
- :mod:`sweepflight.paper`: the paper's price series and length grid.
- :func:`plot`: PnL by length, or a heatmap of a two-parameter grid (``sweepflight[plot]``);
  :func:`plot_equity` and :func:`plot_trades` for :meth:`Client.equity` and :meth:`Client.trades`.
- :mod:`sweepflight.stats`: the probability of backtest overfitting (from ``blocks=``) and the
  deflated Sharpe ratio.
- :mod:`sweepflight.reference`: the numba reference kernel (``sweepflight[reference]``).
- :mod:`sweepflight.ray`: a cluster of servers on Ray (``sweepflight[ray]``).
- :func:`tune_grpc`: opt-in gRPC setting for faster small calls.

Importing the package changes nothing in the process (no environment variables, no threads).
"""

from . import paper
from ._grpc import tune_grpc
from ._version import __version__
from .client import (
    DEFAULT_URI,
    Client,
    DatasetInfo,
    Job,
    PutSummary,
    Session,
    SweepRequest,
    WalkForward,
    connect,
    request_of,
)
from .errors import (
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidRequest,
    NotFound,
    ResourceExhausted,
    ServerError,
    SweepflightError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    UnusableColumns,
)
from .expr import (
    Expr,
    Portfolio,
    Strategy,
    abs,
    atr,
    change,
    close,
    column,
    cross_above,
    cross_below,
    daily,
    ema,
    high,
    highest,
    hma,
    hma3,
    lag,
    log,
    low,
    lowest,
    max,
    min,
    monthly,
    open,
    param,
    rma,
    roc,
    rsi,
    sma,
    sqrt,
    std,
    sum,
    tr,
    volume,
    weekly,
    where,
    wma,
)
from .plot import plot, plot_equity, plot_trades, plot_walk_forward
from .server import local

#: The old name of :func:`plot`.
plot_sweep = plot

__all__ = [
    "DEFAULT_URI",
    "Cancelled",
    "Client",
    "DatasetInfo",
    "DeadlineExceeded",
    "Expr",
    "FailedPrecondition",
    "InvalidRequest",
    "Job",
    "NotFound",
    "Portfolio",
    "PutSummary",
    "ResourceExhausted",
    "ServerError",
    "Session",
    "Strategy",
    "SweepRequest",
    "SweepflightError",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "UnusableColumns",
    "WalkForward",
    "__version__",
    "abs",
    "atr",
    "change",
    "close",
    "column",
    "connect",
    "cross_above",
    "cross_below",
    "daily",
    "ema",
    "high",
    "highest",
    "hma",
    "hma3",
    "lag",
    "local",
    "log",
    "low",
    "lowest",
    "max",
    "min",
    "monthly",
    "open",
    "paper",
    "param",
    "plot",
    "plot_equity",
    "plot_sweep",
    "plot_trades",
    "plot_walk_forward",
    "request_of",
    "rma",
    "roc",
    "rsi",
    "sma",
    "sqrt",
    "std",
    "sum",
    "tr",
    "tune_grpc",
    "volume",
    "weekly",
    "where",
    "wma",
]
