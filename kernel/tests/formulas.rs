//! The strategy language (docs/language.md) against its oracles: every function's fast
//! computation against the plain one written from the spec, on random, near-tie, integer,
//! flat, NaN-prefixed and gappy series; every built-in against its formula form on every
//! result column and option; random formula strategies (fast sweep vs the plain interpreter,
//! trade for trade); the parser's canonical text, errors and limits; `explain`'s array count.

use std::time::Instant;

use proptest::prelude::*;
use sweepflight_kernel::NodeKey;
use sweepflight_kernel::builtins::BUILTINS;
use sweepflight_kernel::eval::{oracle as interp, sweep_program};
use sweepflight_kernel::expr::registry::{Arg, Compute, FUNCTIONS, Plain};
use sweepflight_kernel::expr::{Field, ParamKind, Program, canon, parse};
use sweepflight_kernel::lines::{Bars, Input, Line};
use sweepflight_kernel::oracle::same_bits as same;
use sweepflight_kernel::plan::{Plan, line_array_key, signs_key};
use sweepflight_kernel::{
    ArrayCache, ArrayKey, Combo, Combos, Execution, NoCache, Params, Records, Side, Strategy,
    SweepControl, sweep_params, sweep_with,
};

mod common;
use common::Rng;

/// The kinds of series every function is tried on.
fn series_kinds(len: usize, seed: u64) -> Vec<(&'static str, Vec<f64>)> {
    let mut r = Rng(seed | 1);
    let mut walk = Vec::with_capacity(len);
    let mut p = 100.0;
    for _ in 0..len {
        p *= 1.0 + (r.unit() - 0.5) * 0.02;
        walk.push(p);
    }
    let ticks: Vec<f64> = walk.iter().map(|v| (v * 4.0).round() / 4.0).collect();
    let integers: Vec<f64> = walk.iter().map(|v| v.round()).collect();
    let flat: Vec<f64> = (0..len)
        .map(|i| if (i / 40) % 2 == 0 { 50.0 } else { 51.0 })
        .collect();
    let mut nan_prefixed = walk.clone();
    for v in nan_prefixed.iter_mut().take(len / 10 + 3) {
        *v = f64::NAN;
    }
    let mut gappy = walk.clone();
    for (i, v) in gappy.iter_mut().enumerate() {
        if i % 97 == 13 || i % 131 == 0 {
            *v = f64::NAN;
        }
    }
    vec![
        ("walk", walk),
        ("ticks", ticks),
        ("integers", integers),
        ("flat", flat),
        ("nan-prefixed", nan_prefixed),
        ("gappy", gappy),
    ]
}

/// Bars around `close`: highs and lows a random distance out, opens between them.
fn bars_of(close: &[f64], seed: u64) -> Around {
    let mut r = Rng(seed | 1);
    let high: Vec<f64> = close.iter().map(|c| c + r.unit() * 0.8).collect();
    let low: Vec<f64> = close.iter().map(|c| c - r.unit() * 0.8).collect();
    let open: Vec<f64> = low
        .iter()
        .zip(&high)
        .map(|(l, h)| l + (h - l) * 0.3)
        .collect();
    let volume: Vec<f64> = close.iter().map(|_| (r.unit() * 1000.0).round()).collect();
    Around {
        open,
        high,
        low,
        volume,
    }
}

/// The columns [`bars_of`] makes around a series of closes.
struct Around {
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    volume: Vec<f64>,
}

impl Around {
    /// The bars of these columns and `close`.
    fn with<'a>(&'a self, close: &'a [f64]) -> Bars<'a> {
        Bars {
            open: Some(&self.open),
            high: Some(&self.high),
            low: Some(&self.low),
            close,
            volume: Some(&self.volume),
            ..Bars::default()
        }
    }
}

#[test]
fn every_function_equals_its_oracle_bit_for_bit() {
    let len = 700;
    for (kind, x) in series_kinds(len, 7) {
        // Columns must be finite for the true range: it reads the walk's bars.
        let walk = &series_kinds(len, 7)[0].1;
        let around = bars_of(walk, 11);
        let bars = around.with(walk);
        let other: Vec<f64> = x.iter().rev().copied().collect();
        let mut r = Rng(3);
        let cond: Vec<u8> = (0..len).map(|_| u8::from(r.unit() < 0.4)).collect();
        for f in FUNCTIONS.iter().filter(|f| f.expands.is_none()) {
            for windows in [
                [1, 1, 1],
                [2, 3, 1],
                [5, 9, 3],
                [14, 4, 7],
                [30, 60, 8],
                [len, 2, 2],
                [len + 1, 3, 2],
            ] {
                let mut w = windows.iter();
                let mut series_args = [&x, &other].into_iter().cycle();
                let inputs: Vec<Input<'_>> = f
                    .args
                    .iter()
                    .map(|a| match a {
                        Arg::Window => Input::Window(*w.next().unwrap()),
                        Arg::Series => Input::Series(series_args.next().unwrap()),
                        Arg::Cond => Input::Cond(&cond),
                    })
                    .collect();
                let what = format!("{} on {kind} with windows {windows:?}", f.signature);
                match (f.compute, f.plain) {
                    (Compute::Series(fast), Plain::Series(plain)) => {
                        let mut out = vec![0.0; len];
                        fast(&bars, &inputs, &mut out);
                        assert!(same(&out, &plain(&bars, &inputs)), "{what}");
                    }
                    (Compute::Cond(fast), Plain::Cond(plain)) => {
                        let want: Vec<u8> =
                            plain(&bars, &inputs).into_iter().map(u8::from).collect();
                        let mut out = vec![0u8; len];
                        fast(&inputs, 0, &mut out);
                        assert_eq!(out, want, "{what}");
                        // From the middle, as the per-combo phase asks for blocks.
                        let mut part = vec![0u8; len - 100];
                        fast(&inputs, 100, &mut part);
                        assert_eq!(part, want[100..], "{what} from bar 100");
                    }
                    // Computed on period bars: tests/timeframe.rs holds them to their oracle.
                    (Compute::Frame(a), Plain::Frame(b)) if a == b => continue,
                    _ => panic!("{} has mismatched computations", f.name),
                }
                // A constant where a series goes.
                if f.args.first() == Some(&Arg::Series) {
                    let mut with_const = inputs.clone();
                    with_const[0] = Input::Const(2.5);
                    if let (Compute::Series(fast), Plain::Series(plain)) = (f.compute, f.plain) {
                        let mut out = vec![0.0; len];
                        fast(&bars, &with_const, &mut out);
                        assert!(same(&out, &plain(&bars, &with_const)), "{what}, constant x");
                    }
                }
            }
        }
    }
}

#[test]
fn every_shared_pass_equals_its_function_per_window_bit_for_bit() {
    let len = 700;
    let bars_of_walk = series_kinds(len, 5);
    let bars = Bars::closes(&bars_of_walk[0].1);
    let multis: Vec<_> = FUNCTIONS.iter().filter(|f| f.multi.is_some()).collect();
    assert!(multis.len() >= 3, "sma, wma and ema have shared passes");
    for (kind, x) in series_kinds(len, 9) {
        for windows in [
            vec![1],
            vec![1, 2, 3, 5, 8, 13, 21, 34, 55],
            (2..=30).collect(),
            vec![4, 200, len, len + 1, len + 50],
        ] {
            for f in &multis {
                let lines = (f.multi.unwrap())(&x, &windows, true);
                assert_eq!(lines.len(), windows.len());
                let Compute::Series(one) = f.compute else {
                    panic!("{} is a series function", f.name)
                };
                // Its pass from another function's lines (`std` from `sma`'s), where it has one.
                let from = f.from_lines.map(|from| {
                    let of = FUNCTIONS.iter().find(|g| g.name == from.of).unwrap();
                    let means = (of.multi.unwrap())(&x, &windows, false);
                    let means: Vec<&[f64]> = means.iter().map(|m| &m[..]).collect();
                    (from.pass)(&x, &windows, &means, true)
                });
                for (k, (line, &n)) in lines.iter().zip(&windows).enumerate() {
                    let mut want = vec![0.0; len];
                    one(&bars, &[Input::Series(&x), Input::Window(n)], &mut want);
                    assert!(same(line, &want), "{} on {kind}, window {n}", f.signature);
                    if let Some(from) = &from {
                        assert!(
                            same(&from[k], &want),
                            "{} from lines on {kind}, window {n}",
                            f.signature
                        );
                    }
                }
            }
        }
    }
    assert!(
        FUNCTIONS.iter().any(|f| f.from_lines.is_some()),
        "std reads sma's lines"
    );
}

/// Hull-type lines sharing their first-level WMAs (`multi::hulls`) equal `hma` and `hma3`
/// computed alone, bit for bit, on every kind of series, windows past the series included.
#[test]
fn hull_lines_sharing_their_first_level_equal_each_alone() {
    use sweepflight_kernel::lines::multi::{Hull, hulls};
    let len = 700;
    let walk = series_kinds(len, 5);
    let bars = Bars::closes(&walk[0].1);
    let hulled: Vec<_> = FUNCTIONS.iter().filter(|f| f.hull.is_some()).collect();
    assert_eq!(hulled.len(), 2, "hma and hma3");
    let triples = [
        [3, 6, 2],
        [4, 6, 2],
        [3, 12, 3],
        [10, 20, 4],
        [2, 2, 2],
        [1, 1, 1],
        [30, 60, 8],
        [5, len + 1, 3],
    ];
    for (kind, x) in series_kinds(len, 11) {
        for f in &hulled {
            let (scale, firsts) = f.hull.unwrap();
            let specs: Vec<Hull> = triples
                .iter()
                .map(|w| Hull {
                    scale,
                    first: w[..firsts].to_vec(),
                    outer: w[2],
                })
                .collect();
            let lines = hulls(&x, &specs, true);
            let Compute::Series(one) = f.compute else {
                panic!("a series")
            };
            for (line, w) in lines.iter().zip(&triples) {
                let mut want = vec![0.0; len];
                let args = [
                    Input::Series(&x),
                    Input::Window(w[0]),
                    Input::Window(w[1]),
                    Input::Window(w[2]),
                ];
                one(&bars, &args, &mut want);
                assert!(
                    same(line, &want),
                    "{} on {kind}, windows {w:?}",
                    f.signature
                );
            }
        }
    }
}

#[test]
fn functions_follow_the_spec_on_hand_computed_values() {
    let x = [1.0, 2.0, 4.0, 8.0, f64::NAN, 3.0, 5.0];
    let bars = Bars::closes(&x);
    let run = |name: &str, n: usize| {
        let f = FUNCTIONS
            .iter()
            .find(|f| f.name == name && f.args.len() == 2)
            .unwrap();
        let Compute::Series(g) = f.compute else {
            panic!()
        };
        let mut out = vec![0.0; x.len()];
        g(&bars, &[Input::Series(&x), Input::Window(n)], &mut out);
        out
    };
    let nan = f64::NAN;
    assert!(same(&run("sum", 2), &[nan, 3.0, 6.0, 12.0, nan, nan, 8.0]));
    assert!(same(&run("sma", 2), &[nan, 1.5, 3.0, 6.0, nan, nan, 4.0]));
    assert!(same(
        &run("wma", 2),
        &[nan, 5.0 / 3.0, 10.0 / 3.0, 20.0 / 3.0, nan, nan, 13.0 / 3.0]
    ));
    assert!(same(&run("lag", 1), &[nan, 1.0, 2.0, 4.0, 8.0, nan, 3.0]));
    assert!(same(
        &run("change", 2),
        &[nan, nan, 3.0, 6.0, nan, -5.0, nan]
    ));
    assert!(same(
        &run("highest", 3),
        &[nan, nan, 4.0, 8.0, nan, nan, nan]
    ));
    assert!(same(&run("std", 2), &[nan, 0.5, 1.0, 2.0, nan, nan, 1.0]));
    // EMA from the first defined bar; a NaN poisons what follows.
    let e = run("ema", 3);
    assert_eq!((e[0], e[1]), (1.0, 0.5 * 2.0 + 0.5 * 1.0));
    assert!(e[4].is_nan() && e[6].is_nan());
    // RMA seeded with the mean of the first n defined values.
    let r = run("rma", 2);
    assert!(r[0].is_nan());
    assert_eq!((r[1], r[2]), (1.5, (1.5 * 1.0 + 4.0) / 2.0));
    // RSI of a rising series is 100, of a flat one 50.
    let up: Vec<f64> = (0..20).map(f64::from).collect();
    let flat = vec![5.0; 20];
    for (s, want) in [(&up, 100.0), (&flat, 50.0)] {
        let f = FUNCTIONS.iter().find(|f| f.name == "rsi").unwrap();
        let Compute::Series(g) = f.compute else {
            panic!()
        };
        let mut out = vec![0.0; 20];
        g(
            &Bars::closes(s),
            &[Input::Series(s), Input::Window(14)],
            &mut out,
        );
        assert!(out[13].is_nan());
        assert_eq!(out[14], want);
    }
    // ATR's first value is at bar n: the first true range needs a previous close.
    let c = [10.0, 11.0, 12.0, 11.5, 13.0];
    let h = [10.5, 11.5, 12.5, 12.0, 13.5];
    let l = [9.5, 10.0, 11.0, 11.0, 12.0];
    let bars = Bars {
        high: Some(&h),
        low: Some(&l),
        close: &c,
        ..Bars::default()
    };
    let f = FUNCTIONS.iter().find(|f| f.name == "atr").unwrap();
    let Compute::Series(g) = f.compute else {
        panic!()
    };
    let mut out = vec![0.0; 5];
    g(&bars, &[Input::Window(2)], &mut out);
    assert!(out[0].is_nan() && out[1].is_nan());
    // tr[1] = max(1.5, 1.5, 0) = 1.5, tr[2] = max(1.5, 1.5, 0) = 1.5.
    assert_eq!(out[2], (1.5 + 1.5) / 2.0);
}

/// A grid of combos for a built-in, in its parameter order.
fn builtin_grid(name: &str) -> Vec<Vec<f64>> {
    let mut out = Vec::new();
    match name {
        "hma_sar" => {
            for l in [4u32, 6, 13, 40, 150, 5000] {
                let c = Combo::from_length(l).unwrap();
                out.push(c.windows().iter().map(|&w| f64::from(w)).collect());
            }
            out.push(vec![3.0, 7.0, 2.0, 1.0, 2.0, 3.0]);
        }
        "sma_cross" | "ema_cross" => {
            for a in [1.0, 3.0, 8.0, 30.0] {
                for b in [2.0, 8.0, 21.0, 4000.0] {
                    out.push(vec![a, b]);
                }
            }
        }
        "donchian" => {
            for n in [1.0, 2.0, 5.0, 20.0, 60.0, 4000.0] {
                out.push(vec![n]);
            }
        }
        "rsi_revert" => {
            for n in [2.0, 6.0, 14.0, 4000.0] {
                for (lo, hi) in [(30.0, 70.0), (10.0, 90.0), (49.5, 50.5), (0.0, 100.0)] {
                    out.push(vec![n, lo, hi]);
                }
            }
        }
        _ => unreachable!(),
    }
    out
}

fn executions(start: usize) -> Vec<Execution> {
    let base = Execution::new(0.0009);
    vec![
        base,
        Execution {
            side: Side::Long,
            ..base
        },
        Execution {
            side: Side::Short,
            stop_loss: Some(0.01),
            ..base
        },
        Execution {
            stop_loss: Some(0.005),
            take_profit: Some(0.01),
            ..base
        },
        Execution { start, ..base },
        Execution {
            start,
            side: Side::Long,
            take_profit: Some(0.003),
            ..base
        },
    ]
}

#[test]
fn every_builtin_equals_its_formula_form_on_every_column() {
    let kinds = series_kinds(2500, 5);
    for b in &BUILTINS {
        let program = b.program();
        let strategy = Strategy::from_name(b.name).unwrap();
        // The formula form's parameters are the built-in's, in its order, with its kinds.
        let names: Vec<(&str, ParamKind)> = program
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.kind))
            .collect();
        let want: Vec<(&str, ParamKind)> = strategy
            .params()
            .iter()
            .map(|(n, k)| {
                (
                    *n,
                    if *k == sweepflight_kernel::builtins::ParamKind::Int {
                        ParamKind::Int
                    } else {
                        ParamKind::Number
                    },
                )
            })
            .collect();
        assert_eq!(names, want, "{}", b.name);
        let grid = builtin_grid(b.name);
        let combos: Vec<Params> = grid
            .iter()
            .map(|v| Params::new(strategy, v).unwrap())
            .collect();
        let flat: Vec<f64> = grid.concat();
        // The built-ins read NaN-free closes; the first four kinds are.
        for (kind, close) in kinds.iter().take(4) {
            let bars = Bars::closes(close);
            for exec in executions(300) {
                for parallel in [false, true] {
                    let records =
                        Records::new(grid.len(), close.len(), exec.start, true, 4).unwrap();
                    let control = SweepControl {
                        parallel: Some(parallel),
                        records: Some(&records),
                        ..SweepControl::default()
                    };
                    let want = sweep_params(
                        close,
                        &combos,
                        &exec,
                        &SweepControl {
                            parallel: Some(parallel),
                            ..SweepControl::default()
                        },
                    )
                    .unwrap();
                    let got =
                        sweep_program(&bars, &program, &flat, grid.len(), &exec, &control).unwrap();
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(
                            g, w,
                            "{} combo {:?} on {kind} under {exec:?}",
                            b.name, grid[i]
                        );
                        assert_eq!(g.metrics(252.0), w.metrics(252.0), "{} metrics", b.name);
                    }
                    // And the oracle's trades, for the last combos.
                    let kept = records.into_records();
                    for (i, values) in grid.iter().enumerate().rev().take(3) {
                        let trades = interp::run(&bars, &program, values, &exec);
                        // total_return (strategies.md v1.3): compounded in booking order.
                        let p = trades.iter().fold(1.0, |p, t| p * (1.0 + t.net / 100.0));
                        let want = if trades.is_empty() {
                            0.0
                        } else {
                            (p - 1.0) * 100.0
                        };
                        assert_eq!(
                            got[i].total_return().to_bits(),
                            want.to_bits(),
                            "{}",
                            b.name
                        );
                        let fast: Vec<(i8, usize, usize, u64)> = kept[i]
                            .trades
                            .iter()
                            .map(|t| (t.side, t.entry_row, t.exit_row, t.net.to_bits()))
                            .collect();
                        let plain: Vec<(i8, usize, usize, u64)> = trades
                            .iter()
                            .map(|t| (t.side, t.entry_row, t.exit_row, t.net.to_bits()))
                            .collect();
                        assert_eq!(fast, plain, "{} {values:?} on {kind}", b.name);
                    }
                }
            }
        }
    }
}

/// A random formula of `kind` ("c" condition, "s" series) at most `depth` deep over the
/// parameters `a` (a window), `k` and `t` (numbers).
fn random_formula(r: &mut Rng, kind: char, depth: usize) -> String {
    let window = |r: &mut Rng| {
        if r.below(3) == 0 {
            "a".to_owned()
        } else {
            (1 + r.below(25)).to_string()
        }
    };
    if kind == 'c' {
        return match r.below(if depth == 0 { 2 } else { 6 }) {
            0 => format!(
                "{} {} {}",
                random_formula(r, 's', depth.saturating_sub(1)),
                [">", "<", ">=", "<=", "==", "!="][r.below(6)],
                random_formula(r, 's', depth.saturating_sub(1))
            ),
            1 => format!(
                "cross_above({}, {})",
                random_formula(r, 's', depth.saturating_sub(1)),
                random_formula(r, 's', depth.saturating_sub(1))
            ),
            2 => format!(
                "cross_below({}, {})",
                random_formula(r, 's', depth - 1),
                random_formula(r, 's', depth - 1)
            ),
            3 => format!(
                "({}) and ({})",
                random_formula(r, 'c', depth - 1),
                random_formula(r, 'c', depth - 1)
            ),
            4 => format!(
                "({}) or ({})",
                random_formula(r, 'c', depth - 1),
                random_formula(r, 'c', depth - 1)
            ),
            _ => format!("not ({})", random_formula(r, 'c', depth - 1)),
        };
    }
    if depth == 0 {
        return [
            "close", "high", "low", "open", "volume", "k", "t", "1.5", "100",
        ][r.below(9)]
        .to_owned();
    }
    let x = |r: &mut Rng| random_formula(r, 's', depth - 1);
    match r.below(14) {
        0 => format!("{} {} {}", x(r), ["+", "-", "*", "/"][r.below(4)], x(r)),
        1 => format!("-({})", x(r)),
        2 => format!(
            "where({}, {}, {})",
            random_formula(r, 'c', depth - 1),
            x(r),
            x(r)
        ),
        3 => format!("{}({}, {})", ["min", "max"][r.below(2)], x(r), x(r)),
        4 => format!("{}({})", ["abs", "sqrt", "log"][r.below(3)], x(r)),
        5 => "tr()".to_owned(),
        6 => format!("atr({})", window(r)),
        7 => format!("hma({}, {})", x(r), window(r)),
        8 => format!(
            "hma3({}, {}, {}, {})",
            x(r),
            window(r),
            window(r),
            window(r)
        ),
        _ => {
            let f = [
                "lag", "change", "roc", "sum", "sma", "wma", "std", "highest", "lowest", "ema",
                "rma", "rsi",
            ][r.below(12)];
            format!("{f}({}, {})", x(r), window(r))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Random strategies of random formulas: the fast sweep books the plain interpreter's
    /// trades, bit for bit, for every combo, side and stop, serial or parallel, in any
    /// working set.
    #[test]
    fn random_formulas_trade_as_the_interpreter(seed in any::<u64>(), which in 0usize..6, side in 0usize..3, tight in any::<bool>()) {
        let mut r = Rng(seed | 1);
        let mut fields = vec![(Field::Long, random_formula(&mut r, 'c', 3))];
        if r.below(3) > 0 { fields.push((Field::Short, random_formula(&mut r, 'c', 3))); }
        if r.below(2) > 0 { fields.push((Field::ExitLong, random_formula(&mut r, 'c', 2))); }
        if r.below(2) > 0 { fields.push((Field::ExitShort, random_formula(&mut r, 'c', 2))); }
        let texts: Vec<(Field, &str)> = fields.iter().map(|(f, t)| (*f, t.as_str())).collect();
        let Ok(program) = Program::new(&texts) else { return Ok(()) };
        // Long enough, some of the time, for the per-combo phase's blocks of 1,024 bars.
        let kinds = series_kinds(if which % 2 == 0 { 2600 } else { 400 }, seed);
        let close = &kinds[which.min(3)].1;
        let around = bars_of(close, seed ^ 9);
        let bars = around.with(close);
        let mut combos: Vec<Vec<f64>> = Vec::new();
        for _ in 0..6 {
            combos.push(program.params.iter().map(|p| match p.kind {
                ParamKind::Int => (1 + r.below(40)) as f64,
                ParamKind::Number => [0.5, 1.0, 2.0, 50.0, 100.0, 0.0][r.below(6)],
            }).collect());
        }
        let exec = Execution {
            side: [Side::Both, Side::Long, Side::Short][side],
            stop_loss: (side == 1).then_some(0.01),
            start: if tight { 37 } else { 0 },
            ..Execution::new(0.0009)
        };
        for (values, (got, plain, trades)) in combos.iter().zip(common::swept_and_interpreted(&bars, &program, &combos, &exec, tight)) {
            prop_assert_eq!(&got, &plain, "{:?} {:?}", texts, values);
            prop_assert_eq!(trades, plain.len());
        }
    }

    /// Canonical text parses back to the same canonical text, for random formulas.
    #[test]
    fn canonical_text_round_trips(seed in any::<u64>()) {
        let mut r = Rng(seed | 1);
        let text = random_formula(&mut r, 'c', 4);
        let Ok(f) = parse::parse(&text) else { return Ok(()) };
        let canonical = canon::text(&f);
        let again = parse::parse(&canonical).unwrap();
        prop_assert_eq!(canon::text(&again), canonical.clone());
        prop_assert_eq!(again.nodes, f.nodes, "{} -> {}", text, canonical);
    }
}

#[test]
fn canonical_text_follows_the_spec() {
    for (text, want) in [
        ("(a and b) and c", "a and b and c"),
        ("a and (b and c)", "a and (b and c)"),
        ("((close))>sma( close ,n)", "close > sma(close, n)"),
        ("1.50 * x - -y", "1.5 * x - -y"),
        ("-(a + b) * c", "-(a + b) * c"),
        ("a - (b - c)", "a - (b - c)"),
        ("(a - b) - c", "a - b - c"),
        ("not (x > 1 or y < 2)", "not (x > 1 or y < 2)"),
        ("not not x > 1e-5", "not not x > 1e-05"),
        ("x > 1e16 and y < .5", "x > 1e+16 and y < 0.5"),
        ("x > 2.0", "x > 2"),
    ] {
        assert_eq!(canon::text(&parse::parse(text).unwrap()), want, "{text}");
    }
}

/// The edit distance of the hints (docs/language.md v1.4): insertions, deletions,
/// substitutions and swaps of two neighbours, one edit each; no hint past two edits.
#[test]
fn edit_distance_counts_swaps_as_one_and_hints_stop_at_two() {
    use sweepflight_kernel::expr::registry::{closest, edit_distance};
    for (a, b, d) in [
        ("art", "atr", 1),
        ("clsoe", "close", 1),
        ("", "abc", 3),
        ("abc", "abc", 0),
        ("ca", "abc", 3),
        ("kitten", "sitting", 3),
        ("vwap", "vawp", 1),
    ] {
        assert_eq!(edit_distance(a, b), d, "{a} {b}");
        assert_eq!(edit_distance(b, a), d, "{b} {a}");
    }
    assert_eq!(closest("xyzw", ["sma", "ema"]), None);
    // Ties by the candidates' order.
    assert_eq!(closest("ma", ["sma", "ema"]), Some("sma"));
    assert_eq!(closest("ma", ["ema", "sma"]), Some("ema"));
    let e = parse::parse("zzzz(close) > 1").unwrap_err();
    assert!(!e.message.contains("did you mean"), "{}", e.message);
}

#[test]
fn parse_errors_name_the_offset_and_what_was_expected() {
    for (text, offset, needle) in [
        ("close >", 7, "expected a number, a name, a call or `(`"),
        ("smaa(close, 5) > 1", 0, "did you mean `sma`"),
        // A swap of two neighbours is one edit (`atr`, not `abs`, which is two substitutions).
        ("art(14) > 1", 0, "did you mean `atr`"),
        ("rsl(close, 14) > 1", 0, "did you mean `rsi`"),
        ("sma(close) > 1", 0, "sma takes sma(x, n), got 1 argument"),
        (
            "hma(close, 1, 2) > 1",
            0,
            "hma(x, half, full, sqrt) or hma(x, n)",
        ),
        ("a < b < c", 6, "comparisons do not chain"),
        ("010 > x", 0, "may not start with 0"),
        ("x > 1.", 5, "expected digits after `.`"),
        ("x > 1e", 5, "exponent"),
        ("x > 1e999", 4, "not a finite"),
        ("Close > 1", 0, "lower case"),
        ("x & y", 2, "write `and`"),
        ("if > 1", 0, "Python keyword"),
        ("x = 1", 2, "compare with `==`"),
        ("sma(close, 5,) > 1", 13, "no trailing commas"),
        ("x > 2x", 5, "must be followed by"),
        ("x > 1 $", 6, "unexpected character"),
        ("(x > 1", 6, "expected `)`"),
        ("", 0, "empty"),
        ("x ** 2 > 1", 2, "no powers"),
    ] {
        let e = parse::parse(text).unwrap_err();
        assert_eq!(e.offset, offset, "{text}: {e:?}");
        assert!(e.message.contains(needle), "{text}: {}", e.message);
    }
}

#[test]
fn limits_hold_without_recursion_a_hostile_formula_can_exhaust() {
    let started = Instant::now();
    let deep = format!("{}x{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(
        parse::parse(&deep)
            .unwrap_err()
            .message
            .contains("4096 bytes")
    );
    let parens = format!("{}x > 1{}", "(".repeat(65), ")".repeat(65));
    assert!(
        parse::parse(&parens)
            .unwrap_err()
            .message
            .contains("nested parentheses")
    );
    let ok = format!("{}x > 1{}", "(".repeat(64), ")".repeat(64));
    assert!(parse::parse(&ok).is_ok());
    let minus = format!("{}x > 1", "-".repeat(2000));
    assert!(parse::parse(&minus).unwrap_err().message.contains("depth"));
    let nots = format!("{}x > 1", "not ".repeat(1000));
    assert!(parse::parse(&nots).unwrap_err().message.contains("depth"));
    let long_sum = format!("{} > 1", vec!["x"; 70].join(" + "));
    assert!(
        parse::parse(&long_sum)
            .unwrap_err()
            .message
            .contains("deep")
    );
    let many = format!("{} > 1", vec!["x"; 130].join(" + "));
    assert!(parse::parse(&many).unwrap_err().message.contains("nodes"));
    let name = format!("{} > 1", "x".repeat(65));
    assert!(
        parse::parse(&name)
            .unwrap_err()
            .message
            .contains("at most 64 bytes")
    );
    // Well under a second, all of it, on any machine this runs on.
    assert!(started.elapsed().as_secs() < 5);
}

#[test]
fn binder_refuses_what_the_language_does_not_allow() {
    let err = |fields: &[(Field, &str)]| Program::new(fields).unwrap_err().to_string();
    for (fields, needle) in [
        (vec![(Field::ExitLong, "x > 1")], "needs `long` or `short`"),
        (vec![(Field::Long, "sma(close, n)")], "must be a condition"),
        (
            vec![(Field::Long, "close + 1 > 2 and close")],
            "takes a condition here, got a series",
        ),
        (
            vec![(Field::Long, "(close > 1) > 2")],
            "comparisons of conditions are refused",
        ),
        (
            vec![(Field::Long, "sma(close, n + 1) > 1")],
            "no arithmetic in a window",
        ),
        (
            vec![(Field::Long, "sma(close, 2.5) > 1")],
            "integer in 1..=67108864",
        ),
        (
            vec![(Field::Long, "sma(close, 0) > 1")],
            "integer in 1..=67108864",
        ),
        (
            vec![(Field::Long, "sma(close, 1e2) > 1")],
            "integer in 1..=67108864",
        ),
        (
            vec![(Field::Long, "where(close, 1, 2) > 1")],
            "takes a condition here",
        ),
        (
            vec![(Field::Long, "sma(close > 1, 3) > 1")],
            "takes a number or a series here",
        ),
        (
            vec![(Field::Long, "close > pnl")],
            "names a column of the reply",
        ),
        (
            vec![(Field::Long, "close > 1"), (Field::Constraint, "close > 1")],
            "only parameters and numbers",
        ),
        (
            vec![(Field::Long, "close > 1"), (Field::Constraint, "a + 1")],
            "must be a condition",
        ),
    ] {
        let e = err(&fields);
        assert!(e.contains(needle), "{fields:?}: {e}");
    }
    let params: String = (0..33)
        .map(|i| format!("p{i}"))
        .collect::<Vec<_>>()
        .join(" + ");
    assert!(err(&[(Field::Long, &format!("close > {params}"))]).contains("at most 32 parameters"));
}

#[test]
fn parameters_number_in_order_of_first_appearance_with_their_kinds() {
    let p = Program::new(&[
        (Field::Short, "close < sma(close, n) - k * std(close, n)"),
        (Field::Long, "close > sma(close, m) + k * std(close, n)"),
        (Field::Constraint, "m < n and z > 0"),
    ])
    .unwrap();
    let names: Vec<(&str, ParamKind)> =
        p.params.iter().map(|p| (p.name.as_str(), p.kind)).collect();
    assert_eq!(
        names,
        [
            ("m", ParamKind::Int),
            ("k", ParamKind::Number),
            ("n", ParamKind::Int),
            ("z", ParamKind::Number)
        ]
    );
    // A parameter may be called like a function, or `sqrt` (as hma_sar's is).
    let hma = Program::new(&[(Field::Long, "sqrt(close) > sqrt")]).unwrap();
    assert_eq!(hma.params[0].name, "sqrt");
}

/// The Bollinger-and-RSI strategy with exits (the study's): sma and std per `n`, rsi once.
fn bollinger() -> Program {
    Program::new(&[
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
    ])
    .unwrap()
}

#[test]
fn explain_counts_the_distinct_series_nodes() {
    let bollinger = bollinger();
    let count = |ns: &[f64], ks: &[f64]| {
        let mut plan = Plan::new();
        for &n in ns {
            for &k in ks {
                plan.bind(&bollinger, &[n, k]);
            }
        }
        plan.arrays()
    };
    // Per n: sma, std; per (n, k): k*std, sma - k*std, sma + k*std; rsi once.
    assert_eq!(count(&[10.0], &[2.0]), 2 + 3 + 1);
    assert_eq!(count(&[10.0, 20.0], &[1.0, 2.0, 3.0]), 2 * 2 + 6 * 3 + 1);
    // Counted by fingerprint over plans of a few combos each (explain's steps): the same
    // count as one plan, and equal nodes of two plans have one fingerprint.
    let (ns, ks) = ([10.0, 20.0, 30.0, 40.0], [1.0, 1.5, 2.0, 2.5, 3.0]);
    let combos: Vec<[f64; 2]> = ns.iter().flat_map(|&n| ks.map(|k| [n, k])).collect();
    let mut seen = std::collections::HashSet::new();
    for step in combos.chunks(3) {
        let mut plan = Plan::new();
        for c in step {
            plan.bind(&bollinger, c);
        }
        seen.extend(plan.array_fingerprints());
    }
    assert_eq!(seen.len(), count(&ns, &ks));
    assert_eq!(seen.len(), 4 * 2 + 20 * 3 + 1);
    // The same array written in two formulas or reached from two combos is one; constants
    // compare by value; hma(x, n) is the node of its derived windows.
    let p = Program::new(&[
        (Field::Long, "close > 2 * atr(14) + hma(close, 16)"),
        (Field::Short, "close < k * atr(14) + hma(close, 8, 16, 4)"),
    ])
    .unwrap();
    let mut plan = Plan::new();
    plan.bind(&p, &[2.0]);
    // atr, hma, 2*atr, 2*atr + hma.
    assert_eq!(plan.arrays(), 4);
}

/// A cache that keeps every array offered, counting what it is asked and given.
#[derive(Default)]
struct Keeping {
    arrays: std::sync::Mutex<std::collections::HashMap<ArrayKey, std::sync::Arc<[f64]>>>,
    /// Byte arrays: the paper kernel's sign bytes.
    bytes: std::sync::Mutex<std::collections::HashMap<ArrayKey, std::sync::Arc<[u8]>>>,
    asked: std::sync::atomic::AtomicUsize,
    given: std::sync::atomic::AtomicUsize,
}

impl ArrayCache for Keeping {
    fn get(&self, key: ArrayKey) -> Option<std::sync::Arc<[f64]>> {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.arrays.lock().unwrap().get(&key).cloned()
    }
    fn insert(&self, key: ArrayKey, array: std::sync::Arc<[f64]>) {
        // The closes' moves (the per-bar metrics' sums) are offered too: not counted.
        if key != ArrayKey::Moves {
            self.given
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.arrays.lock().unwrap().insert(key, array);
    }
    fn get_bytes(&self, key: ArrayKey) -> Option<std::sync::Arc<[u8]>> {
        self.bytes.lock().unwrap().get(&key).cloned()
    }
    fn insert_bytes(&self, key: ArrayKey, bytes: std::sync::Arc<[u8]>) {
        self.bytes.lock().unwrap().insert(key, bytes);
    }
}

/// The two lines of a paper combo: its HMA line and its HMA3 line.
fn paper_lines(c: &Combo) -> [Line; 2] {
    [
        Line::Hma([c.half(), c.full(), c.sqrt()]),
        Line::Hma3([c.p3(), c.p2(), c.p()]),
    ]
}

/// The cache's key of a paper combo's state bytes.
fn signs_of(c: &Combo) -> ArrayKey {
    let [hma, hma3] = paper_lines(c);
    signs_key(hma, hma3)
}

/// The paper kernel kept each of `combos`' sign bytes and no line (its grid's lines are
/// single-use: the bytes are what its repeat reads, and a sixteenth of the lines).
fn kept_signs_only(cache: &Keeping, combos: &[Combo], name: &str) {
    let bytes = cache.bytes.lock().unwrap();
    for c in combos {
        let key = signs_of(c);
        assert!(bytes.contains_key(&key), "{name}: {key:?}");
    }
    let lines = cache.arrays.lock().unwrap();
    assert!(
        lines.keys().all(|k| *k == ArrayKey::Moves),
        "{name}: {:?}",
        lines.keys()
    );
}

#[test]
fn a_cache_keeps_the_function_series_of_formulas_under_their_canonical_keys() {
    let bollinger = bollinger();
    let grid = |ns: &[f64], ks: &[f64]| -> Vec<f64> {
        ns.iter()
            .flat_map(|&n| ks.iter().flat_map(move |&k| [n, k]))
            .collect()
    };
    let given = |c: &Keeping| c.given.load(std::sync::atomic::Ordering::Relaxed);
    for (name, close) in series_kinds(1500, 11) {
        let around = bars_of(&close, 3);
        let bars = around.with(&close);
        let exec = Execution::default();
        let run = |values: &[f64], cache: &dyn ArrayCache| -> Vec<String> {
            let control = SweepControl {
                cache,
                ..SweepControl::default()
            };
            sweep_program(&bars, &bollinger, values, values.len() / 2, &exec, &control)
                .unwrap()
                .iter()
                .map(|r| format!("{r:?}"))
                .collect()
        };
        let cache = Keeping::default();
        let first = grid(&[10.0, 20.0, 30.0], &[1.0, 2.0]);
        // Offered: sma and std per n, rsi once (never a combo's own arithmetic), besides the
        // closes' moves; the estimate a server sizes its offer by is that count.
        assert_eq!(run(&first, &cache), run(&first, &NoCache), "{name}");
        assert_eq!(given(&cache), 3 * 2 + 1, "{name}");
        let combos = Combos::of_program(std::sync::Arc::new(bollinger.clone()), first.clone(), 6);
        assert_eq!(
            combos.line_bytes(close.len()),
            (3 * 2 + 1) * close.len() * 8
        );
        assert!(
            cache
                .arrays
                .lock()
                .unwrap()
                .keys()
                .all(|k| matches!(k, ArrayKey::Node(_) | ArrayKey::Moves))
        );
        // `sma(close, n)` is kept under the key a tuned pass's SMA line of the closes has.
        for n in [10, 20, 30] {
            assert!(
                cache
                    .arrays
                    .lock()
                    .unwrap()
                    .contains_key(&line_array_key(Line::Sma(n)))
            );
        }
        // Other k values over the same n: every series read back, none computed again, the
        // results those of a sweep without a cache, bit for bit.
        let again = grid(&[10.0, 30.0], &[1.5, 2.5, 3.0]);
        assert_eq!(run(&again, &cache), run(&again, &NoCache), "{name}");
        assert_eq!(given(&cache), 3 * 2 + 1, "{name}");
        assert!(cache.asked.load(std::sync::atomic::Ordering::Relaxed) >= 2 * (3 * 2 + 1));
        // A new n adds its own two only.
        let more = grid(&[40.0], &[2.0]);
        assert_eq!(run(&more, &cache), run(&more, &NoCache), "{name}");
        assert_eq!(given(&cache), 3 * 2 + 1 + 2, "{name}");
        // A built-in sweep reads the formulas' SMA lines (and the formulas its): sma_cross
        // over those windows computes none, over 50 one, which a Bollinger of n = 50 reads.
        let builtin = |pairs: &[(u32, u32)], cache: &dyn ArrayCache| -> Vec<String> {
            let control = SweepControl {
                cache,
                ..SweepControl::default()
            };
            let params: Vec<Params> = pairs
                .iter()
                .map(|&(f, s)| Params::new(Strategy::SmaCross, &[f64::from(f), f64::from(s)]))
                .collect::<Result<_, _>>()
                .unwrap();
            sweep_params(&close, &params, &exec, &control)
                .unwrap()
                .iter()
                .map(|r| format!("{r:?}"))
                .collect()
        };
        let pairs = [(10, 20), (10, 40), (20, 30)];
        assert_eq!(builtin(&pairs, &cache), builtin(&pairs, &NoCache), "{name}");
        assert_eq!(given(&cache), 3 * 2 + 1 + 2, "{name}");
        let wide = [(10, 50)];
        assert_eq!(builtin(&wide, &cache), builtin(&wide, &NoCache), "{name}");
        assert_eq!(given(&cache), 3 * 2 + 1 + 2 + 1, "{name}");
        let fifty = grid(&[50.0], &[2.0]);
        assert_eq!(run(&fifty, &cache), run(&fifty, &NoCache), "{name}");
        assert_eq!(given(&cache), 3 * 2 + 1 + 2 + 1 + 1, "{name}");
    }
}

#[test]
fn constraint_and_lookback() {
    let p = Program::new(&[
        (
            Field::Long,
            "cross_above(sma(close, fast), sma(close, slow))",
        ),
        (Field::Constraint, "fast < slow"),
    ])
    .unwrap();
    assert!(sweepflight_kernel::plan::constraint_holds(&p, &[5.0, 20.0]));
    assert!(!sweepflight_kernel::plan::constraint_holds(
        &p,
        &[20.0, 20.0]
    ));
    assert_eq!(sweepflight_kernel::plan::lookback(&p, &[5.0, 20.0]), 20);
    let q = Program::new(&[(
        Field::Long,
        "rsi(sma(close, 10), 14) > lag(atr(5), 3) and hma(close, 16) > 1",
    )])
    .unwrap();
    // rsi: 9 + 14; lag(atr(5), 3): 5 + 3; hma(close, 16) = hma(close, 8, 16, 4): 15 + 3.
    assert_eq!(sweepflight_kernel::plan::lookback(&q, &[]), 23);
}

#[test]
fn random_formulas_are_mostly_valid_programs() {
    // The property tests above skip what the binder refuses: make sure that is rare, so they
    // test something.
    let mut r = Rng(12345);
    let close = &series_kinds(400, 1)[0].1;
    let around = bars_of(close, 2);
    let bars = around.with(close);
    let (mut valid, mut trading) = (0, 0);
    for _ in 0..400 {
        let long = random_formula(&mut r, 'c', 3);
        let short = random_formula(&mut r, 'c', 3);
        if let Ok(p) = Program::new(&[(Field::Long, &long), (Field::Short, &short)]) {
            valid += 1;
            let values: Vec<f64> = p.params.iter().map(|_| 5.0).collect();
            trading +=
                usize::from(!interp::run(&bars, &p, &values, &Execution::default()).is_empty());
        }
    }
    assert!(valid > 300, "{valid} of 400");
    assert!(trading > 150, "{trading} of {valid} trade");
}

/// Tokens of the language and a few that are not, for the token-soup fuzz below.
const SOUP: [&str; 30] = [
    "close",
    "high",
    "(",
    ")",
    ",",
    "+",
    "-",
    "*",
    "/",
    "<",
    "<=",
    "==",
    "!=",
    ">",
    "and",
    "or",
    "not",
    "sma",
    "rsi",
    "cross_above",
    "where",
    "hma",
    "lag",
    "n",
    "k",
    "14",
    "2.5",
    "1e-3",
    "0",
    "&",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// A bounded fuzz of parse + bind + plan on stable Rust (the libFuzzer target is
    /// `flight-server/fuzz`'s `formulas`): soups of the language's tokens, spaced or not, and
    /// arbitrary bytes never panic; whatever is accepted prints canonical text that parses
    /// back to itself, and binds for any window values.
    #[test]
    fn token_soups_and_bytes_never_panic(
        tokens in prop::collection::vec(prop::sample::select(SOUP.to_vec()), 0..40),
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let spaced = tokens.join(" ");
        let tight = tokens.concat();
        let raw = String::from_utf8_lossy(&bytes).into_owned();
        for text in [spaced, tight, raw] {
            let _ = parse::parse(&text);
            if let Ok(p) = Program::new(&[(Field::Long, text.as_str())]) {
                for (_, canonical) in p.canonical() {
                    let again = parse::parse(&canonical).unwrap();
                    prop_assert_eq!(canon::text(&again), canonical);
                }
                let mut plan = Plan::new();
                for v in [1.0, 3.0] {
                    plan.bind(&p, &vec![v; p.params.len()]);
                }
            }
        }
    }
}

/// Bars of closes only.
fn closes_only(close: &[f64]) -> Bars<'_> {
    Bars {
        open: None,
        high: None,
        low: None,
        close,
        volume: None,
        ..Bars::default()
    }
}

/// `program`'s sweep over `values` (its parameters' values, combo after combo) on `close`
/// through `cache`, every result as text (equal text: equal bits).
fn program_results(
    close: &[f64],
    program: &Program,
    values: &[f64],
    cache: &dyn ArrayCache,
) -> Vec<String> {
    let control = SweepControl {
        cache,
        ..SweepControl::default()
    };
    let combos = values.len() / program.params.len();
    sweep_program(
        &closes_only(close),
        program,
        values,
        combos,
        &Execution::default(),
        &control,
    )
    .unwrap()
    .iter()
    .map(|r| format!("{r:?}"))
    .collect()
}

/// The paper kernel's sweep of `combos` on `close` through `cache` (exact lines only if
/// `exact`), every result as text.
fn paper_results(
    close: &[f64],
    combos: &[Combo],
    exact: bool,
    cache: &dyn ArrayCache,
) -> Vec<String> {
    let control = SweepControl {
        cache,
        exact_lines: exact,
        ..SweepControl::default()
    };
    sweep_with(close, combos, 0.0009, &control)
        .unwrap()
        .iter()
        .map(|r| format!("{r:?}"))
        .collect()
}

#[test]
fn formulas_and_the_paper_kernel_share_their_wma_lines() {
    let program = Program::new(&[
        (Field::Long, "close > wma(close, n)"),
        (Field::Short, "close < wma(close, n)"),
    ])
    .unwrap();
    let windows = [10.0, 20.0, 40.0];
    let combos: Vec<Combo> = [20, 40]
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .collect();
    for (name, close) in series_kinds(1500, 13) {
        let bars = closes_only(&close);
        let exec = Execution::default();
        let formulas = |cache: &dyn ArrayCache| program_results(&close, &program, &windows, cache);
        let paper = |cache: &dyn ArrayCache| paper_results(&close, &combos, true, cache);
        // The formulas keep `wma(close, n)` under the paper kernel's key, bit for bit its line.
        let cache = Keeping::default();
        assert_eq!(formulas(&cache), formulas(&NoCache), "{name}");
        let kept: Vec<(u32, std::sync::Arc<[f64]>)> = [10, 20, 40]
            .iter()
            .map(|&n| {
                let line = cache.arrays.lock().unwrap()[&line_array_key(Line::Wma(n))].clone();
                assert!(
                    same(
                        &line,
                        &sweepflight_kernel::lines::wma::wma(&close, n as usize)
                    ),
                    "{name} wma {n}"
                );
                (n, line)
            })
            .collect();
        // The paper kernel reads them (its first-level WMAs of 20 and 40, and of their halves)
        // instead of computing its own, and answers as without a cache.
        assert_eq!(paper(&cache), paper(&NoCache), "{name}");
        for (n, line) in &kept {
            let now = cache.arrays.lock().unwrap()[&line_array_key(Line::Wma(*n))].clone();
            assert!(
                std::sync::Arc::ptr_eq(&now, line),
                "{name}: wma {n} computed again"
            );
        }
        // The other way round, the paper kernel keeps its combos' sign bytes, not its lines
        // (what a repeat of its sweep reads): the formula computes wma(close, 20) itself.
        let paper_first = Keeping::default();
        assert_eq!(paper(&paper_first), paper(&NoCache), "{name}");
        kept_signs_only(&paper_first, &combos, name);
        let before = paper_first.given.load(std::sync::atomic::Ordering::Relaxed);
        let twenty = [20.0];
        let control = SweepControl {
            cache: &paper_first,
            ..SweepControl::default()
        };
        sweep_program(&bars, &program, &twenty, 1, &exec, &control).unwrap();
        assert_eq!(
            paper_first.given.load(std::sync::atomic::Ordering::Relaxed),
            before + 1,
            "{name}: the formula's wma(close, 20)"
        );
    }
}

#[test]
fn formulas_and_the_paper_kernel_share_their_hma_and_hma3_lines() {
    // The paper grid's shape: lengths whose HMA and HMA3 windows the formulas name.
    let combos: Vec<Combo> = (6..200)
        .step_by(9)
        .map(|l| Combo::from_length(l).unwrap())
        .collect();
    let program = Program::new(&[
        (Field::Long, "hma(close, h, f, s) > hma3(close, a, b, c)"),
        (Field::Short, "hma(close, h, f, s) < hma3(close, a, b, c)"),
    ])
    .unwrap();
    let values: Vec<f64> = combos
        .iter()
        .flat_map(|c| [c.half(), c.full(), c.sqrt(), c.p3(), c.p2(), c.p()])
        .map(f64::from)
        .collect();
    let params: Vec<String> = program.params.iter().map(|p| p.name.clone()).collect();
    assert_eq!(params, ["h", "f", "s", "a", "b", "c"]);
    for (name, close) in series_kinds(30_000, 13) {
        let formulas = |cache: &dyn ArrayCache| program_results(&close, &program, &values, cache);
        let paper = |cache: &dyn ArrayCache| paper_results(&close, &combos, false, cache);
        // The paper kernel keeps its combos' sign bytes (what its repeat reads), not the
        // lines: the formulas compute theirs.
        let cache = Keeping::default();
        assert_eq!(paper(&cache), paper(&NoCache), "{name}");
        kept_signs_only(&cache, &combos, name);
        assert_eq!(formulas(&cache), formulas(&NoCache), "{name}");
        // And the other way round: the formulas keep their lines under the paper kernel's
        // keys, and the paper kernel then computes none of its HMA or HMA3 lines.
        let formulas_first = Keeping::default();
        assert_eq!(formulas(&formulas_first), formulas(&NoCache), "{name}");
        let lines: std::collections::HashMap<ArrayKey, Line> = combos
            .iter()
            .flat_map(paper_lines)
            .map(|l| (line_array_key(l), l))
            .collect();
        let held = |c: &Keeping| -> std::collections::HashMap<ArrayKey, std::sync::Arc<[f64]>> {
            c.arrays
                .lock()
                .unwrap()
                .iter()
                .filter(|(k, _)| lines.contains_key(k))
                .map(|(k, l)| (*k, std::sync::Arc::clone(l)))
                .collect()
        };
        let by_formulas = held(&formulas_first);
        assert_eq!(by_formulas.len(), 2 * combos.len(), "{name}");
        // The language's hma and hma3 are the paper's lines bit for bit.
        for (k, line) in &by_formulas {
            let want = match lines[k] {
                Line::Hma([h, f, s]) => {
                    sweepflight_kernel::oracle::hma(&close, h as usize, f as usize, s as usize)
                }
                Line::Hma3([a, b, c]) => {
                    sweepflight_kernel::oracle::hma3(&close, a as usize, b as usize, c as usize)
                }
                _ => unreachable!(),
            };
            assert!(same(line, &want), "{name} {k:?}");
        }
        assert_eq!(paper(&formulas_first), paper(&NoCache), "{name}");
        let after = held(&formulas_first);
        assert!(
            by_formulas
                .iter()
                .all(|(k, l)| std::sync::Arc::ptr_eq(l, &after[k])),
            "{name}: the paper kernel computed a line the formulas kept"
        );
    }
}

/// A strategy's own column (`inputs`, v1.4) is a series like a bar column: a sweep reading it
/// equals the same formulas reading a bar column that holds the same values, on every kind of
/// series (NaN-prefixed and gappy included), over a slice of the bars too; and its arrays are
/// keyed by the column's name, not its position in one call's `inputs`.
#[test]
fn an_input_column_is_read_like_a_bar_column_and_keyed_by_its_name() {
    use std::sync::Arc;
    for (name, x) in series_kinds(900, 17) {
        let walk = &series_kinds(900, 17)[0].1;
        let own = [
            Arc::<[f64]>::from(vec![0.5; walk.len()]),
            Arc::from(x.clone()),
        ];
        let with_input = Bars {
            inputs: &own,
            ..Bars::closes(walk)
        };
        let as_volume = Bars {
            volume: Some(&x),
            ..Bars::closes(walk)
        };
        let fields = |col: &str| {
            [
                (
                    Field::Long,
                    format!("cross_above(sma({col}, n), sma({col}, 20)) and close > k"),
                ),
                (Field::Short, format!("{col} < ema({col}, n) - k")),
                (Field::ExitLong, format!("{col} > max({col}, 5)")),
            ]
        };
        let program = |col: &str, inputs: &[String]| {
            let owned = fields(col);
            let texts: Vec<(Field, &str)> = owned.iter().map(|(f, t)| (*f, t.as_str())).collect();
            Program::with_inputs(&[], &texts, inputs).unwrap()
        };
        let mine = program("pred", &["spare".into(), "pred".into()]);
        let theirs = program("volume", &[]);
        assert_eq!(mine.params, theirs.params, "{name}");
        assert_eq!(mine.inputs_read(), ["pred"]);
        assert!(mine.columns().iter().all(|c| c.bar_index().is_some()));
        let values: Vec<f64> = [3.0, 5.0, 8.0]
            .iter()
            .flat_map(|&n| [0.0, 0.5].map(|k| [n, k]))
            .flatten()
            .collect();
        let exec = Execution::default();
        let run = |bars: &Bars<'_>, p: &Program| {
            sweep_program(
                bars,
                p,
                &values,
                values.len() / 2,
                &exec,
                &SweepControl::default(),
            )
            .unwrap()
        };
        let text = |r: Vec<sweepflight_kernel::ComboResult>| {
            r.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>()
        };
        let got = run(&with_input, &mine);
        // Not vacuous: the input's values decide trades.
        assert!(got.iter().map(|r| r.trades).sum::<u64>() > 0, "{name}");
        assert_eq!(text(got), text(run(&as_volume, &theirs)), "{name}");
        let run = |bars: &Bars<'_>, p: &Program| text(run(bars, p));
        // A slice of the bars reads the same rows of the input.
        let (a, b) = (with_input.slice(100, 700), as_volume.slice(100, 700));
        assert_eq!(run(&a, &mine), run(&b, &theirs), "{name} sliced");
    }
    // Fingerprints name the column: `sma(pred, 5)` is one array whether `pred` is listed
    // first or second, and another than `sma(vwap, 5)`.
    let fingerprints = |inputs: &[&str], col: &str| {
        let inputs: Vec<String> = inputs.iter().map(|s| (*s).to_owned()).collect();
        let text = format!("sma({col}, 5) > 1");
        let p = Program::with_inputs(&[], &[(Field::Long, text.as_str())], &inputs).unwrap();
        let mut plan = Plan::new();
        plan.bind(&p, &[]);
        plan.array_fingerprints()
    };
    assert_eq!(
        fingerprints(&["pred", "vwap"], "pred"),
        fingerprints(&["vwap", "pred"], "pred")
    );
    assert_ne!(
        fingerprints(&["pred", "vwap"], "pred"),
        fingerprints(&["pred", "vwap"], "vwap")
    );
    // Canonical text keeps the name.
    let p =
        Program::with_inputs(&[], &[(Field::Long, "pred>sma(pred,3)")], &["pred".into()]).unwrap();
    assert_eq!(p.canonical()[0].1, "pred > sma(pred, 3)");
}

/// Every combo of `program` trades as the interpreter (trade for trade, and its result counts
/// them) under every execution option, swept on the pool and in a tight working set, and some
/// combo trades (a case that never trades would prove nothing).
fn trades_as_the_interpreter(
    bars: &Bars<'_>,
    (case, kind): (&str, &str),
    program: &Program,
    combos: &[Vec<f64>],
) {
    for exec in executions(300) {
        for tight in [false, true] {
            let mut traded = 0;
            for (values, (got, plain, trades)) in combos.iter().zip(common::swept_and_interpreted(
                bars, program, combos, &exec, tight,
            )) {
                assert_eq!(got, plain, "{case} {values:?} on {kind} under {exec:?}");
                assert_eq!(trades, plain.len());
                traded += trades;
            }
            assert!(traded > 0, "{case} on {kind} never trades");
        }
    }
}

/// A crossing of an `hma` and an `hma3` line of the closes, anywhere in a formula and in
/// either order, is read from the paper kernel's state bytes (the shape its tiles serve, not
/// the name of a built-in): trades equal the interpreter's on every kind of series
/// (NaN-prefixed and gappy included), under the options, serial and parallel, in a tight
/// working set; on the word path (crossings and shared conditions), on the generic path (a
/// condition of the combo's own beside them) and where several combos share the crossing
/// (computed once for the group); and neither line is computed for it: a keeping cache is
/// offered the combos' state bytes and no HMA or HMA3 line.
#[test]
fn crossings_of_hma_and_hma3_lines_read_the_paper_kernels_state_bytes() {
    let hma = "hma(close, h, f, s)";
    let hma3 = "hma3(close, a, b, c)";
    let word_path = Program::new(&[
        (
            Field::Long,
            &format!("cross_below({hma}, {hma3}) and close > 0"),
        ),
        (Field::Short, &format!("cross_below({hma3}, {hma})")),
        (
            Field::ExitLong,
            &format!("cross_below({hma3}, {hma}) or close < lag(close, 5)"),
        ),
    ])
    .unwrap();
    let generic = Program::new(&[
        (
            Field::Long,
            &format!("cross_below({hma}, {hma3}) and close > sma(close, h)"),
        ),
        (
            Field::Short,
            &format!("cross_above({hma3}, {hma}) and not close > sma(close, h)"),
        ),
    ])
    .unwrap();
    // `k` changes no line: the combos of one windows share the crossing.
    let shared = Program::new(&[
        (
            Field::Long,
            &format!("cross_above({hma}, {hma3}) and close > k"),
        ),
        (Field::Short, &format!("cross_below({hma}, {hma3})")),
    ])
    .unwrap();
    let windows: Vec<Vec<f64>> = [5u32, 9, 16, 31, 60, 4000]
        .iter()
        .map(|&l| Combo::from_length(l).unwrap())
        .map(|c| {
            [c.half(), c.full(), c.sqrt(), c.p3(), c.p2(), c.p()]
                .map(f64::from)
                .to_vec()
        })
        .chain([vec![3.0, 7.0, 2.0, 1.0, 2.0, 3.0]])
        .collect();
    let with_k: Vec<Vec<f64>> = windows
        .iter()
        .flat_map(|w| [0.0, 99.0].map(|k| [w.as_slice(), &[k]].concat()))
        .collect();
    let cases = [
        ("word path", &word_path, &windows),
        ("generic path", &generic, &windows),
        ("shared crossing", &shared, &with_k),
    ];
    for (kind, close) in series_kinds(2600, 31) {
        let around = bars_of(&close, 7);
        let bars = around.with(&close);
        for (case, program, combos) in cases {
            trades_as_the_interpreter(&bars, (case, kind), program, combos);
        }
        // The lines are never computed for the crossings: the cache is offered each
        // combo's state bytes and no HMA or HMA3 line.
        let cache = Keeping::default();
        let flat = windows.concat();
        let control = SweepControl {
            cache: &cache,
            ..SweepControl::default()
        };
        sweep_program(
            &bars,
            &word_path,
            &flat,
            windows.len(),
            &Execution::default(),
            &control,
        )
        .unwrap();
        let combos: Vec<Combo> = windows
            .iter()
            .map(|w| Combo::new(std::array::from_fn(|i| w[i] as u32)).unwrap())
            .collect();
        let bytes = cache.bytes.lock().unwrap();
        for c in &combos {
            let key = signs_of(c);
            assert!(bytes.contains_key(&key), "{kind}: {key:?}");
        }
        let paper: Vec<ArrayKey> = combos
            .iter()
            .flat_map(paper_lines)
            .map(line_array_key)
            .collect();
        let lines = cache.arrays.lock().unwrap();
        assert!(
            !lines.keys().any(|k| paper.contains(k)),
            "{kind}: {:?}",
            lines.keys()
        );
    }
}

/// A channel breakout, `x > lag(highest(x, n), 1)` or `x < lag(lowest(x, n), 1)` (either
/// side of the comparison), of a column without NaN is a shared condition made by the
/// channels' pass (the `donchian` built-in's), neither line computed: trades equal the
/// interpreter's on every kind of series and column, under the options, in a tight working
/// set; where the column has NaN, where the lag is not 1 or the comparison not strict, the
/// lines are computed as any other and the trades are the same.
#[test]
fn channel_breakouts_are_the_channels_pass_and_compute_no_line() {
    let programs = [
        (
            "close > lag(highest(close, n), 1)",
            "close < lag(lowest(close, n), 1)",
        ),
        (
            "lag(highest(high, n), 1) < high",
            "lag(lowest(low, n), 1) > low",
        ),
        (
            "close >= lag(highest(close, n), 1)",
            "close < lag(lowest(close, n), 2)",
        ),
        (
            "close > lag(highest(close, n), 1) and rsi(close, 14) < 70",
            "close < lag(lowest(close, n), 1) and not close > lag(highest(close, 20), 1)",
        ),
    ]
    .map(|(long, short)| Program::new(&[(Field::Long, long), (Field::Short, short)]).unwrap());
    let combos: Vec<Vec<f64>> = [1.0, 2.0, 5.0, 20.0, 60.0, 4000.0]
        .iter()
        .map(|&n| vec![n])
        .collect();
    for (kind, close) in series_kinds(2600, 41) {
        let around = bars_of(&close, 3);
        let bars = around.with(&close);
        for program in &programs {
            for exec in executions(300) {
                for tight in [false, true] {
                    for (values, (got, plain, trades)) in combos.iter().zip(
                        common::swept_and_interpreted(&bars, program, &combos, &exec, tight),
                    ) {
                        assert_eq!(got, plain, "{values:?} on {kind} under {exec:?}");
                        assert_eq!(trades, plain.len());
                    }
                }
            }
        }
        // The first program computes no line where the closes have no NaN.
        let cache = Keeping::default();
        let control = SweepControl {
            cache: &cache,
            ..SweepControl::default()
        };
        let flat = combos.concat();
        let results = sweep_program(
            &bars,
            &programs[0],
            &flat,
            combos.len(),
            &Execution::default(),
            &control,
        )
        .unwrap();
        assert!(results.iter().any(|r| r.trades > 0), "{kind}");
        let lines = cache.arrays.lock().unwrap();
        let clean = !close.iter().any(|v| v.is_nan());
        assert_eq!(
            lines.keys().all(|k| *k == ArrayKey::Moves),
            clean,
            "{kind}: {:?}",
            lines.keys()
        );
    }
}

/// A combo whose `long` and `short` are the two ways of one crossing of the paper kernel's
/// lines (HMA3 over HMA, written either way round), the two sides of one channel breakout, or
/// the two ways of a crossing of SMA lines long enough to certify runs whole on that tuned
/// path (`eval/direct.rs`), and trades as the interpreter on every kind of series, under the
/// options, in a tight working set; mixed in one call with combos of other shapes. The SMA
/// pairs are shown to take certified lines (their comparisons are counted), which the
/// formula path never does.
#[test]
fn whole_signals_of_a_tuned_shape_trade_as_the_interpreter() {
    let hma = "hma(close, h, f, s)";
    let hma3 = "hma3(close, a, b, c)";
    let paper = Program::new(&[
        (Field::Long, &format!("cross_above({hma3}, {hma})")),
        (Field::Short, &format!("cross_above({hma}, {hma3})")),
    ])
    .unwrap();
    let hulls: Vec<Vec<f64>> = [5u32, 16, 60, 4000]
        .iter()
        .map(|&l| {
            Combo::from_length(l)
                .unwrap()
                .windows()
                .map(f64::from)
                .to_vec()
        })
        .collect();
    let channel = Program::new(&[
        (Field::Long, "lag(highest(high, n), 1) < high"),
        (Field::Short, "high < lag(lowest(high, n), 1)"),
    ])
    .unwrap();
    let windows: Vec<Vec<f64>> = [1.0, 5.0, 60.0, 4000.0].map(|n| vec![n]).to_vec();
    let smas = Program::new(&[
        (
            Field::Long,
            "cross_below(sma(close, slow), sma(close, fast))",
        ),
        (
            Field::Short,
            "cross_above(sma(close, slow), sma(close, fast))",
        ),
    ])
    .unwrap();
    // Long pairs (certified), a short one, and one past the series.
    let pairs: Vec<Vec<f64>> = [(20.0, 300.0), (300.0, 20.0), (257.0, 1000.0), (5.0, 9.0)]
        .iter()
        .chain(&[(10.0, 4000.0)])
        .map(|&(f, s)| vec![f, s])
        .collect();
    let cases = [
        ("paper", &paper, &hulls),
        ("channel", &channel, &windows),
        ("smas", &smas, &pairs),
    ];
    for (kind, close) in series_kinds(2600, 43) {
        let around = bars_of(&close, 5);
        let bars = around.with(&close);
        for (case, program, combos) in cases {
            trades_as_the_interpreter(&bars, (case, kind), program, combos);
        }
        // The long SMA pairs compare certified lines where the closes allow them.
        let counts = sweepflight_kernel::CertifiedBars::default();
        let control = SweepControl {
            certified: Some(&counts),
            ..SweepControl::default()
        };
        let flat = pairs.concat();
        let exec = Execution::default();
        sweep_program(&bars, &smas, &flat, pairs.len(), &exec, &control).unwrap();
        let certifiable = close.iter().all(|v| v.is_finite());
        assert_eq!(counts.compared() > 0, certifiable, "{kind}");
    }
}

/// A crossing of two `sma` lines of the closes, one of them long enough for a certified line,
/// anywhere in a formula and in either order, reads the pair's state bytes made from the
/// certified lines and settled exactly where their bounds leave them open: trades equal the
/// interpreter's on the word path and the generic one, on every kind of series (the closes
/// with NaN or past the certified range take the exact lines), under the options, in a tight
/// working set; the comparisons are counted where the closes allow certified lines.
#[test]
fn crossings_of_long_sma_lines_read_certified_state_bytes() {
    let (fast, slow) = ("sma(close, fast)", "sma(close, slow)");
    let word_path = Program::new(&[
        (
            Field::Long,
            &format!("cross_above({fast}, {slow}) and close > 0"),
        ),
        (Field::Short, &format!("cross_above({slow}, {fast})")),
    ])
    .unwrap();
    let generic = Program::new(&[
        (
            Field::Long,
            &format!("cross_below({slow}, {fast}) and close > sma(close, 20)"),
        ),
        (
            Field::Short,
            &format!("cross_below({fast}, {slow}) and not close > sma(close, 20)"),
        ),
        (Field::ExitLong, &format!("cross_below({fast}, {slow})")),
    ])
    .unwrap();
    let pairs: Vec<Vec<f64>> = [
        (20.0, 300.0),
        (300.0, 20.0),
        (257.0, 1000.0),
        (5.0, 9.0),
        (10.0, 4000.0),
    ]
    .map(|(f, s)| vec![f, s])
    .to_vec();
    for (kind, close) in series_kinds(2600, 47) {
        let around = bars_of(&close, 9);
        let bars = around.with(&close);
        for (case, program) in [("word path", &word_path), ("generic path", &generic)] {
            trades_as_the_interpreter(&bars, (case, kind), program, &pairs);
            let counts = sweepflight_kernel::CertifiedBars::default();
            let control = SweepControl {
                certified: Some(&counts),
                ..SweepControl::default()
            };
            let flat = pairs.concat();
            sweep_program(
                &bars,
                program,
                &flat,
                pairs.len(),
                &Execution::default(),
                &control,
            )
            .unwrap();
            let certifiable = close.iter().all(|v| v.is_finite());
            assert_eq!(counts.compared() > 0, certifiable, "{case} on {kind}");
        }
    }
}

/// The paper kernel's state bytes serve a formula's crossings whichever way its sweep runs,
/// tiled (small tiles forced) or untiled, and from a cache a built-in sweep filled (its bytes
/// read, not recomputed): the built-in's formula form, swept on the formula path, equals the
/// built-in every time.
#[test]
fn served_crossings_equal_the_builtin_tiled_untiled_and_from_its_cache() {
    let close = &series_kinds(20_000, 17)[0].1;
    let bars = closes_only(close);
    // With a filter that holds everywhere (the closes are positive), the crossing is served
    // inside the formula rather than the whole combo run on the paper kernel.
    assert!(close.iter().all(|&c| c > 0.0));
    let hma_sar = sweepflight_kernel::builtins::Builtin::named("hma_sar").unwrap();
    let program = Program::new(&[
        (Field::Long, &format!("{} and close > 0", hma_sar.long)),
        (Field::Short, &format!("{} and close > 0", hma_sar.short)),
    ])
    .unwrap();
    let combos: Vec<Combo> = (5..130)
        .step_by(13)
        .map(|l| Combo::from_length(l).unwrap())
        .collect();
    let grid: Vec<Vec<f64>> = combos
        .iter()
        .map(|c| c.windows().map(f64::from).to_vec())
        .collect();
    let params: Vec<Params> = grid
        .iter()
        .map(|v| Params::new(Strategy::HmaSar, v).unwrap())
        .collect();
    let flat = grid.concat();
    let exec = Execution::default();
    let want = sweep_params(close, &params, &exec, &SweepControl::default()).unwrap();
    assert!(want.iter().all(|r| r.trades > 0));
    for tile_bars in [None, Some(0), Some(256), Some(1000)] {
        let control = SweepControl {
            tile_bars,
            ..SweepControl::default()
        };
        let got = sweep_program(&bars, &program, &flat, grid.len(), &exec, &control).unwrap();
        assert_eq!(got, want, "tiles {tile_bars:?}");
    }
    // A built-in sweep keeps its combos' bytes; the formulas then read them.
    let cache = Keeping::default();
    let keeping = SweepControl {
        cache: &cache,
        ..SweepControl::default()
    };
    sweep_params(close, &params, &exec, &keeping).unwrap();
    let kept = cache.bytes.lock().unwrap().clone();
    assert_eq!(kept.len(), combos.len());
    let got = sweep_program(&bars, &program, &flat, grid.len(), &exec, &keeping).unwrap();
    assert_eq!(got, want);
    for (key, bytes) in cache.bytes.lock().unwrap().iter() {
        assert!(
            std::sync::Arc::ptr_eq(bytes, &kept[key]),
            "{key:?} was computed again"
        );
    }
}

/// Every combo of `program` (`combos`' values) swept under the default execution trades as the
/// interpreter, trade for trade, and counts them so (`what` names the case in a failure).
fn trade_as_interpreter(bars: &Bars<'_>, program: &Program, combos: &[Vec<f64>], what: &str) {
    let exec = Execution::default();
    for (values, (got, plain, trades)) in combos.iter().zip(common::swept_and_interpreted(
        bars, program, combos, &exec, false,
    )) {
        assert_eq!(got, plain, "{what} {values:?}");
        assert_eq!(trades, plain.len());
    }
}

/// A comparison computes the arithmetic node only it reads in the same pass: every comparison
/// and arithmetic operator, the arithmetic on either side of the comparison, numbers and
/// series in every position, trade as the interpreter on every kind of series.
#[test]
fn comparisons_of_arithmetic_they_alone_read_trade_as_the_interpreter() {
    let combos: Vec<Vec<f64>> = [(3.0, 0.5), (8.0, 1.0), (20.0, 2.0), (1.0, 100.0)]
        .iter()
        .map(|&(a, k)| vec![a, k])
        .collect();
    for (kind, close) in series_kinds(1500, 23) {
        let around = bars_of(&close, 5);
        let bars = around.with(&close);
        for cmp in [">", "<", ">=", "<=", "==", "!="] {
            for arith in ["+", "-", "*", "/"] {
                let fields = [
                    (Field::Long, format!("close {cmp} sma(close, a) {arith} k")),
                    (
                        Field::Short,
                        format!("sma(close, a) {arith} std(close, a) {cmp} close"),
                    ),
                    (
                        Field::ExitLong,
                        format!("k {cmp} close {arith} lag(close, a)"),
                    ),
                    (
                        Field::ExitShort,
                        format!("k {arith} high {cmp} sma(low, a)"),
                    ),
                ];
                let texts: Vec<(Field, &str)> =
                    fields.iter().map(|(f, t)| (*f, t.as_str())).collect();
                let program = Program::new(&texts).unwrap();
                trade_as_interpreter(&bars, &program, &combos, &format!("{texts:?} on {kind}"));
            }
        }
    }
}

/// A product of a parameter and a shared array read by two bands (`sma(close, a) - k * std(close,
/// a)` and `... + k * std(close, a)`, the Bollinger shape) is multiplied inside each band's
/// comparison: every comparison and arithmetic operator, the product on either side of each
/// band (taken inline where the operator allows, computed once otherwise), and the same read
/// by a stop formula as well (computed once), trade as the interpreter on every kind of series.
#[test]
fn a_scaled_array_two_bands_read_trades_as_the_interpreter() {
    let combos: Vec<Vec<f64>> = [(3.0, 0.5), (8.0, 1.0), (20.0, 2.0), (1.0, -100.0)]
        .iter()
        .map(|&(a, k)| vec![a, k])
        .collect();
    for (kind, close) in series_kinds(1500, 29) {
        let around = bars_of(&close, 5);
        let bars = around.with(&close);
        for cmp in [">", "<", ">=", "<=", "==", "!="] {
            for arith in ["+", "-", "*", "/"] {
                let fields = [
                    (
                        Field::Long,
                        format!("close {cmp} sma(close, a) {arith} k * std(close, a)"),
                    ),
                    (
                        Field::Short,
                        format!("std(close, a) * k {arith} sma(close, a) {cmp} close"),
                    ),
                    (
                        Field::ExitLong,
                        format!("high {cmp} lag(close, a) {arith} k * std(close, a)"),
                    ),
                    // Two products in one band: the same node on both sides.
                    (
                        Field::ExitShort,
                        format!("close {cmp} k * std(close, a) {arith} k * std(close, a)"),
                    ),
                ];
                let texts: Vec<(Field, &str)> =
                    fields.iter().map(|(f, t)| (*f, t.as_str())).collect();
                let program = Program::new(&texts).unwrap();
                // Two different products in one band (`a` first: the combos' order).
                let both = format!("low {cmp} std(close, a) * k {arith} k * sma(low, a)");
                let two = Program::new(&[(Field::Long, both.as_str()), texts[1]]).unwrap();
                trade_as_interpreter(&bars, &two, &combos, &format!("{both} on {kind}"));
                // Read by a stop formula too: computed once, never multiplied inline.
                let stopped: Vec<(Field, &str)> = texts
                    .iter()
                    .copied()
                    .chain([(Field::StopLoss, "abs(k * std(close, a)) + 0.5")])
                    .collect();
                let stopped = Program::new(&stopped).unwrap();
                trade_as_interpreter(&bars, &stopped, &combos, &format!("{stopped:?} on {kind}"));
                trade_as_interpreter(&bars, &program, &combos, &format!("{texts:?} on {kind}"));
            }
        }
    }
}

/// A combo listed twice in one call is run once and its copy takes its results: every combo
/// equals itself swept alone, the progress reported adds up to every combo's bars, and where
/// each combo's trades are kept every copy books its own, the interpreter's.
#[test]
fn a_combo_listed_twice_is_run_once_and_each_copy_has_its_results() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let program = bollinger();
    let close = &series_kinds(3000, 3)[0].1;
    let bars = closes_only(close);
    let grid = vec![
        vec![10.0, 1.0],
        vec![20.0, 2.0],
        vec![10.0, 1.0],
        vec![20.0, 2.0],
        vec![20.0, 2.5],
        vec![10.0, 1.0],
    ];
    let exec = Execution::default();
    let done = AtomicU64::new(0);
    let report = |n: u64| {
        done.fetch_add(n, Ordering::Relaxed);
    };
    let control = SweepControl {
        progress: Some(&report),
        ..SweepControl::default()
    };
    let got = sweep_program(&bars, &program, &grid.concat(), grid.len(), &exec, &control).unwrap();
    assert!(got.iter().any(|r| r.trades > 0));
    for (g, values) in got.iter().zip(&grid) {
        let alone =
            sweep_program(&bars, &program, values, 1, &exec, &SweepControl::default()).unwrap();
        assert_eq!(g, &alone[0], "{values:?}");
    }
    assert_eq!(
        done.load(Ordering::Relaxed),
        grid.len() as u64 * close.len() as u64
    );
    for (values, (got, plain, trades)) in grid.iter().zip(common::swept_and_interpreted(
        &bars, &program, &grid, &exec, false,
    )) {
        assert!(!plain.is_empty(), "{values:?}");
        assert_eq!(got, plain, "{values:?}");
        assert_eq!(trades, plain.len());
    }
}

/// Every function the registry marks `fresh` computes over a row range exactly what its whole
/// series holds at those rows, its lookback undefined: what lets a walk-forward's folds cut
/// their arrays from one computation of the whole series (`ArrayKey::of_range`). On every kind
/// of series (NaN-prefixed and gappy included), at ranges from the first row, inside, one row
/// long and shorter than the lookback.
#[test]
fn a_fresh_function_over_a_range_is_its_whole_series_cut() {
    let fresh: Vec<_> = FUNCTIONS.iter().filter(|f| f.fresh).collect();
    assert!(fresh.len() >= 10, "{}", fresh.len());
    for f in fresh {
        let Compute::Series(compute) = f.compute else {
            panic!("{}: a fresh function is a series", f.name)
        };
        for (kind, x) in series_kinds(600, 31) {
            let y: Vec<f64> = x.iter().rev().map(|v| v * 0.5 + 1.0).collect();
            let around = bars_of(&x, 5);
            let bars = around.with(&x);
            let n = x.len();
            for windows in [[1u32, 1, 1], [3, 7, 2], [16, 9, 5], [40, 60, 8]] {
                // The arguments over rows `from..to`, and their lookbacks.
                let args = |from: usize, to: usize| -> (Vec<Input<'_>>, Vec<usize>) {
                    let (mut series, mut ws) = ([&x, &y].into_iter(), windows.iter());
                    f.args
                        .iter()
                        .map(|a| match a {
                            Arg::Series => (Input::Series(&series.next().unwrap()[from..to]), 0),
                            Arg::Window => {
                                let w = *ws.next().unwrap();
                                (Input::Window(w as usize), w as usize)
                            }
                            Arg::Cond => panic!("{}: no condition argument", f.name),
                        })
                        .unzip()
                };
                let (all, lookbacks) = args(0, n);
                let lookback = (f.lookback)(&lookbacks);
                let mut whole = vec![0.0; n];
                compute(&bars, &all, &mut whole);
                let key = ArrayKey::Node(NodeKey::new(0, Some(lookback as u32)));
                for (from, to) in [(0, n), (1, n), (37, 480), (299, 300), (550, 600)]
                    .into_iter()
                    .chain([(100, (101 + lookback).min(n))])
                {
                    let mut got = vec![0.0; to - from];
                    compute(&bars.slice(from, to), &args(from, to).0, &mut got);
                    let cut = key.of_range(&whole, from, to).unwrap();
                    assert!(
                        same(&cut, &got),
                        "{} {kind} windows {windows:?} rows {from}..{to}",
                        f.name
                    );
                }
            }
        }
    }
}

/// A formula's arrays over a row range, cut from the whole series' by their node keys, are the
/// range's own bit for bit, and a sweep of the range reading them answers as one computing
/// them: the keys of fresh calls (of any column, nested) carry their warm-up, a recurrence's
/// (`ema`) none.
#[test]
fn a_formulas_arrays_over_a_range_cut_from_the_whole_series_are_its_own() {
    let program = Program::new(&[
        (
            Field::Long,
            "close > sma(high, n) + k * std(close, n) and hma(close, n) > lowest(low, n)",
        ),
        (
            Field::Short,
            "close < sma(sma(low, 3), n) - k and ema(close, 5) < highest(high, n)",
        ),
    ])
    .unwrap();
    let values: Vec<f64> = [10.0, 20.0]
        .iter()
        .flat_map(|&n| [1.0, 2.0].map(|k| [n, k]))
        .flatten()
        .collect();
    for (kind, close) in series_kinds(1200, 41) {
        let around = bars_of(&close, 7);
        let bars = around.with(&close);
        let exec = Execution::default();
        let run = |bars: &Bars<'_>, cache: &dyn ArrayCache| {
            let control = SweepControl {
                cache,
                ..SweepControl::default()
            };
            sweep_program(bars, &program, &values, 4, &exec, &control).unwrap()
        };
        let (whole, fresh) = (Keeping::default(), Keeping::default());
        run(&bars, &whole);
        let (from, to) = (333, 1100);
        let range = bars.slice(from, to);
        let want = run(&range, &fresh);
        let whole = whole.arrays.into_inner().unwrap();
        let derived = Keeping::default();
        let (mut cut, mut uncut) = (0, 0);
        for (key, line) in fresh.arrays.into_inner().unwrap() {
            let base = &whole[&key];
            match key.of_range(base, from, to) {
                Some(c) => {
                    assert!(same(&c, &line), "{kind} {key:?}");
                    derived.arrays.lock().unwrap().insert(key, c);
                    cut += 1;
                }
                None => uncut += 1,
            }
        }
        // sma(high, n), std(close, n), hma(close, n), lowest(low, n), highest(high, n) and
        // sma(sma(low, 3), n) per n, and sma(low, 3): cut; ema(close, 5) and the moves: not.
        assert_eq!((cut, uncut), (13, 2), "{kind}");
        assert_eq!(run(&range, &derived), want, "{kind}");
    }
}
