//! The execution options of v1.3 (strategies.md, "Execution, v1.3": `fill`, `stops`,
//! `trailing_stop`, `slippage`) against the plain loop written from the spec
//! (`oracle::execute_with_exits`): hand-computed cases first (a gap through a stop, both stops
//! inside one bar, a trail that moves then hits, slippage on each kind of fill, an order decided
//! on the last bar), then every option on random bars with gaps and flat stretches, for every
//! built-in strategy and for formula strategies with exits: the trades equal bit for bit, the
//! metrics within the spec's tolerance.

use sweepflight_kernel::eval::{oracle as interp, sweep_program};
use sweepflight_kernel::execution::EXITS_MIN_COMBOS;
use sweepflight_kernel::expr::{Field, Program};
use sweepflight_kernel::lines::Bars;
use sweepflight_kernel::oracle::{self, Trade};
use sweepflight_kernel::{
    ComboResult, Execution, ExitReason, Fill, Params, Records, Side, StopsOn, Strategy,
    SweepControl, sweep_params_on,
};

mod common;
use common::Rng;

/// OHLC bars of `len`: a random walk of closes on a quarter tick (near ties), opens that gap
/// away from the previous close now and then, highs and lows beyond both, and flat stretches
/// where open, high, low and close are one price.
struct Ohlc {
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    close: Vec<f64>,
}

impl Ohlc {
    fn random(len: usize, seed: u64) -> Self {
        let mut r = Rng(seed | 1);
        let (mut open, mut high, mut low, mut close) = (vec![], vec![], vec![], vec![]);
        let mut c: f64 = 100.0;
        let mut flat = 0;
        for _ in 0..len {
            if flat == 0 && r.below(40) == 0 {
                flat = 5 + r.below(20);
            }
            if flat > 0 {
                flat -= 1;
                open.push(c);
                high.push(c);
                low.push(c);
                close.push(c);
                continue;
            }
            let gap = if r.below(10) == 0 {
                (r.unit() - 0.5) * 6.0
            } else {
                0.0
            };
            let o = (((c + gap) * 4.0).round() / 4.0).max(1.0);
            c = ((o + (r.unit() - 0.5) * 3.0) * 4.0).round() / 4.0;
            c = c.max(1.0);
            let h = o.max(c) + (r.below(4) as f64) * 0.25;
            let l = (o.min(c) - (r.below(4) as f64) * 0.25).max(0.25);
            open.push(o);
            high.push(h);
            low.push(l);
            close.push(c);
        }
        Self {
            open,
            high,
            low,
            close,
        }
    }

    fn bars(&self) -> Bars<'_> {
        Bars::ohlc(&self.open, &self.high, &self.low, &self.close)
    }
}

/// Bars from rows of (open, high, low, close).
fn rows(rows: &[(f64, f64, f64, f64)]) -> Ohlc {
    Ohlc {
        open: rows.iter().map(|r| r.0).collect(),
        high: rows.iter().map(|r| r.1).collect(),
        low: rows.iter().map(|r| r.2).collect(),
        close: rows.iter().map(|r| r.3).collect(),
    }
}

/// A trade as (side, entry row, exit row, entry price, exit price, reason).
type Row = (i8, usize, usize, f64, f64, ExitReason);

fn plain(trades: &[Trade]) -> Vec<Row> {
    trades
        .iter()
        .map(|t| {
            (
                t.side,
                t.entry_row,
                t.exit_row,
                t.entry_price,
                t.exit_price,
                t.reason,
            )
        })
        .collect()
}

/// A kept trade as a [`Row`].
fn kept_rows(trades: &[sweepflight_kernel::Trade]) -> Vec<Row> {
    trades
        .iter()
        .map(|t| {
            (
                t.side,
                t.entry_row,
                t.exit_row,
                t.entry_price,
                t.exit_price,
                t.reason,
            )
        })
        .collect()
}

/// The fast loop's trades for one signal series and its exits: the kernel's formula sweep over
/// a program whose conditions read them back from a column.
fn fast(bars: &Bars<'_>, signals: &[i8], exits: (&[bool], &[bool]), exec: &Execution) -> Vec<Row> {
    // The signals and exits become a code in the volume column the formulas read: 1 long,
    // 2 short, + 4 exit long, + 8 exit short.
    let code: Vec<f64> = (0..signals.len())
        .map(|i| {
            let s = match signals[i] {
                1 => 1.0,
                -1 => 2.0,
                _ => 0.0,
            };
            let el = if exits.0.get(i).copied().unwrap_or(false) {
                4.0
            } else {
                0.0
            };
            let es = if exits.1.get(i).copied().unwrap_or(false) {
                8.0
            } else {
                0.0
            };
            s + el + es
        })
        .collect();
    let bars = Bars {
        volume: Some(&code),
        ..*bars
    };
    let program = Program::new(&[
        (
            Field::Long,
            "volume == 1 or volume == 5 or volume == 9 or volume == 13",
        ),
        (
            Field::Short,
            "volume == 2 or volume == 6 or volume == 10 or volume == 14",
        ),
        (
            Field::ExitLong,
            "(volume >= 4 and volume < 8) or volume >= 12",
        ),
        (Field::ExitShort, "volume >= 8"),
    ])
    .expect("the test program binds");
    let records = Records::new(1, signals.len(), exec.start, true, 0).unwrap();
    let control = SweepControl {
        records: Some(&records),
        ..SweepControl::default()
    };
    sweep_program(&bars, &program, &[], 1, exec, &control).unwrap();
    let kept = records.into_records();
    kept_rows(&kept[0].trades)
}

fn exec(f: impl FnOnce(&mut Execution)) -> Execution {
    let mut e = Execution::new(0.0);
    f(&mut e);
    e
}

/// Both loops on one case; returns the trades (equal).
fn both(bars: &Bars<'_>, signals: &[i8], exits: (&[bool], &[bool]), e: &Execution) -> Vec<Row> {
    let want = plain(&oracle::execute_with_exits(bars, signals, exits, e));
    let got = fast(bars, signals, exits, e);
    assert_eq!(got, want, "{e:?}");
    want
}

#[test]
fn next_open_fills_the_decision_at_the_following_open_and_drops_one_on_the_last_bar() {
    let b = rows(&[
        (10.0, 10.0, 10.0, 10.0),
        (11.0, 12.0, 10.5, 11.5),
        (12.0, 13.0, 11.0, 12.5),
        (13.0, 14.0, 12.0, 13.0),
        (14.0, 15.0, 13.0, 14.5),
    ]);
    let e = exec(|e| e.fill = Fill::NextOpen);
    // Long decided on bar 0, filled at open[1] = 11; short decided on bar 2 filled at open[3]
    // = 13; a long decided on the last bar is dropped; the short closes at the last close.
    let t = both(&b.bars(), &[1, 0, -1, 0, 1], (&[], &[]), &e);
    assert_eq!(
        t,
        vec![
            (1, 1, 3, 11.0, 13.0, ExitReason::Signal),
            (-1, 3, 4, 13.0, 14.5, ExitReason::End),
        ]
    );
}

#[test]
fn a_gap_through_the_stop_fills_at_the_open_and_the_stop_loss_comes_first() {
    // Long at close[0] = 100 with a 5% stop (95) and a 5% take-profit (105).
    let b = rows(&[
        (100.0, 100.0, 100.0, 100.0),
        (99.0, 101.0, 97.0, 98.0),
        // Gaps down through 95: filled at the open, 90.
        (90.0, 92.0, 89.0, 91.0),
    ]);
    let e = exec(|e| {
        e.stops = StopsOn::HighLow;
        e.stop_loss = Some(0.05);
        e.take_profit = Some(0.05);
    });
    let t = both(&b.bars(), &[1, 0, 0], (&[], &[]), &e);
    assert_eq!(t, vec![(1, 0, 2, 100.0, 90.0, ExitReason::StopLoss)]);
    // Both stops inside one bar: the stop-loss, at its price.
    let b = rows(&[(100.0, 100.0, 100.0, 100.0), (100.0, 106.0, 94.0, 100.0)]);
    let t = both(&b.bars(), &[1, 0], (&[], &[]), &e);
    assert_eq!(t, vec![(1, 0, 1, 100.0, 95.0, ExitReason::StopLoss)]);
    // A short's take-profit when the bar gaps through it: the open, better than the price.
    let b = rows(&[(100.0, 100.0, 100.0, 100.0), (90.0, 91.0, 89.0, 90.0)]);
    let t = both(&b.bars(), &[-1, 0], (&[], &[]), &e);
    assert_eq!(t, vec![(-1, 0, 1, 100.0, 90.0, ExitReason::TakeProfit)]);
}

#[test]
fn a_trail_follows_the_best_price_then_hits() {
    // Long at 100 with a 10% trail on highs: the peak goes 100 -> 120 (high of bar 1) -> 130
    // (bar 2); bar 3's low 116 is under 130 * 0.9 = 117: out at 117.
    let b = rows(&[
        (100.0, 100.0, 100.0, 100.0),
        (105.0, 120.0, 104.0, 115.0),
        (116.0, 130.0, 115.0, 125.0),
        (124.0, 125.0, 116.0, 118.0),
        (118.0, 119.0, 117.0, 118.0),
    ]);
    let e = exec(|e| {
        e.stops = StopsOn::HighLow;
        e.trailing_stop = Some(0.1);
    });
    let t = both(&b.bars(), &[1, 0, 0, 0, 0], (&[], &[]), &e);
    assert_eq!(
        t[0],
        (
            1,
            0,
            3,
            100.0,
            130.0 * (1.0 - 0.1),
            ExitReason::TrailingStop
        )
    );
    // With a fixed stop at 20% too, the trail is tighter: still reported as the trail. With
    // the fixed stop tighter than the trail at the hit, it is the stop-loss.
    let e2 = Execution {
        stop_loss: Some(0.2),
        ..e
    };
    assert_eq!(
        both(&b.bars(), &[1, 0, 0, 0, 0], (&[], &[]), &e2)[0].5,
        ExitReason::TrailingStop
    );
    // On closes, the peak is the best close: 125, the trail 112.5, never hit before the end.
    let e3 = Execution {
        stops: StopsOn::Close,
        ..e
    };
    let t = both(&b.bars(), &[1, 0, 0, 0, 0], (&[], &[]), &e3);
    assert_eq!(t, vec![(1, 0, 4, 100.0, 118.0, ExitReason::End)]);
}

#[test]
fn slippage_moves_every_fill_but_the_take_profit() {
    let s = 0.01;
    let b = rows(&[
        (100.0, 100.0, 100.0, 100.0),
        (101.0, 102.0, 100.0, 101.0),
        (102.0, 103.0, 101.0, 102.0),
        (103.0, 120.0, 102.0, 110.0),
    ]);
    // Close fills: a long bought at 100 * 1.01, reversed at 101: sold at 101 * 0.99, the short
    // sold at 101 * 0.99 and bought back at the end at 110 * 1.01.
    let e = exec(|e| e.slippage = s);
    let t = both(&b.bars(), &[1, -1, 0, 0], (&[], &[]), &e);
    assert_eq!(
        t,
        vec![
            (
                1,
                0,
                1,
                100.0 * (1.0 + s),
                101.0 * (1.0 - s),
                ExitReason::Signal
            ),
            (
                -1,
                1,
                3,
                101.0 * (1.0 - s),
                110.0 * (1.0 + s),
                ExitReason::End
            ),
        ]
    );
    // Next-open fills: at the adjusted open.
    let e = exec(|e| {
        e.slippage = s;
        e.fill = Fill::NextOpen;
    });
    let t = both(&b.bars(), &[1, 0, -1, 0], (&[], &[]), &e);
    assert_eq!(
        t[0],
        (
            1,
            1,
            3,
            101.0 * (1.0 + s),
            103.0 * (1.0 - s),
            ExitReason::Signal
        )
    );
    // A take-profit fill is not adjusted; a stop-loss fill is.
    let e = exec(|e| {
        e.slippage = s;
        e.stops = StopsOn::HighLow;
        e.take_profit = Some(0.1);
    });
    let t = both(&b.bars(), &[1, 0, 0, 0], (&[], &[]), &e);
    let entry = 100.0 * (1.0 + s);
    assert_eq!(
        t,
        vec![(1, 0, 3, entry, entry * (1.0 + 0.1), ExitReason::TakeProfit)]
    );
    let e = exec(|e| {
        e.slippage = s;
        e.stops = StopsOn::HighLow;
        e.stop_loss = Some(0.001);
    });
    let t = both(&b.bars(), &[-1, 0, 0, 0], (&[], &[]), &e);
    let entry = 100.0 * (1.0 - s);
    let slp = entry * (1.0 + 0.001);
    assert_eq!(
        t,
        vec![(
            -1,
            0,
            1,
            entry,
            101.0f64.max(slp) * (1.0 + s),
            ExitReason::StopLoss
        )]
    );
}

#[test]
fn exits_and_reversals_on_one_bar_with_next_open() {
    let b = rows(&[
        (10.0, 10.0, 10.0, 10.0),
        (11.0, 11.0, 11.0, 11.0),
        (12.0, 12.0, 12.0, 12.0),
        (13.0, 13.0, 13.0, 13.0),
        (14.0, 14.0, 14.0, 14.0),
    ]);
    let e = exec(|e| e.fill = Fill::NextOpen);
    // Long from open[1]; on bar 2 an exit and a new long: closed and reopened at open[3].
    let exits = [false, false, true, false, false];
    let t = both(&b.bars(), &[1, 0, 1, 0, 0], (&exits, &[]), &e);
    assert_eq!(
        t,
        vec![
            (1, 1, 3, 11.0, 13.0, ExitReason::Exit),
            (1, 3, 4, 13.0, 14.0, ExitReason::End),
        ]
    );
    // Long only: a short signal closes at the next open and opens nothing.
    let e = Execution {
        side: Side::Long,
        ..e
    };
    let t = both(&b.bars(), &[1, 0, -1, 0, 0], (&[], &[]), &e);
    assert_eq!(t, vec![(1, 1, 3, 11.0, 13.0, ExitReason::Signal)]);
}

#[test]
fn the_defaults_are_v1_2_and_missing_columns_are_refused() {
    let o = Ohlc::random(400, 3);
    let closes = Bars::closes(&o.close);
    let sig: Vec<i8> = (0..400).map(|i| [1, 0, 0, -1, 0][i % 5]).collect();
    let e = Execution::new(0.0009);
    assert_eq!(
        plain(&oracle::execute_with_exits(&closes, &sig, (&[], &[]), &e)),
        plain(&oracle::execute(&o.close, &sig, &e))
    );
    for (e, column) in [
        (exec(|e| e.fill = Fill::NextOpen), "open"),
        (exec(|e| e.stops = StopsOn::HighLow), "open"),
    ] {
        let err = e.check_bars(&closes).unwrap_err().to_string();
        assert!(err.contains(column), "{err}");
        let p = [Params::new(Strategy::SmaCross, &[3.0, 9.0]).unwrap()];
        assert!(sweep_params_on(&closes, &p, &e, &SweepControl::default()).is_err());
    }
    for bad in [-0.1, 0.5, f64::NAN] {
        assert!(exec(|e| e.slippage = bad).validate().is_err());
    }
    assert!(exec(|e| e.trailing_stop = Some(0.0)).validate().is_err());
    // The v1.3 loop's stop blocks are counted in a sweep's memory only where they are built.
    let blocks = sweepflight_kernel::execution::extrema_bytes;
    assert_eq!(blocks(1_000, &Execution::new(0.0009), false), 0);
    assert_eq!(blocks(1_000, &exec(|e| e.stop_loss = Some(0.02)), false), 0);
    // Per bar four prices; per level (blocks of 8, 64, 512, 4,096) two: 125 + 16 + 2 + 1.
    let extremes = (4 * 1_000 + 2 * (125 + 16 + 2 + 1)) * 8;
    assert_eq!(blocks(1_000, &Execution::new(0.0009), true), extremes);
    assert_eq!(
        blocks(1_000, &exec(|e| e.fill = Fill::NextOpen), false),
        extremes
    );
    // A sweep of many combos with fixed stops takes a table of every entry's first stop
    // instead (13 bytes a bar and side: the stop's bar, price and reason), within what the
    // blocks are counted at.
    let exits = sweepflight_kernel::execution::exits_bytes;
    let trail = exec(|e| {
        e.fill = Fill::NextOpen;
        e.trailing_stop = Some(0.02);
    });
    assert_eq!(exits(1_000, 435, &trail, false), 2 * 1_000 * 13);
    assert!(exits(1_000, 435, &trail, false) <= blocks(1_000, &trail, false));
    assert_eq!(exits(1_000, 4, &trail, false), 0);
    assert_eq!(exits(1_000, 435, &trail, true), 0);
}

/// A random execution: every option, some of the time.
fn random_exec(r: &mut Rng) -> Execution {
    // Tight stops hit often; wide ones (x10) leave long quiet stretches, where the loop passes
    // over whole blocks of bars.
    let wide = [1.0, 10.0][r.below(2)];
    let pick = |r: &mut Rng, v: f64| (r.below(2) == 0).then_some(v * wide * (0.5 + r.unit()));
    Execution {
        fee: [0.0, 0.0009][r.below(2)],
        side: [Side::Both, Side::Long, Side::Short][r.below(3)],
        stop_loss: pick(r, 0.02),
        take_profit: pick(r, 0.03),
        trailing_stop: pick(r, 0.015),
        fill: [Fill::Close, Fill::NextOpen][r.below(2)],
        stops: [StopsOn::Close, StopsOn::HighLow][r.below(2)],
        slippage: [0.0, 0.0005, 0.01][r.below(3)],
        start: [0, 0, 37][r.below(3)],
    }
}

fn close_enough(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => false,
    }
}

#[test]
fn every_option_on_every_builtin_books_the_oracles_trades() {
    let grids: [(Strategy, Vec<Vec<f64>>); 4] = [
        (
            Strategy::SmaCross,
            vec![
                vec![3.0, 9.0],
                vec![5.0, 20.0],
                vec![9.0, 3.0],
                vec![1.0, 2.0],
            ],
        ),
        (Strategy::Donchian, vec![vec![5.0], vec![20.0]]),
        (
            Strategy::RsiRevert,
            vec![vec![6.0, 30.0, 70.0], vec![14.0, 40.0, 60.0]],
        ),
        (
            Strategy::HmaSar,
            vec![
                vec![4.0, 8.0, 3.0, 2.0, 4.0, 8.0],
                vec![8.0, 16.0, 4.0, 5.0, 10.0, 20.0],
            ],
        ),
    ];
    for seed in 0..120u64 {
        let mut r = Rng(seed * 7919 + 1);
        let o = Ohlc::random(if seed % 3 == 0 { 2600 } else { 600 }, seed);
        let bars = o.bars();
        let e = random_exec(&mut r);
        for (strategy, grid) in &grids {
            // Odd seeds sweep the grid over and over, as many combos as share every entry's
            // first stop (the table of exits).
            let copies = if seed % 2 == 1 {
                EXITS_MIN_COMBOS.div_ceil(grid.len())
            } else {
                1
            };
            let params: Vec<Params> = grid
                .iter()
                .cycle()
                .take(grid.len() * copies)
                .map(|v| Params::new(*strategy, v).unwrap())
                .collect();
            let wants: Vec<Vec<Trade>> = params[..grid.len()]
                .iter()
                .map(|p| {
                    let sig = oracle::signals(&o.close, p);
                    oracle::execute_with_exits(&bars, &sig, (&[], &[]), &e)
                })
                .collect();
            let records = Records::new(params.len(), o.close.len(), e.start, true, 5).unwrap();
            let control = SweepControl {
                records: Some(&records),
                parallel: Some(seed % 2 == 0),
                ..SweepControl::default()
            };
            let got = sweep_params_on(&bars, &params, &e, &control).unwrap();
            let kept = records.into_records();
            for (i, p) in params.iter().enumerate() {
                let want = &wants[i % grid.len()];
                let fast = kept_rows(&kept[i].trades);
                assert_eq!(fast, plain(want), "seed {seed} {p:?} {e:?}");
                let blocks = oracle::block_pnl(&o.close, e.start..o.close.len(), want, 5);
                for (g, w) in kept[i].block_pnl.iter().zip(&blocks) {
                    assert!((g - w).abs() <= 1e-6, "seed {seed} {p:?} blocks");
                }
                check_result(
                    &got[i],
                    want,
                    &o.close,
                    e.start,
                    &format!("{seed} {p:?} {e:?}"),
                );
            }
        }
    }
}

/// A sweep's result against the oracle's trades: the trade figures exactly, every metric
/// within the spec's tolerance.
fn check_result(got: &ComboResult, trades: &[Trade], close: &[f64], start: usize, what: &str) {
    let want = oracle::summarise(trades);
    assert_eq!(got.trades, want.trades, "{what}");
    assert_eq!(got.wins, want.wins, "{what}");
    assert!((got.pnl - want.pnl).abs() <= 1e-6, "{what}");
    let m = oracle::metrics(close, start..close.len(), trades, 252.0);
    let g = got.metrics(252.0);
    // Nets that differ only by rounding (two trades closed by the same stop fraction) have a
    // spread that is rounding noise: the two-pass oracle turns it into an sqn of 1e14, the
    // ledger's sums into none. Neither is a figure; sqn is compared where the spread is real.
    let nets: Vec<f64> = trades.iter().map(|t| t.net).collect();
    let scale = nets.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let spread = nets.iter().fold(0.0f64, |m, v| m.max((v - nets[0]).abs()));
    let sqn = if nets.len() >= 2 && spread <= 1e-9 * scale {
        (None, None)
    } else {
        (g.sqn, m.sqn)
    };
    for (name, a, b) in [
        ("sharpe", g.sharpe, m.sharpe),
        ("sortino", g.sortino, m.sortino),
        ("sqn", sqn.0, sqn.1),
        ("exposure", g.exposure, m.exposure),
        ("profit_factor", g.profit_factor, m.profit_factor),
    ] {
        assert!(close_enough(a, b), "{what} {name}: {a:?} vs {b:?}");
    }
}

/// Sweeps `program` over `combos` on `o` under `e` (a one-byte working set when `tight`, so
/// arrays are recomputed per group; with `tight` off, each combo as many times as share a
/// table of first stops, which a stop formula's values get too) and checks every combo against
/// the interpreter: trades bit for bit, metrics within tolerance. The interpreter's trades, per
/// combo.
fn check_program(
    o: &Ohlc,
    program: &Program,
    combos: &[Vec<f64>],
    e: &Execution,
    tight: bool,
    what: &str,
) -> Vec<Vec<Trade>> {
    let bars = o.bars();
    let copies = if tight { 1 } else { EXITS_MIN_COMBOS };
    let swept: Vec<&Vec<f64>> = combos.iter().cycle().take(combos.len() * copies).collect();
    let flat: Vec<f64> = swept.iter().flat_map(|v| v.iter().copied()).collect();
    let records = Records::new(swept.len(), o.close.len(), e.start, true, 0).unwrap();
    let control = SweepControl {
        records: Some(&records),
        working_set_bytes: if tight { 1 } else { 64 << 20 },
        ..SweepControl::default()
    };
    let got = sweep_program(&bars, program, &flat, swept.len(), e, &control).unwrap();
    let kept = records.into_records();
    let wants: Vec<Vec<Trade>> = combos
        .iter()
        .map(|values| interp::run(&bars, program, values, e))
        .collect();
    for (i, values) in swept.iter().enumerate() {
        let want = &wants[i % combos.len()];
        let label = format!("{what} {values:?} {e:?}");
        assert_eq!(kept_rows(&kept[i].trades), plain(want), "{label}");
        check_result(&got[i], want, &o.close, e.start, &label);
    }
    wants
}

#[test]
fn every_option_on_formula_strategies_with_exits_books_the_interpreters_trades() {
    let programs = [
        vec![
            (Field::Long, "close < sma(close, n) - k * std(close, n)"),
            (Field::Short, "close > sma(close, n) + k * std(close, n)"),
            (Field::ExitLong, "close > sma(close, n)"),
            (Field::ExitShort, "close < sma(close, n)"),
        ],
        vec![
            (Field::Long, "cross_above(ema(close, n), sma(high, n))"),
            (Field::Short, "cross_below(ema(close, n), sma(low, n))"),
            (Field::ExitLong, "rsi(close, 5) > 50 + k * 10"),
        ],
    ];
    for seed in 0..60u64 {
        let mut r = Rng(seed * 104_729 + 3);
        let o = Ohlc::random(if seed % 4 == 0 { 2500 } else { 500 }, seed + 100);
        let e = random_exec(&mut r);
        for fields in &programs {
            let program = Program::new(fields).unwrap();
            let combos: Vec<Vec<f64>> = vec![vec![10.0, 1.0], vec![20.0, 2.0], vec![5.0, 0.5]];
            check_program(
                &o,
                &program,
                &combos,
                &e,
                seed % 2 == 0,
                &format!("seed {seed}"),
            );
        }
    }
}

/// Stop formulas (docs/language.md's execution formulas): a trade's fraction is the formula at
/// the bar whose close decided its entry, NaN or <= 0 meaning no such stop; the fast sweep books
/// the interpreter's trades for every option, with the formulas' parameters swept.
#[test]
fn stop_formulas_book_the_interpreters_trades() {
    let strategies = [
        vec![
            (Field::Long, "cross_above(sma(close, 5), sma(close, n))"),
            (Field::Short, "cross_below(sma(close, 5), sma(close, n))"),
            (Field::StopLoss, "m * atr(14) / close"),
        ],
        vec![
            (Field::Long, "close > lag(highest(high, n), 1)"),
            (Field::Short, "close < lag(lowest(low, n), 1)"),
            (Field::StopLoss, "m * atr(n) / close"),
            (Field::TakeProfit, "2 * m * atr(n) / close"),
            (Field::TrailingStop, "0.01 * m"),
        ],
        vec![
            (Field::Long, "rsi(close, 7) < 30"),
            (Field::ExitLong, "rsi(close, 7) > 55"),
            // Negative for some bars (no stop there), NaN in the warm-up.
            (
                Field::StopLoss,
                "(sma(close, n) - close) / close + 0.001 * m",
            ),
        ],
    ];
    let mut stopped = [0usize; 3];
    for seed in 0..40u64 {
        let mut r = Rng(seed * 31 + 5);
        let o = Ohlc::random(if seed % 5 == 0 { 2400 } else { 500 }, seed + 7);
        let mut e = random_exec(&mut r);
        // The formulas set these; a number beside a formula of another stop stays.
        e.stop_loss = None;
        for fields in &strategies {
            let program = Program::new(fields).unwrap();
            assert_eq!(program.params.len(), 2, "n then m");
            let combos: Vec<Vec<f64>> = (1..=4)
                .flat_map(|m| [vec![10.0, f64::from(m)], vec![20.0, f64::from(m)]])
                .collect();
            let wants = check_program(
                &o,
                &program,
                &combos,
                &e,
                seed % 2 == 0,
                &format!("seed {seed} {fields:?}"),
            );
            for t in wants.iter().flatten() {
                match t.reason {
                    ExitReason::StopLoss => stopped[0] += 1,
                    ExitReason::TakeProfit => stopped[1] += 1,
                    ExitReason::TrailingStop => stopped[2] += 1,
                    _ => {}
                }
            }
        }
    }
    // Every kind of formula stop was hit, many times.
    assert!(stopped.iter().all(|&n| n > 50), "{stopped:?}");
}

#[test]
fn a_stop_formula_that_is_nan_at_entry_sets_no_stop_for_that_trade() {
    // A long decided on bar 0 (the stop formula is NaN there: no stop) and another on bar 3
    // (2%): the price falls 10% after each entry; only the second trade is stopped.
    let b = rows(&[
        (100.0, 100.0, 100.0, 100.0),
        (90.0, 90.0, 90.0, 90.0),
        (100.0, 100.0, 100.0, 100.0),
        (100.0, 100.0, 100.0, 100.0),
        (90.0, 90.0, 90.0, 90.0),
        (91.0, 91.0, 91.0, 91.0),
    ]);
    let stop = [f64::NAN, 0.02, 0.02, 0.02, 0.02, 0.02];
    let e = exec(|_| {});
    let t = oracle::execute_with_stops(
        &b.bars(),
        &[1, 0, -1, 1, 0, 0],
        (&[], &[]),
        [Some(&stop), None, None],
        &e,
    );
    let rows: Vec<(usize, usize, ExitReason)> = t
        .iter()
        .map(|t| (t.entry_row, t.exit_row, t.reason))
        .collect();
    assert_eq!(
        rows,
        vec![
            (0, 2, ExitReason::Signal),
            (2, 3, ExitReason::Signal),
            (3, 4, ExitReason::StopLoss),
        ]
    );
    // The same through the fast sweep: a formula that is NaN where the window is not full.
    let program = Program::new(&[
        (
            Field::Long,
            "close > lag(close, 1) + 5 or close == 100 and lag(close, 2) == 90",
        ),
        (Field::StopLoss, "0.02 + 0 * sma(close, 2)"),
    ])
    .unwrap();
    let records = Records::new(1, 6, 0, true, 0).unwrap();
    let control = SweepControl {
        records: Some(&records),
        ..SweepControl::default()
    };
    sweep_program(&b.bars(), &program, &[], 1, &e, &control).unwrap();
    let want = interp::run(&b.bars(), &program, &[], &e);
    let kept = records.into_records();
    assert_eq!(
        kept[0]
            .trades
            .iter()
            .map(|t| (t.entry_row, t.exit_row, t.reason))
            .collect::<Vec<_>>(),
        want.iter()
            .map(|t| (t.entry_row, t.exit_row, t.reason))
            .collect::<Vec<_>>()
    );
    assert!(
        want.iter().any(|t| t.reason == ExitReason::StopLoss),
        "{want:?}"
    );
}

#[test]
fn a_stop_formula_must_be_a_number() {
    let err = Program::new(&[(Field::Long, "close > 1"), (Field::StopLoss, "close > 2")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("stop_loss") && err.contains("got a condition"),
        "{err}"
    );
    // Its parameters come after the strategy's, in order of first appearance.
    let p = Program::new(&[
        (Field::TrailingStop, "t"),
        (Field::StopLoss, "m * atr(w) / close"),
        (Field::Long, "close > sma(close, n)"),
    ])
    .unwrap();
    let names: Vec<&str> = p.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["n", "m", "w", "t"]);
}

#[test]
fn every_option_name_reads_back_as_its_option() {
    for (i, &name) in Side::NAMES.iter().enumerate() {
        let side = Side::from_name(name).unwrap();
        assert_eq!((side.name(), side as usize), (name, i));
    }
    for (i, &name) in Fill::NAMES.iter().enumerate() {
        let fill = Fill::from_name(name).unwrap();
        assert_eq!((fill.name(), fill as usize), (name, i));
    }
    for (i, &name) in StopsOn::NAMES.iter().enumerate() {
        let stops = StopsOn::from_name(name).unwrap();
        assert_eq!((stops.name(), stops as usize), (name, i));
    }
    for bad in ["", "Both", "next-open", "highlow"] {
        assert_eq!(Side::from_name(bad), None);
        assert_eq!(Fill::from_name(bad), None);
        assert_eq!(StopsOn::from_name(bad), None);
    }
}
