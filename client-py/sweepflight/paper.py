"""The IPC-tax paper's inputs: its price series and its grid of lengths.

The series is defined as ``100 * exp(cumsum(normal(0, 0.0008, 150_000)))`` from
``numpy.random.default_rng(42)``, but numpy's ``exp`` is not the same function on every CPU:
its AVX-512 path and its other paths (and libm) disagree by 1-2 ulp on about 4% of these
values, and the published figures (combo 0: -5165.58 on 57,029 trades) are those of the
AVX-512 values. So :func:`series` returns the pinned values shipped with the package
(``paper-close.arrow``, sha256 checked), identical on every machine, as a pyarrow array (no numpy
needed); :func:`generate` is the formula as written (it needs numpy).
"""

from __future__ import annotations

import functools
import hashlib
import pathlib
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    import numpy as np

#: Bars in the paper series.
N_BARS = 150_000
#: Seed of ``numpy.random.default_rng`` for the paper series.
SEED = 42
#: sha256 of the pinned series' values as little-endian float64 bytes.
SHA256 = "28970418bd3213da9f3456dec74f2c7d424b4b1b6e0729ba054a3da0718d6bfc"
#: The pinned series, shipped inside the package.
PINNED = pathlib.Path(__file__).with_name("paper-close.arrow")


def series(n: int = N_BARS) -> pa.Array[Any]:
    """The paper series (its first ``n`` bars) as a float64 pyarrow array, bit-identical on
    every machine. ``sf.put(name, series())`` uploads it; ``.to_numpy()`` gives numpy."""
    if not 0 <= n <= N_BARS:
        raise ValueError(f"the paper series has {N_BARS} bars; use generate() for {n}")
    return _pinned().slice(0, n)


def table(n: int = N_BARS) -> pa.Table:
    """The paper series as a one-column (``close``) table."""
    return pa.table({"close": series(n)})


def generate(n: int = N_BARS, seed: int = SEED) -> np.ndarray:
    """``100 * exp(cumsum(normal(0, 0.0008, n)))`` from ``default_rng(seed)``, with this
    machine's numpy ``exp`` (within 2 ulp of :func:`series` for the paper's seed). Needs numpy."""
    import numpy as np

    rng = np.random.default_rng(seed)
    r = rng.normal(0.0, 0.0008, n)
    out: np.ndarray = 100.0 * np.exp(np.cumsum(r))
    return out


def lengths() -> list[int]:
    """The 80 lengths of the paper grid: ``numpy.linspace(6, 200, 80)`` truncated to integers
    (``start + i * step``, the last exactly 200)."""
    start, stop, num = 6.0, 200.0, 80
    step = (stop - start) / (num - 1)
    return [int(stop if i == num - 1 else start + i * step) for i in range(num)]


def combo(length: int) -> tuple[int, int, int, int, int, int]:
    """The six windows ``(half, full, sqrt, p3, p2, p)`` the paper derives from one length.

    ``round`` is Python's (half to even); every value is clamped to at least 1.
    """
    L = int(length)
    if L < 1:
        raise ValueError(f"length must be >= 1, got {L}")
    p = max(1, round(L / 2))
    return (max(1, round(L / 2)), L, max(1, round(L**0.5)), max(1, round(p / 3)), max(1, round(p / 2)), p)


def combos() -> list[tuple[int, int, int, int, int, int]]:
    """The 80 paper combos as explicit ``params`` rows."""
    return [combo(L) for L in lengths()]


@functools.lru_cache(maxsize=1)
def _pinned() -> pa.Array[Any]:
    column = pa.ipc.open_file(str(PINNED)).read_all().column("close").combine_chunks()
    values = column.buffers()[1]
    assert values is not None
    raw = values.to_pybytes()[column.offset * 8 : (column.offset + len(column)) * 8]
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256:
        raise RuntimeError(f"{PINNED} is corrupt: values sha256 {digest}, expected {SHA256}")
    return pa.array(column, type=pa.float64())
