//! The plain, obviously-correct implementation of the kernel's definition (docs/kernel.md), kept
//! as the test oracle.
//!
//! Nothing here is shared between combos or vectorised: each WMA is the textbook double loop
//! with an explicit NaN check, each combo computes its own seven WMAs. It is slow on purpose;
//! the fast path in [`crate::sweep`] must agree with it bit for bit.
//!
//! The v1.2 strategies, the execution loop and booking are here too, each written from
//! strategies.md on its own ([`run`]): one indicator at a time, one signal per bar, the spec's
//! bar-by-bar loop. Nothing below calls the fast path's modules.

use std::ops::Range;

use crate::execution::{Execution, ExitReason, Fill, Side, StopsOn};
use crate::ledger::Metrics;
use crate::lines::Bars;
use crate::{Combo, ComboResult, signal, wma::denominator};

/// `WMA(x, n)` exactly as the spec writes it (pandas `rolling(n).apply` semantics).
///
/// # Panics
/// If `n == 0`.
pub fn wma(x: &[f64], n: usize) -> Vec<f64> {
    assert!(n >= 1, "window must be >= 1");
    let denom = denominator(n);
    (0..x.len())
        .map(|i| {
            if i + 1 < n {
                return f64::NAN;
            }
            let window = &x[i + 1 - n..=i];
            if window.iter().any(|v| v.is_nan()) {
                return f64::NAN;
            }
            let mut sum = 0.0;
            #[expect(
                clippy::needless_range_loop,
                reason = "the spec's index form, on purpose"
            )]
            for k in 0..n {
                sum += window[k] * (k + 1) as f64;
            }
            sum / denom
        })
        .collect()
}

/// `HMA = WMA(2*WMA(x, half) - WMA(x, full), sqrt)`.
pub fn hma(x: &[f64], half: usize, full: usize, sqrt: usize) -> Vec<f64> {
    let (h, f) = (wma(x, half), wma(x, full));
    let diff: Vec<f64> = h.iter().zip(&f).map(|(h, f)| 2.0 * h - f).collect();
    wma(&diff, sqrt)
}

/// `HMA3 = WMA(3*WMA(x, p3) - WMA(x, p2) - WMA(x, p), p)`.
pub fn hma3(x: &[f64], p3: usize, p2: usize, p: usize) -> Vec<f64> {
    let (w3, w2, w1) = (wma(x, p3), wma(x, p2), wma(x, p));
    let diff: Vec<f64> = (0..x.len()).map(|i| 3.0 * w3[i] - w2[i] - w1[i]).collect();
    wma(&diff, p)
}

/// One combo on one series, computed from scratch.
pub fn run_combo(close: &[f64], combo: &Combo, fee: f64) -> ComboResult {
    let [half, full, sqrt, p3, p2, p] = combo.windows().map(|w| w as usize);
    let a = hma(close, half, full, sqrt);
    let b = hma3(close, p3, p2, p);
    signal::run(close, &a, &b, fee)
}

/// Every combo, one after another, in input order.
pub fn sweep(close: &[f64], combos: &[Combo], fee: f64) -> Vec<ComboResult> {
    combos.iter().map(|c| run_combo(close, c, fee)).collect()
}

/// `SMA(x, n)`: a fresh sum per output, oldest term first, then one division by `n`.
pub fn sma(x: &[f64], n: usize) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            if i + 1 < n {
                return f64::NAN;
            }
            let mut sum = 0.0;
            for v in &x[i + 1 - n..=i] {
                sum += v;
            }
            sum / n as f64
        })
        .collect()
}

/// `EMA(x, n)` as strategies.md writes it.
pub fn ema(x: &[f64], n: usize) -> Vec<f64> {
    let alpha = 2.0 / (n as f64 + 1.0);
    let beta = 1.0 - alpha;
    let mut e = vec![0.0; x.len()];
    for i in 0..x.len() {
        e[i] = if i == 0 {
            x[0]
        } else {
            alpha * x[i] + beta * e[i - 1]
        };
    }
    e
}

/// Wilder's `RSI(x, n)` as strategies.md writes it; NaN where undefined (`k < n`).
pub fn rsi(x: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    let gain = |k: usize| f64::max(x[k] - x[k - 1], 0.0);
    let loss = |k: usize| f64::max(x[k - 1] - x[k], 0.0);
    let nf = n as f64;
    let (mut g, mut l) = (0.0, 0.0);
    #[expect(
        clippy::needless_range_loop,
        reason = "the spec's index form, on purpose"
    )]
    for k in 0..x.len() {
        if k < n {
            continue;
        }
        if k == n {
            let (mut sg, mut sl) = (0.0, 0.0);
            for j in 1..=n {
                sg += gain(j);
                sl += loss(j);
            }
            g = sg / nf;
            l = sl / nf;
        } else {
            g = (g * (nf - 1.0) + gain(k)) / nf;
            l = (l * (nf - 1.0) + loss(k)) / nf;
        }
        out[k] = if g == 0.0 && l == 0.0 {
            50.0
        } else if l == 0.0 {
            100.0
        } else {
            100.0 - 100.0 / (1.0 + g / l)
        };
    }
    out
}

/// The `donchian` signal: the max and min of the `n` closes before each bar, found by looking.
pub fn donchian_signals(x: &[f64], n: usize) -> Vec<i8> {
    (0..x.len())
        .map(|i| {
            if i < n {
                return 0;
            }
            let before = &x[i - n..i];
            let hi = before.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lo = before.iter().copied().fold(f64::INFINITY, f64::min);
            if x[i] > hi {
                1
            } else if x[i] < lo {
                -1
            } else {
                0
            }
        })
        .collect()
}

/// +1 where `b` crosses above `a`, -1 where below, 0 elsewhere (any of the four values NaN: 0).
pub(crate) fn cross_signals(a: &[f64], b: &[f64]) -> Vec<i8> {
    let mut out = vec![0i8; a.len()];
    for i in 1..a.len() {
        let (a0, a1, b0, b1) = (a[i - 1], a[i], b[i - 1], b[i]);
        if a0.is_nan() || a1.is_nan() || b0.is_nan() || b1.is_nan() {
            continue;
        }
        if b1 > a1 && b0 <= a0 {
            out[i] = 1;
        } else if b1 < a1 && b0 >= a0 {
            out[i] = -1;
        }
    }
    out
}

/// A strategy's definition as the oracle runs it: one signal per bar of a computed range
/// (the built-ins' definitions from strategies.md are beside their rows,
/// [`crate::builtins::Params`]'s implementation).
pub trait Signals {
    /// One signal per bar of `x`: +1 long, -1 short, 0 none.
    fn signals(&self, x: &[f64]) -> Vec<i8>;
}

/// One signal per bar of `x` (a computed range) for `params`.
pub fn signals(x: &[f64], params: &impl Signals) -> Vec<i8> {
    params.signals(x)
}

/// One booked trade, as the oracle's loop books it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trade {
    /// +1 long, -1 short.
    pub side: i8,
    /// Bar of entry (within the closes given to [`execute`]).
    pub entry_row: usize,
    /// Bar of exit.
    pub exit_row: usize,
    /// Close at entry.
    pub entry_price: f64,
    /// Close at exit.
    pub exit_price: f64,
    /// `((1 + ret) * (1 - fee) - 1) * 100`, `ret = side * (exit / entry - 1)`.
    pub net: f64,
    /// Why it was closed.
    pub reason: ExitReason,
}

/// The spec's execution loop, bar by bar, over `signals` from bar `exec.start`: every booked
/// trade in order.
pub fn execute(close: &[f64], signals: &[i8], exec: &Execution) -> Vec<Trade> {
    execute_with_exits(&Bars::closes(close), signals, (&[], &[]), exec)
}

/// An action decided on a bar's close (strategies.md, "Execution, v1.3").
#[derive(Debug, Clone, Copy)]
enum Action {
    Close(ExitReason),
    /// The side and the trade's stop fractions.
    Enter(i8, [Option<f64>; 3]),
}

/// The loop of strategies.md's "Execution, v1.3" over `bars`, written as the spec writes it,
/// with the exit conditions of a formula strategy (docs/language.md): at each bar, after the
/// stops and before the signal, a long position closes where `exits.0` holds and a short one
/// where `exits.1` does (an empty slice: never). With the default options it is v1.2's loop.
pub fn execute_with_exits(
    bars: &Bars<'_>,
    signals: &[i8],
    exits: (&[bool], &[bool]),
    exec: &Execution,
) -> Vec<Trade> {
    execute_with_stops(bars, signals, exits, [None; 3], exec)
}

/// [`execute_with_exits`] with stop formulas (docs/language.md's execution formulas): where
/// `stops[k]` is given (stop-loss, take-profit, trailing stop), a trade's fraction is its value
/// at the bar whose close decided the entry (NaN or <= 0: no such stop for that trade) instead
/// of the number in `exec`.
pub fn execute_with_stops(
    bars: &Bars<'_>,
    signals: &[i8],
    exits: (&[bool], &[bool]),
    stops: [Option<&[f64]>; 3],
    exec: &Execution,
) -> Vec<Trade> {
    let close = bars.close;
    // The fractions of a trade decided at bar i.
    let fractions = |i: usize| -> [Option<f64>; 3] {
        let fixed = [exec.stop_loss, exec.take_profit, exec.trailing_stop];
        let mut out = [None; 3];
        for k in 0..3 {
            out[k] = match stops[k] {
                Some(values) => {
                    if values[i] > 0.0 {
                        Some(values[i])
                    } else {
                        None
                    }
                }
                None => fixed[k],
            };
        }
        out
    };
    let n = close.len();
    let exit_at = |e: &[bool], i: usize| e.get(i).copied().unwrap_or(false);
    let buy = |p: f64| p * (1.0 + exec.slippage);
    let sell = |p: f64| p * (1.0 - exec.slippage);
    // A long's entry and a short's exit are buys.
    let enter_price = |d: i8, p: f64| if d > 0 { buy(p) } else { sell(p) };
    let exit_price = |d: i8, p: f64| if d > 0 { sell(p) } else { buy(p) };
    let fee = exec.fee;
    let mut trades = Vec::new();
    let mut book = |pos: i8, entry: f64, entry_row: usize, exit: f64, i: usize, why: ExitReason| {
        let ret = f64::from(pos) * (exit / entry - 1.0);
        trades.push(Trade {
            side: pos,
            entry_row,
            exit_row: i,
            entry_price: entry,
            exit_price: exit,
            net: ((1.0 + ret) * (1.0 - fee) - 1.0) * 100.0,
            reason: why,
        });
    };
    let (mut pos, mut entry, mut entry_row, mut peak) = (0i8, 0.0f64, 0usize, 0.0f64);
    let mut trade: [Option<f64>; 3] = [None; 3];
    let mut pending: Vec<Action> = Vec::new();
    let next_open = exec.fill == Fill::NextOpen;
    let high_low = exec.stops == StopsOn::HighLow;
    let col = |c: Option<&[f64]>, i: usize| c.expect("the options' columns are present")[i];
    for i in exec.start..n {
        // 1. The actions decided at bar i - 1, at open[i].
        for act in std::mem::take(&mut pending) {
            let o = col(bars.open, i);
            match act {
                Action::Close(why) => {
                    book(pos, entry, entry_row, exit_price(pos, o), i, why);
                    pos = 0;
                }
                Action::Enter(d, fr) => {
                    pos = d;
                    entry = enter_price(d, o);
                    entry_row = i;
                    peak = entry;
                    trade = fr;
                }
            }
        }
        // 2. The stops.
        let from_entry = if next_open {
            i >= entry_row
        } else {
            i > entry_row
        };
        if pos != 0 && from_entry {
            let long = pos > 0;
            let fixed = trade[0].map(|f| {
                if long {
                    entry * (1.0 - f)
                } else {
                    entry * (1.0 + f)
                }
            });
            let trail = trade[2].map(|f| {
                if long {
                    peak * (1.0 - f)
                } else {
                    peak * (1.0 + f)
                }
            });
            let (slp, trailing) = match (fixed, trail) {
                (Some(s), Some(t)) => {
                    if (long && t > s) || (!long && t < s) {
                        (Some(t), true)
                    } else {
                        (Some(s), false)
                    }
                }
                (Some(s), None) => (Some(s), false),
                (None, Some(t)) => (Some(t), true),
                (None, None) => (None, false),
            };
            let tpp = trade[1].map(|f| {
                if long {
                    entry * (1.0 + f)
                } else {
                    entry * (1.0 - f)
                }
            });
            let mut hit: Option<(f64, ExitReason)> = None;
            if high_low {
                let (o, h, l) = (col(bars.open, i), col(bars.high, i), col(bars.low, i));
                if let Some(p) = slp {
                    if long && l <= p {
                        hit = Some((o.min(p), ExitReason::StopLoss));
                    } else if !long && h >= p {
                        hit = Some((o.max(p), ExitReason::StopLoss));
                    }
                }
                if hit.is_none()
                    && let Some(p) = tpp
                {
                    if long && h >= p {
                        hit = Some((o.max(p), ExitReason::TakeProfit));
                    } else if !long && l <= p {
                        hit = Some((o.min(p), ExitReason::TakeProfit));
                    }
                }
            } else {
                let c = close[i];
                if let Some(p) = slp
                    && (long && c <= p || !long && c >= p)
                {
                    hit = Some((c, ExitReason::StopLoss));
                }
                if hit.is_none()
                    && let Some(p) = tpp
                    && (long && c >= p || !long && c <= p)
                {
                    hit = Some((c, ExitReason::TakeProfit));
                }
            }
            if let Some((price, why)) = hit {
                let (exit, why) = match why {
                    ExitReason::TakeProfit => (price, why),
                    _ if trailing => (exit_price(pos, price), ExitReason::TrailingStop),
                    _ => (exit_price(pos, price), why),
                };
                book(pos, entry, entry_row, exit, i, why);
                pos = 0;
            }
        }
        if pos > 0 {
            peak = peak.max(if high_low {
                col(bars.high, i)
            } else {
                close[i]
            });
        } else if pos < 0 {
            peak = peak.min(if high_low { col(bars.low, i) } else { close[i] });
        }
        // 3. Decisions on bar i's close: each acts on the position the decisions before it
        // leave; with next_open they wait for open[i + 1] (dropped on the last bar).
        let mut decided = pos;
        let mut actions: Vec<Action> = Vec::new();
        if decided > 0 && exit_at(exits.0, i) || decided < 0 && exit_at(exits.1, i) {
            actions.push(Action::Close(ExitReason::Exit));
            decided = 0;
        }
        let s = signals[i];
        let side_rule = exec.side == Side::Long && s == -1 || exec.side == Side::Short && s == 1;
        if side_rule {
            if decided == -s {
                actions.push(Action::Close(ExitReason::Signal));
            }
        } else if s != 0 && s != decided {
            if decided != 0 {
                actions.push(Action::Close(ExitReason::Signal));
            }
            actions.push(Action::Enter(s, fractions(i)));
        }
        if next_open {
            pending = actions;
        } else {
            for act in actions {
                match act {
                    Action::Close(why) => {
                        book(pos, entry, entry_row, exit_price(pos, close[i]), i, why);
                        pos = 0;
                    }
                    Action::Enter(d, fr) => {
                        pos = d;
                        entry = enter_price(d, close[i]);
                        entry_row = i;
                        peak = entry;
                        trade = fr;
                    }
                }
            }
        }
    }
    if pos != 0 {
        book(
            pos,
            entry,
            entry_row,
            exit_price(pos, close[n - 1]),
            n - 1,
            ExitReason::End,
        );
    }
    trades
}

/// The result columns of a list of trades: pnl the plain sum in order, the drawdown of the
/// running sum sampled at each booking.
pub fn summarise(trades: &[Trade]) -> ComboResult {
    let mut r = ComboResult::default();
    let mut peak = 0.0f64;
    for t in trades {
        r.pnl += t.net;
        r.trades += 1;
        if t.net > 0.0 {
            r.wins += 1;
        }
        peak = peak.max(r.pnl);
        r.max_drawdown = r.max_drawdown.max(peak - r.pnl);
    }
    r
}

/// One combo on rows `rows` of `close` with a warm-up of `warmup` bars (strategies.md, "The
/// range a strategy sees"): indicators over `[max(0, S - W), E)`, signals and trades over
/// `[S, E)`. `exec.start` is ignored (the range decides it); trade rows are within `close`.
///
/// # Panics
/// If `rows` is empty or past the end of `close`.
pub fn run_trades(
    close: &[f64],
    rows: Range<usize>,
    warmup: usize,
    params: &impl Signals,
    exec: &Execution,
) -> Vec<Trade> {
    assert!(rows.start < rows.end && rows.end <= close.len(), "{rows:?}");
    let from = rows.start.saturating_sub(warmup);
    let x = &close[from..rows.end];
    let exec = Execution {
        start: rows.start - from,
        ..*exec
    };
    let mut trades = execute(x, &signals(x, params), &exec);
    for t in &mut trades {
        t.entry_row += from;
        t.exit_row += from;
    }
    trades
}

/// [`run_trades`], summarised.
pub fn run(
    close: &[f64],
    rows: Range<usize>,
    warmup: usize,
    params: &impl Signals,
    exec: &Execution,
) -> ComboResult {
    summarise(&run_trades(close, rows, warmup, params, exec))
}

/// `Q(i)` of strategies.md for `trades` (rows within `close`): the nets booked at bars <= i,
/// plus the mark of the trade open after bar i.
pub fn mark_to_market(close: &[f64], trades: &[Trade], i: usize) -> f64 {
    let mut v = 0.0;
    for t in trades {
        if t.exit_row <= i {
            v += t.net;
        } else if t.entry_row <= i {
            v += f64::from(t.side) * (close[i] / t.entry_price - 1.0) * 100.0;
        }
    }
    v
}

/// The `equity` action's rows for `trades` over rows `rows`: per bar, the position after it
/// (0 after the final forced close) and `Q`.
pub fn equity(close: &[f64], rows: Range<usize>, trades: &[Trade]) -> Vec<(i8, f64)> {
    rows.map(|i| {
        let open = trades
            .iter()
            .find(|t| t.entry_row <= i && i < t.exit_row)
            .map_or(0, |t| t.side);
        (open, mark_to_market(close, trades, i))
    })
    .collect()
}

/// `block_pnl` of strategies.md: `blocks` blocks over rows `rows`, each `Q(its last row) -
/// Q(the row before it)`, `Q(S - 1) = 0`.
pub fn block_pnl(close: &[f64], rows: Range<usize>, trades: &[Trade], blocks: usize) -> Vec<f64> {
    let (s, n) = (rows.start, rows.len());
    (0..blocks)
        .map(|b| {
            let (first, last) = (s + b * n / blocks, s + (b + 1) * n / blocks - 1);
            let before = if first == s {
                0.0
            } else {
                mark_to_market(close, trades, first - 1)
            };
            mark_to_market(close, trades, last) - before
        })
        .collect()
}

/// Every v1.2 metric of `trades` (rows within `close`) evaluated on rows `rows`, computed bar by
/// bar from the mark-to-market equity `Q` as strategies.md defines it (two-pass means and
/// spreads).
pub fn metrics(
    close: &[f64],
    rows: Range<usize>,
    trades: &[Trade],
    periods_per_year: f64,
) -> Metrics {
    let qs: Vec<f64> = rows
        .clone()
        .map(|i| mark_to_market(close, trades, i))
        .collect();
    // Differencing Q leaves rounding noise where the equity did not move (a mark minus the
    // same mark computed another way): increments under 1e-12 of the equity's scale are 0.
    let noise = 1e-12 * qs.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let d: Vec<f64> = qs
        .windows(2)
        .map(|w| w[1] - w[0])
        .map(|v| if v.abs() <= noise { 0.0 } else { v })
        .collect();
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    // A spread is 0 exactly when every value is the same; otherwise the two-pass formula.
    let std = |x: &[f64]| {
        if x.iter().all(|&v| v == x[0]) {
            return 0.0;
        }
        let m = mean(x);
        (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() as f64 - 1.0)).sqrt()
    };
    let nets: Vec<f64> = trades.iter().map(|t| t.net).collect();
    let n = trades.len() as f64;
    let pnl: f64 = nets.iter().sum();
    let held: usize = trades.iter().map(|t| t.exit_row - t.entry_row).sum();
    let some = |ok: bool, v: f64| ok.then_some(v);
    let losses: f64 = nets.iter().filter(|&&v| v < 0.0).sum();
    let gains: f64 = nets.iter().filter(|&&v| v > 0.0).sum();
    let ann = periods_per_year.sqrt();
    let sharpe = (d.len() >= 2 && std(&d) != 0.0).then(|| mean(&d) / std(&d) * ann);
    let downside = d.iter().map(|v| v.min(0.0).powi(2)).sum::<f64>() / d.len() as f64;
    let sortino = d
        .iter()
        .any(|&v| v < 0.0)
        .then(|| mean(&d) / downside.sqrt() * ann);
    let sqn = (nets.len() >= 2 && std(&nets) != 0.0).then(|| n.sqrt() * mean(&nets) / std(&nets));
    Metrics {
        avg_trade: some(!nets.is_empty(), pnl / n),
        best_trade: nets.iter().copied().reduce(f64::max),
        worst_trade: nets.iter().copied().reduce(f64::min),
        profit_factor: some(nets.iter().any(|&v| v < 0.0), gains / -losses),
        exposure: Some(held as f64 / rows.len() as f64),
        avg_bars: some(!nets.is_empty(), held as f64 / n),
        sharpe,
        sortino,
        sqn,
    }
}

/// True if `a` and `b` hold the same values bit for bit (any NaN equal to any NaN): how the
/// tests compare a fast path's arrays with the oracle's.
pub fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}
