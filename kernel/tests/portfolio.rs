//! Portfolio selection and accounting (protocol v1.4) on hand-computed cases: each step of the
//! contract's "Fills and accounting" written out for a few series and rows (sells before buys,
//! a buy filled in part, fees and slippage, a gap at the fill, an ended series, the `keep`
//! buffer, longs with shorts), the periods of the decision words across year ends, and the
//! metrics.

use sweepflight_kernel::portfolio::{
    ComboArrays, Keep, NO_BAR, OnCalendar, PortfolioFill, Rules, civil, day_key, days_from_civil,
    every, month_key, period_starts, run, week_key,
};

fn rules(longs: usize, shorts: usize, fill: PortfolioFill) -> Rules {
    Rules {
        longs,
        shorts,
        keep: None,
        fill,
        fee: 0.0,
        slippage: 0.0,
    }
}

fn arrays(rank: &[f64]) -> ComboArrays<'_> {
    ComboArrays {
        rank,
        filter: None,
        weight: None,
        fits: true,
    }
}

const ALL: Keep = Keep {
    trades: true,
    rows: true,
};

#[test]
fn a_rotation_between_two_series_at_the_close() {
    // s0 leads at row 0, s1 from row 1 on. Prices are powers of two: every value exact.
    let rows: Vec<u32> = vec![0, 1, 2];
    let (c0, c1) = ([8.0, 8.0, 16.0], [4.0, 2.0, 3.0]);
    let series = [
        OnCalendar {
            row_of: &rows,
            open: None,
            close: &c0,
        },
        OnCalendar {
            row_of: &rows,
            open: None,
            close: &c1,
        },
    ];
    let (r0, r1) = ([1.0, 0.0, 0.0], [0.0, 1.0, 1.0]);
    let a = [arrays(&r0), arrays(&r1)];
    let out = run(
        &series,
        &a,
        &rules(1, 0, PortfolioFill::Close),
        &every(0, 3, 1),
        (0, 3),
        1.0,
        None,
        ALL,
    );
    // Row 0: buy 1/8 = 0.125 of s0 with all the cash. Row 1: sell it (1.0), buy 1.0 / 2 = 0.5
    // of s1. Row 2: the target is what is held: no trade.
    let trades: Vec<(usize, usize, f64, f64)> = out
        .trades
        .iter()
        .map(|t| (t.row, t.series, t.shares, t.price))
        .collect();
    assert_eq!(
        trades,
        [(0, 0, 0.125, 8.0), (1, 0, -0.125, 8.0), (1, 1, 0.5, 2.0)]
    );
    let equity: Vec<f64> = out.rows.iter().map(|r| r.equity).collect();
    assert_eq!(equity, [1.0, 1.0, 1.5]);
    assert_eq!(out.rows[2].cash, 0.0);
    assert_eq!(out.rows[2].holdings, 1);
    let m = &out.metrics;
    assert_eq!(m.total_return, 50.0);
    assert_eq!(m.max_drawdown, 0.0);
    assert_eq!(m.turnover, 3.0);
    assert_eq!(m.rebalances, 3);
    assert_eq!(m.avg_holdings, 1.0);
    assert_eq!(m.fees, 0.0);
    // Returns 0, 0, 0.5: none below 0, so no Sortino; the Sharpe of their mean and std.
    assert_eq!(m.sortino, None);
    let mean = (0.0 + 0.0 + 0.5) / 3.0;
    let std =
        (((0.0 - mean) * (0.0 - mean) + (0.0 - mean) * (0.0 - mean) + (0.5 - mean) * (0.5 - mean))
            / 2.0f64)
            .sqrt();
    assert_eq!(m.sharpe, Some(mean / std * 1.0));
    assert_eq!(m.volatility, Some(std * 1.0 * 100.0));
    assert_eq!(
        m.annual_return,
        Some((1.5f64.powf(1.0 / 3.0) - 1.0) * 100.0)
    );
}

#[test]
fn next_open_fills_pay_fees_and_slippage_and_a_short_buy_is_filled_in_part() {
    // One series, long, filled at the next open with a fee and slippage.
    let rows: Vec<u32> = vec![0, 1, 2, 3];
    let open = [10.0, 10.0, 11.0, 12.0];
    let close = [10.0, 10.5, 11.5, 12.5];
    let series = [OnCalendar {
        row_of: &rows,
        open: Some(&open),
        close: &close,
    }];
    let rank = [1.0; 4];
    let a = [arrays(&rank)];
    let r = Rules {
        fee: 0.002,
        slippage: 0.01,
        ..rules(1, 0, PortfolioFill::NextOpen)
    };
    let out = run(&series, &a, &r, &[0], (0, 4), 1.0, None, ALL);
    // Decided at row 0, filled at row 1's open: 10 * 1.01 = 10.1 a share; the target
    // (1.0 * 1.0) / 10 = 0.1 shares costs 0.1 * 10.1 * 1.001 > 1.0: filled in part.
    let (phi, q) = (0.001, 10.0 * (1.0 + 0.01));
    let part = 1.0 / (q * (1.0 + phi));
    assert_eq!(out.trades.len(), 1);
    let t = out.trades[0];
    assert_eq!((t.row, t.series, t.shares, t.price), (1, 0, part, 10.0));
    assert_eq!(t.value, part * q);
    assert_eq!(t.fee, (1.0 - part * q).max(0.0));
    let equity: Vec<f64> = out.rows.iter().map(|r| r.equity).collect();
    assert_eq!(equity, [1.0, part * 10.5, part * 11.5, part * 12.5]);
    assert_eq!(out.rows[1].cash, 0.0);
    assert_eq!(out.metrics.fees, t.fee * 100.0);
    assert_eq!(out.metrics.turnover, (part * 10.0) / 1.0);
}

#[test]
fn a_gap_at_the_fill_is_not_traded_and_an_ended_series_is_closed_at_its_last_close() {
    // s0 has no bar at row 2 and ends after row 3; s1 has every bar. Long 1 by rank.
    let rows0 = [0, 1, NO_BAR, 2, NO_BAR, NO_BAR];
    let rows1 = [0, 1, 2, 3, 4, 5];
    let (c0, c1) = ([4.0, 8.0, 16.0], [2.0, 2.0, 2.0, 2.0, 4.0, 4.0]);
    let series = [
        OnCalendar {
            row_of: &rows0,
            open: None,
            close: &c0,
        },
        OnCalendar {
            row_of: &rows1,
            open: None,
            close: &c1,
        },
    ];
    // s0 best at rows 0 and 1 (and at 3, its last bar), s1 elsewhere.
    let (r0, r1) = ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let a = [arrays(&r0), arrays(&r1)];
    let out = run(
        &series,
        &a,
        &rules(1, 0, PortfolioFill::Close),
        &every(0, 6, 1),
        (0, 6),
        1.0,
        None,
        ALL,
    );
    // Row 0: 1.0 buys 0.25 of s0. Row 1: held, target 0.25 * 8 / 8: no trade. Row 2: s0 has no
    // bar (not eligible, not tradable): s1 is chosen, but the book's tradable part is cash 0
    // (all is in s0, marked at its last close 8): Et = 0, so nothing is traded. Row 3: s0 is
    // back and best: held. Row 4: s0 has no bar in [4, 6): closed at its last close 16, and
    // the cash 4.0 buys 1 of s1 at 4.
    let trades: Vec<(usize, usize, f64, f64)> = out
        .trades
        .iter()
        .map(|t| (t.row, t.series, t.shares, t.price))
        .collect();
    assert_eq!(
        trades,
        [(0, 0, 0.25, 4.0), (4, 0, -0.25, 16.0), (4, 1, 1.0, 4.0)]
    );
    let equity: Vec<f64> = out.rows.iter().map(|r| r.equity).collect();
    assert_eq!(equity, [1.0, 2.0, 2.0, 4.0, 4.0, 4.0]);
    // Row 2's fill is not counted (Et = 0); the other five are.
    assert_eq!(out.metrics.rebalances, 5);
}

#[test]
fn keep_holds_a_series_within_its_buffer_and_shorts_take_the_rest() {
    // Four series; ranks move so that the held one drops to second place at row 1.
    let rows: Vec<u32> = vec![0, 1];
    let close = [1.0, 1.0];
    let series: Vec<OnCalendar<'_>> = (0..4)
        .map(|_| OnCalendar {
            row_of: &rows,
            open: None,
            close: &close,
        })
        .collect();
    let ranks = [[4.0, 3.0], [3.0, 4.0], [2.0, 2.0], [1.0, 1.0]];
    let a: Vec<ComboArrays<'_>> = ranks.iter().map(|r| arrays(r)).collect();
    let held_at = |keep: Option<usize>, shorts: usize| {
        let r = Rules {
            keep,
            ..rules(1, shorts, PortfolioFill::Close)
        };
        let out = run(&series, &a, &r, &[0, 1], (0, 2), 1.0, None, ALL);
        let mut shares = [0.0; 4];
        for t in out.trades {
            shares[t.series] += t.shares;
        }
        shares
    };
    // Without a buffer the leader is bought at row 1; with keep = 2, s0 (second) stays.
    assert_eq!(held_at(None, 0), [0.0, 1.0, 0.0, 0.0]);
    assert_eq!(held_at(Some(2), 0), [1.0, 0.0, 0.0, 0.0]);
    // Long 1 and short 1: half the equity each way, the short the lowest rank.
    assert_eq!(held_at(None, 1), [0.0, 0.5, 0.0, -0.5]);
}

#[test]
fn decision_words_follow_utc_days_iso_weeks_and_months() {
    // 2020-12-28 (Monday, ISO week 2020-53) .. 2021-01-11.
    let first = days_from_civil(2020, 12, 28);
    assert_eq!(civil(first), (2020, 12, 28));
    let days: Vec<i64> = (0..15).map(|k| first + k).collect();
    let weeks: Vec<i64> = days.iter().map(|&d| week_key(d)).collect();
    assert_eq!(weeks[0], 202_053);
    assert_eq!(weeks[6], 202_053); // Sunday 2021-01-03
    assert_eq!(weeks[7], 202_101); // Monday 2021-01-04
    assert_eq!(weeks[14], 202_102);
    assert_eq!(period_starts(0, 15, &weeks), [0, 7, 14]);
    let months: Vec<i64> = days.iter().map(|&d| month_key(d)).collect();
    assert_eq!(period_starts(0, 15, &months), [0, 4]);
    let daily: Vec<i64> = days.iter().map(|&d| day_key(d)).collect();
    assert_eq!(period_starts(2, 6, &daily), [2, 3, 4, 5]);
    // 2015-12-31 is in ISO week 2015-53, 2016-01-01 too; 2019-12-30 in 2020-01.
    assert_eq!(week_key(days_from_civil(2016, 1, 1)), 201_553);
    assert_eq!(week_key(days_from_civil(2019, 12, 30)), 202_001);
    assert_eq!(every(3, 20, 5), [3, 8, 13, 18]);
    // Every day from 1900 to 2100 round-trips through the civil date.
    for d in days_from_civil(1900, 1, 1)..days_from_civil(2100, 1, 1) {
        let (y, m, dd) = civil(d);
        assert_eq!(days_from_civil(y, m, dd), d);
    }
}

/// The outside check: vectorbt 1.2's `Portfolio.from_orders` (target percents, cash shared,
/// `call_seq="auto"`, valued at the order price, half the fee a side) fed the same target
/// weights at the next open, on aligned universes with fees, slippage, shorts and buys the cash
/// cannot pay in full (`kernel/testdata/make_portfolio_fixture.py` wrote its equity): the
/// kernel's equity equals it to 1e-9 relative at every row.
#[test]
fn the_accounting_equals_vectorbts_on_the_same_target_weights() {
    use sweepflight_kernel::portfolio::run_targets;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/portfolio-vbt.json");
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let floats = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let cases = fixture["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    let mut partial_fills = 0;
    for case in cases {
        let open: Vec<Vec<f64>> = case["open"]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect();
        let close: Vec<Vec<f64>> = case["close"]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect();
        let rows = close[0].len();
        let row_of: Vec<u32> = (0..rows as u32).collect();
        let series: Vec<OnCalendar<'_>> = open
            .iter()
            .zip(&close)
            .map(|(o, c)| OnCalendar {
                row_of: &row_of,
                open: Some(o),
                close: c,
            })
            .collect();
        let decisions: Vec<usize> = case["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let targets: Vec<Vec<f64>> = case["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect();
        let rules = Rules {
            fee: case["fee"].as_f64().unwrap(),
            slippage: case["slippage"].as_f64().unwrap(),
            ..rules(0, 0, PortfolioFill::NextOpen)
        };
        let out = run_targets(
            &series,
            &targets,
            &rules,
            &decisions,
            (0, rows),
            252.0,
            None,
            ALL,
        );
        let want = floats(&case["equity"]);
        assert_eq!(out.rows.len(), want.len());
        for (t, (got, want)) in out.rows.iter().map(|r| r.equity).zip(&want).enumerate() {
            // The contract's tolerance: 1e-9 relative, 1e-9 absolute near zero.
            assert!(
                (got - want).abs() <= (1e-9 * want.abs()).max(1e-9),
                "case {} row {t}: {got} against vectorbt's {want}",
                case["seed"]
            );
        }
        // A buy cut to the cash leaves none.
        partial_fills += out.rows.iter().filter(|r| r.cash == 0.0).count();
    }
    assert!(partial_fills > 0, "the cases reach the cash-limited buy");
}

/// The calendar of series that start late, end early and miss days: the sorted union of their
/// times, each series' rows where its times are, nothing elsewhere.
#[test]
fn the_calendar_is_the_union_of_the_series_times() {
    use sweepflight_kernel::portfolio::Calendar;
    let a = [1, 2, 3, 5, 8];
    let b = [3, 4, 5];
    let c = [0, 9];
    let cal = Calendar::of(&[&a, &b, &c]);
    assert_eq!(cal.times, [0, 1, 2, 3, 4, 5, 8, 9]);
    assert_eq!(cal.len(), 8);
    let n = NO_BAR;
    assert_eq!(cal.row_of[0], [n, 0, 1, 2, n, 3, 4, n]);
    assert_eq!(cal.row_of[1], [n, n, n, 0, 1, 2, n, n]);
    assert_eq!(cal.row_of[2], [0, n, n, n, n, n, n, 1]);
    // Every series' own rows appear once each, in order.
    for (s, times) in [&a[..], &b, &c].iter().enumerate() {
        let placed: Vec<i64> = cal.row_of[s]
            .iter()
            .zip(&cal.times)
            .filter(|(r, _)| **r != NO_BAR)
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(placed, *times);
    }
    assert!(Calendar::of(&[]).is_empty());
}

/// A momentum rotation from its formulas: `rank` = `roc(close, n)`, `filter` =
/// `close > sma(close, m)`, evaluated on each series' own bars, equals the same run fed those
/// arrays computed plainly here; and the binder's refusals of a portfolio's fields.
#[test]
fn a_rotation_from_its_formulas_equals_the_arrays_computed_by_hand() {
    use sweepflight_kernel::expr::{Field, Program};
    use sweepflight_kernel::lines::Bars;
    use sweepflight_kernel::portfolio::{Calendar, SeriesValues};

    // Four series on different days: one starts late, one ends early, one misses days.
    let times: Vec<Vec<i64>> = vec![
        (0..120).collect(),
        (30..120).collect(),
        (0..90).collect(),
        (0..120).filter(|d| d % 7 != 3).collect(),
    ];
    let closes: Vec<Vec<f64>> = times
        .iter()
        .enumerate()
        .map(|(s, t)| {
            t.iter()
                .map(|&d| {
                    100.0
                        + ((d as f64) * (0.05 + 0.02 * s as f64)).sin() * 10.0
                        + d as f64 * 0.1 * s as f64
                })
                .collect()
        })
        .collect();
    let views: Vec<&[i64]> = times.iter().map(Vec::as_slice).collect();
    let cal = Calendar::of(&views);
    let series: Vec<OnCalendar<'_>> = cal
        .row_of
        .iter()
        .zip(&closes)
        .map(|(row_of, close)| OnCalendar {
            row_of,
            open: None,
            close,
        })
        .collect();
    let program = Program::portfolio(
        &[
            (Field::Rank, "roc(close, n)"),
            (Field::Filter, "close > sma(close, m)"),
        ],
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(program.params.len(), 2);
    let (n, m) = (10usize, 20usize);
    let values = SeriesValues::of(&Bars::closes(&closes[0]), &program, &[n as f64, m as f64]);
    assert!(values.fits);
    let by_formulas: Vec<SeriesValues> = closes
        .iter()
        .map(|c| SeriesValues::of(&Bars::closes(c), &program, &[n as f64, m as f64]))
        .collect();
    // By hand: roc and sma from their definitions (NaN while the window is short).
    let by_hand: Vec<(Vec<f64>, Vec<u8>)> = closes
        .iter()
        .map(|c| {
            let rank = (0..c.len())
                .map(|i| {
                    if i < n {
                        f64::NAN
                    } else {
                        (c[i] / c[i - n] - 1.0) * 100.0
                    }
                })
                .collect();
            let filter = (0..c.len())
                .map(|i| {
                    if i + 1 < m {
                        return 0;
                    }
                    let mut sum = 0.0;
                    for v in &c[i + 1 - m..=i] {
                        sum += v;
                    }
                    u8::from(c[i] > sum / m as f64)
                })
                .collect();
            (rank, filter)
        })
        .collect();
    let hand: Vec<ComboArrays<'_>> = by_hand
        .iter()
        .map(|(rank, filter)| ComboArrays {
            rank,
            filter: Some(filter),
            weight: None,
            fits: true,
        })
        .collect();
    let formulas: Vec<ComboArrays<'_>> = by_formulas.iter().map(SeriesValues::arrays).collect();
    let r = Rules {
        fee: 0.001,
        ..rules(2, 0, PortfolioFill::Close)
    };
    let decisions = every(0, cal.len(), 5);
    let a = run(
        &series,
        &formulas,
        &r,
        &decisions,
        (0, cal.len()),
        252.0,
        Some(4),
        ALL,
    );
    let b = run(
        &series,
        &hand,
        &r,
        &decisions,
        (0, cal.len()),
        252.0,
        Some(4),
        ALL,
    );
    assert_eq!(a, b);
    assert!(a.trades.len() > 10, "{} trades", a.trades.len());
    assert!(a.metrics.rebalances > 10);
    assert_eq!(a.metrics.block_pnl.as_ref().map(Vec::len), Some(4));
    // A window longer than a series: that series never fits.
    let short = SeriesValues::of(&Bars::closes(&closes[0][..5]), &program, &[10.0, 20.0]);
    assert!(!short.fits);
    // The binder's refusals.
    for (fields, said) in [
        (vec![(Field::Filter, "close > 1")], "needs `rank`"),
        (
            vec![(Field::Rank, "close > 1")],
            "`rank` must be a number or a series",
        ),
        (
            vec![(Field::Rank, "close"), (Field::Filter, "close")],
            "`filter` must be a condition",
        ),
        (
            vec![(Field::Rank, "close"), (Field::Weight, "close > 0")],
            "`weight` must be a number",
        ),
        (
            vec![(Field::Rank, "close"), (Field::Long, "close > 0")],
            "`long` is not a field of a portfolio",
        ),
    ] {
        let e = Program::portfolio(&fields, &[], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains(said), "{e}");
    }
    // Constants are allowed: every eligible series ties and series order decides.
    let flat = Program::portfolio(&[(Field::Rank, "1")], &[], &[]).unwrap();
    assert_eq!(
        SeriesValues::of(&Bars::closes(&closes[0]), &flat, &[]).rank,
        vec![1.0; 120]
    );
}

/// A small seeded generator (xorshift64*), so every universe of the property test below can be
/// rebuilt from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() * n as f64) as usize % n.max(1)
    }
}

/// A universe whose series start late, end early and miss days: times (days), opens, closes.
fn gappy_universe(rng: &mut Rng) -> Vec<(Vec<i64>, Vec<f64>, Vec<f64>)> {
    let series = 2 + rng.below(9);
    let days = 50 + rng.below(120) as i64;
    (0..series)
        .map(|_| {
            let from = rng.below(25) as i64;
            let to = days - rng.below(25) as i64;
            let mut times = Vec::new();
            for d in from..to.max(from + 1) {
                if rng.next() < 0.85 || times.is_empty() {
                    times.push(20_000 + d);
                }
            }
            let (mut opens, mut closes) = (Vec::new(), Vec::new());
            let mut c = 50.0 + rng.next() * 100.0;
            for _ in &times {
                let o = c * (1.0 + (rng.next() - 0.5) * 0.02);
                // Prices on a coarse grid: ranks tie, as real prices often do.
                c = ((c * (1.0 + (rng.next() - 0.5) * 0.06)) * 4.0).round() / 4.0;
                opens.push(o);
                closes.push(c.max(0.25));
            }
            (times, opens, closes)
        })
        .collect()
}

#[test]
fn the_fast_sweep_equals_the_plain_run_on_random_gappy_universes() {
    use sweepflight_kernel::NoCache;
    use sweepflight_kernel::expr::{Field, Program};
    use sweepflight_kernel::lines::Bars;
    use sweepflight_kernel::portfolio::panel::{PortfolioCombo, PortfolioSweep, Universe, sweep};
    use sweepflight_kernel::portfolio::{Calendar, SeriesValues};
    let programs: [(&str, Option<&str>, Option<&str>); 5] = [
        ("roc(close, n)", Some("close > sma(close, m)"), None),
        (
            "min(roc(close, n), 1)",
            None,
            Some("1 / std(roc(close, 1), m)"),
        ),
        ("1", None, None),
        ("-abs(roc(close, n))", Some("close > 0"), Some("2")),
        (
            "close - sma(close, m)",
            Some("roc(close, n) > -50"),
            Some("close"),
        ),
    ];
    let mut checked = 0;
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let data = gappy_universe(&mut rng);
        let views: Vec<&[i64]> = data.iter().map(|(t, _, _)| t.as_slice()).collect();
        let cal = Calendar::of(&views);
        let on: Vec<OnCalendar<'_>> = cal
            .row_of
            .iter()
            .zip(&data)
            .map(|(row_of, (_, open, close))| OnCalendar {
                row_of,
                open: Some(open),
                close,
            })
            .collect();
        let (rank, filter, weight) = programs[seed as usize % programs.len()];
        let mut fields = vec![(Field::Rank, rank)];
        fields.extend(filter.map(|f| (Field::Filter, f)));
        fields.extend(weight.map(|w| (Field::Weight, w)));
        let program = Program::portfolio(&fields, &[], &[]).unwrap();
        let t_n = cal.len();
        let start = rng.below(t_n / 3);
        let end = if rng.next() < 0.5 {
            t_n
        } else {
            start + 1 + rng.below(t_n - start)
        };
        let weeks: Vec<i64> = cal.times.iter().map(|&d| week_key(d)).collect();
        let schedules = [
            every(start, end, 1),
            every(start, end, 3),
            every(start, end, 7),
            period_starts(start, end, &weeks),
        ];
        let width = program.params.len();
        let mut values: Vec<Vec<f64>> = Vec::new();
        let mut combos_rules: Vec<(Rules, usize)> = Vec::new();
        for _ in 0..6 {
            let v: Vec<f64> = (0..width)
                .map(|_| [2.0, 3.0, 5.0, 8.0, 40.0][rng.below(5)])
                .collect();
            values.push(v);
            let longs = rng.below(4);
            let shorts = if rng.next() < 0.4 { rng.below(3) } else { 0 };
            let r = Rules {
                longs,
                shorts,
                keep: (rng.next() < 0.5).then(|| rng.below(6)),
                fill: if rng.next() < 0.5 {
                    PortfolioFill::Close
                } else {
                    PortfolioFill::NextOpen
                },
                fee: [0.0, 0.002, 0.05][rng.below(3)],
                slippage: [0.0, 0.001][rng.below(2)],
            };
            combos_rules.push((r, rng.below(schedules.len())));
        }
        let combos: Vec<PortfolioCombo<'_>> = values
            .iter()
            .zip(&combos_rules)
            .map(|(v, (r, k))| PortfolioCombo {
                values: v,
                rules: *r,
                decisions: &schedules[*k],
            })
            .collect();
        let bars: Vec<Bars<'_>> = data.iter().map(|(_, _, c)| Bars::closes(c)).collect();
        let fill_rows: Vec<usize> = schedules
            .iter()
            .flatten()
            .flat_map(|&r| [r, r + 1])
            .collect();
        let universe = Universe::new(on.clone(), &fill_rows);
        let blocks = (end - start >= 3).then_some(3);
        let call = PortfolioSweep {
            universe: &universe,
            bars: &bars,
            program: &program,
            combos: &combos,
            range: (start, end),
            periods_per_year: 252.0,
            blocks,
            keep: ALL,
            cache: &|_| Box::new(NoCache),
            cancelled: &|| false,
            progress: &|| {},
        };
        // Small caps split the combos into groups of their own panels.
        let cap = if seed % 3 == 0 { 1 } else { usize::MAX };
        let fast = sweep(&call, seed % 2 == 0, cap).unwrap();
        for (c, combo) in combos.iter().enumerate() {
            let oracle: Vec<SeriesValues> = bars
                .iter()
                .map(|b| SeriesValues::of(b, &program, combo.values))
                .collect();
            let arrays: Vec<ComboArrays<'_>> = oracle.iter().map(SeriesValues::arrays).collect();
            let plain = run(
                &on,
                &arrays,
                &combo.rules,
                combo.decisions,
                (start, end),
                252.0,
                blocks,
                ALL,
            );
            // Exactly: the same trades, rows and metrics, bit for bit (Debug shows NaN too).
            assert_eq!(
                format!("{plain:?}"),
                format!("{:?}", fast[c]),
                "seed {seed} combo {c}: {rank} / {filter:?} / {weight:?}, {:?}",
                combo.rules
            );
            checked += plain.trades.len();
        }
    }
    assert!(checked > 500, "the universes traded: {checked} trades");
}

/// Cutting the calendar after row `t` changes no decision, fill or equity at or before `t`:
/// nothing after a row is read. (One rule reads the run's end by design: a held series with
/// no bar left before the end is closed as ended, so rows from the first such ambiguous gap of
/// a series that trades again after `t` are left out of the comparison.)
#[test]
fn cutting_the_calendar_after_a_row_changes_nothing_before_it() {
    use sweepflight_kernel::NoCache;
    use sweepflight_kernel::expr::{Field, Program};
    use sweepflight_kernel::lines::Bars;
    use sweepflight_kernel::portfolio::Calendar;
    use sweepflight_kernel::portfolio::panel::{PortfolioCombo, PortfolioSweep, Universe, sweep};
    let program = Program::portfolio(
        &[
            (Field::Rank, "roc(close, n)"),
            (Field::Filter, "close > sma(close, 5)"),
            (Field::Weight, "1 / std(close, 4)"),
        ],
        &[],
        &[],
    )
    .unwrap();
    let mut compared = 0;
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let data = gappy_universe(&mut rng);
        let run_to = |cut: Option<i64>| {
            // The data as it stood at time `cut`: every bar after it removed.
            let kept: Vec<(Vec<i64>, Vec<f64>, Vec<f64>)> = data
                .iter()
                .map(|(t, o, c)| {
                    let n = cut.map_or(t.len(), |cut| t.iter().take_while(|&&x| x <= cut).count());
                    (t[..n].to_vec(), o[..n].to_vec(), c[..n].to_vec())
                })
                .filter(|(t, _, _)| !t.is_empty())
                .collect();
            let views: Vec<&[i64]> = kept.iter().map(|(t, _, _)| t.as_slice()).collect();
            let cal = Calendar::of(&views);
            let on: Vec<OnCalendar<'_>> = cal
                .row_of
                .iter()
                .zip(&kept)
                .map(|(row_of, (_, open, close))| OnCalendar {
                    row_of,
                    open: Some(open),
                    close,
                })
                .collect();
            // No fill row copied: every price is read from the series' own rows.
            let fill_rows: Vec<usize> = Vec::new();
            let universe = Universe::new(on, &fill_rows);
            let bars: Vec<Bars<'_>> = kept.iter().map(|(_, _, c)| Bars::closes(c)).collect();
            let decisions = every(0, cal.len(), 3);
            let values = [4.0];
            let combos = [PortfolioCombo {
                values: &values,
                rules: Rules {
                    keep: Some(3),
                    fee: 0.002,
                    ..rules(2, 1, PortfolioFill::NextOpen)
                },
                decisions: &decisions,
            }];
            let call = PortfolioSweep {
                universe: &universe,
                bars: &bars,
                program: &program,
                combos: &combos,
                range: (0, cal.len()),
                periods_per_year: 1.0,
                blocks: None,
                keep: ALL,
                cache: &|_| Box::new(NoCache),
                cancelled: &|| false,
                progress: &|| {},
            };
            let run = sweep(&call, false, usize::MAX).unwrap().remove(0);
            // Trades by time and series key (the position of a series may differ when a cut
            // leaves one out), and the equity by time.
            let names: Vec<usize> = data
                .iter()
                .enumerate()
                .filter(|(_, (t, _, _))| cut.is_none_or(|cut| t[0] <= cut))
                .map(|(i, _)| i)
                .collect();
            let trades: Vec<(i64, usize, String)> = run
                .trades
                .iter()
                .map(|tr| (cal.times[tr.row], names[tr.series], format!("{tr:?}")))
                .collect();
            let equity: Vec<(i64, String)> = run
                .rows
                .iter()
                .enumerate()
                .map(|(t, r)| (cal.times[t], format!("{r:?}")))
                .collect();
            (trades, equity)
        };
        let (all_trades, all_equity) = run_to(None);
        let times: Vec<i64> = all_equity.iter().map(|(t, _)| *t).collect();
        for _ in 0..4 {
            let cut = times[rng.below(times.len())];
            // The first time a series that trades again after the cut has no bar left.
            let ambiguous = data
                .iter()
                .filter(|(t, _, _)| t.iter().any(|&x| x > cut) && t[0] <= cut)
                .filter_map(|(t, _, _)| {
                    let last = t.iter().rev().find(|&&x| x <= cut)?;
                    times.iter().copied().find(|&x| x > *last)
                })
                .min()
                .unwrap_or(i64::MAX);
            let (trades, equity) = run_to(Some(cut));
            let before = |time: i64| time <= cut && time < ambiguous;
            let strip = |v: &[(i64, usize, String)]| -> Vec<(i64, usize, String)> {
                v.iter()
                    .filter(|x| before(x.0))
                    .map(|(t, s, d)| {
                        // A trade's series position may differ; compare its key and the rest.
                        let rest = d.split_once(", shares").map_or(d.as_str(), |(_, r)| r);
                        (*t, *s, rest.to_owned())
                    })
                    .collect()
            };
            assert_eq!(strip(&trades), strip(&all_trades), "seed {seed} cut {cut}");
            let eq = |v: &[(i64, String)]| -> Vec<(i64, String)> {
                v.iter().filter(|x| before(x.0)).cloned().collect()
            };
            assert_eq!(eq(&equity), eq(&all_equity), "seed {seed} cut {cut}");
            compared += eq(&equity).len();
        }
    }
    assert!(compared > 1000, "rows compared: {compared}");
}
