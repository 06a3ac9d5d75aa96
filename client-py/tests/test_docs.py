"""The docs hold: every relative link (and #anchor) resolves, and every code block marked
runnable (info string ```` ```python runnable ````) runs, file by file in order, against the real
server, with its results checked."""

from __future__ import annotations

import os
import pathlib
import re
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "client-py" / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def runnable_blocks(path: pathlib.Path) -> list[str]:
    """The ```python runnable blocks of a Markdown file, each dedented (some sit in list items)."""
    return [textwrap.dedent(b) for b in re.findall(r"```python runnable\n(.*?)```", path.read_text(), flags=re.S)]


def anchors(path: pathlib.Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    out = set()
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: pathlib.Path) -> None:
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
            broken.append(target)
    assert not broken, f"{doc.name}: broken links {broken}"


def repo_markdown_names() -> set[str]:
    """The names of the Markdown files the repository holds (tracked or not, outside build and
    environment folders)."""
    skip = {"target", ".venv", "node_modules", ".git"}
    names: set[str] = set()
    # Pruned as it walks: a build running beside the tests creates and removes folders under
    # target/ (a walk that descends there can find one gone).
    for _, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        names.update(f for f in files if f.endswith(".md"))
    return names


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_name_no_file_outside_the_repo(doc: pathlib.Path) -> None:
    """A user of the repository has only the repository: every relative link stays inside it,
    and every Markdown file a page names (``language.md``, ``kernel.md``) is one it holds."""
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    outside = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file = target.partition("#")[0]
        if file and not (doc.parent / file).resolve().is_relative_to(ROOT):
            outside.append(target)
    known = repo_markdown_names()
    named = sorted({m for m in re.findall(r"\b[\w.-]+\.md\b", text) if m.rsplit("/", 1)[-1] not in known})
    assert not outside, f"{doc.name}: links outside the repository {outside}"
    assert not named, f"{doc.name}: names files the repository does not hold {named}"
    assert "spec/" not in text, f"{doc.name}: names the contract's spec folder"


def check_readme(ns: dict[str, Any]) -> None:
    assert ns["df"].height == 80
    assert ns["df"]["trades"][0] == 57_029
    assert ns["best"]["full"] == 172
    assert ns["crosses"].height == 1_515 and ns["crosses"].columns[1:3] == ["fast", "slow"]
    assert (ns["crosses"]["fast"] < ns["crosses"]["slow"]).all()
    assert ns["mine"].height == 6 and ns["mine"].columns[1:3] == ["n", "k"]
    assert ns["trades"]["combo"].n_unique() == 3 and ns["curves"].height == 3 * 150_000
    assert ns["wf"].height == 12 and 0.0 <= ns["stats"].pbo(ns["swept"]).pbo <= 1.0


def check_protocol(ns: dict[str, Any]) -> None:
    assert ns["own"].num_rows == 4 and str(ns["own"].schema.field("n").type) == "int64"
    assert ns["plan"]["arrays"] == 12 and ns["plan"]["lookback"] == 19
    assert ns["stored"]["columns"] == ["open", "high", "low", "close", "time"]
    assert ns["filled"].num_rows > 0 and ns["filled"].column_names[-1] == "exit_time"
    assert ns["table"].num_rows == 80
    assert ns["result"].num_rows == 2
    assert ns["echoed"].num_rows == 150_000
    assert ns["rows"].num_rows == 150_000
    assert ns["every"].num_rows == 6 and ns["every"].column_names[0] == "series"
    assert ns["two"]["series"].to_pylist() == ["CCC", "CCC", "AAA", "AAA"]
    assert ns["in_sample"].num_rows == 6 and ns["out_of_sample"].num_rows == 6
    assert ns["in_sample"]["pnl"].to_pylist() != ns["out_of_sample"]["pnl"].to_pylist()
    assert ns["per_symbol"].num_rows == 3
    assert ns["sma"].num_rows == 900 and ns["sma"].column_names[1:3] == ["fast", "slow"]
    assert ns["ema"].num_rows == 2 and ns["breakout"].num_rows == 3
    assert ns["rsi"].num_rows == 50 and str(ns["rsi"].schema.field("lower").type) == "double"
    assert ns["long_only"].num_rows == 1
    assert ns["judged"].num_rows == 6 and ns["judged"].schema.field("sharpe").nullable
    sharpe = ns["ranked"]["sharpe"].to_pylist()
    assert ns["ranked"].num_rows == 5 and sharpe == sorted(sharpe, reverse=True)
    assert [s["name"] for s in ns["listing"]][:2] == ["hma_sar", "sma_cross"]
    assert ns["zipped"]["rows"] == 150_000
    assert str(ns["blocked"].schema.field("block_pnl").type) == "fixed_size_list<item: double not null>[8]"
    assert ns["curves"].num_rows == 3 * 150_000
    assert ns["booked"].column_names[:3] == ["combo", "trade", "side"] and ns["booked"].num_rows > 0
    assert ns["squeezed"].num_rows == 3
    assert ns["walked"].num_rows == 5 and ns["walked"].column_names[:2] == ["fold", "train_start"]
    assert ns["state"]["state"] == "done" and ns["state"]["combos_done"] == 2204
    assert ns["fetched"].num_rows == 2204 and ns["stopped"]["state"] == "cancelled"
    assert "bars out of time order (row 1: time 2025-06-21 is not after" in ns["refusal"]
    assert "sort the bars by time" in ns["refusal"]
    assert ns["in_rows"].num_rows == 1
    assert ns["framed"].num_rows == 3 and ns["framed"]["trades"].to_pylist() != [0, 0, 0]
    assert ns["weeks"]["lookback"] is None and ns["weeks"]["arrays"] == 8
    assert ns["book"].num_rows == 4 and ns["book"].column_names[1:3] == ["n", "k"]
    assert "pnl" not in ns["book"].column_names and ns["book"]["rebalances"][0].as_py() > 30
    assert ns["fills"].column_names == ["combo", "row", "time", "series", "shares", "price", "value", "fee"]


def check_strategies(ns: dict[str, Any]) -> None:
    assert ns["bands"].height == 6 and ns["bands"].columns[1:3] == ["n", "k"]
    assert ns["bands"]["trades"].sum() > 0
    assert (ns["plan"]["arrays"], ns["plan"]["combos"], ns["plan"]["lookback"]) == (1281, 400, 48)
    assert ns["macd_runs"].height == 4 and ns["macd_runs"].columns[1:4] == ["fast", "slow", "signal"]
    assert ns["breaks"].height == 4 and ns["breaks"]["trades"].sum() > 0
    assert ns["trend"].height == 3 and ns["trend"]["trades"].sum() > 0
    assert ns["stoch"].height == 4 and ns["stoch"]["trades"].sum() > 0
    # The weekly filter on GOOG: every combo trades, and fewer times than without the filter.
    assert ns["weekly_runs"].height == 8 and ns["weekly_runs"]["trades"].min() > 0
    plain = {(r["fast"], r["slow"]): r["trades"] for r in ns["unfiltered"].iter_rows(named=True)}
    assert all(r["trades"] < plain[(r["fast"], r["slow"])] for r in ns["weekly_runs"].iter_rows(named=True))
    assert (ns["weekly_plan"]["arrays"], ns["weekly_plan"]["lookback"]) == (8, None)


def check_portfolios(ns: dict[str, Any]) -> None:
    assert ns["momentum"].height == 4 and ns["momentum"].columns[1:3] == ["n", "k"]
    sharpe = ns["momentum"]["sharpe"].to_list()
    assert sharpe == sorted(sharpe, reverse=True)
    # The equity has a row per calendar row: the union of the stocks' dates.
    assert ns["book"].height == ns["stocks"]["time"].n_unique()
    # k holdings, and now and then one more: a stock without a bar on a fill day is sold later.
    assert ns["book"]["holdings"].median() == ns["best"]["k"]
    # A wider buffer trades less.
    assert ns["weighted"].height == 2 and ns["weighted"]["turnover"][1] < ns["weighted"]["turnover"][0]
    assert ns["quantiles"].height == 1 and (ns["fills"]["shares"] < 0).any() and (ns["fills"]["shares"] > 0).any()
    assert ns["ranked"].height == 3 and ns["walked"].height >= 5 and "series" not in ns["walked"].columns
    assert set(ns["walked"]["k"].to_list()) <= {5, 10, 20}


#: Per file with runnable blocks: what its blocks must have computed.
CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "README.md": check_readme,
    "docs/portfolios.md": check_portfolios,
    "docs/protocol.md": check_protocol,
    "docs/strategies.md": check_strategies,
}


def test_every_file_with_runnable_blocks_is_checked() -> None:
    having = {str(d.relative_to(ROOT)) for d in DOCS if runnable_blocks(d)}
    assert having == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_runnable_blocks_run(name: str, server: Any, tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    # What a page's example writes (a plot's file) goes to a scratch directory.
    monkeypatch.chdir(tmp_path)
    blocks = runnable_blocks(ROOT / name)
    assert blocks, f"{name} has no runnable blocks"
    source = "\n".join(blocks).replace("grpc://127.0.0.1:8815", server.uri)
    namespace: dict[str, Any] = {}
    exec(compile(source, name, "exec"), namespace)
    CHECKS[name](namespace)
