//! `formula-timer`: times the strategy language's sweep (`eval::sweep_program`) on the paper
//! series, in one process, and prints JSON: each built-in as a call by name runs it (its typed
//! combos, `sweep_params`, on the same engine), its formula form, and the form with one more
//! condition.
//!
//! ```text
//! formula-timer [--runs N] [--series FILE] [--case TEXT]
//! ```
//!
//! Cases (each checked before it is timed: the formula form's results must equal the
//! built-in's, every field): every built-in beside its formula form (`sma_cross` and
//! `ema_cross` over vectorbt's 435 pairs, fast < slow in 10..=39; `hma_sar` over the 80 paper
//! combos; `donchian` over n in 2..=200; `rsi_revert` over n in 2..=30 and four lower and four
//! upper levels; `sma_cross_long`: fast 20, 50, 100, 200 and slow 256..=4096 by 256, whose
//! lines take the certified path), and the form with one more condition (`and close > 0`, true on the paper
//! series, so checked equal to the built-in; `and rsi(close, 14) < 70`, checked against the
//! plain interpreter); the Bollinger and RSI strategy with exits (n in 10..=49, k in
//! 1.0..=3.25 by 0.25: 400 combos) and the same with twice the k values (1.0..=3.375 by 0.125:
//! 800 combos, no new array), checked against the plain interpreter on two combos.
//! `--case` times only the cases whose label contains TEXT. Every run is cold: no cache, all
//! cores. Output: `{"bars", "runs": {CASE: [seconds]}}`.

use anyhow::ensure;
use sweepflight_benches::{check_interpreter, flag, paper_fixture_path, read_close, time_runs};
use sweepflight_kernel::builtins::Builtin;
use sweepflight_kernel::eval::sweep_program;
use sweepflight_kernel::expr::{Field, Program};
use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::{Execution, Params, Strategy, SweepControl, paper, sweep_params};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| flag(&args, name);
    let runs: usize = flag("--runs").map_or(Ok(5), |v| v.parse())?;
    let case = flag("--case").unwrap_or_default();
    let wanted = |label: &str| label.contains(case.as_str());
    let path = flag("--series").map_or_else(paper_fixture_path, Into::into);
    let close = read_close(&path)?;
    let bars = Bars::closes(&close);
    let exec = Execution::default();
    let control = SweepControl::default();
    let mut out = serde_json::Map::new();

    // Built-ins beside their formula forms.
    let sma: Vec<Vec<f64>> = sweepflight_benches::vbt_pairs()
        .into_iter()
        .map(|(f, s)| vec![f64::from(f), f64::from(s)])
        .collect();
    let hma: Vec<Vec<f64>> = paper::combos()
        .iter()
        .map(|c| c.windows().iter().map(|&w| f64::from(w)).collect())
        .collect();
    let donchian: Vec<Vec<f64>> = (2..=200).map(|n| vec![f64::from(n)]).collect();
    let rsi: Vec<Vec<f64>> = (2..=30)
        .flat_map(|n| {
            [20.0, 25.0, 30.0, 35.0].into_iter().flat_map(move |lo| {
                [65.0, 70.0, 75.0, 80.0]
                    .into_iter()
                    .map(move |hi| vec![f64::from(n), lo, hi])
            })
        })
        .collect();
    // Long windows (the SMA lines past certified::MIN_WINDOW take the certified path).
    let long_sma: Vec<Vec<f64>> = [20.0, 50.0, 100.0, 200.0]
        .into_iter()
        .flat_map(|f| (1..=16).map(move |s| vec![f, f64::from(s * 256)]))
        .collect();
    for (label, name, grid) in [
        ("sma_cross", "sma_cross", &sma),
        ("hma_sar", "hma_sar", &hma),
        ("ema_cross", "ema_cross", &sma),
        ("donchian", "donchian", &donchian),
        ("rsi_revert", "rsi_revert", &rsi),
        ("sma_cross_long", "sma_cross", &long_sma),
    ] {
        if !wanted(label) && !case.starts_with(label) {
            continue;
        }
        let strategy = Strategy::from_name(name).expect("a built-in");
        let params: Vec<Params> = grid
            .iter()
            .map(|v| Params::new(strategy, v))
            .collect::<Result<_, _>>()?;
        let program = Builtin::named(name).expect("a built-in").program();
        let flat = grid.concat();
        let builtin = sweep_params(&close, &params, &exec, &control)?;
        let formula = sweep_program(&bars, &program, &flat, grid.len(), &exec, &control)?;
        ensure!(
            builtin == formula,
            "{label}: the formula form differs from the built-in"
        );
        if label == "hma_sar" {
            paper::check_gate(&formula).map_err(anyhow::Error::msg)?;
        }
        if wanted(&format!("{label} builtin")) {
            let b = time_runs(runs, || {
                sweep_params(&close, &params, &exec, &control).unwrap()
            });
            out.insert(format!("{label} builtin"), b.into());
        }
        if wanted(&format!("{label} formula")) {
            let f = time_runs(runs, || {
                sweep_program(&bars, &program, &flat, grid.len(), &exec, &control).unwrap()
            });
            out.insert(format!("{label} formula"), f.into());
        }
        // The formula form with one more condition that reads only shared arrays (#49's
        // shapes): `close > 0` holds at every bar of the paper series, so its results must be
        // the built-in's; the RSI filter is checked against the interpreter.
        let (long, short) = {
            let b = Builtin::named(name).expect("a built-in");
            (b.long, b.short)
        };
        for (extra, equal) in [("close > 0", true), ("rsi(close, 14) < 70", false)] {
            let more = Program::new(&[
                (Field::Long, &format!("{long} and {extra}")),
                (Field::Short, &format!("{short} and {extra}")),
            ])?;
            let label = format!("{label} formula and {extra}");
            if !wanted(&label) {
                continue;
            }
            let got = sweep_program(&bars, &more, &flat, grid.len(), &exec, &control)?;
            if equal {
                ensure!(got == builtin, "{label}: differs from the built-in");
            } else {
                check_interpreter(&label, &bars, &more, grid, &exec, &[0, grid.len() - 1])?;
            }
            let t = time_runs(runs, || {
                sweep_program(&bars, &more, &flat, grid.len(), &exec, &control).unwrap()
            });
            out.insert(label, t.into());
        }
    }

    // Bollinger + RSI with exits, and the same with twice the k values.
    let program = Program::new(&[
        (
            Field::Long,
            "close < sma(close, n) - k * std(close, n) and rsi(close, 14) < 35",
        ),
        (
            Field::Short,
            "close > sma(close, n) + k * std(close, n) and rsi(close, 14) > 65",
        ),
        (Field::ExitLong, "close > sma(close, n)"),
        (Field::ExitShort, "close < sma(close, n)"),
    ])?;
    for (label, step, ks) in [
        ("bollinger_rsi 400", 0.25, 10),
        ("bollinger_rsi 800 (k twice)", 0.125, 20),
    ] {
        if !wanted(label) {
            continue;
        }
        let grid: Vec<Vec<f64>> = (10..=49)
            .flat_map(|n| (0..ks).map(move |j| vec![f64::from(n), 1.0 + j as f64 * step]))
            .collect();
        let flat = grid.concat();
        check_interpreter(label, &bars, &program, &grid, &exec, &[0, grid.len() - 1])?;
        let t = time_runs(runs, || {
            sweep_program(&bars, &program, &flat, grid.len(), &exec, &control).unwrap()
        });
        out.insert(label.to_owned(), t.into());
    }
    let report = serde_json::json!({"bars": close.len(), "runs": out});
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
