"""The IPC-tax paper's inputs: its price series and its grid of lengths."""

from __future__ import annotations

import numpy as np

#: Bars in the paper series.
N_BARS = 150_000
#: Seed of ``numpy.random.default_rng`` for the paper series.
SEED = 42


def series(n: int = N_BARS, seed: int = SEED) -> np.ndarray:
    """The paper series: ``100 * exp(cumsum(normal(0, 0.0008, n)))`` from ``default_rng(seed)``.

    float64 throughout; float32 anywhere would break the published fingerprint.
    """
    rng = np.random.default_rng(seed)
    r = rng.normal(0.0, 0.0008, n)
    return 100.0 * np.exp(np.cumsum(r))


def lengths() -> np.ndarray:
    """The 80 lengths of the paper grid: ``linspace(6, 200, 80)`` truncated to int64."""
    return np.linspace(6, 200, 80).astype(np.int64)


def combo(length: int) -> tuple[int, int, int, int, int, int]:
    """The six windows ``(half, full, sqrt, p3, p2, p)`` the paper derives from one length.

    ``round`` is Python's (half to even); every value is clamped to at least 1.
    """
    L = int(length)
    if L < 1:
        raise ValueError(f"length must be >= 1, got {L}")
    p = max(1, round(L / 2))
    return (max(1, round(L / 2)), L, max(1, round(L ** 0.5)), max(1, round(p / 3)), max(1, round(p / 2)), p)
