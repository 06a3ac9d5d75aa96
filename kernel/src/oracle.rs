//! The plain, obviously-correct implementation of `spec/kernel.md`, kept as the test oracle.
//!
//! Nothing here is shared between combos or vectorised: each WMA is the textbook double loop
//! with an explicit NaN check, each combo computes its own seven WMAs. It is slow on purpose;
//! the fast path in [`crate::sweep`] must agree with it bit for bit.

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
