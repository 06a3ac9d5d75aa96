//! `bars-timer`: times the v1.3 execution options on the paper series made into bars, in one
//! process, and prints JSON.
//!
//! ```text
//! bars-timer [--runs N] [--series FILE] [--case TEXT]
//! ```
//!
//! The bars: each open a quarter of the way from the close before to its own close, highs and
//! lows half the bar's move beyond both
//! (the closes are the paper's 150,000). Cases, each checked before it is timed (every combo's
//! trade count and pnl against the plain v1.3 loop of the oracle):
//! - `sma_cross default`, `sma_cross next_open+high_low+trail`: vectorbt's 435 pairs (fast <
//!   slow, 10..=39) under the default execution, and with `fill: next_open`, `stops: high_low`
//!   and a 2% trailing stop (and each part alone: `part ...`);
//! - `stop formula x10`: the 435 pairs with `stop_loss: "m * atr(14) / close"` and 10 values
//!   of m (4,350 combos, one ATR array), beside `fixed stop x10`: the 435 pairs with a fixed
//!   2% stop-loss swept 10 times (4,350 combo runs).
//!
//! `--case` times only the cases whose label contains TEXT. Every run is cold: no cache, all
//! cores. Output: `{"bars", "runs": {CASE: [seconds]}}`.

use anyhow::ensure;
use sweepflight_benches::{flag, paper_fixture_path, read_close, time_runs};
use sweepflight_kernel::eval::{oracle as interp, sweep_program};
use sweepflight_kernel::expr::{Field, Program};
use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::{
    ComboResult, Execution, Fill, Params, StopsOn, Strategy, SweepControl, oracle, sweep_params_on,
};

/// The results' trades and pnl equal the oracle's for `check` combos spread over the grid.
fn checked(
    got: &[ComboResult],
    want: impl Fn(usize) -> Vec<oracle::Trade>,
    label: &str,
) -> anyhow::Result<()> {
    let n = got.len();
    for i in [0, n / 3, n / 2, n - 1] {
        let w = want(i);
        let pnl: f64 = w.iter().map(|t| t.net).sum();
        ensure!(
            got[i].trades as usize == w.len() && (got[i].pnl - pnl).abs() <= 1e-6,
            "{label}: combo {i} differs from the oracle"
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| flag(&args, name);
    let runs: usize = flag("--runs").map_or(Ok(5), |v| v.parse())?;
    let path = flag("--series").map_or_else(paper_fixture_path, Into::into);
    let case = flag("--case").unwrap_or_default();
    let wanted = |label: &str| label.contains(case.as_str());
    let close = read_close(&path)?;
    // Each open a quarter of the way from the close before to its own close (a next-open fill
    // is neither price).
    let open: Vec<f64> = (0..close.len())
        .map(|i| {
            let prev = close[i.saturating_sub(1)];
            prev + 0.25 * (close[i] - prev)
        })
        .collect();
    let wick: Vec<f64> = open
        .iter()
        .zip(&close)
        .map(|(o, c)| (c - o).abs() * 0.5)
        .collect();
    let high: Vec<f64> = (0..close.len())
        .map(|i| open[i].max(close[i]) + wick[i])
        .collect();
    let low: Vec<f64> = (0..close.len())
        .map(|i| open[i].min(close[i]) - wick[i])
        .collect();
    let bars = Bars::ohlc(&open, &high, &low, &close);
    let control = SweepControl::default();
    let pairs = sweepflight_benches::vbt_pairs();
    let params: Vec<Params> = pairs
        .iter()
        .map(|&(f, s)| Params::new(Strategy::SmaCross, &[f64::from(f), f64::from(s)]))
        .collect::<Result<_, _>>()?;
    let mut out = serde_json::Map::new();

    let default = Execution::default();
    let real = Execution {
        fill: Fill::NextOpen,
        stops: StopsOn::HighLow,
        trailing_stop: Some(0.02),
        ..Execution::default()
    };
    let parts = [
        (
            "part next_open",
            Execution {
                fill: Fill::NextOpen,
                ..default
            },
        ),
        (
            "part high_low+trail",
            Execution {
                fill: Fill::Close,
                ..real
            },
        ),
        (
            "part close+trail",
            Execution {
                fill: Fill::Close,
                stops: StopsOn::Close,
                ..real
            },
        ),
    ];
    let fixed = Execution {
        stop_loss: Some(0.02),
        ..Execution::default()
    };
    // Each built-in case: label, execution, calls per timed run.
    let cases = [
        ("sma_cross default", default, 1),
        ("sma_cross next_open+high_low+trail", real, 1),
    ]
    .into_iter()
    .chain(parts.map(|(label, exec)| (label, exec, 1)))
    .chain([("fixed stop x10", fixed, 10)]);
    for (label, exec, calls) in cases {
        if !wanted(label) {
            continue;
        }
        let got = sweep_params_on(&bars, &params, &exec, &control)?;
        checked(
            &got,
            |i| {
                oracle::execute_with_exits(
                    &bars,
                    &oracle::signals(&close, &params[i]),
                    (&[], &[]),
                    &exec,
                )
            },
            label,
        )?;
        let t = time_runs(runs, || {
            (0..calls)
                .flat_map(|_| sweep_params_on(&bars, &params, &exec, &control).unwrap())
                .collect::<Vec<_>>()
        });
        out.insert(label.to_owned(), t.into());
    }

    // A stop formula over 10 values of m (beside the fixed stop run 10 times, above).
    if wanted("stop formula x10") {
        let program = Program::new(&[
            (
                Field::Long,
                "cross_above(sma(close, fast), sma(close, slow))",
            ),
            (
                Field::Short,
                "cross_below(sma(close, fast), sma(close, slow))",
            ),
            (Field::StopLoss, "m * atr(14) / close"),
        ])?;
        let ms: Vec<f64> = (1..=10).map(|m| f64::from(m) * 0.5).collect();
        let grid: Vec<Vec<f64>> = pairs
            .iter()
            .flat_map(|&(f, s)| ms.iter().map(move |&m| vec![f64::from(f), f64::from(s), m]))
            .collect();
        let flat = grid.concat();
        let got = sweep_program(&bars, &program, &flat, grid.len(), &default, &control)?;
        checked(
            &got,
            |i| interp::run(&bars, &program, &grid[i], &default),
            "stop formula",
        )?;
        let t = time_runs(runs, || {
            sweep_program(&bars, &program, &flat, grid.len(), &default, &control).unwrap()
        });
        out.insert("stop formula x10".to_owned(), t.into());
    }
    let report = serde_json::json!({"bars": close.len(), "runs": out});
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
