"""The IPC-tax paper's inputs: its price series and its grid of lengths.

The series is defined as ``100 * exp(cumsum(normal(0, 0.0008, 150_000)))`` from
``numpy.random.default_rng(42)``, but numpy's ``exp`` is not the same function on every CPU:
its AVX-512 path and its other paths (and libm) disagree by 1-2 ulp on about 4% of these
values, and the published figures (combo 0: -5165.58 on 57,029 trades) are those of the
AVX-512 values. So :func:`series` returns the pinned values shipped with the package
(``paper-close.arrow``, sha256 checked), identical on every machine; :func:`generate` is the
formula as written.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib

import numpy as np

#: Bars in the paper series.
N_BARS = 150_000
#: Seed of ``numpy.random.default_rng`` for the paper series.
SEED = 42
#: sha256 of the pinned series' values as little-endian float64 bytes.
SHA256 = "28970418bd3213da9f3456dec74f2c7d424b4b1b6e0729ba054a3da0718d6bfc"
#: The pinned series, shipped inside the package.
PINNED = pathlib.Path(__file__).with_name("paper-close.arrow")


def series(n: int = N_BARS, seed: int = SEED) -> np.ndarray:
    """The paper series (its first ``n`` bars), bit-identical on every machine.

    Other seeds or longer series come from :func:`generate`. float64 throughout; float32
    anywhere would break the published fingerprint.
    """
    if seed == SEED and 0 <= n <= N_BARS:
        return _pinned()[:n].copy()
    return generate(n, seed)


def generate(n: int = N_BARS, seed: int = SEED) -> np.ndarray:
    """``100 * exp(cumsum(normal(0, 0.0008, n)))`` from ``default_rng(seed)``, with this
    machine's numpy ``exp`` (equal to :func:`series` within 2 ulp for the paper's seed)."""
    rng = np.random.default_rng(seed)
    r = rng.normal(0.0, 0.0008, n)
    return 100.0 * np.exp(np.cumsum(r))


@functools.lru_cache(maxsize=1)
def _pinned() -> np.ndarray:
    import pyarrow as pa

    with pa.memory_map(str(PINNED)) as source:
        values = pa.ipc.open_file(source).read_all().column("close").to_numpy()
    close = np.ascontiguousarray(values, dtype="<f8")
    digest = hashlib.sha256(close.tobytes()).hexdigest()
    if digest != SHA256:
        raise RuntimeError(f"{PINNED} is corrupt: values sha256 {digest}, expected {SHA256}")
    close.setflags(write=False)
    return close


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
