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

/// `std(x, n)` for each of `windows` (strictly ascending): the means by [`sma`]'s one pass,
/// each turned into its line's deviations in place ([`super::series::std`]'s arithmetic, bit
/// for bit: its means are the SMA's), so no window sums its values twice.
pub fn std(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Arc<[f64]>> {
    use rayon::prelude::*;
    let mut lines = sma(x, windows, parallel);
    let one = |(line, &n): (&mut Arc<[f64]>, &usize)| {
        let line = Arc::get_mut(line).expect("just computed, not shared");
        super::series::std_from_means(x, n, None, line);
    };
    if parallel {
        lines.par_iter_mut().zip(windows).for_each(one);
    } else {
        lines.iter_mut().zip(windows).for_each(one);
    }
    lines
}

/// `std(x, n)` for each of `windows` (strictly ascending) from `means`, each window's
/// `sma(x, n)` line (bit for bit [`sma`]'s, which a group also asked for): [`std`] without its
/// own SMA pass, each line written fresh.
pub fn std_from_means(
    x: &[f64],
    windows: &[usize],
    means: &[&[f64]],
    parallel: bool,
) -> Vec<Arc<[f64]>> {
    use rayon::prelude::*;
    assert_eq!(windows.len(), means.len(), "a mean line a window");
    let one = |(&n, m): (&usize, &&[f64])| {
        let mut line = super::filled_line(x.len(), 0.0);
        let out = Arc::get_mut(&mut line).expect("just allocated, not shared");
        super::series::std_from_means(x, n, Some(m), out);
        line
    };
    if parallel {
        windows.par_iter().zip(means).map(one).collect()
    } else {
        windows.iter().zip(means).map(one).collect()
    }
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

/// A Hull-type line: `wma(scale * wma(x, first[0]) - wma(x, first[1]) - wma(x, first[2]) ...,
/// outer)`, subtracting left to right (`hma(x, h, f, s)`: scale 2, first `[h, f]`, outer `s`;
/// `hma3(x, p3, p2, p)`: scale 3, first `[p3, p2, p]`, outer `p`).
#[derive(Debug, Clone, PartialEq)]
pub struct Hull {
    /// The first first-level line's factor.
    pub scale: f64,
    /// The first-level windows, in the order they are combined.
    pub first: Vec<usize>,
    /// The outer window.
    pub outer: usize,
}

/// Hull-type lines of one input `x` (`hma`, `hma3`): every first-level `wma(x, w)` they need in
/// one shared pass (prefix sharing across windows, the paper kernel's), then each line's own
/// combination and outer WMA. Bit for bit [`super::series::hma`] / [`super::series::hma3`]: the
/// same WMAs (the shared pass equals the single-window one, as the tests hold) and the same
/// operations in the same order.
pub fn hulls(x: &[f64], calls: &[Hull], parallel: bool) -> Vec<Arc<[f64]>> {
    use rayon::prelude::*;
    let mut windows: Vec<usize> = calls.iter().flat_map(|c| c.first.iter().copied()).collect();
    windows.sort_unstable();
    windows.dedup();
    let first = wma(x, &windows, parallel);
    let at = |w: usize| {
        let k = windows
            .binary_search(&w)
            .expect("every first-level window is passed");
        &first[k][..]
    };
    // `a`: the combination before the outer WMA, one buffer per worker (fresh pages for each
    // line's would cost more than its arithmetic).
    let one = |a: &mut Vec<f64>, c: &Hull| -> Arc<[f64]> {
        a.clear();
        a.extend(
            at(c.first[0])
                .iter()
                .zip(at(c.first[1]))
                .map(|(p, q)| c.scale * p - q),
        );
        for &w in &c.first[2..] {
            for (v, q) in a.iter_mut().zip(at(w)) {
                *v -= q;
            }
        }
        let mut line = super::filled_line(x.len(), 0.0);
        super::wma::wma_into(a, c.outer, Arc::get_mut(&mut line).expect("just allocated"));
        line
    };
    if parallel {
        calls.par_iter().map_init(Vec::new, one).collect()
    } else {
        let mut a = Vec::new();
        calls.iter().map(|c| one(&mut a, c)).collect()
    }
}
