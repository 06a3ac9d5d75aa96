//! The ledger: booked trades folded into a combo's result, in booking order, with every metric
//! of strategies.md ("Metrics").
//!
//! Every metric is a fold over booked trades, so a metric is added in one place and every
//! strategy and execution option gets it. The per-bar ones (`sharpe`, `sortino`) need the
//! increments `d` of the mark-to-market equity, and those are known per trade too: inside a
//! trade of `pos` entered at `entry`, `d(i) = pos * (close[i] - close[i-1]) / entry * 100`; at its
//! exit bar the booked `net` less the mark at the bar before; while flat, 0. So a trade adds its
//! own bars' squares (one pass over the closes it held, vectorised), and the sum of all
//! increments is the PnL itself (they telescope: `Q(E-1) = pnl`, `Q(S) = 0`).

use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::execution::{Book, ExitReason};
use crate::keys::{ArrayCache, ArrayKey};
use crate::record::{Marks, Record, Records, Trade};

/// What one combo earned on one series.
///
/// `pnl` and `trades` are the paper's figures; `wins` and `max_drawdown` cost one comparison and
/// a few adds per booked trade:
/// - `wins`: booked trades whose net return (after the fee) is > 0;
/// - `max_drawdown`: the largest fall, in percentage points, of the cumulative PnL curve (the
///   running sum of net returns, sampled at each booking and starting at 0) below its running
///   peak; 0 when the curve never falls.
///
/// The v1.2 metrics are methods ([`ComboResult::sharpe`] ...) over [`TradeStats`]. Equality
/// compares the four figures above, which are exact (bit for bit the reference's); the metrics
/// are sums of squares whose last bits depend on the order of summation, and strategies.md
/// compares them with a relative tolerance of 1e-9.
#[derive(Debug, Clone, Copy, Default)]
pub struct ComboResult {
    /// Sum of the net returns of all booked trades, in percentage points (not compounded).
    pub pnl: f64,
    /// Number of booked trades, including the final forced close.
    pub trades: u64,
    /// Booked trades with a positive net return.
    pub wins: u64,
    /// Largest peak-to-trough fall of the cumulative PnL, in percentage points (>= 0).
    pub max_drawdown: f64,
    /// The accumulators of the v1.2 metrics.
    pub stats: TradeStats,
}

impl PartialEq for ComboResult {
    fn eq(&self, other: &Self) -> bool {
        (self.pnl, self.trades, self.wins, self.max_drawdown)
            == (other.pnl, other.trades, other.wins, other.max_drawdown)
    }
}

/// Sums over booked trades and over the equity increments `d`, from which every v1.2 metric
/// follows (see the methods of [`ComboResult`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TradeStats {
    /// Sum of `net` over trades with `net > 0`.
    pub gross_profit: f64,
    /// Sum of `net` over trades with `net < 0` (<= 0).
    pub gross_loss: f64,
    /// Largest `net` (meaningful when there is a trade).
    pub best: f64,
    /// Smallest `net`.
    pub worst: f64,
    /// Sum over trades of `exit_row - entry_row`.
    pub bars_held: u64,
    /// The running mean of `net` (Welford's update, trade after trade).
    pub net_mean: f64,
    /// The running sum of squared deviations of `net` from its mean (Welford's `M2`): the
    /// variance without the cancellation of a sum of squares less `n * mean^2`, which loses
    /// every digit when the nets are nearly equal (two trades of -1.5202 and -1.5200 gave an
    /// SQN wrong in its ninth digit).
    pub net_m2: f64,
    /// Sum of `d^2` over the increments.
    pub d_sq: f64,
    /// Sum of `min(d, 0)^2`.
    pub d_neg_sq: f64,
    /// How many increments are < 0 (a bar two bookings share counts once, combined).
    pub d_negs: u32,
    /// Evaluated bars, `E - S` (the increments are one fewer).
    pub evaluated: u64,
    /// `Q(S)`: 0 but for a position entered on the first evaluated bar at a price other than
    /// its close (v1.3's slippage), whose mark there is no increment. The increments sum to
    /// `pnl - start_mark`.
    pub start_mark: f64,
    /// The product from 1.0 of `1.0 + net / 100.0` in booking order (strategies.md v1.3's
    /// `P`; meaningful when there is a trade).
    pub compound: f64,
}

impl ComboResult {
    /// The compounded return of the booked trades in percent (strategies.md, v1.3):
    /// `(P - 1.0) * 100.0`; 0.0 with no trade.
    pub fn total_return(&self) -> f64 {
        if self.trades == 0 {
            0.0
        } else {
            (self.stats.compound - 1.0) * 100.0
        }
    }

    /// `wins / trades`, or 0 when there were no trades.
    pub fn win_rate(&self) -> f64 {
        if self.trades == 0 {
            0.0
        } else {
            self.wins as f64 / self.trades as f64
        }
    }

    /// `pnl / trades`; `None` without a trade.
    pub fn avg_trade(&self) -> Option<f64> {
        (self.trades > 0).then(|| self.pnl / self.trades as f64)
    }

    /// The largest `net`; `None` without a trade.
    pub fn best_trade(&self) -> Option<f64> {
        (self.trades > 0).then_some(self.stats.best)
    }

    /// The smallest `net`; `None` without a trade.
    pub fn worst_trade(&self) -> Option<f64> {
        (self.trades > 0).then_some(self.stats.worst)
    }

    /// Gross profit over gross loss; `None` if no trade lost.
    pub fn profit_factor(&self) -> Option<f64> {
        (self.stats.gross_loss < 0.0).then(|| self.stats.gross_profit / -self.stats.gross_loss)
    }

    /// Bars held over bars evaluated (0 for an empty range).
    pub fn exposure(&self) -> f64 {
        if self.stats.evaluated == 0 {
            0.0
        } else {
            self.stats.bars_held as f64 / self.stats.evaluated as f64
        }
    }

    /// Mean bars per trade; `None` without a trade.
    pub fn avg_bars(&self) -> Option<f64> {
        (self.trades > 0).then(|| self.stats.bars_held as f64 / self.trades as f64)
    }

    /// Increments of the equity: `E - S - 1`.
    fn increments(&self) -> u64 {
        self.stats.evaluated.saturating_sub(1)
    }

    /// `mean(d) / std(d, ddof=1) * sqrt(periods_per_year)`; `None` with fewer than 2
    /// increments or a zero spread.
    pub fn sharpe(&self, periods_per_year: f64) -> Option<f64> {
        let n = self.increments() as f64;
        if n < 2.0 {
            return None;
        }
        let mean = (self.pnl - self.stats.start_mark) / n;
        let var = (self.stats.d_sq - n * mean * mean) / (n - 1.0);
        // From sums, a spread that is truly 0 (every increment equal: no trade) can come out a
        // rounding error above it: below 1e-14 of the mean square it is taken as 0.
        let floor = 1e-14 * self.stats.d_sq / (n - 1.0);
        (var > floor).then(|| mean / var.sqrt() * periods_per_year.sqrt())
    }

    /// `mean(d) / sqrt(sum(min(d, 0)^2) / count(d)) * sqrt(periods_per_year)`; `None` if no
    /// increment is negative.
    pub fn sortino(&self, periods_per_year: f64) -> Option<f64> {
        let n = self.increments() as f64;
        if self.stats.d_negs == 0 || n == 0.0 || self.stats.d_neg_sq <= 0.0 {
            return None;
        }
        let sum = self.pnl - self.stats.start_mark;
        Some(sum / n / (self.stats.d_neg_sq / n).sqrt() * periods_per_year.sqrt())
    }

    /// `sqrt(trades) * mean(net) / std(net, ddof=1)`; `None` with fewer than 2 trades or a zero
    /// spread.
    pub fn sqn(&self) -> Option<f64> {
        if self.trades < 2 {
            return None;
        }
        // Identical nets (best == worst) have a spread of exactly 0, whatever the sums round to.
        if self.stats.best == self.stats.worst {
            return None;
        }
        let n = self.trades as f64;
        let mean = self.pnl / n;
        let var = self.stats.net_m2 / (n - 1.0);
        (var > 0.0).then(|| n.sqrt() * mean / var.sqrt())
    }
}

/// The v1.2 metric columns of one result, in their order (strategies.md); `None` is null.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metrics {
    /// `pnl / trades`.
    pub avg_trade: Option<f64>,
    /// Largest `net`.
    pub best_trade: Option<f64>,
    /// Smallest `net`.
    pub worst_trade: Option<f64>,
    /// Gross profit over gross loss.
    pub profit_factor: Option<f64>,
    /// Bars held over bars evaluated.
    pub exposure: Option<f64>,
    /// Mean bars per trade.
    pub avg_bars: Option<f64>,
    /// Per-bar Sharpe ratio, times `sqrt(periods_per_year)`.
    pub sharpe: Option<f64>,
    /// Per-bar Sortino ratio, times `sqrt(periods_per_year)`.
    pub sortino: Option<f64>,
    /// Van Tharp's system quality number.
    pub sqn: Option<f64>,
}

impl Metrics {
    /// The values in column order (the protocol's `V12_METRIC_COLUMNS`: avg_trade ... sqn).
    pub fn values(&self) -> [Option<f64>; 9] {
        [
            self.avg_trade,
            self.best_trade,
            self.worst_trade,
            self.profit_factor,
            self.exposure,
            self.avg_bars,
            self.sharpe,
            self.sortino,
            self.sqn,
        ]
    }

    /// True if every value equals `other`'s within strategies.md's tolerance (relative 1e-9,
    /// absolute 1e-9 near zero), nulls in the same places.
    pub fn close_to(&self, other: &Self) -> bool {
        self.values()
            .iter()
            .zip(other.values())
            .all(|(a, b)| match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                _ => false,
            })
    }
}

impl ComboResult {
    /// Every v1.2 metric of this result.
    pub fn metrics(&self, periods_per_year: f64) -> Metrics {
        Metrics {
            avg_trade: self.avg_trade(),
            best_trade: self.best_trade(),
            worst_trade: self.worst_trade(),
            profit_factor: self.profit_factor(),
            exposure: Some(self.exposure()),
            avg_bars: self.avg_bars(),
            sharpe: self.sharpe(periods_per_year),
            sortino: self.sortino(periods_per_year),
            sqn: self.sqn(),
        }
    }
}

/// Prefix sums of a series' squared moves, up and down apart, shared by every combo of a sweep:
/// a trade's in-trade increments are its moves times `pos * 100 / entry`, so their squares (and
/// those against the position) over any run of bars are two subtractions. The moves are scaled
/// by a power of two near `1 / max|close|` (exact), so prices of 1e300 or 1e-300 neither
/// overflow nor underflow when squared.
#[derive(Debug, Clone)]
pub struct Moves {
    /// Two values a bar, then the scale: over bars `1..=i`, the sums of `(max(close[k] -
    /// close[k-1], 0) * scale)^2` and of the same for the falls. Two a bar, side by side, so a
    /// trade's ends read one cache line each; twice the closes' size, not more (it is held beside
    /// them for the whole sweep, and the server's cache keeps it beside the lines,
    /// [`crate::ArrayKey::Moves`], in one flat array).
    sums: Arc<[f64]>,
    /// `100 / scale`: a trade's increments are its scaled moves times this over its entry.
    hundred_over_scale: f64,
}

impl Moves {
    /// The prefix sums of `close` from `cache`, computed and offered to it if it has none:
    /// they cost a pass over the series, as much as a short sweep itself.
    pub fn cached(close: &[f64], cache: &dyn ArrayCache) -> Self {
        if let Some(sums) = cache
            .get(ArrayKey::Moves)
            .filter(|s| s.len() == Self::values(close.len()))
        {
            return Self::from_sums(sums);
        }
        let moves = Self::of(close);
        if cache.keeps() {
            cache.insert(ArrayKey::Moves, Arc::clone(&moves.sums));
        }
        moves
    }

    /// The prefix sums of `close`.
    pub fn of(close: &[f64]) -> Self {
        let top = close.iter().fold(0.0f64, |m, &c| m.max(c.abs()));
        let scale = if top > 0.0 && top.is_finite() {
            // 2^-exponent of the largest value: a power of two, so the scaling is exact.
            2f64.powi(-top.log2().ceil() as i32)
        } else {
            1.0
        };
        // Written straight into the shared allocation: `Arc::from(Vec)` would copy it, and the
        // copy's transient double is what a sweep's memory budget does not count.
        let mut sums: Arc<[MaybeUninit<f64>]> = Arc::new_uninit_slice(Self::values(close.len()));
        let out = Arc::get_mut(&mut sums).expect("just allocated, not shared");
        let (bars, tail) = out.split_at_mut(2 * close.len());
        let (mut u, mut d) = (0.0, 0.0);
        for (i, bar) in bars.chunks_exact_mut(2).enumerate() {
            if i > 0 {
                let m = (close[i] - close[i - 1]) * scale;
                let (rise, fall) = (m.max(0.0), m.min(0.0));
                u += rise * rise;
                d += fall * fall;
            }
            bar[0].write(u);
            bar[1].write(d);
        }
        tail[0].write(scale);
        // SAFETY: the loop wrote both values of every bar, and the scale is the last value.
        Self::from_sums(unsafe { sums.assume_init() })
    }

    fn from_sums(sums: Arc<[f64]>) -> Self {
        let scale = sums.last().copied().unwrap_or(1.0);
        Self {
            hundred_over_scale: 100.0 / scale,
            sums,
        }
    }

    /// Values held for a series of `bars`.
    fn values(bars: usize) -> usize {
        2 * bars + 1
    }

    /// Bytes the sums of a series of `bars` take.
    pub fn bytes(bars: usize) -> usize {
        Self::values(bars) * size_of::<f64>()
    }

    /// Squared rises and falls over bars `from + 1 ..= to`.
    fn between(&self, from: usize, to: usize) -> (f64, f64) {
        let (a, b) = (2 * from, 2 * to);
        (
            self.sums[b] - self.sums[a],
            self.sums[b + 1] - self.sums[a + 1],
        )
    }
}

/// What every ledger of one sweep over one series shares: the closes, their moves (for the
/// per-bar metrics, if asked) and the records to keep (if asked).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Books<'a> {
    /// The bars the execution reads (the ledger's closes are theirs).
    pub(crate) bars: crate::lines::Bars<'a>,
    /// What the general loop's stop checks share, when it checks them.
    pub(crate) stops: &'a crate::execution::SharedStops,
    pub(crate) moves: Option<&'a Moves>,
    pub(crate) records: Option<&'a Records>,
}

impl<'a> Books<'a> {
    /// Combo `combo`'s ledger under `exec`.
    pub(crate) fn ledger(&self, exec: &crate::Execution, combo: usize) -> Ledger<'a> {
        let mut ledger = Ledger::over(exec.fee, self.bars.close, self.moves, exec.start)
            .recording(self.records, combo);
        // v1.2's options keep their order of summation, and with it their results' bits.
        ledger.holds_last = !exec.is_v12();
        ledger
    }
}

/// Accumulates booked trades in booking order (PnL is a plain sum in that order).
#[derive(Debug, Clone)]
pub struct Ledger<'a> {
    keep: f64,
    result: ComboResult,
    peak: f64,
    /// The closes the trades' rows index, for the per-bar increments; empty: no per-bar stats.
    close: &'a [f64],
    /// Their moves' prefix sums.
    moves: Option<&'a Moves>,
    /// The exit bar of the last trade and its increment there: a trade opened on that bar and
    /// force-closed on it (the last bar of the range) books into the same increment.
    last_exit: (usize, f64),
    /// The last exit's increment is held out of the sums until a booking on a later bar (or
    /// the end): v1.3's fills put the next trade's entry mark on that bar nearly every trade
    /// (a reversal at the next open), and the two then add once instead of taking a square
    /// back. Off for v1.2's options, whose sums keep their order.
    holds_last: bool,
    /// What the sweep asked to keep besides the result ([`Records`]); boxed, so a ledger that
    /// keeps nothing stays small enough to live in registers.
    detail: Option<Box<Detail<'a>>>,
}

/// One combo's trades and block marks as its ledger keeps them, and where they go.
#[derive(Debug, Clone)]
struct Detail<'a> {
    records: &'a Records,
    combo: usize,
    trades: Vec<Trade>,
    marks: Marks<'a>,
}

impl<'a> Ledger<'a> {
    /// An empty ledger charging `fee` (a fraction) per round trip, keeping only the
    /// trade-level figures.
    pub fn new(fee: f64) -> Self {
        Self::over(fee, &[], None, 0)
    }

    /// A ledger of trades on `close` (whose moves are `moves`, [`Moves::of`]) evaluated from
    /// bar `start`: every metric.
    pub fn over(fee: f64, close: &'a [f64], moves: Option<&'a Moves>, start: usize) -> Self {
        let mut result = ComboResult::default();
        result.stats.evaluated = close.len().saturating_sub(start) as u64;
        result.stats.best = f64::NEG_INFINITY;
        result.stats.worst = f64::INFINITY;
        result.stats.compound = 1.0;
        Self {
            keep: 1.0 - fee,
            result,
            peak: 0.0,
            close,
            moves,
            last_exit: (usize::MAX, 0.0),
            holds_last: false,
            detail: None,
        }
    }

    /// This ledger keeping combo `combo`'s trades and block marks in `records`, if any.
    pub(crate) fn recording(mut self, records: Option<&'a Records>, combo: usize) -> Self {
        self.detail = records.map(|records| {
            Box::new(Detail {
                records,
                combo,
                trades: Vec::new(),
                marks: Marks::new(records.ends()),
            })
        });
        self
    }

    /// The result, once every trade is booked; what the ledger kept goes to its records.
    pub(crate) fn done(self) -> ComboResult {
        let result = self.result();
        if let Some(d) = self.detail {
            let block_pnl = d.marks.finish(result.pnl);
            d.records.put(
                d.combo,
                Record {
                    trades: d.trades,
                    block_pnl,
                },
            );
        }
        result
    }

    /// Books a trade of `pos` (+1 or -1) from `entry` to `exit`: `ret = pos * (exit / entry -
    /// 1)`, `net = ((1 + ret) * (1 - fee) - 1) * 100` (kernel.md); returns `net`.
    #[inline(always)]
    pub fn add(&mut self, pos: f64, entry: f64, exit: f64) -> f64 {
        self.record(pos, entry, exit).0
    }

    /// [`Ledger::add`], returning `(net, ret)`.
    #[inline(always)]
    fn record(&mut self, pos: f64, entry: f64, exit: f64) -> (f64, f64) {
        let ret = pos * (exit / entry - 1.0);
        let net = ((1.0 + ret) * self.keep - 1.0) * 100.0;
        let r = &mut self.result;
        r.pnl += net;
        r.trades += 1;
        r.wins += u64::from(net > 0.0);
        self.peak = self.peak.max(r.pnl);
        r.max_drawdown = r.max_drawdown.max(self.peak - r.pnl);
        let s = &mut r.stats;
        // Branch-free: a net's sign is a coin flip, a branch on it mispredicts half the time.
        s.gross_profit += net.max(0.0);
        s.gross_loss += net.min(0.0);
        s.best = s.best.max(net);
        s.worst = s.worst.min(net);
        let delta = net - s.net_mean;
        s.net_mean += delta / r.trades as f64;
        s.net_m2 += delta * (net - s.net_mean);
        s.compound *= 1.0 + net / 100.0;
        (net, ret)
    }

    /// The result so far.
    pub fn result(&self) -> ComboResult {
        let mut result = self.result;
        if self.holds_last {
            result.stats.add_increment(self.last_exit.1, 0.0, 0.0, 0);
        }
        result
    }
}

impl Book for Ledger<'_> {
    // Inlined into the execution loop: the ledger's fields then stay in registers between
    // trades instead of round-tripping through memory on every call.
    #[inline(always)]
    fn book(
        &mut self,
        pos: f64,
        entry: f64,
        entry_row: usize,
        exit: f64,
        exit_row: usize,
        reason: ExitReason,
    ) {
        let booked = self.result.pnl;
        let (net, ret) = self.record(pos, entry, exit);
        if let Some(d) = self.detail.as_deref_mut() {
            d.marks
                .before_booking(self.close, booked, (pos, entry, entry_row), exit_row);
            if d.records.keeps_trades() {
                d.trades.push(Trade {
                    side: if pos > 0.0 { 1 } else { -1 },
                    entry_row,
                    exit_row,
                    entry_price: entry,
                    exit_price: exit,
                    net,
                    reason,
                });
            }
        }
        let s = &mut self.result.stats;
        s.bars_held += (exit_row - entry_row) as u64;
        let Some(moves) = self.moves else {
            return;
        };
        let inv = 1.0 / entry;
        // The entry bar, when the position is held after it: its mark moves from the entry
        // price to the bar's close. Exactly 0 for an entry at the close without slippage (every
        // v1.2 entry), which then adds nothing; nor is there one on the first evaluated bar,
        // which has no increment (they start at S + 1).
        let first = self.close.len() - s.evaluated as usize;
        if exit_row > entry_row {
            let e = pos * ((self.close[entry_row] - entry) * inv) * 100.0;
            if e != 0.0 {
                if entry_row > first {
                    self.increment(entry_row, e, 0.0, 0.0, 0);
                } else {
                    s.start_mark = e;
                }
            }
        }
        // The increments inside the trade, bars entry_row+1 .. exit_row-1: its moves times
        // pos * 100 / entry; against the position are the falls of a long, the rises of a short.
        // One division a trade; the metrics' tolerance allows multiplying by its result where
        // the reference divides.
        let (sq, neg_sq) = if exit_row > entry_row + 1 {
            let (rises, falls) = moves.between(entry_row, exit_row - 1);
            let k = inv * moves.hundred_over_scale;
            let k2 = k * k;
            let against = if pos > 0.0 { falls } else { rises };
            ((rises + falls) * k2, against * k2)
        } else {
            (0.0, 0.0)
        };
        // The exit bar: the booked net less the mark at the bar before, that is the last move
        // (from the entry on a trade closed on its entry bar) less the fee's share,
        // `net - ret * 100 = -fee * (1 + ret) * 100`: written so, a bar that did not move and
        // paid no fee adds exactly 0 (differencing the two marks would leave rounding noise).
        let before = if exit_row > entry_row {
            self.close[exit_row - 1]
        } else {
            entry
        };
        let d = pos * ((exit - before) * inv) * 100.0 - (1.0 - self.keep) * (1.0 + ret) * 100.0;
        self.increment(exit_row, d, sq, neg_sq, u32::from(neg_sq > 0.0));
    }
}

impl Ledger<'_> {
    /// Adds the increment `d` at bar `row`, with `sq`, `neg_sq` and `negs` of the bars before
    /// it. Two bookings on one bar are one increment: the first one's square is taken back, or,
    /// holding the last exit's increment (`holds_last`), not added yet.
    #[inline(always)]
    fn increment(&mut self, row: usize, mut d: f64, sq: f64, neg_sq: f64, negs: u32) {
        if self.holds_last {
            let (at, held) = self.last_exit;
            if row == at {
                self.last_exit.1 = held + d;
                self.result.stats.add_increment(0.0, sq, neg_sq, negs);
            } else {
                self.last_exit = (row, d);
                self.result.stats.add_increment(held, sq, neg_sq, negs);
            }
            return;
        }
        let s = &mut self.result.stats;
        if row == self.last_exit.0 {
            let first = self.last_exit.1;
            s.d_sq -= first * first;
            s.d_neg_sq -= first.min(0.0) * first.min(0.0);
            s.d_negs -= u32::from(first < 0.0);
            d += first;
        }
        self.last_exit = (row, d);
        self.result.stats.add_increment(d, sq, neg_sq, negs);
    }
}

impl TradeStats {
    /// Adds the increment `d`, with `sq`, `neg_sq` and `negs` of other bars.
    #[inline(always)]
    fn add_increment(&mut self, d: f64, sq: f64, neg_sq: f64, negs: u32) {
        let s = self;
        let down = d.min(0.0);
        s.d_sq += sq + d * d;
        s.d_neg_sq += neg_sq + down * down;
        s.d_negs = s.d_negs.saturating_add(negs + u32::from(d < 0.0));
    }
}
