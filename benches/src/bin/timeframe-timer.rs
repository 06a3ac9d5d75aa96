//! `timeframe-timer`: what higher timeframes (protocol v1.4) cost in the kernel, in one
//! process, printed as JSON.
//!
//! ```text
//! timeframe-timer [--runs N] [--bars N]
//! ```
//!
//! - **Period bars** of a `--bars`-bar hourly series (10,000,000 by default): daily, weekly and
//!   monthly closes, and weekly OHLCV, beside one `sma(close, 10)` over the same bars. Checked
//!   first: the fast gathering equals the oracle's, column for column, bit for bit.
//! - **A weekly filter**: `sma_cross` over vectorbt's 435 pairs as formulas on the paper series
//!   (150,000 bars, hourly times), beside the same with `and close > weekly(sma(close, 10))`
//!   on both sides. Checked first: the filtered sweep equals the same strategy reading the
//!   weekly values as an input column (computed by the interpreter), every field, and two
//!   combos equal the interpreter's trades.
//!
//! Every run is cold (no cache, all cores); the cases of one part are timed in alternating
//! rounds. Output: `{"bars", "paper_bars", "runs": {CASE: [seconds]}}`.

use std::sync::Arc;

use anyhow::ensure;
use sweepflight_benches::{check_interpreter, flag, paper_fixture_path, read_close};
use sweepflight_kernel::eval::{oracle, sweep_program};
use sweepflight_kernel::expr::{Field, Program};
use sweepflight_kernel::lines::{Bars, Input, series};
use sweepflight_kernel::timeframe::{PeriodBars, Timeframe};
use sweepflight_kernel::{Combos, Execution, SweepControl, sweep_combos};

/// Each case run once per round, in an order that alternates between rounds; seconds per case.
fn rounds(runs: usize, cases: &mut [(&str, &mut dyn FnMut())]) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::with_capacity(runs); cases.len()];
    for r in 0..runs {
        for k in 0..cases.len() {
            let k = if r % 2 == 0 { k } else { cases.len() - 1 - k };
            let t = std::time::Instant::now();
            (cases[k].1)();
            out[k].push(t.elapsed().as_secs_f64());
        }
    }
    out
}

/// Hourly bars of 24 a day from Monday 2000-01-03: each bar's UTC day.
fn hourly_days(n: usize) -> Vec<i64> {
    let first = sweepflight_kernel::timeframe::days_from_civil(2000, 1, 3);
    (0..n as i64).map(|h| first + h / 24).collect()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| flag(&args, name);
    let runs: usize = flag("--runs").map_or(Ok(5), |v| v.parse())?;
    let n: usize = flag("--bars").map_or(Ok(10_000_000), |v| v.parse())?;
    let mut out = serde_json::Map::new();

    // Period bars of a long series against one SMA over it.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut p = 100.0f64;
    let close: Vec<f64> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            p *= 1.0 + ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.002;
            p
        })
        .collect();
    let open: Vec<f64> = close.iter().map(|c| c * 0.999).collect();
    let high: Vec<f64> = close.iter().map(|c| c * 1.002).collect();
    let low: Vec<f64> = open.iter().map(|o| o * 0.998).collect();
    let volume: Vec<f64> = (0..n).map(|i| (i % 97) as f64).collect();
    let days = hourly_days(n);
    let closes = Bars {
        days: Some(&days),
        ..Bars::closes(&close)
    };
    let ohlcv = Bars {
        open: Some(&open),
        high: Some(&high),
        low: Some(&low),
        volume: Some(&volume),
        ..closes
    };
    for (bars, tf) in [
        (&closes, Timeframe::Daily),
        (&closes, Timeframe::Weekly),
        (&closes, Timeframe::Monthly),
        (&ohlcv, Timeframe::Weekly),
    ] {
        let fast = PeriodBars::of(bars, &days, tf);
        ensure!(
            fast == oracle::period_bars(bars, tf),
            "{} period bars differ from the oracle's",
            tf.name()
        );
    }
    let sma_of = || {
        let mut line = vec![0.0; n];
        series::sma(
            &closes,
            &[Input::Series(&close), Input::Window(10)],
            &mut line,
        );
        line
    };
    let gather = |bars: &Bars<'_>, tf: Timeframe| PeriodBars::of(bars, &days, tf);
    let mut cases: Vec<(&str, &mut dyn FnMut())> = Vec::new();
    let mut a = || drop(std::hint::black_box(sma_of()));
    let mut b = || drop(std::hint::black_box(gather(&closes, Timeframe::Daily)));
    let mut c = || drop(std::hint::black_box(gather(&closes, Timeframe::Weekly)));
    let mut d = || drop(std::hint::black_box(gather(&closes, Timeframe::Monthly)));
    let mut e = || drop(std::hint::black_box(gather(&ohlcv, Timeframe::Weekly)));
    cases.push(("sma(close, 10)", &mut a));
    cases.push(("daily period bars (close)", &mut b));
    cases.push(("weekly period bars (close)", &mut c));
    cases.push(("monthly period bars (close)", &mut d));
    cases.push(("weekly period bars (OHLCV)", &mut e));
    let timed = rounds(runs, &mut cases);
    for ((label, _), t) in cases.iter().zip(timed) {
        out.insert((*label).to_owned(), t.into());
    }

    // A weekly filter on sma_cross's 435 pairs.
    let paper = read_close(&paper_fixture_path())?;
    let paper_days = hourly_days(paper.len());
    let bars = Bars {
        days: Some(&paper_days),
        ..Bars::closes(&paper)
    };
    let grid: Vec<Vec<f64>> = sweepflight_benches::vbt_pairs()
        .into_iter()
        .map(|(f, s)| vec![f64::from(f), f64::from(s)])
        .collect();
    let flat = grid.concat();
    let cross = [
        "cross_above(sma(close, fast), sma(close, slow))",
        "cross_below(sma(close, fast), sma(close, slow))",
    ];
    let filter = "close > weekly(sma(close, 10))";
    let plain = Program::new(&[(Field::Long, cross[0]), (Field::Short, cross[1])])?;
    let long = format!("{} and {filter}", cross[0]);
    let short = format!("{} and {filter}", cross[1]);
    let framed = Program::new(&[(Field::Long, &long), (Field::Short, &short)])?;
    // The weekly values by the interpreter, read as an input column.
    let weekly = Program::portfolio(&[(Field::Rank, "weekly(sma(close, 10))")], &[], &[])?;
    let (values, _) = oracle::evaluate(&bars, weekly.formula(Field::Rank).expect("rank"), &[]);
    let oracle::Value::Series(wk) = values else {
        anyhow::bail!("weekly(sma(close, 10)) is a series")
    };
    let inputs: Vec<Arc<[f64]>> = vec![wk.into()];
    let with_input = Bars {
        inputs: &inputs,
        ..bars
    };
    let sent = Program::with_inputs(
        &[],
        &[
            (Field::Long, &format!("{} and close > wk", cross[0])),
            (Field::Short, &format!("{} and close > wk", cross[1])),
        ],
        &["wk".to_owned()],
    )?;
    let exec = Execution::default();
    let control = SweepControl::default();
    let got = sweep_program(&bars, &framed, &flat, grid.len(), &exec, &control)?;
    let want = sweep_program(&with_input, &sent, &flat, grid.len(), &exec, &control)?;
    ensure!(
        got == want,
        "the weekly filter differs from its values read as a column"
    );
    check_interpreter(
        "the weekly filter",
        &bars,
        &framed,
        &grid,
        &exec,
        &[0, grid.len() - 1],
    )?;
    let plain = Combos::of_program(Arc::new(plain), flat.clone(), grid.len());
    let framed = Combos::of_program(Arc::new(framed), flat.clone(), grid.len());
    let mut g = || {
        drop(std::hint::black_box(
            sweep_combos(&bars, &plain, &exec, &control).unwrap(),
        ))
    };
    let mut h = || {
        drop(std::hint::black_box(
            sweep_combos(&bars, &framed, &exec, &control).unwrap(),
        ))
    };
    let mut cases: Vec<(&str, &mut dyn FnMut())> = vec![
        ("sma_cross as formulas (435 pairs)", &mut g),
        ("the same and close > weekly(sma(close, 10))", &mut h),
    ];
    let timed = rounds(runs, &mut cases);
    for ((label, _), t) in cases.iter().zip(timed) {
        out.insert((*label).to_owned(), t.into());
    }
    let report = serde_json::json!({"bars": n, "paper_bars": paper.len(), "runs": out});
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
