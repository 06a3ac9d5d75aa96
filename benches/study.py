"""sweepflight's benchmark suite: the IPC-tax study re-run on our stack, against the peer.

    .venv/bin/python benches/study.py                  # full run (release build): rewrites docs/benchmarks.md
    .venv/bin/python benches/study.py --quick --profile debug   # smoke test (CI): small sizes, checks only
    .venv/bin/python benches/study.py --only peer,kernel        # some sections, output under target/study
    .venv/bin/python benches/study.py --check-doc      # docs/benchmarks.md is the rendering of its JSON

Sections: kernel (numba vs Rust, % of the machine's peak), scaling (combos and bars), server
(the paper sweep as one params-only call, cold and warm, and chatty), architectures (the
study's other ways across the boundary), peer (sweepflight vs the pyarrow Flight server a team
would write instead, benches/peer.py), universe, strategies (vectorbt's own example, each
strategy's cost, what the metrics cost), judging (a ranked grid of 10^7 combos, trades),
overload (the sweep memory budget) and ray.

Rules: wherever two things are compared, their samples are taken in alternating rounds, in a
fresh random order each round, so the machine's noise hits both alike. Every sweep result is
checked before its timings count: the 80 paper combos against the reference CSV (trades equal,
|dPnL| <= 1e-6), other grids against the kernel's oracle or the numba reference, concurrent
results against the same sweeps run alone. A failed check stops the run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "client-py"))
sys.path.insert(0, str(ROOT / "benches"))


from studykit.experiments import SECTIONS  # noqa: E402
from studykit.harness import DOC, IMG, OUT, RAW, Ctx  # noqa: E402
from studykit.report import Report, environment, plots  # noqa: E402

# ---------------------------------------------------------------------------------------------
# main


def build(profile: str) -> pathlib.Path:
    subprocess.run(
        [
            "cargo",
            "build",
            "--quiet",
            "--profile",
            profile,
            "-p",
            "sweepflight-server",
            "-p",
            "sweepflight-benches",
            "--bins",
        ],
        cwd=ROOT,
        check=True,
    )
    return ROOT / "target" / ("debug" if profile == "dev" else profile)


@contextlib.contextmanager
def context(bins: pathlib.Path, quick: bool) -> Iterator[Ctx]:
    ctx = Ctx(bins, quick)
    try:
        yield ctx
    finally:
        ctx.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes and counts; writes under target/study only")
    ap.add_argument(
        "--profile", default="release", help="cargo profile of the binaries (release; debug/dev for smoke tests)"
    )
    ap.add_argument(
        "--only", help="comma-separated sections (" + ", ".join(SECTIONS) + "); writes under target/study only"
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the sections already in target/study/partial.json (of an interrupted run) and run the rest",
    )
    ap.add_argument(
        "--into-doc",
        action="store_true",
        help="with --only (release, not --quick): put the sections run into docs/benchmarks.json beside the"
        " others (their run's date is recorded in its environment) and render docs/benchmarks.md",
    )
    ap.add_argument(
        "--check-doc",
        action="store_true",
        help="only check docs/benchmarks.md is the rendering of docs/benchmarks.json",
    )
    ap.add_argument(
        "--no-build",
        action="store_true",
        help="use the binaries already in target/PROFILE (scripts/test.sh builds them with the tests)",
    )
    args = ap.parse_args()
    if args.check_doc:
        if Report(json.loads(RAW.read_text())).render() != DOC.read_text():
            print(f"{DOC} is not the rendering of {RAW}: run benches/study.py", file=sys.stderr)
            return 1
        print(f"{DOC.name} matches {RAW.name}")
        return 0
    profile = "dev" if args.profile == "debug" else args.profile
    only = args.only.split(",") if args.only else list(SECTIONS)
    if unknown := set(only) - set(SECTIONS):
        ap.error(f"unknown sections {sorted(unknown)}")
    official = not args.quick and not args.only and profile == "release"
    OUT.mkdir(parents=True, exist_ok=True)
    bins = ROOT / "target" / ("debug" if profile == "dev" else profile) if args.no_build else build(profile)
    res: dict[str, Any] = {"environment": environment(args.profile)}
    partial = OUT / "partial.json"
    if args.resume and partial.exists():
        res.update({k: v for k, v in json.loads(partial.read_text()).items() if k in only})
    for name in only:
        if name in res:
            print(f"{name}: kept from {partial}", flush=True)
            continue
        print(f"{name} ...", flush=True)
        t0 = time.perf_counter()
        with context(bins, args.quick) as ctx:
            res[name] = SECTIONS[name](ctx)
        partial.write_text(json.dumps(res, indent=1) + "\n")
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    if args.into_doc:
        if args.quick or not args.only or profile != "release":
            ap.error("--into-doc takes --only sections of a release run")
        merged = json.loads(RAW.read_text())
        merged.update({k: v for k, v in res.items() if k != "environment"})
        env = merged["environment"]
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        env["sections rerun"] = "; ".join(filter(None, [env.get("sections rerun"), f"{', '.join(only)}: {when}"]))
        res, official = merged, True
    doc = Report(res).render()
    if official:
        RAW.write_text(json.dumps(res, indent=1) + "\n")
        plots(res, IMG)
        DOC.write_text(doc)
    else:
        (OUT / "results.json").write_text(json.dumps(res, indent=1) + "\n")
        plots(res, OUT / "img")
        (OUT / "benchmarks.md").write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
