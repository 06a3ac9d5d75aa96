//! The ledger: booked trades folded into a combo's result, in booking order.
//!
//! Every metric of a run is a fold over its booked trades here, so a metric is added in one
//! place and every strategy and execution option gets it.

use crate::execution::Book;

/// What one combo earned on one series.
///
/// `pnl` and `trades` are the paper's figures. The rest cost one comparison and a few adds per
/// booked trade:
/// - `wins`: booked trades whose net return (after the fee) is > 0;
/// - `max_drawdown`: the largest fall, in percentage points, of the cumulative PnL curve (the
///   running sum of net returns, sampled at each booking and starting at 0) below its running
///   peak; 0 when the curve never falls.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ComboResult {
    /// Sum of the net returns of all booked trades, in percentage points (not compounded).
    pub pnl: f64,
    /// Number of booked trades, including the final forced close.
    pub trades: u64,
    /// Booked trades with a positive net return.
    pub wins: u64,
    /// Largest peak-to-trough fall of the cumulative PnL, in percentage points (>= 0).
    pub max_drawdown: f64,
}

impl ComboResult {
    /// `wins / trades`, or 0 when there were no trades.
    pub fn win_rate(&self) -> f64 {
        if self.trades == 0 {
            0.0
        } else {
            self.wins as f64 / self.trades as f64
        }
    }
}

/// Accumulates booked trades in booking order (PnL is a plain sum in that order).
#[derive(Debug, Clone)]
pub struct Ledger {
    keep: f64,
    result: ComboResult,
    peak: f64,
}

impl Ledger {
    /// An empty ledger charging `fee` (a fraction) per round trip.
    pub fn new(fee: f64) -> Self {
        Self {
            keep: 1.0 - fee,
            result: ComboResult::default(),
            peak: 0.0,
        }
    }

    /// Books a trade of `pos` (+1 or -1) from `entry` to `exit`: `ret = pos * (exit / entry -
    /// 1)`, `net = ((1 + ret) * (1 - fee) - 1) * 100` (kernel.md); returns `net`.
    pub fn add(&mut self, pos: f64, entry: f64, exit: f64) -> f64 {
        let ret = pos * (exit / entry - 1.0);
        let net = ((1.0 + ret) * self.keep - 1.0) * 100.0;
        let r = &mut self.result;
        r.pnl += net;
        r.trades += 1;
        r.wins += u64::from(net > 0.0);
        self.peak = self.peak.max(r.pnl);
        r.max_drawdown = r.max_drawdown.max(self.peak - r.pnl);
        net
    }

    /// The result so far.
    pub fn result(&self) -> ComboResult {
        self.result
    }
}

impl Book for Ledger {
    #[inline]
    fn book(&mut self, pos: f64, entry: f64, _entry_row: usize, exit: f64, _exit_row: usize) {
        self.add(pos, entry, exit);
    }
}
