//! Calendar periods and period bars (protocol v1.4, expressions.md "Higher timeframes"), on
//! hand-computed cases: ISO week 53 across a year end, month and year ends, a series starting
//! mid-week, intraday bars across UTC midnight; each column's rule; `daily(x)` on daily bars
//! is `lag(x, 1)`; and cutting the bars after any bar changes no value seen at or before it.

use std::sync::Arc;

use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::timeframe::{PeriodBars, Timeframe, days_from_civil, seen_from_next};

fn day(y: i64, m: u32, d: u32) -> i64 {
    days_from_civil(y, m, d)
}

#[test]
fn iso_week_53_spans_the_year_end_and_months_split_at_theirs() {
    // 2020-12-28 (a Monday) to 2021-01-10: ISO week 53 of 2020 holds 2020-12-28..2021-01-03.
    let days: Vec<i64> = (0..14).map(|k| day(2020, 12, 28) + k).collect();
    let close: Vec<f64> = (0..14).map(f64::from).collect();
    let weekly = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Weekly);
    assert_eq!(weekly.of_bar, [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(weekly.close, [6.0, 13.0]);
    assert_eq!(Timeframe::Weekly.key(day(2021, 1, 3)), 202_053);
    assert_eq!(Timeframe::Weekly.key(day(2021, 1, 4)), 202_101);
    let monthly = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Monthly);
    // December 2020 (4 days), January 2021 (10 days).
    assert_eq!(monthly.of_bar.iter().filter(|&&p| p == 0).count(), 4);
    assert_eq!(monthly.close, [3.0, 13.0]);
    // Seen from the next period only: NaN through the first, then the one before.
    let seen = seen_from_next(&monthly.close, &monthly.of_bar);
    assert!(seen[..4].iter().all(|v| v.is_nan()));
    assert!(seen[4..].iter().all(|&v| v == 3.0));
}

#[test]
fn each_column_gathers_by_its_rule_and_a_series_may_start_mid_week() {
    // Wednesday 2024-01-03 to Tuesday 2024-01-09, trading days only (no weekend bars).
    let days = [
        day(2024, 1, 3),
        day(2024, 1, 4),
        day(2024, 1, 5),
        day(2024, 1, 8),
        day(2024, 1, 9),
    ];
    let open = [10.0, 11.0, 12.0, 13.0, 14.0];
    let high = [12.0, 15.0, 13.0, 14.0, 16.0];
    let low = [9.0, 10.0, 8.0, 12.0, 13.0];
    let close = [11.0, 12.0, 12.5, 13.5, 15.0];
    let volume = [100.0, 200.0, 300.0, 400.0, 500.0];
    let pred: Arc<[f64]> = vec![0.1, 0.2, f64::NAN, 0.4, 0.5].into();
    let inputs = [pred];
    let bars = Bars {
        open: Some(&open),
        high: Some(&high),
        low: Some(&low),
        close: &close,
        volume: Some(&volume),
        inputs: &inputs,
        inputs_from: 0,
        days: None,
    };
    let w = PeriodBars::of(&bars, &days, Timeframe::Weekly);
    assert_eq!(w.of_bar, [0, 0, 0, 1, 1]);
    assert_eq!(w.open.as_deref(), Some(&[10.0, 13.0][..]));
    assert_eq!(w.high.as_deref(), Some(&[15.0, 16.0][..]));
    assert_eq!(w.low.as_deref(), Some(&[8.0, 12.0][..]));
    assert_eq!(w.close, [12.5, 15.0]);
    assert_eq!(w.volume.as_deref(), Some(&[600.0, 900.0][..]));
    // An input is its period's last value, a NaN included.
    assert!(w.inputs[0][0].is_nan());
    assert_eq!(w.inputs[0][1], 0.5);
    // The partial first week is a period of its own: seen from the next one.
    let seen = seen_from_next(&w.close, &w.of_bar);
    assert!(seen[0].is_nan() && seen[2].is_nan());
    assert_eq!(&seen[3..], [12.5, 12.5]);
    // A column the bars lack stays lacking.
    let only = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Weekly);
    assert!(only.open.is_none() && only.volume.is_none() && only.inputs.is_empty());
}

#[test]
fn intraday_bars_split_at_utc_midnight() {
    // Hourly bars from 2024-03-01 21:00 UTC to 2024-03-02 02:00 UTC: their UTC dates.
    let hours: Vec<i64> = (21..27).collect();
    let days: Vec<i64> = hours
        .iter()
        .map(|h| (day(2024, 3, 1) * 24 + h).div_euclid(24))
        .collect();
    let close: Vec<f64> = hours.iter().map(|&h| h as f64).collect();
    let d = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Daily);
    assert_eq!(d.of_bar, [0, 0, 0, 1, 1, 1]);
    assert_eq!(d.close, [23.0, 26.0]);
}

#[test]
fn daily_on_daily_bars_is_the_bar_before() {
    let days: Vec<i64> = (0..50).map(|k| day(2023, 1, 1) + k * 2).collect();
    let close: Vec<f64> = (0..50).map(|k| (f64::from(k) * 0.7).sin()).collect();
    let d = PeriodBars::of(&Bars::closes(&close), &days, Timeframe::Daily);
    let seen = seen_from_next(&d.close, &d.of_bar);
    assert!(seen[0].is_nan());
    assert_eq!(&seen[1..], &close[..49]);
}

#[test]
fn cutting_the_bars_after_any_bar_changes_no_value_seen_at_or_before_it() {
    // Irregular days (gaps, weekends, a month end), a value per period that reads its
    // period's whole run (the close) and one that reads period bars before it (a mean of
    // three closes).
    let mut days = Vec::new();
    let mut d = day(2023, 11, 20);
    let mut state = 7u64;
    for _ in 0..120 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        d += 1 + (state >> 62) as i64;
        days.push(d);
    }
    let close: Vec<f64> = (0..120)
        .map(|k| 100.0 + (f64::from(k) * 0.37).cos() * 5.0)
        .collect();
    let mean3 = |c: &[f64]| -> Vec<f64> {
        (0..c.len())
            .map(|i| {
                if i < 2 {
                    f64::NAN
                } else {
                    (c[i - 2] + c[i - 1] + c[i]) / 3.0
                }
            })
            .collect()
    };
    for tf in Timeframe::ALL {
        let full = PeriodBars::of(&Bars::closes(&close), &days, tf);
        let whole = [
            seen_from_next(&full.close, &full.of_bar),
            seen_from_next(&mean3(&full.close), &full.of_bar),
        ];
        for t in 0..close.len() {
            let cut = PeriodBars::of(&Bars::closes(&close[..=t]), &days[..=t], tf);
            let part = [
                seen_from_next(&cut.close, &cut.of_bar),
                seen_from_next(&mean3(&cut.close), &cut.of_bar),
            ];
            for (a, b) in whole.iter().zip(&part) {
                for i in 0..=t {
                    assert!(
                        a[i] == b[i] || (a[i].is_nan() && b[i].is_nan()),
                        "{} cut at {t}: bar {i} saw {} whole, {} cut",
                        tf.name(),
                        a[i],
                        b[i]
                    );
                }
            }
        }
    }
}

// ---- The functions `daily(x)`, `weekly(x)`, `monthly(x)` in formulas ----

use sweepflight_kernel::eval::{NodeArray, node_arrays, oracle as interp, sweep_program};
use sweepflight_kernel::expr::{Field, ParamKind, Program};
use sweepflight_kernel::oracle::same_bits;
use sweepflight_kernel::plan::{Plan, Root};
use sweepflight_kernel::{Execution, NoCache, Side, SweepControl};

mod common;
use common::Rng;

/// One random series: its bar columns, an input (`pred`, with NaNs) and each bar's UTC day.
struct Series {
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    close: Vec<f64>,
    volume: Vec<f64>,
    inputs: Vec<Arc<[f64]>>,
    days: Vec<i64>,
}

impl Series {
    /// `len` bars from a seed: daily bars on weekdays with random holidays (a month or a week
    /// may be short or missing), or, `intraday`, six-hour bars whose days cross UTC midnight;
    /// prices on a 0.25 grid some of the time (ties).
    fn random(len: usize, seed: u64, intraday: bool) -> Self {
        let mut r = Rng(seed | 1);
        let ticks = r.below(2) == 0;
        let mut days = Vec::with_capacity(len);
        let mut d = day(2019, 12, 20) + r.below(40) as i64;
        let mut hour = 0i64;
        while days.len() < len {
            if intraday {
                hour += 6 * (1 + r.below(2) as i64);
                days.push(d + hour.div_euclid(24));
            } else {
                d += 1;
                let weekday = (d + 3).rem_euclid(7);
                // Weekends skipped; a holiday, or now and then a gap of weeks.
                if weekday >= 5 || r.below(12) == 0 {
                    continue;
                }
                if r.below(150) == 0 {
                    d += 20;
                }
                days.push(d);
            }
        }
        let mut p = 100.0;
        let mut close = Vec::with_capacity(len);
        for _ in 0..len {
            p *= 1.0 + (r.unit() - 0.5) * 0.03;
            close.push(if ticks { (p * 4.0f64).round() / 4.0 } else { p });
        }
        let high: Vec<f64> = close
            .iter()
            .map(|c| c + (r.unit() * 4.0).floor() * 0.25)
            .collect();
        let low: Vec<f64> = close
            .iter()
            .map(|c| c - (r.unit() * 4.0).floor() * 0.25)
            .collect();
        let open: Vec<f64> = low
            .iter()
            .zip(&high)
            .map(|(l, h)| l + (h - l) * 0.5)
            .collect();
        let volume: Vec<f64> = close.iter().map(|_| (r.unit() * 1000.0).round()).collect();
        let pred: Arc<[f64]> = (0..len)
            .map(|i| {
                if i < 5 || r.below(9) == 0 {
                    f64::NAN
                } else {
                    r.unit() - 0.5
                }
            })
            .collect();
        Self {
            open,
            high,
            low,
            close,
            volume,
            inputs: vec![pred],
            days,
        }
    }

    fn bars(&self) -> Bars<'_> {
        self.cut(self.close.len())
    }

    /// Its first `n` bars.
    fn cut(&self, n: usize) -> Bars<'_> {
        Bars {
            open: Some(&self.open[..n]),
            high: Some(&self.high[..n]),
            low: Some(&self.low[..n]),
            close: &self.close[..n],
            volume: Some(&self.volume[..n]),
            inputs: &self.inputs,
            inputs_from: 0,
            days: Some(&self.days[..n]),
        }
    }
}

/// Every function of the table inside a higher timeframe (`X` an argument series, `a` a
/// window parameter); a condition function as `where`'s condition.
const INSIDE: [&str; 28] = [
    "lag(X, a)",
    "change(X, 2)",
    "roc(X, a)",
    "sum(X, 3)",
    "sma(X, a)",
    "wma(X, a)",
    "std(X, 4)",
    "highest(X, a)",
    "lowest(X, 3)",
    "ema(X, a)",
    "rma(X, 3)",
    "rsi(X, a)",
    "tr()",
    "atr(a)",
    "hma(X, a)",
    "hma(X, 2, a, 2)",
    "hma3(X, 2, 3, a)",
    "abs(X - open)",
    "sqrt(X)",
    "log(X)",
    "min(X, open)",
    "max(high, X)",
    "where(cross_above(X, sma(X, 3)), high, low)",
    "where(cross_below(X, lag(X, 1)), 1, 0)",
    "X",
    "volume",
    "pred * k",
    "k",
];

const ARGS: [&str; 5] = ["close", "high", "low", "volume / 1000", "pred"];

#[test]
fn period_bars_equal_their_oracle_on_random_daily_and_intraday_bars() {
    for seed in 0..24u64 {
        let s = Series::random(300 + 7 * seed as usize, seed, seed % 3 == 0);
        let bars = s.bars();
        for tf in Timeframe::ALL {
            let fast = PeriodBars::of(&bars, &s.days, tf);
            let plain = interp::period_bars(&bars, tf);
            assert_eq!(fast.of_bar, plain.of_bar, "seed {seed} {}", tf.name());
            for (a, b) in [
                (fast.open.as_deref(), plain.open.as_deref()),
                (fast.high.as_deref(), plain.high.as_deref()),
                (fast.low.as_deref(), plain.low.as_deref()),
                (Some(&fast.close[..]), Some(&plain.close[..])),
                (fast.volume.as_deref(), plain.volume.as_deref()),
                (Some(&fast.inputs[0][..]), Some(&plain.inputs[0][..])),
            ] {
                assert!(
                    same_bits(a.unwrap(), b.unwrap()),
                    "seed {seed} {}",
                    tf.name()
                );
            }
        }
    }
}

/// The values of portfolio rank formula `text` for parameter values `values` on `bars`, by the
/// fast path's phase 1 (what a sweep's shared arrays are) and by the oracle, with whether the
/// windows fit.
fn both_ways(text: &str, values: &[f64], bars: &Bars<'_>) -> (Vec<f64>, Vec<f64>, bool, bool) {
    let inputs = if text.contains("pred") {
        vec!["pred".to_owned()]
    } else {
        vec![]
    };
    let program = Program::portfolio(&[(Field::Rank, text)], &[], &inputs)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let mut plan = Plan::new();
    let ([rank, ..], windows, _) = plan.bind_portfolio(&program, values);
    let len = bars.len();
    let (fast, have) = match rank.expect("a rank") {
        Root::Node(n) => {
            let (arrays, have) = node_arrays(bars, &program, &plan, &[n], false, &NoCache).unwrap();
            let NodeArray::Numbers(a) = &arrays[0] else {
                panic!("a number")
            };
            (a.to_vec(), have)
        }
        Root::Const(c) => (vec![c; len], windows),
        Root::Bool(_) => panic!("a number"),
    };
    let (v, fits) = interp::evaluate(bars, program.formula(Field::Rank).unwrap(), values);
    let plain = match v {
        interp::Value::Const(c) => vec![c; len],
        interp::Value::Series(s) => s,
        _ => panic!("a number"),
    };
    (fast, plain, windows.fit(&have), fits)
}

#[test]
fn every_function_inside_each_timeframe_equals_its_oracle_and_never_reads_ahead() {
    let s = Series::random(150, 5, false);
    let intraday = Series::random(150, 8, true);
    for (which, s) in [("daily bars", &s), ("six-hour bars", &intraday)] {
        for tf in Timeframe::ALL {
            for (k, inside) in INSIDE.iter().enumerate() {
                let x = ARGS[k % ARGS.len()];
                let text = format!("{}({}) + 0 * close", tf.name(), inside.replace('X', x));
                for a in [1.0, 3.0, 9.0] {
                    let values: Vec<f64> = [a, 1.5].to_vec();
                    let program =
                        Program::portfolio(&[(Field::Rank, &text)], &[], &["pred".to_owned()])
                            .unwrap();
                    let values: Vec<f64> = program
                        .params
                        .iter()
                        .map(|p| {
                            if p.kind == ParamKind::Int {
                                values[0]
                            } else {
                                values[1]
                            }
                        })
                        .collect();
                    let (fast, plain, fits_fast, fits_plain) = both_ways(&text, &values, &s.bars());
                    let what = format!("{text} a={a} on {which}");
                    assert!(same_bits(&fast, &plain), "{what}");
                    assert_eq!(fits_fast, fits_plain, "{what}");
                    // Cut after bar t: no value at or before t changes (every fifth cut).
                    for t in (0..s.close.len()).step_by(5) {
                        let (cut, cut_plain, ..) = both_ways(&text, &values, &s.cut(t + 1));
                        assert!(same_bits(&cut, &cut_plain), "{what} cut at {t}");
                        assert!(
                            same_bits(&cut, &fast[..=t]),
                            "{what}: cut at {t} changed a value"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn hand_computed_weekly_values_and_nodes_keyed_by_their_timeframe() {
    // Mon 2020-12-21 .. Fri 2021-01-15, weekdays: weeks 52 and 53 of 2020, week 1 and 2 of
    // 2021; closes 1, 2, 3, ...
    let days: Vec<i64> = (0..26)
        .map(|k| day(2020, 12, 21) + k)
        .filter(|d| (d + 3).rem_euclid(7) < 5)
        .collect();
    let close: Vec<f64> = (1..=days.len()).map(|k| k as f64).collect();
    let bars = Bars {
        days: Some(&days),
        ..Bars::closes(&close)
    };
    // Weekly closes 5, 10, 15, 20; their 2-week mean 7.5, 12.5, 17.5 from the second week.
    let (fast, plain, ..) = both_ways("weekly(sma(close, 2))", &[], &bars);
    assert!(same_bits(&fast, &plain));
    let want: Vec<f64> = (0..20)
        .map(|i| match i / 5 {
            0 | 1 => f64::NAN,
            2 => 7.5,
            _ => 12.5,
        })
        .collect();
    assert!(same_bits(&fast, &want), "{fast:?}");
    // `monthly(close)`: December's last close (9) from January's first bar.
    let (m, ..) = both_ways("monthly(close)", &[], &bars);
    assert!(m[..9].iter().all(|v| v.is_nan()) && m[9..].iter().all(|&v| v == 9.0));
    // The nodes: `sma(close, 2)` on the bars and in weekly are two, the call a third.
    let program = Program::new(&[(
        Field::Long,
        "sma(close, 2) > weekly(sma(close, 2)) and weekly(sma(close, 2)) > 0",
    )])
    .unwrap();
    let mut plan = Plan::new();
    plan.bind(&program, &[]);
    assert_eq!(plan.arrays(), 3);
    let prints = plan.array_fingerprints();
    assert_eq!(prints.len(), 3);
    assert!(prints[0] != prints[1] && prints[1] != prints[2] && prints[0] != prints[2]);
}

#[test]
fn higher_timeframe_calls_are_refused_where_the_language_says() {
    let refused = |text: &str, says: &str| {
        let e = Program::new(&[(Field::Long, text)])
            .expect_err(text)
            .to_string();
        assert!(e.contains(says), "{text}: {e}");
    };
    refused("close > weekly(daily(close))", "do not nest");
    refused("close > weekly(sma(monthly(close), 3))", "do not nest");
    refused("weekly(close > open)", "got a condition");
    refused("weekly(close)", "must be a condition");
    refused(
        "close > weekly(close, 2)",
        "weekly takes weekly(x), got 2 arguments",
    );
    refused("close > yearly(close)", "unknown function `yearly`");
    // A constraint reads parameters only.
    let e = Program::new(&[
        (Field::Long, "close > a"),
        (Field::Constraint, "weekly(a) > 1"),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("no columns, no functions"), "{e}");
    // Without days the kernel says what it needs.
    let program = Program::new(&[(Field::Long, "close > weekly(close)")]).unwrap();
    let close = [1.0, 2.0, 3.0];
    let e = sweep_program(
        &Bars::closes(&close),
        &program,
        &[],
        1,
        &Execution::default(),
        &SweepControl::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("weekly(x)") && e.contains("timestamp or date"),
        "{e}"
    );
}

#[test]
fn a_window_longer_than_the_period_bars_gives_no_signal_even_under_not() {
    let s = Series::random(200, 3, false);
    // About ten months of bars: `monthly(sma(close, 12))` is NaN everywhere, and `not (close <
    // ...)` would be true everywhere were it not for the rule.
    let program = Program::new(&[(Field::Long, "not (close < monthly(sma(close, n)))")]).unwrap();
    let exec = Execution::default();
    let months = PeriodBars::of(&s.bars(), &s.days, Timeframe::Monthly).len();
    for (n, trades) in [
        (months as f64 + 1.0, false),
        (months as f64, true),
        (2.0, true),
    ] {
        let results = sweep_program(
            &s.bars(),
            &program,
            &[n],
            1,
            &exec,
            &SweepControl::default(),
        )
        .unwrap();
        let plain = interp::run(&s.bars(), &program, &[n], &exec);
        assert_eq!(results[0].trades as usize, plain.len(), "n={n}");
        assert_eq!(!plain.is_empty(), trades, "n={n} of {months} months");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// Random strategies with higher-timeframe filters and crosses: the fast sweep books the
    /// plain interpreter's trades bit for bit, for every combo, side, fill and group size.
    #[test]
    fn random_timeframe_strategies_trade_as_the_interpreter(seed in proptest::prelude::any::<u64>()) {
        let mut r = Rng(seed | 1);
        let series = |r: &mut Rng| {
            let k = r.below(INSIDE.len());
            let tf = Timeframe::ALL[r.below(3)].name();
            format!("{tf}({})", INSIDE[k].replace('X', ARGS[r.below(ARGS.len())]))
        };
        let long = match r.below(3) {
            0 => format!("close > {}", series(&mut r)),
            1 => format!("cross_above(close, {}) or close > {}", series(&mut r), series(&mut r)),
            _ => format!("not ({} < {}) and rsi(close, a) < 70", series(&mut r), series(&mut r)),
        };
        let short = format!("cross_below(sma(close, 3), {})", series(&mut r));
        let exit = format!("close < {} * 0.99", series(&mut r));
        let texts = [(Field::Long, long.as_str()), (Field::Short, short.as_str()), (Field::ExitLong, exit.as_str())];
        let program = Program::with_inputs(&[], &texts, &["pred".to_owned()]).unwrap();
        let s = Series::random(500 + r.below(900), seed, r.below(3) == 0);
        let bars = s.bars();
        let combos: Vec<Vec<f64>> = (0..5).map(|_| program.params.iter().map(|p| match p.kind {
            ParamKind::Int => (1 + r.below(30)) as f64,
            ParamKind::Number => [0.5, 1.0, 2.0][r.below(3)],
        }).collect()).collect();
        let exec = Execution {
            side: [Side::Both, Side::Long, Side::Short][r.below(3)],
            fill: if r.below(2) == 0 { sweepflight_kernel::Fill::Close } else { sweepflight_kernel::Fill::NextOpen },
            start: r.below(40),
            ..Execution::new(0.0009)
        };
        let tight = r.below(2) == 0;
        for (values, (got, plain, trades)) in combos.iter().zip(common::swept_and_interpreted(&bars, &program, &combos, &exec, tight)) {
            proptest::prop_assert_eq!(&got, &plain, "{:?} {:?}", texts, values);
            proptest::prop_assert_eq!(trades, plain.len());
        }
    }
}
