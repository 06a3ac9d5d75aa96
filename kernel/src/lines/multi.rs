//! Shared passes: one function of one input for many windows at once, where one pass costs
//! less than a computation per window (the registry's `multi` entries). Each line is bit for
//! bit what [`super::series`] computes for its window (the tests hold them so); the passes
//! are the v1.2 strategies' and the paper kernel's, whose arithmetic the language's functions
//! were written to match.

use std::sync::Arc;

/// `sma(x, n)` for each of `windows` (strictly ascending): one pass whose cost is the longest
/// window in adds per bar, not the sum of the windows.
pub fn sma(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Arc<[f64]>> {
    super::indicators::sma_multi(x, windows, parallel)
}

/// `wma(x, n)` for each of `windows` (strictly ascending): the paper kernel's prefix-sharing
/// pass, the longest window in multiply-adds per bar.
pub fn wma(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Arc<[f64]>> {
    let mut lines: Vec<Arc<[f64]>> = windows
        .iter()
        .map(|_| super::filled_line(x.len(), 0.0))
        .collect();
    let mut outs: Vec<&mut [f64]> = lines
        .iter_mut()
        .map(|l| Arc::get_mut(l).expect("just allocated, not shared"))
        .collect();
    super::wma::wma_multi(x, windows, &mut outs, parallel);
    lines
}

/// `ema(x, n)` for each of `windows`: the recurrences side by side in vector lanes, each from
/// the input's first defined bar (NaN before it), as the language's `ema` starts.
pub fn ema(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Arc<[f64]>> {
    let first = x.iter().position(|v| !v.is_nan()).unwrap_or(x.len());
    if first == 0 {
        return super::indicators::ema_multi(x, windows, parallel);
    }
    let tails = super::indicators::ema_multi(&x[first..], windows, parallel);
    tails
        .into_iter()
        .map(|tail| {
            let mut line = vec![f64::NAN; first];
            line.extend_from_slice(&tail);
            Arc::from(line)
        })
        .collect()
}
