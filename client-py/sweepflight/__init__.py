"""sweepflight: push a price series once, then run backtest parameter sweeps on it over Arrow Flight.

Modules:
- ``sweepflight.paper``: the paper's price series and length grid.
- ``sweepflight.reference``: the numba reference kernel (the paper's single-thread rung).
"""

__version__ = "0.1.0"
