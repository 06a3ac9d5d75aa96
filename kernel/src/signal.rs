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

/// Per-bar state of the two lines, one byte each: [`ABOVE`] where `b > a`, [`BELOW`] where
/// `b < a`, `0` where they are equal, [`UNDEFINED`] where either is NaN.
pub(crate) const ABOVE: u8 = 1;
/// See [`ABOVE`].
pub(crate) const BELOW: u8 = 2;
/// See [`ABOVE`].
pub(crate) const UNDEFINED: u8 = 3;

/// [`run`], faster and with the same result bit for bit.
///
/// The lines are first reduced to one sign byte per bar (a loop the compiler vectorises), and
/// the crosses are found by comparing neighbouring bytes eight at a time: a cross at bar `i` is
/// a state at `i` that is above or below, differs from the state at `i - 1`, and follows a
/// defined bar, which is exactly the reference's test (`b0 <= a0` on defined values is "not
/// above").
/// Long windows cross rarely, so most words of eight bars are skipped with one comparison.
/// Trades are booked in bar order with the reference's arithmetic.
pub(crate) fn run_fast(
    close: &[f64],
    a: &[f64],
    b: &[f64],
    fee: f64,
    signs: &mut Vec<u8>,
) -> ComboResult {
    let n = close.len();
    debug_assert!(a.len() == n && b.len() == n);
    crate::vector::signs(a, b, signs);
    let mut ledger = Ledger::new(fee);
    let mut pos = 0.0f64;
    let mut entry = 0.0f64;
    let word = |i: usize| u64::from_le_bytes(signs[i..i + 8].try_into().expect("8 bytes"));
    let mut i = 1;
    while i < n {
        // Eight bars whose signs equal their predecessors' hold no cross.
        if i + 8 <= n && word(i) == word(i - 1) {
            i += 8;
            continue;
        }
        let (s0, s1) = (signs[i - 1], signs[i]);
        if s1 != s0 && (s1 == ABOVE || s1 == BELOW) && s0 != UNDEFINED {
            let signal = if s1 == ABOVE { 1.0 } else { -1.0 };
            if signal != pos {
                if pos != 0.0 {
                    ledger.book(pos, entry, close[i]);
                }
                pos = signal;
                entry = close[i];
            }
        }
        i += 1;
    }
    if pos != 0.0 {
        ledger.book(pos, entry, close[n - 1]);
    }
    ledger.result
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
    fn the_fast_loop_equals_the_reference_on_ties_nans_and_word_edges() {
        let nan = f64::NAN;
        let mut signs = Vec::new();
        // Ties (b == a), NaN gaps, crosses right at word boundaries, a repeat cross.
        let a: Vec<f64> = (0..40)
            .map(|i| if i % 9 == 4 { nan } else { 1.0 })
            .collect();
        let b: Vec<f64> = (0..40)
            .map(|i| match i % 7 {
                0 => 1.0,
                1 | 2 => 2.0,
                3 => 0.5,
                4 => nan,
                _ => 1.5,
            })
            .collect();
        let close: Vec<f64> = (0..40).map(|i| 100.0 + i as f64).collect();
        for fee in [0.0, 0.001] {
            assert_eq!(
                run_fast(&close, &a, &b, fee, &mut signs),
                run(&close, &a, &b, fee)
            );
        }
        assert_eq!(
            run_fast(&[], &[], &[], 0.0, &mut signs),
            ComboResult::default()
        );
        assert_eq!(
            run_fast(&[1.0], &[nan], &[nan], 0.0, &mut signs),
            ComboResult::default()
        );
    }

    #[test]
    fn no_defined_bars_means_no_trades() {
        let nan = f64::NAN;
        let r = run(&[1.0, 2.0], &[nan, nan], &[nan, nan], 0.0009);
        assert_eq!(r, ComboResult::default());
        assert_eq!(run(&[], &[], &[], 0.0), ComboResult::default());
    }
}
