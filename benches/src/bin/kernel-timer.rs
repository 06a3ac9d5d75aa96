//! `kernel-timer`: times in-process Rust sweeps and prints JSON, for benches/study.py.
//!
//! ```text
//! kernel-timer [--runs N] [--threads T]... [--series FILE] [--params FILE] [--check K]
//!              [--tile-bars B] [--strategy NAME] [--no-bar-metrics] [--exact-lines]
//! ```
//!
//! By default it sweeps the 80 paper combos over the paper series, after the equivalence gate.
//! `--series` takes an Arrow IPC file with a float64 `close` column and, optionally, a utf8
//! `key` column whose values come in contiguous runs (a universe); `--params` a JSON list of
//! six-window rows. Anything but the paper sweep is checked instead against the oracle
//! (`sweepflight_kernel::oracle`, bit for bit) on `K` combos spread over the grid (default 2).
//! `--threads 0` means all cores; without `--threads`, 1 and all. `--tile-bars` sets the
//! kernel's tiling (`SweepControl::tile_bars`: 0 untiled; default automatic), to compare the
//! two paths on one grid. `--strategy` (sma_cross, ema_cross, donchian, rsi_revert) times
//! that strategy's sweep instead: `--params` is then a JSON list of its parameter rows, checked
//! against `oracle::run` on `K` combos (every field equal). `--no-bar-metrics` leaves out the
//! per-bar metrics' work (`SweepControl::bar_metrics`: the moves' prefix sums and their use per
//! trade), to time what the Sharpe and Sortino columns cost. `--exact-lines` computes every
//! line by the exact rule (`SweepControl::exact_lines`: no certified lines), to time the two
//! side by side. Where the oracle would take minutes (windows of thousands of bars on a long
//! series), the `K` combos are checked against the exact rule's sweep instead (itself held to
//! the oracle, bit for bit, by the kernel's tests).
//!
//! Each run sweeps from scratch (no cache), timed with a monotonic clock around the sweep call
//! only, after one untimed checked sweep. With a `key` column, two timings per thread count:
//! `whole`, the kernel on the concatenated closes (the same work in one call), and `per-key`,
//! one sweep per series, one after another; the check is then on the first series.
//!
//! Output: `{"bars", "series", "combos", "multiply_adds", "runs": {LABEL: [seconds]},
//! "certified": {"compared", "recomputed"}}`: the certified lines' comparisons of one sweep
//! (the checked one, all cores), and how many were decided from recomputed reference values.

use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, ensure};
use arrow_array::{Array, StringArray};
use sweepflight_benches::{closes, paper_fixture_path};
use sweepflight_kernel::{
    CertifiedBars, Combo, ComboResult, DEFAULT_FEE, Execution, Params, Strategy, SweepControl,
    multiply_adds, oracle, paper, sweep_params, sweep_with,
};

struct Args {
    runs: usize,
    threads: Vec<usize>,
    series: Option<PathBuf>,
    params: Option<PathBuf>,
    check: usize,
    tile_bars: Option<usize>,
    strategy: Option<Strategy>,
    bar_metrics: bool,
    exact_lines: bool,
}

fn parse() -> anyhow::Result<Args> {
    let mut out = Args {
        runs: 5,
        threads: Vec::new(),
        series: None,
        params: None,
        check: 2,
        tile_bars: None,
        strategy: None,
        bar_metrics: true,
        exact_lines: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--no-bar-metrics" {
            out.bar_metrics = false;
            continue;
        }
        if a == "--exact-lines" {
            out.exact_lines = true;
            continue;
        }
        let v = args.next().with_context(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--runs" => out.runs = v.parse()?,
            "--threads" => out.threads.push(v.parse()?),
            "--series" => out.series = Some(v.into()),
            "--params" => out.params = Some(v.into()),
            "--check" => out.check = v.parse()?,
            "--tile-bars" => out.tile_bars = Some(v.parse()?),
            "--strategy" => {
                out.strategy =
                    Some(Strategy::from_name(&v).with_context(|| format!("no strategy {v}"))?)
            }
            _ => anyhow::bail!("unknown flag {a}"),
        }
    }
    if out.threads.is_empty() {
        out.threads = vec![1, 0];
    }
    Ok(out)
}

/// The closes of an IPC file and the row range of each series (one range without a `key`).
fn load(path: &std::path::Path) -> anyhow::Result<(Vec<f64>, Vec<Range<usize>>)> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let batches: Vec<_> = arrow_ipc::reader::FileReader::try_new(file, None)?.collect();
    let mut keys: Vec<String> = Vec::new();
    for batch in batches.iter().flatten() {
        if let Some(col) = batch.column_by_name("key") {
            let col = col
                .as_any()
                .downcast_ref::<StringArray>()
                .context("`key` is not utf8")?;
            ensure!(col.null_count() == 0, "`key` has nulls");
            keys.extend(col.iter().flatten().map(str::to_owned));
        }
    }
    let close = closes(batches)?;
    if keys.is_empty() {
        let all = 0..close.len();
        return Ok((close, vec![all]));
    }
    ensure!(keys.len() == close.len(), "`key` on some batches only");
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        match ranges.last_mut() {
            Some(r) if keys[r.start] == *k => r.end = i + 1,
            _ => ranges.push(i..i + 1),
        }
    }
    Ok((close, ranges))
}

/// Above this many multiply-adds a combo is checked against the exact rule's fast sweep
/// rather than the oracle (seconds instead of minutes).
const ORACLE_WORK: u64 = 2_000_000_000;

/// Bit-exact agreement with the oracle (or, for long windows, the exact rule's sweep) on `k`
/// combos spread over the grid.
fn check_oracle(
    close: &[f64],
    combos: &[Combo],
    got: &[ComboResult],
    k: usize,
) -> anyhow::Result<()> {
    let k = k.min(combos.len());
    for j in 0..k {
        let i = if k == 1 {
            0
        } else {
            j * (combos.len() - 1) / (k - 1)
        };
        let windows: u64 = combos[i].windows().iter().map(|&w| u64::from(w)).sum();
        let want = if windows.saturating_mul(close.len() as u64) <= ORACLE_WORK {
            oracle::run_combo(close, &combos[i], DEFAULT_FEE)
        } else {
            let exact = SweepControl {
                exact_lines: true,
                ..SweepControl::default()
            };
            sweep_with(close, &combos[i..=i], DEFAULT_FEE, &exact)?[0]
        };
        ensure!(
            want.trades == got[i].trades && want.pnl.to_bits() == got[i].pnl.to_bits(),
            "combo {i} {:?}: oracle {want:?}, sweep {:?}",
            combos[i].windows(),
            got[i]
        );
    }
    Ok(())
}

/// The `--strategy` run: its combos from `--params`, checked against the oracle, timed per
/// thread count.
fn strategy_run(args: &Args, strategy: Strategy) -> anyhow::Result<()> {
    let (close, _) = load(&args.series.clone().unwrap_or_else(paper_fixture_path))?;
    let path = args.params.as_ref().context("--strategy needs --params")?;
    let rows: Vec<Vec<f64>> = serde_json::from_reader(File::open(path)?)?;
    let params: Vec<Params> = rows
        .iter()
        .map(|r| Params::new(strategy, r))
        .collect::<Result<_, _>>()?;
    let exec = Execution::default();
    let control = SweepControl {
        bar_metrics: args.bar_metrics,
        exact_lines: args.exact_lines,
        ..SweepControl::default()
    };
    let counts = CertifiedBars::default();
    let mut runs = serde_json::Map::new();
    for &t in &args.threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
        let counted = SweepControl {
            certified: Some(&counts),
            ..control
        };
        let got = pool.install(|| sweep_params(&close, &params, &exec, &counted))?;
        let k = args.check.min(params.len());
        for j in 0..k {
            let i = if k == 1 {
                0
            } else {
                j * (params.len() - 1) / (k - 1)
            };
            let want = oracle::run(&close, 0..close.len(), 0, &params[i], &exec);
            ensure!(
                got[i] == want,
                "combo {i} {:?}: oracle {want:?}, sweep {:?}",
                params[i],
                got[i]
            );
        }
        let secs: Vec<f64> = (0..args.runs)
            .map(|_| {
                let t0 = Instant::now();
                let n = pool
                    .install(|| sweep_params(&close, &params, &exec, &control))
                    .map_or(0, |r| r.len());
                assert_eq!(n, params.len());
                t0.elapsed().as_secs_f64()
            })
            .collect();
        runs.insert(
            format!("threads={}", pool.current_num_threads()),
            serde_json::json!(secs),
        );
    }
    let out = serde_json::json!({
        "bars": close.len(),
        "series": 1,
        "combos": params.len(),
        "strategy": strategy.name(),
        "runs": runs,
        "certified": certified_json(&counts, args.threads.len()),
    });
    println!("{out}");
    Ok(())
}

/// The counts of one checked sweep (of `sweeps` counted, one per thread count: each does the
/// same comparisons).
fn certified_json(counts: &CertifiedBars, sweeps: usize) -> serde_json::Value {
    let per = |n: u64| n / sweeps.max(1) as u64;
    serde_json::json!({
        "compared": per(counts.compared()),
        "recomputed": per(counts.recomputed()),
    })
}

fn main() -> anyhow::Result<()> {
    let args = parse()?;
    if let Some(s) = args.strategy.filter(|&s| s != Strategy::HmaSar) {
        return strategy_run(&args, s);
    }
    let paper_run = args.series.is_none() && args.params.is_none();
    let (close, ranges) = load(&args.series.clone().unwrap_or_else(paper_fixture_path))?;
    let combos: Vec<Combo> = match &args.params {
        None => paper::combos(),
        Some(p) => {
            let rows: Vec<[u32; 6]> = serde_json::from_reader(File::open(p)?)?;
            rows.into_iter().map(Combo::new).collect::<Result<_, _>>()?
        }
    };
    let keyed = ranges.len() > 1;
    let control = SweepControl {
        tile_bars: args.tile_bars,
        bar_metrics: args.bar_metrics,
        exact_lines: args.exact_lines,
        ..SweepControl::default()
    };
    let sweep =
        |close: &[f64], combos: &[Combo], fee: f64| sweep_with(close, combos, fee, &control);
    let counts = CertifiedBars::default();
    let counted = SweepControl {
        certified: Some(&counts),
        ..control
    };

    let mut runs = serde_json::Map::new();
    for &t in &args.threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build()?;
        let threads = pool.current_num_threads();
        if keyed {
            // The concatenated run is the same kernel on more bars: checking the first series
            // covers the code, at a fraction of the oracle's cost.
            let first = &close[ranges[0].clone()];
            let got = pool.install(|| sweep_with(first, &combos, DEFAULT_FEE, &counted))?;
            check_oracle(first, &combos, &got, args.check)?;
        } else {
            let whole = pool.install(|| sweep_with(&close, &combos, DEFAULT_FEE, &counted))?;
            if paper_run {
                paper::check_gate(&whole)
                    .map_err(anyhow::Error::msg)
                    .context("equivalence gate")?;
            } else {
                check_oracle(&close, &combos, &whole, args.check)?;
            }
        }
        let time = |f: &dyn Fn() -> usize| -> Vec<f64> {
            (0..args.runs)
                .map(|_| {
                    let t0 = Instant::now();
                    let n = f();
                    let dt = t0.elapsed().as_secs_f64();
                    assert_eq!(n, combos.len() * if keyed { ranges.len() } else { 1 });
                    dt
                })
                .collect()
        };
        let label = if keyed { "whole " } else { "" };
        let secs = time(&|| {
            let n = pool
                .install(|| sweep(&close, &combos, DEFAULT_FEE))
                .map_or(0, |r| r.len());
            n * ranges.len()
        });
        runs.insert(format!("{label}threads={threads}"), serde_json::json!(secs));
        if keyed {
            let secs = time(&|| {
                ranges
                    .iter()
                    .map(|r| {
                        pool.install(|| sweep(&close[r.clone()], &combos, DEFAULT_FEE))
                            .map_or(0, |x| x.len())
                    })
                    .sum()
            });
            runs.insert(
                format!("per-key threads={threads}"),
                serde_json::json!(secs),
            );
        }
    }
    let out = serde_json::json!({
        "bars": close.len(),
        "series": ranges.len(),
        "combos": combos.len(),
        "multiply_adds": multiply_adds(close.len(), &combos),
        "runs": runs,
        "certified": certified_json(&counts, args.threads.len()),
    });
    println!("{out}");
    Ok(())
}
