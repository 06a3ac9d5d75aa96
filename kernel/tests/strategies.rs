//! Every strategy and execution option of protocol v1.2 against the plain oracle
//! (`oracle::run`, written from strategies.md): on random walks and on adversarial series
//! (flat stretches, repeated and integer prices, tiny ticks: near-ties everywhere), random
//! combos, every side and stop combination, row ranges with warm-up, thread counts and
//! working-set budgets. Results must be equal, not close: the same trades, booked in the same
//! order with the same arithmetic.

use proptest::prelude::*;
use sweepflight_kernel::lines::Line;
use sweepflight_kernel::oracle;
use sweepflight_kernel::plan::line_array_key;
use sweepflight_kernel::{
    ArrayCache, ArrayKey, Combo, ComboResult, Execution, Params, Records, Side, Strategy as Kind,
    SweepControl, equity, sweep_params,
};

/// Price series: a random walk, or an adversarial one built from a few repeated levels.
fn series(max_len: usize) -> impl Strategy<Value = Vec<f64>> {
    let walk = (
        1.0f64..1000.0,
        prop::collection::vec(-0.02f64..0.02, 1..max_len),
    )
        .prop_map(|(start, steps)| {
            steps
                .iter()
                .scan(start, |p, r| {
                    *p *= 1.0 + r;
                    Some(*p)
                })
                .collect::<Vec<f64>>()
        });
    // Integer prices moving by -1, 0, +1 (flat runs and exact ties between averages), or
    // half-cent steps, with long constant stretches.
    let ticks = (
        prop::collection::vec((-1i32..=1, 1usize..20), 1..max_len / 4),
        prop_oneof![Just(1.0f64), Just(0.005), Just(0.25)],
    )
        .prop_map(|(moves, tick)| {
            let mut p = 200i64;
            let mut out = Vec::new();
            for (m, run) in moves {
                p = (p + i64::from(m)).max(1);
                out.extend(std::iter::repeat_n(p as f64 * tick + 1.0, run));
            }
            out
        });
    prop_oneof![walk, ticks]
}

fn window() -> impl Strategy<Value = u32> {
    prop_oneof![6 => 1u32..30, 1 => 1u32..=3_000]
}

fn params() -> impl Strategy<Value = Params> {
    prop_oneof![
        (1u32..=400).prop_map(|l| Params::HmaSar(Combo::from_length(l).unwrap())),
        (window(), window()).prop_map(|(fast, slow)| Params::SmaCross { fast, slow }),
        (window(), window()).prop_map(|(fast, slow)| Params::EmaCross { fast, slow }),
        window().prop_map(|n| Params::Donchian { n }),
        (window(), 0u32..100, 1u32..=100).prop_map(|(n, a, b)| {
            let (lower, upper) = if a < b {
                (a, b)
            } else {
                (b.saturating_sub(1), b)
            };
            // Integral bands half the time: RSI values of flat stretches land on them.
            let (lower, upper) = if n % 2 == 0 {
                (f64::from(lower), f64::from(upper))
            } else {
                (f64::from(lower) + 0.37, f64::from(upper).min(99.9))
            };
            Params::new(Kind::RsiRevert, &[f64::from(n), lower, upper]).unwrap_or(
                Params::RsiRevert {
                    n,
                    lower: 30.0,
                    upper: 70.0,
                },
            )
        }),
    ]
}

fn execution() -> impl Strategy<Value = Execution> {
    (
        prop_oneof![Just(Side::Both), Just(Side::Long), Just(Side::Short)],
        prop::option::of(prop_oneof![0.001f64..0.05, Just(0.01)]),
        prop::option::of(prop_oneof![0.001f64..0.05, Just(0.02)]),
        prop_oneof![Just(0.0009f64), Just(0.0), 0.0f64..0.01],
    )
        .prop_map(|(side, stop_loss, take_profit, fee)| Execution {
            fee,
            side,
            stop_loss,
            take_profit,
            ..Execution::new(fee)
        })
}

/// A cache that keeps every array offered.
#[derive(Default)]
struct Lines(std::sync::Mutex<std::collections::HashMap<ArrayKey, std::sync::Arc<[f64]>>>);

impl ArrayCache for Lines {
    fn get(&self, key: ArrayKey) -> Option<std::sync::Arc<[f64]>> {
        self.0.lock().unwrap().get(&key).cloned()
    }
    fn insert(&self, key: ArrayKey, array: std::sync::Arc<[f64]>) {
        self.0.lock().unwrap().insert(key, array);
    }
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// The fast path on rows `[s, e)` with warm-up `w`, as the server calls it.
fn fast(
    close: &[f64],
    (s, e, w): (usize, usize, usize),
    params: &[Params],
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Vec<ComboResult> {
    let from = s.saturating_sub(w);
    let exec = Execution {
        start: s - from,
        ..*exec
    };
    sweep_params(&close[from..e], params, &exec, control).unwrap()
}

/// Rows and warm-up inside a series of `len`.
fn range(len: usize, a: usize, b: usize, w: usize) -> (usize, usize, usize) {
    let s = a % len;
    let e = s + 1 + b % (len - s);
    (s, e, w)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_strategy_and_option_equals_the_oracle(
        close in series(2_500),
        combos in prop::collection::vec(params(), 1..10),
        exec in execution(),
        (a, b, w) in (any::<usize>(), any::<usize>(), prop_oneof![Just(0usize), 0usize..400]),
        whole in any::<bool>(),
    ) {
        let r = if whole { (0, close.len(), 0) } else { range(close.len(), a, b, w) };
        let got = fast(&close, r, &combos, &exec, &SweepControl::default());
        for (p, g) in combos.iter().zip(&got) {
            let trades = oracle::run_trades(&close, r.0..r.1, r.2, p, &exec);
            let want = oracle::summarise(&trades);
            prop_assert_eq!(g, &want, "{:?} {:?} rows {:?}", p, exec, r);
            // Every v1.2 metric, against the per-bar oracle, at two annualisations.
            for ppy in [1.0, 252.0 * 390.0] {
                let m = oracle::metrics(&close, r.0..r.1, &trades, ppy);
                prop_assert!(g.metrics(ppy).close_to(&m), "{:?} {:?} rows {:?}: {:?} vs {:?}", p, exec, r, g.metrics(ppy), m);
            }
        }
    }

    #[test]
    fn trades_blocks_and_equity_equal_the_oracle(
        close in series(2_500),
        combos in prop::collection::vec(params(), 1..8),
        exec in execution(),
        (a, b, w) in (any::<usize>(), any::<usize>(), prop_oneof![Just(0usize), 0usize..400]),
        blocks in 2usize..=64,
        tile in prop_oneof![Just(None), Just(Some(0usize)), Just(Some(256usize))],
    ) {
        let (s, e, w) = range(close.len(), a, b, w);
        let blocks = blocks.min(e - s);
        prop_assume!(blocks >= 2);
        let from = s.saturating_sub(w);
        let records = Records::new(combos.len(), e - from, s - from, true, blocks).unwrap();
        let control = SweepControl { records: Some(&records), tile_bars: tile, ..SweepControl::default() };
        let got = fast(&close, (s, e, w), &combos, &exec, &control);
        for ((p, g), record) in combos.iter().zip(&got).zip(records.into_records()) {
            let want = oracle::run_trades(&close, s..e, w, p, &exec);
            prop_assert_eq!(g, &oracle::summarise(&want));
            let trades: Vec<_> = record.trades.iter().map(|t| (t.side, t.entry_row + from, t.exit_row + from, t.entry_price, t.exit_price, t.net)).collect();
            let oracle_trades: Vec<_> = want.iter().map(|t| (t.side, t.entry_row, t.exit_row, t.entry_price, t.exit_price, t.net)).collect();
            prop_assert_eq!(trades, oracle_trades, "{:?} {:?}", p, exec);
            let want_blocks = oracle::block_pnl(&close, s..e, &want, blocks);
            prop_assert_eq!(record.block_pnl.len(), blocks);
            for (x, y) in record.block_pnl.iter().zip(&want_blocks) {
                prop_assert!((x - y).abs() <= 1e-6, "{:?}: blocks {:?} vs {:?}", p, record.block_pnl, want_blocks);
            }
            let sum: f64 = record.block_pnl.iter().sum();
            prop_assert!((sum - g.pnl).abs() <= 1e-6, "blocks sum to {} not {}", sum, g.pnl);
            let curve = equity(&close[from..e], s - from, &record.trades);
            let want_curve = oracle::equity(&close, s..e, &want);
            prop_assert_eq!(curve.len(), want_curve.len());
            for (k, (x, y)) in curve.iter().zip(&want_curve).enumerate() {
                prop_assert!(x.0 == y.0 && (x.1 - y.1).abs() <= 1e-6, "{:?} bar {}: {:?} vs {:?}", p, s + k, x, y);
            }
        }
    }

    #[test]
    fn lines_of_a_range_cut_from_the_whole_series_are_the_fresh_ones(
        close in series(5_000),
        combos in prop::collection::vec(params(), 1..10),
        cut in (0.0f64..1.0, 0.0f64..1.0),
        tile_bars in prop_oneof![Just(None), Just(Some(0)), Just(Some(300))],
    ) {
        let n = close.len();
        let (a, b) = ((cut.0 * n as f64) as usize, (cut.1 * n as f64) as usize);
        let (from, to) = (a.min(b), a.max(b).max(a.min(b) + 1).min(n));
        prop_assume!(from < to);
        let exec = Execution::default();
        let (whole, fresh) = (Lines::default(), Lines::default());
        fast(&close, (0, n, 0), &combos, &exec, &SweepControl { cache: &whole, tile_bars, ..SweepControl::default() });
        let want = fast(&close, (from, to, 0), &combos, &exec, &SweepControl { cache: &fresh, tile_bars, ..SweepControl::default() });
        let whole = whole.0.into_inner().unwrap();
        let fresh_lines: Vec<ArrayKey> = combos
            .iter()
            .flat_map(|p| match *p {
                Params::SmaCross { fast, slow } => vec![Line::Sma(fast), Line::Sma(slow)],
                Params::HmaSar(c) => vec![
                    Line::Hma([c.half(), c.full(), c.sqrt()]),
                    Line::Hma3([c.p3(), c.p2(), c.p()]),
                ],
                _ => Vec::new(),
            })
            .map(line_array_key)
            .collect();
        let mut derived = Lines::default();
        for (key, line) in fresh.0.into_inner().unwrap() {
            let Some(base) = whole.get(&key) else { continue };
            match key.of_range(base, from, to) {
                // The lines of the closes whose values are fresh over their windows are cut.
                None => prop_assert!(!fresh_lines.contains(&key), "{:?}", key),
                Some(cut) => {
                    prop_assert_eq!(cut.len(), line.len());
                    for (i, (x, y)) in cut.iter().zip(line.iter()).enumerate() {
                        prop_assert!(x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()), "{:?} bar {}: {} vs {}", key, i, x, y);
                    }
                    derived.0.get_mut().unwrap().insert(key, cut);
                }
            }
        }
        // A sweep of the range reading the cut lines gives the fresh answer.
        let reading = SweepControl { cache: &derived, tile_bars, ..SweepControl::default() };
        prop_assert_eq!(fast(&close, (from, to, 0), &combos, &exec, &reading), want);
    }

    #[test]
    fn threads_budgets_and_grouping_do_not_change_the_answer(
        close in series(6_000),
        combos in prop::collection::vec(params(), 1..16),
        exec in execution(),
    ) {
        let n = close.len();
        let want = fast(&close, (0, n, 0), &combos, &exec, &SweepControl { parallel: Some(false), ..SweepControl::default() });
        for threads in [1, 3] {
            for budget in [1usize, 512 << 20] {
                let control = SweepControl { parallel: Some(true), working_set_bytes: budget, ..SweepControl::default() };
                let got = pool(threads).install(|| fast(&close, (0, n, 0), &combos, &exec, &control));
                prop_assert_eq!(&got, &want, "threads {} budget {}", threads, budget);
            }
        }
        // Progress adds up to every combo over every bar, on every path (tiled or not, one
        // group or many, any strategy).
        for (tile_bars, budget) in [(None, 512 << 20), (Some(0), 1), (Some(512), 512 << 20), (Some(700), 1)] {
            let done = std::sync::atomic::AtomicU64::new(0);
            let report = |units: u64| { done.fetch_add(units, std::sync::atomic::Ordering::Relaxed); };
            let control = SweepControl { progress: Some(&report), tile_bars, working_set_bytes: budget, ..SweepControl::default() };
            let got = pool(2).install(|| fast(&close, (0, n, 0), &combos, &exec, &control));
            prop_assert_eq!(&got, &want, "with progress, tiles {:?}", tile_bars);
            prop_assert_eq!(done.into_inner(), (combos.len() * n) as u64, "tiles {:?} budget {}", tile_bars, budget);
        }
        // Lines from a cache a sweep of some of the combos filled: the same answer.
        let cache = Lines::default();
        let control = SweepControl { cache: &cache, ..SweepControl::default() };
        fast(&close, (0, n, 0), &combos[..combos.len() / 2], &exec, &control);
        prop_assert_eq!(&fast(&close, (0, n, 0), &combos, &exec, &control), &want, "with cached lines");
    }
}

#[test]
fn hand_computed_sma_cross_with_stops_and_sides() {
    // SMA(1) is the close, SMA(2) the mean of two: the fast line crosses the slow one at every
    // turn of this zig-zag.
    let close = [10.0, 10.0, 12.0, 11.0, 14.0, 9.0, 9.0];
    let p = [Params::SmaCross { fast: 1, slow: 2 }];
    let run =
        |exec: Execution| sweep_params(&close, &p, &exec, &SweepControl::default()).unwrap()[0];
    // Signals: bar 2 +1 (12 > 11), bar 3 -1 (11 < 11.5), bar 4 +1, bar 5 -1; bar 6 flat.
    let plain = run(Execution::new(0.0));
    // Long 12 -> 11, short 11 -> 14, long 14 -> 9, short 9 -> 9 (forced).
    let want = (11.0 / 12.0 - 1.0) * 100.0
        + (1.0 - 14.0 / 11.0) * 100.0
        + (9.0 / 14.0 - 1.0) * 100.0
        + 0.0;
    assert_eq!(plain.trades, 4);
    assert!((plain.pnl - want).abs() < 1e-9, "{plain:?}");
    // Long only: 12 -> 11 and 14 -> 9.
    let long = run(Execution {
        side: Side::Long,
        ..Execution::new(0.0)
    });
    assert_eq!(long.trades, 2);
    assert!((long.pnl - ((11.0 / 12.0 - 1.0) + (9.0 / 14.0 - 1.0)) * 100.0).abs() < 1e-9);
    // A 5% stop-loss closes the first long at bar 3 (11 <= 11.4) before the signal there,
    // which then opens a short as usual.
    let stopped = run(Execution {
        stop_loss: Some(0.05),
        ..Execution::new(0.0)
    });
    assert_eq!(stopped.trades, 4);
    // Warm-up: evaluating from bar 4 only, the cross at 4 reads bar 3: long 14 -> 9, short 9.
    let late = run(Execution {
        start: 4,
        ..Execution::new(0.0)
    });
    assert_eq!(late.trades, 2);
    // A window longer than the range: no trade, for EMAs too.
    let long_window = [
        Params::EmaCross { fast: 2, slow: 8 },
        Params::SmaCross { fast: 8, slow: 2 },
    ];
    let none = sweep_params(
        &close,
        &long_window,
        &Execution::new(0.0),
        &SweepControl::default(),
    )
    .unwrap();
    assert!(none.iter().all(|r| r.trades == 0), "{none:?}");
}

#[test]
fn the_paper_grid_through_the_strategy_seam_is_the_paper_sweep() {
    // sweep_params with hma_sar combos and the plain execution is the paper kernel itself.
    let close: Vec<f64> = (0..20_000)
        .map(|i| 100.0 + (i as f64 * 0.01).sin() + (i % 7) as f64 * 0.01)
        .collect();
    let combos = sweepflight_kernel::paper::combos();
    let params: Vec<Params> = combos.iter().map(|&c| Params::HmaSar(c)).collect();
    let want = sweepflight_kernel::sweep(&close, &combos, 0.0009).unwrap();
    let got = sweep_params(
        &close,
        &params,
        &Execution::new(0.0009),
        &SweepControl::default(),
    )
    .unwrap();
    assert_eq!(got, want);
    // Mixed strategies in one call keep request order.
    let mixed = [params[3], Params::Donchian { n: 20 }, params[7]];
    let got = sweep_params(
        &close,
        &mixed,
        &Execution::new(0.0009),
        &SweepControl::default(),
    )
    .unwrap();
    assert_eq!((got[0], got[2]), (want[3], want[7]));
    assert_eq!(
        got[1],
        oracle::run(
            &close,
            0..close.len(),
            0,
            &mixed[1],
            &Execution::new(0.0009)
        )
    );
}

#[test]
fn tiled_hma_sar_with_options_equals_the_oracle() {
    let close: Vec<f64> = (0..40_000u32)
        .map(|i| 100.0 + f64::from(i % 997) * 0.01 + (f64::from(i) * 0.003).sin() * 3.0)
        .collect();
    let params: Vec<Params> = [6, 13, 40]
        .iter()
        .map(|&l| Params::HmaSar(Combo::from_length(l).unwrap()))
        .collect();
    for exec in [
        Execution {
            side: Side::Long,
            stop_loss: Some(0.01),
            ..Execution::new(0.0009)
        },
        Execution {
            side: Side::Short,
            take_profit: Some(0.005),
            start: 15_000,
            ..Execution::new(0.0)
        },
    ] {
        for tile in [None, Some(0), Some(512)] {
            let control = SweepControl {
                tile_bars: tile,
                parallel: Some(true),
                ..SweepControl::default()
            };
            let got = sweep_params(&close, &params, &exec, &control).unwrap();
            for (p, g) in params.iter().zip(&got) {
                let e = Execution { start: 0, ..exec };
                let want = oracle::run(&close, exec.start..close.len(), exec.start, p, &e);
                assert_eq!(g, &want, "{p:?} {exec:?} tile {tile:?}");
            }
        }
    }
}

#[test]
fn bad_options_are_refused() {
    let p = [Params::Donchian { n: 3 }];
    for exec in [
        Execution {
            stop_loss: Some(0.0),
            ..Execution::default()
        },
        Execution {
            take_profit: Some(f64::INFINITY),
            ..Execution::default()
        },
        Execution {
            stop_loss: Some(-0.1),
            ..Execution::default()
        },
        Execution::new(f64::NAN),
    ] {
        assert!(
            sweep_params(&[1.0, 2.0], &p, &exec, &SweepControl::default()).is_err(),
            "{exec:?}"
        );
    }
}

#[test]
fn options_change_trades_on_a_random_walk() {
    // Guards the property tests against vacuity: on a plain walk every strategy trades, and
    // each option changes what it does.
    let (mut p, mut state) = (100.0, 0x9e37_79b9_7f4a_7c15u64);
    let close: Vec<f64> = (0..5_000)
        .map(|_| {
            // xorshift64: a plain, reproducible random walk.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let r = ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.01;
            p *= 1.0 + r;
            p
        })
        .collect();
    let combos = [
        Params::HmaSar(Combo::from_length(20).unwrap()),
        Params::SmaCross { fast: 5, slow: 20 },
        Params::EmaCross { fast: 5, slow: 20 },
        Params::Donchian { n: 20 },
        Params::RsiRevert {
            n: 14,
            lower: 30.0,
            upper: 70.0,
        },
    ];
    let run =
        |exec: Execution| sweep_params(&close, &combos, &exec, &SweepControl::default()).unwrap();
    let plain = run(Execution::default());
    assert!(plain.iter().all(|r| r.trades > 10), "{plain:?}");
    for exec in [
        Execution {
            side: Side::Long,
            ..Execution::default()
        },
        Execution {
            side: Side::Short,
            ..Execution::default()
        },
        Execution {
            stop_loss: Some(0.005),
            ..Execution::default()
        },
        Execution {
            take_profit: Some(0.005),
            ..Execution::default()
        },
        Execution {
            start: 2_500,
            ..Execution::default()
        },
    ] {
        let other = run(exec);
        for (k, (a, b)) in plain.iter().zip(&other).enumerate() {
            assert_ne!(a, b, "{:?} under {exec:?}", combos[k]);
        }
    }
}

#[test]
fn metrics_and_their_null_cases_by_hand() {
    let close = [10.0, 10.0, 12.0, 11.0, 14.0, 9.0, 9.0];
    let run = |p: Params, exec: Execution| {
        sweep_params(&close, &[p], &exec, &SweepControl::default()).unwrap()[0]
    };
    // No trade: every metric null but exposure (0), whose denominator is the range.
    let none = run(Params::Donchian { n: 50 }, Execution::new(0.0)).metrics(1.0);
    assert_eq!(
        none,
        sweepflight_kernel::Metrics {
            exposure: Some(0.0),
            ..Default::default()
        }
    );
    // The zig-zag of hand_computed_sma_cross_with_stops_and_sides, fee 0: trades
    // -8.33 (2 -> 3), -27.27 (3 -> 4), -35.71 (4 -> 5), 0 (5 -> 6): no winner, bars held 4 of 7.
    let r = run(Params::SmaCross { fast: 1, slow: 2 }, Execution::new(0.0));
    let m = r.metrics(1.0);
    let nets = [
        (11.0 / 12.0 - 1.0) * 100.0,
        (1.0 - 14.0 / 11.0) * 100.0,
        (9.0 / 14.0 - 1.0) * 100.0,
        0.0,
    ];
    assert!((m.avg_trade.unwrap() - nets.iter().sum::<f64>() / 4.0).abs() < 1e-12);
    assert_eq!(m.best_trade, Some(0.0));
    assert!((m.worst_trade.unwrap() - nets[2]).abs() < 1e-12);
    assert_eq!(m.profit_factor, Some(0.0), "no gains: 0 / losses");
    assert_eq!(m.exposure, Some(4.0 / 7.0));
    assert_eq!(m.avg_bars, Some(1.0));
    assert!(m.sharpe.unwrap() < 0.0 && m.sortino.unwrap() < 0.0 && m.sqn.unwrap() < 0.0);
    // Annualising scales the per-bar ratios by sqrt(periods_per_year) only.
    let year = r.metrics(252.0);
    assert!((year.sharpe.unwrap() - m.sharpe.unwrap() * 252f64.sqrt()).abs() < 1e-9);
    // One winning trade, on a rising series, long only: no loser (profit factor null), one
    // trade (sqn null), no falling increment (sortino null).
    let up: Vec<f64> = (0..20).map(|i| 100.0 + f64::from(i)).collect();
    let one = sweep_params(
        &up,
        &[Params::Donchian { n: 3 }],
        &Execution {
            side: Side::Long,
            ..Execution::new(0.0)
        },
        &SweepControl::default(),
    )
    .unwrap()[0];
    assert_eq!(one.trades, 1);
    let m = one.metrics(1.0);
    assert_eq!((m.profit_factor, m.sqn, m.sortino), (None, None, None));
    assert!(m.sharpe.unwrap() > 0.0);
    let want = oracle::metrics(
        &up,
        0..20,
        &oracle::run_trades(
            &up,
            0..20,
            0,
            &Params::Donchian { n: 3 },
            &Execution {
                side: Side::Long,
                ..Execution::new(0.0)
            },
        ),
        1.0,
    );
    assert!(m.close_to(&want), "{m:?} vs {want:?}");
}
