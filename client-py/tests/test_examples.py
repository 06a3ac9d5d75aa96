"""The examples in client-py/examples run to completion against the real server."""

from __future__ import annotations

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def run(script: str, *args: str) -> str:
    res = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_polars_pipeline(server) -> None:
    out = run("polars_pipeline.py", "--uri", server.uri)
    assert "pushed 50,000 bars" in out


def test_plot_sweep_example(server, tmp_path) -> None:
    png = tmp_path / "sweep.png"
    out = run("plot_sweep.py", "--uri", server.uri, "--out", str(png))
    assert png.stat().st_size > 10_000 and "wrote" in out


def test_universe_example(server) -> None:
    out = run("universe.py", "--uri", server.uri)
    assert "put 160,000 bars of 8 symbols as one dataset" in out
    assert "symbols kept a positive PnL out of sample" in out
    assert "SYM7" in out


def test_walk_forward_example(server) -> None:
    out = run("walk_forward.py", "--uri", server.uri)
    assert "put 240,000 bars of 20 symbols" in out
    assert "walk-forward: 180 folds x 126 combos in one call" in out
    # The planted trends show: lower PBO and better out-of-sample PnL than the random walks.
    trend = next(line for line in out.splitlines() if line.startswith("trending symbols"))
    noise = next(line for line in out.splitlines() if line.startswith("random walks"))
    pbo = lambda line: float(line.split("mean PBO ")[1].split(",")[0])  # noqa: E731
    pnl = lambda line: float(line.split("PnL ")[1].split(" ")[0])  # noqa: E731
    assert pbo(trend) < pbo(noise) and pnl(trend) > pnl(noise), out
    assert "deflated Sharpe > 0.95 on" in out
