//! The stop-and-reverse loop and trade booking: from the two indicator lines to a
//! [`ComboResult`].

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
struct Ledger {
    keep: f64,
    result: ComboResult,
    peak: f64,
}

impl Ledger {
    fn new(fee: f64) -> Self {
        Self {
            keep: 1.0 - fee,
            result: ComboResult::default(),
            peak: 0.0,
        }
    }

    fn book(&mut self, pos: f64, entry: f64, exit: f64) {
        let ret = pos * (exit / entry - 1.0);
        let net = ((1.0 + ret) * self.keep - 1.0) * 100.0;
        let r = &mut self.result;
        r.pnl += net;
        r.trades += 1;
        r.wins += u64::from(net > 0.0);
        self.peak = self.peak.max(r.pnl);
        r.max_drawdown = r.max_drawdown.max(self.peak - r.pnl);
    }
}

/// Runs the strategy on `close` with indicator lines `a` (HMA) and `b` (HMA3).
///
/// Bar `i >= 1` is evaluated only where `a[i-1], a[i], b[i-1], b[i]` are all defined. `b`
/// crossing above `a` goes long, below goes short; a signal against the open position closes it
/// at `close[i]` and opens the new one there. An open position is closed at the last bar.
pub(crate) fn run(close: &[f64], a: &[f64], b: &[f64], fee: f64) -> ComboResult {
    debug_assert!(a.len() == close.len() && b.len() == close.len());
    let mut ledger = Ledger::new(fee);
    let mut pos = 0.0f64;
    let mut entry = 0.0f64;
    for i in 1..close.len() {
        let (a0, a1, b0, b1) = (a[i - 1], a[i], b[i - 1], b[i]);
        if a0.is_nan() || a1.is_nan() || b0.is_nan() || b1.is_nan() {
            continue;
        }
        let signal = if b1 > a1 && b0 <= a0 {
            1.0
        } else if b1 < a1 && b0 >= a0 {
            -1.0
        } else {
            continue;
        };
        if signal != pos {
            if pos != 0.0 {
                ledger.book(pos, entry, close[i]);
            }
            pos = signal;
            entry = close[i];
        }
    }
    if pos != 0.0 {
        let last = close[close.len() - 1];
        ledger.book(pos, entry, last);
    }
    ledger.result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_then_reverse_then_forced_close() {
        let close = [100.0, 100.0, 110.0, 121.0, 121.0];
        let nan = f64::NAN;
        // b crosses above a at bar 2, below at bar 3; open short is closed at the last bar.
        let a = [nan, 1.0, 1.0, 1.0, 1.0];
        let b = [nan, 0.0, 2.0, 0.0, 0.0];
        let r = run(&close, &a, &b, 0.0);
        assert_eq!(r.trades, 2);
        // Long 110 -> 121 = +10%, short 121 -> 121 = 0%.
        assert!((r.pnl - 10.0).abs() < 1e-12, "{r:?}");
        assert_eq!(r.wins, 1);
        assert_eq!(r.max_drawdown, 0.0);
    }

    #[test]
    fn fee_is_charged_per_round_trip_and_drawdown_tracks_the_curve() {
        let close = [100.0, 100.0, 90.0, 90.0];
        let a = [0.0, 0.0, 0.0, 0.0];
        let b = [0.0, 1.0, -1.0, -1.0];
        // Long at 100 (bar 1), reversed at 90 (bar 2): -10%; short 90 -> 90 forced: 0%.
        let r = run(&close, &a, &b, 0.001);
        assert_eq!(r.trades, 2);
        let first = ((1.0 - 0.1) * 0.999 - 1.0) * 100.0;
        let second = (1.0 * 0.999 - 1.0) * 100.0;
        assert_eq!(r.pnl, first + second);
        assert_eq!(r.wins, 0);
        assert_eq!(r.max_drawdown, -(first + second));
        assert_eq!(r.win_rate(), 0.0);
    }

    #[test]
    fn no_defined_bars_means_no_trades() {
        let nan = f64::NAN;
        let r = run(&[1.0, 2.0], &[nan, nan], &[nan, nan], 0.0009);
        assert_eq!(r, ComboResult::default());
        assert_eq!(run(&[], &[], &[], 0.0), ComboResult::default());
    }
}
