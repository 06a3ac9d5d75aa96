//! The indicators of the v1.2 strategies, computed exactly as strategies.md orders their
//! arithmetic (no FMA, no reassociation, one division where one is written), over the closes
//! of one computed range (bar 0 here is the range's first row `R`).
//!
//! - [`sma_multi`]: every requested SMA window in one pass. A running sum started at bar `s`
//!   is, after `n` terms, the fresh oldest-first sum of the window ending at `s + n - 1`, bit for
//!   bit, whatever longer window it goes on to; so the pass costs the longest window in adds per
//!   bar, not the sum of the windows (the WMA pass's prefix sharing, [`super::wma`]). Starts are
//!   blocked so each step is one vector add across a block of starts.
//! - [`ema`] and [`rsi`] are recurrences, sequential in the bars; distinct windows run in
//!   parallel.
//! - [`donchian_signals`] is exact (max and min are exact) with a monotone queue: O(1) per bar.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::Arc;

use rayon::prelude::*;

use super::vector::multiversion;

/// Starts per block of the SMA pass: the partial sums of a block stay in L1.
const BLOCK: usize = 256;

/// Blocks per rayon task.
const BLOCKS_PER_TASK: usize = 32;

/// `SMA(x, n)` for each of `windows` (strictly ascending, >= 1): `NaN` for `i < n - 1`, else
/// `(x[i-n+1] + ... + x[i]) / n`, summed oldest first from 0.0, then one division. Each line is
/// written straight into the shared allocation a cache keeps (no copy to offer it).
///
/// # Panics
/// If the windows are not strictly ascending and >= 1.
pub fn sma_multi(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Arc<[f64]>> {
    assert!(
        windows.first().is_none_or(|&n| n >= 1) && windows.windows(2).all(|w| w[0] < w[1]),
        "windows must be >= 1 and strictly ascending"
    );
    let len = x.len();
    // Left uninitialised but for each window's warm-up (NaN): the pass writes every bar from
    // `n - 1` on, so filling the whole line first would be a wasted pass over fresh memory.
    let mut outs: Vec<Arc<[MaybeUninit<f64>]>> = windows
        .iter()
        .map(|&n| {
            let mut line = Arc::new_uninit_slice(len);
            Arc::get_mut(&mut line).expect("just allocated, not shared")[..(n - 1).min(len)]
                .fill(MaybeUninit::new(f64::NAN));
            line
        })
        .collect();
    if let Some(&shortest) = windows.first() {
        // Starts with an output for at least the shortest window.
        let starts = (len + 1).saturating_sub(shortest);
        let ptrs = Outs(
            outs.iter_mut()
                .map(|o| {
                    Arc::get_mut(o)
                        .expect("not shared yet")
                        .as_mut_ptr()
                        .cast::<f64>()
                })
                .collect(),
        );
        over_starts(starts, parallel, |lo, hi| {
            sma_starts(x, windows, lo, hi, &ptrs)
        });
    }
    outs.into_iter()
        // SAFETY: every element was written: the warm-up above, bars `n - 1..len` by the pass
        // (each start `s < len + 1 - n` writes bar `s + n - 1` of window `n`).
        .map(|o| unsafe { o.assume_init() })
        .collect()
}

multiversion! {
    /// [`sma_multi`]'s lines at the starts `lo..hi`, a block of starts at a time: each step adds
    /// the next value to every start's sum, and a window that ends there writes its means.
    fn sma_starts(x: &[f64], windows: &[usize], lo: usize, hi: usize, ptrs: &Outs) {
        let len = x.len();
        let mut acc = [0.0f64; BLOCK];
        for block in (lo..hi).step_by(BLOCK) {
            let width = BLOCK.min(hi - block);
            acc[..width].fill(0.0);
            let mut next = 0;
            let steps = (len - block).min(windows[windows.len() - 1]);
            for k in 0..steps {
                // Lanes whose window still fits in the series.
                let lanes = width.min(len - block - k);
                for (a, &v) in acc[..lanes]
                    .iter_mut()
                    .zip(&x[block + k..block + k + lanes])
                {
                    *a += v;
                }
                if windows[next] == k + 1 {
                    let n = (k + 1) as f64;
                    let out = ptrs.get(next);
                    for (j, &a) in acc[..lanes].iter().enumerate() {
                        // SAFETY: the output of start `block + j` for window k+1 is element
                        // `block + j + k < len`; starts are split between tasks without
                        // overlap, so no two tasks write one element.
                        unsafe { out.add(block + j + k).write(a / n) };
                    }
                    next += 1;
                    if next == windows.len() {
                        break;
                    }
                }
            }
        }
    }
}

/// Runs `task(lo, hi)` over the window starts `0..starts` in ranges of
/// `BLOCKS_PER_TASK` blocks, on the pool if `parallel` and there is more than one range: the
/// task split shared by the SMA and channel passes (disjoint start ranges, so their outputs are
/// disjoint too).
fn over_starts(starts: usize, parallel: bool, task: impl Fn(usize, usize) + Sync + Send) {
    let per = BLOCK * BLOCKS_PER_TASK;
    let run = |t: usize| task(t * per, ((t + 1) * per).min(starts));
    let tasks = starts.div_ceil(per);
    if parallel && tasks > 1 {
        (0..tasks).into_par_iter().for_each(run);
    } else {
        (0..tasks).for_each(run);
    }
}

/// The outputs of one SMA pass, written by several tasks at disjoint indices.
struct Outs(Vec<*mut f64>);

impl Outs {
    /// Through a method, so closures capture the whole `Outs` (which is `Sync`), not its field.
    fn get(&self, t: usize) -> *mut f64 {
        self.0[t]
    }
}

// SAFETY: the pointers are only written at indices one task owns (see `sma_multi`), and the
// vectors they point into outlive the pass.
unsafe impl Sync for Outs {}
unsafe impl Send for Outs {}

/// `EMA(x, n)`: `alpha = 2 / (n + 1)`, `beta = 1 - alpha`; `e[0] = x[0]`,
/// `e[i] = alpha * x[i] + beta * e[i-1]`.
pub fn ema(x: &[f64], n: usize) -> Vec<f64> {
    let alpha = 2.0 / (n as f64 + 1.0);
    let beta = 1.0 - alpha;
    let mut out = Vec::with_capacity(x.len());
    let mut e = 0.0;
    for (i, &v) in x.iter().enumerate() {
        e = if i == 0 { v } else { alpha * v + beta * e };
        out.push(e);
    }
    out
}

/// Windows per pass of [`ema_multi`]: one AVX-512 register of lanes (two AVX2 ones).
const EMA_LANES: usize = 8;

/// [`ema`] of each of `windows`, bit for bit: the windows go `EMA_LANES` at a time through
/// one pass over `x`, each lane its own recurrence with its own `alpha` and `beta` (the same two
/// products and one add per bar). One EMA is a chain of dependent multiply-adds, bound by their
/// latency; the lanes' chains are independent, so a pass runs them side by side in one vector
/// register for the cost of one chain. Groups of lanes run in parallel if `parallel`.
pub fn ema_multi(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Arc<[f64]>> {
    let group = |ns: &[usize]| -> Vec<Arc<[f64]>> {
        let (mut alpha, mut beta) = ([0.0f64; EMA_LANES], [0.0f64; EMA_LANES]);
        for (j, &n) in ns.iter().enumerate() {
            alpha[j] = 2.0 / (n as f64 + 1.0);
            beta[j] = 1.0 - alpha[j];
        }
        let mut outs: Vec<Arc<[MaybeUninit<f64>]>> =
            ns.iter().map(|_| Arc::new_uninit_slice(x.len())).collect();
        let mut lines: Vec<&mut [MaybeUninit<f64>]> = outs
            .iter_mut()
            .map(|o| Arc::get_mut(o).expect("just allocated, not shared"))
            .collect();
        let mut e = [0.0f64; EMA_LANES];
        for (i, &v) in x.iter().enumerate() {
            if i == 0 {
                e = [v; EMA_LANES];
            } else {
                // Unused lanes (alpha = beta = 0) compute zeros nobody reads.
                for j in 0..EMA_LANES {
                    e[j] = alpha[j] * v + beta[j] * e[j];
                }
            }
            for (line, &value) in lines.iter_mut().zip(&e) {
                line[i].write(value);
            }
        }
        drop(lines);
        // SAFETY: the pass wrote every bar of every line.
        outs.into_iter()
            .map(|o| unsafe { o.assume_init() })
            .collect()
    };
    let groups: Vec<&[usize]> = windows.chunks(EMA_LANES).collect();
    if parallel && groups.len() > 1 {
        groups.par_iter().flat_map_iter(|g| group(g)).collect()
    } else {
        groups.iter().flat_map(|g| group(g)).collect()
    }
}

/// Wilder's `RSI(x, n)`: NaN for bars below `n`, then as strategies.md defines it.
pub fn rsi(x: &[f64], n: usize) -> Vec<f64> {
    let len = x.len();
    let mut out = vec![f64::NAN; len];
    if n >= len {
        return out;
    }
    let nf = n as f64;
    let (mut g, mut l) = (0.0, 0.0);
    for k in 1..=n {
        g += (x[k] - x[k - 1]).max(0.0);
        l += (x[k - 1] - x[k]).max(0.0);
    }
    g /= nf;
    l /= nf;
    out[n] = rsi_value(g, l);
    for k in n + 1..len {
        g = (g * (nf - 1.0) + (x[k] - x[k - 1]).max(0.0)) / nf;
        l = (l * (nf - 1.0) + (x[k - 1] - x[k]).max(0.0)) / nf;
        out[k] = rsi_value(g, l);
    }
    out
}

fn rsi_value(g: f64, l: f64) -> f64 {
    if g == 0.0 && l == 0.0 {
        50.0
    } else if l == 0.0 {
        100.0
    } else {
        100.0 - 100.0 / (1.0 + g / l)
    }
}

/// What one monotone-queue channel costs per bar, in the shared pass's compare pairs.
const DONCHIAN_QUEUE_COST: usize = 16;

/// The donchian signals of each channel of `windows` (strictly ascending, each >= 1) over `x`
/// ([`donchian_signals`]'s), by the cheaper way: one shared pass costs the longest channel in
/// compares per bar, a monotone queue per channel ~16 per bar (measured: branchy, not
/// vectorised), so the pass pays where the channels are many and short next to the longest.
pub fn donchian_channels(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Vec<i8>> {
    let shared = windows
        .last()
        .is_some_and(|&longest| longest <= DONCHIAN_QUEUE_COST * windows.len());
    if shared {
        return donchian_multi(x, windows, parallel);
    }
    let one = |&n: &usize| donchian_signals(x, n);
    if parallel {
        windows.par_iter().map(one).collect()
    } else {
        windows.iter().map(one).collect()
    }
}

/// The `donchian` signals of every channel length in `windows` (strictly ascending, >= 1) in
/// one pass, as [`donchian_signals`] computes each. The channel of bar `s + n` is the `n`
/// closes from `s`: a running max and min started at `s` are, after `n` terms, that channel,
/// whatever longer channel they go on to (max and min are exact in any order). So one blocked
/// pass costs the longest window in compares per bar, vectorised across a block of starts:
/// the choice for dense grids of short channels; a few long ones take [`donchian_signals`]
/// (O(1) per bar per window).
///
/// # Panics
/// If the windows are not strictly ascending and >= 1.
pub fn donchian_multi(x: &[f64], windows: &[usize], parallel: bool) -> Vec<Vec<i8>> {
    assert!(
        windows.first().is_none_or(|&n| n >= 1) && windows.windows(2).all(|w| w[0] < w[1]),
        "windows must be >= 1 and strictly ascending"
    );
    let len = x.len();
    let mut outs: Vec<Vec<i8>> = windows.iter().map(|_| vec![0; len]).collect();
    let Some(&shortest) = windows.first() else {
        return outs;
    };
    // Starts whose shortest channel has a bar after it.
    let starts = len.saturating_sub(shortest);
    let ptrs = Outs(
        outs.iter_mut()
            .map(|o| o.as_mut_ptr().cast::<f64>())
            .collect(),
    );
    let task = |lo: usize, hi: usize| {
        let (mut top, mut bottom) = ([0.0f64; BLOCK], [0.0f64; BLOCK]);
        for block in (lo..hi).step_by(BLOCK) {
            let width = BLOCK.min(hi - block);
            top[..width].copy_from_slice(&x[block..block + width]);
            bottom[..width].copy_from_slice(&x[block..block + width]);
            let mut next = 0;
            // After step k the accumulators hold the channel of the k + 1 closes from each
            // start; the bar it is compared with is k + 1 after the start.
            for k in 0..windows[windows.len() - 1].min(len - block - 1) {
                let lanes = width.min(len - block - k - 1);
                if k > 0 {
                    let v = &x[block + k..block + k + lanes];
                    for ((t, b), &v) in top[..lanes].iter_mut().zip(&mut bottom[..lanes]).zip(v) {
                        *t = t.max(v);
                        *b = b.min(v);
                    }
                }
                if windows[next] == k + 1 {
                    let out = ptrs.get(next).cast::<i8>();
                    let bar = &x[block + k + 1..block + k + 1 + lanes];
                    for (j, ((&t, &b), &c)) in top.iter().zip(&bottom).zip(bar).enumerate() {
                        let s = i8::from(c > t) - i8::from(c < b);
                        // SAFETY: the signal of start `block + j` for channel k+1 is element
                        // `block + j + k + 1 < len`; starts are split between tasks without
                        // overlap, so no two tasks write one element.
                        unsafe { out.add(block + j + k + 1).write(s) };
                    }
                    next += 1;
                    if next == windows.len() {
                        break;
                    }
                }
            }
        }
    };
    over_starts(starts, parallel, task);
    outs
}

/// The `donchian` signal for channel length `n`: +1 where `x[i]` is above the highest of
/// `x[i-n..i]`, -1 where below the lowest, 0 elsewhere and for `i < n`.
pub fn donchian_signals(x: &[f64], n: usize) -> Vec<i8> {
    let mut out = vec![0i8; x.len()];
    // Indices of the window's candidates for the max (values decreasing) and the min
    // (increasing); the window of bar i is i-n..i.
    let (mut hi, mut lo): (VecDeque<usize>, VecDeque<usize>) = (VecDeque::new(), VecDeque::new());
    for i in 0..x.len() {
        if i >= n {
            while hi.front().is_some_and(|&j| j + n < i) {
                hi.pop_front();
            }
            while lo.front().is_some_and(|&j| j + n < i) {
                lo.pop_front();
            }
            let (h, l) = (x[hi[0]], x[lo[0]]);
            out[i] = if x[i] > h {
                1
            } else if x[i] < l {
                -1
            } else {
                0
            };
        }
        while hi.back().is_some_and(|&j| x[j] <= x[i]) {
            hi.pop_back();
        }
        hi.push_back(i);
        while lo.back().is_some_and(|&j| x[j] >= x[i]) {
            lo.pop_back();
        }
        lo.push_back(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle;
    use crate::oracle::same_bits as same;

    fn series(len: usize) -> Vec<f64> {
        (0..len)
            .map(|i| 100.0 + ((i * 37 % 101) as f64 - 50.0) * 0.01 + (i as f64 * 0.01).sin())
            .collect()
    }

    #[test]
    fn sma_pass_equals_the_fresh_sums_bit_for_bit() {
        for len in [0, 1, 5, 255, 256, 257, 3_000, 20_000] {
            let x = series(len);
            let windows = [1, 2, 3, 7, 64, 255, 256, 257, 1_000, 30_000];
            for parallel in [false, true] {
                let outs = sma_multi(&x, &windows, parallel);
                for (n, got) in windows.iter().zip(&outs) {
                    assert!(same(got, &oracle::sma(&x, *n)), "len {len} n {n}");
                }
            }
        }
    }

    #[test]
    fn the_ema_lanes_equal_one_ema_at_a_time_bit_for_bit() {
        for len in [0, 1, 2, 1_000] {
            let x = series(len);
            // Fewer windows than lanes, exactly one group, and groups with a remainder.
            for count in [1, 3, 8, 9, 21] {
                let windows: Vec<usize> = (0..count).map(|k| 1 + 7 * k).collect();
                for parallel in [false, true] {
                    let lines = ema_multi(&x, &windows, parallel);
                    assert_eq!(lines.len(), count);
                    for (&n, line) in windows.iter().zip(&lines) {
                        assert!(same(line, &oracle::ema(&x, n)), "len {len} n {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn recurrences_and_channels_equal_the_oracle() {
        let x = series(2_000);
        for n in [1, 2, 14, 1_999, 2_000, 5_000] {
            assert!(same(&ema(&x, n), &oracle::ema(&x, n)), "ema {n}");
            assert!(same(&rsi(&x, n), &oracle::rsi(&x, n)), "rsi {n}");
            assert_eq!(
                donchian_signals(&x, n),
                oracle::donchian_signals(&x, n),
                "donchian {n}"
            );
        }
        // The shared pass, on every length around its block edges and past the series.
        for len in [0, 1, 2, 5, 255, 256, 257, 258, 3_000] {
            let x = series(len);
            let windows = [1, 2, 3, 7, 64, 255, 256, 257, 1_000, 4_000];
            for parallel in [false, true] {
                let outs = donchian_multi(&x, &windows, parallel);
                for (n, got) in windows.iter().zip(&outs) {
                    assert_eq!(got, &oracle::donchian_signals(&x, *n), "len {len} n {n}");
                }
            }
        }
        // Flat stretches: RSI 50 where nothing moves, Donchian never breaks an equal channel.
        let flat = [5.0; 40];
        assert!(rsi(&flat, 14)[14..].iter().all(|&r| r == 50.0));
        assert!(donchian_signals(&flat, 3).iter().all(|&s| s == 0));
    }
}
