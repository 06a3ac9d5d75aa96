//! The weighted moving average, the kernel's only primitive, in its fast bit-exact forms.
//!
//! `WMA(x, n)[i] = (sum_{k=0..n-1} x[i-n+1+k] * (k+1)) / (n(n+1)/2)`, NaN for `i < n-1`.
//!
//! The reference sums each output on its own, `k` ascending. Reassociating that sum (a running
//! window, a reciprocal multiply, FMA) changes the last bits and, on near-tie crosses, the trade
//! count. So the speed here comes only from loop structure:
//!
//! - **Register blocking.** The `k` loop is hoisted *outside* a block of `B` neighbouring
//!   outputs (window starts), whose partial sums stay in vector registers for all the steps.
//!   Each lane still performs exactly the reference's multiply-then-add sequence. Rust never
//!   contracts `a * b + c` into an FMA, so the arithmetic is the reference's on every target.
//! - **Prefix sharing** ([`wma_multi`]). For a window start `s`, the running sum after `n` steps
//!   is the numerator of `WMA(x, n)` at `s + n - 1`, bit for bit, whatever longer window the
//!   sum goes on to: same operations, same order. So one pass over `k = 0..max_n` per block of
//!   starts emits every requested window of the same input, each with its one division.
//!
//! Blocks are compiled three times (AVX-512, AVX2, baseline) and picked at run time; ranges of
//! starts are spread over rayon's pool in chunks, which cannot change any value.

use rayon::prelude::*;

/// Window starts per rayon task. Large enough that a task is tens of microseconds of work even
/// for short windows; small enough that one 150k-bar input still spreads over many cores.
const CHUNK: usize = 8192;

/// `WMA(x, n)` into a new vector of `x.len()` values (NaN where undefined).
///
/// NaNs in `x` propagate to every output whose window holds one, as in the reference.
pub fn wma(x: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    wma_into(x, n, &mut out);
    out
}

/// `WMA(x, n)` into `out`, which must have `x.len()` elements. Uses rayon for long inputs.
///
/// # Panics
/// If `out.len() != x.len()` or `n == 0` (callers hold a validated [`crate::Combo`]).
pub fn wma_into(x: &[f64], n: usize, out: &mut [f64]) {
    wma_multi(x, &[n], &mut [out], true);
}

/// `WMA(x, n)` for every `n` of `windows` (strictly ascending) in one pass over `x`:
/// `outs[t]` receives `WMA(x, windows[t])` and must have `x.len()` elements. On the calling
/// thread only unless `parallel` (and the input is long).
///
/// The pass costs `max(windows)` multiply-adds per output start, however many windows there
/// are, plus one division per output of each window.
///
/// # Panics
/// If the windows are not strictly ascending and at least 1, or an output has the wrong length.
pub fn wma_multi(x: &[f64], windows: &[usize], outs: &mut [&mut [f64]], parallel: bool) {
    assert_eq!(windows.len(), outs.len(), "one output per window");
    assert!(
        outs.iter().all(|o| o.len() == x.len()),
        "wma_multi: output length must equal input length"
    );
    let ptrs: Vec<*mut f64> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
    // SAFETY: each pointer is a distinct `&mut` slice of `x.len()` elements, borrowed for the
    // whole call.
    unsafe { wma_multi_raw(Input::Series(x), windows, &ptrs, parallel) };
}

/// What a pass reads: a series, or a difference series of the second level, computed a chunk
/// at a time where the pass needs it (so it is read from cache, never written out whole).
#[derive(Clone, Copy)]
pub(crate) enum Input<'a> {
    /// The values themselves.
    Series(&'a [f64]),
    /// `2*h - f` (the HMA's difference series).
    HmaDifference(&'a [f64], &'a [f64]),
    /// `3*w3 - w2 - w1` (the HMA3's difference series).
    Hma3Difference(&'a [f64], &'a [f64], &'a [f64]),
}

impl Input<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Series(x) | Self::HmaDifference(x, _) | Self::Hma3Difference(x, _, _) => x.len(),
        }
    }

    /// Values `lo..hi`: a slice of the series, or the difference computed into `buf`.
    fn values<'b>(&'b self, lo: usize, hi: usize, buf: &'b mut Vec<f64>) -> &'b [f64] {
        match *self {
            Self::Series(x) => &x[lo..hi],
            Self::HmaDifference(h, f) => {
                super::vector::hma_difference(&h[lo..hi], &f[lo..hi], buf);
                buf
            }
            Self::Hma3Difference(w3, w2, w1) => {
                super::vector::hma3_difference(&w3[lo..hi], &w2[lo..hi], &w1[lo..hi], buf);
                buf
            }
        }
    }
}

/// [`wma_multi`] into raw outputs, which may be uninitialised: every one of their `x.len()`
/// elements is written (NaN where undefined) before this returns.
///
/// # Safety
/// Each pointer must be valid for writes of `x.len()` elements and not aliased by anything else
/// during the call.
///
/// # Panics
/// If the windows are not strictly ascending and at least 1.
pub(crate) unsafe fn wma_multi_raw(
    input: Input<'_>,
    windows: &[usize],
    outs: &[*mut f64],
    parallel: bool,
) {
    assert_eq!(windows.len(), outs.len(), "one output per window");
    assert!(
        windows.first().is_none_or(|&n| n >= 1) && windows.windows(2).all(|w| w[0] < w[1]),
        "windows must be >= 1 and strictly ascending"
    );
    let len = input.len();
    let mut plan = Vec::with_capacity(windows.len());
    for (&n, &out) in windows.iter().zip(outs) {
        for i in 0..(n - 1).min(len) {
            // SAFETY: i < len; the caller's contract.
            unsafe { out.add(i).write(f64::NAN) };
        }
        plan.push(Window {
            n,
            denom: denominator(n),
            out,
        });
    }
    // Starts that have an output for at least the shortest window.
    let Some(first) = windows.first() else {
        return;
    };
    let starts = (len + 1).saturating_sub(*first);
    let longest = windows.last().copied().unwrap_or(0).min(len);
    let weights: Vec<f64> = (1..=longest).map(|k| k as f64).collect();
    let targets = Targets {
        windows: &plan,
        weights: &weights,
        lo: 0,
        hi: len,
    };
    // A chunk reads `longest - 1` values past its last start; for a derived input those are
    // computed again by the next chunk, so chunks stay at least four windows long.
    let chunk = match input {
        Input::Series(_) => CHUNK,
        _ => CHUNK.max(4 * longest),
    };
    let chunk_job = |c: usize| {
        let lo = c * chunk;
        let hi = (lo + chunk).min(starts);
        let end = (hi + longest).saturating_sub(1).min(len);
        let mut buf = Vec::new();
        let x = input.values(lo, end, &mut buf);
        // SAFETY: chunks cover disjoint ranges of starts, and window `n`'s output for start `s`
        // is element `s + n - 1`: disjoint across chunks for each window; the caller's
        // contract covers the rest. `x` holds values lo..end, all the starts lo..hi read.
        unsafe { pass(x, lo, 0, hi - lo, targets) };
    };
    let chunks = starts.div_ceil(chunk);
    // Even one chunk through rayon costs a hop to a pool thread and back; short inputs stay.
    if parallel && chunks > 1 {
        (0..chunks).into_par_iter().for_each(chunk_job);
    } else {
        (0..chunks).for_each(chunk_job);
    }
}

/// `n(n+1)/2` computed in integers (exact) and converted once, as the reference does.
pub(crate) fn denominator(n: usize) -> f64 {
    let n = n as u64;
    (n * (n + 1) / 2) as f64
}

/// One requested window: its length, its divisor and where its outputs go.
#[derive(Clone, Copy)]
pub(crate) struct Window {
    n: usize,
    denom: f64,
    out: *mut f64,
}

/// The windows of one pass, shareable with the pool's threads, the weights `1, 2, ..., max(n)`
/// as f64 (read with a broadcast load each step: cheaper than counting in a register, which
/// costs an add on the ports the multiply-adds need), and the output indices `lo..hi` the pass
/// stores: each window's `out` is its element for index `lo`.
#[derive(Clone, Copy)]
struct Targets<'a> {
    windows: &'a [Window],
    weights: &'a [f64],
    lo: usize,
    hi: usize,
}

// SAFETY: the pointers are only written through at indices that one task owns (see
// `wma_multi`), and the slices they point into outlive the pass.
unsafe impl Send for Targets<'_> {}
// SAFETY: as above.
unsafe impl Sync for Targets<'_> {}

/// Emits every window's outputs for window starts `lo..hi` of `x`, whose element 0 is the
/// input's element `base` (outputs go to `base + s + n - 1`).
///
/// # Safety
/// `x` must hold the input's values from `base` on, at least up to the last value the starts
/// `lo..hi` read (or to the input's end). For every window `n`, the output element of each
/// valid start must be writable and not written concurrently by anyone else.
unsafe fn pass(x: &[f64], base: usize, lo: usize, hi: usize, targets: Targets<'_>) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above; the caller's contract.
            unsafe { pass_avx512(x, base, lo, hi, targets) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above; the caller's contract.
            unsafe { pass_avx2(x, base, lo, hi, targets) };
            return;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { pass_blocked::<16>(x, base, lo, hi, targets) };
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pass_avx512(x: &[f64], base: usize, lo: usize, hi: usize, targets: Targets<'_>) {
    // 64 lanes = 8 zmm accumulators: enough independent add chains to hide the add latency.
    // SAFETY: the caller's contract.
    unsafe { pass_blocked::<64>(x, base, lo, hi, targets) };
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pass_avx2(x: &[f64], base: usize, lo: usize, hi: usize, targets: Targets<'_>) {
    // 32 lanes = 8 ymm accumulators.
    // SAFETY: the caller's contract.
    unsafe { pass_blocked::<32>(x, base, lo, hi, targets) };
}

/// The register-blocked pass: for each block of `B` starts, `B` partial sums live in registers
/// while `k` runs up to the longest window, and each window's outputs are divided out and
/// stored the moment `k` reaches it. Lane `j` computes `sum_k x[s+j+k] * (k+1)` in ascending
/// `k`, exactly the reference. Only outputs in the targets' range are divided and stored; a
/// block stops at the first window whose outputs all lie past the range.
///
/// # Safety
/// As [`pass`].
#[inline(always)]
unsafe fn pass_blocked<const B: usize>(
    x: &[f64],
    base: usize,
    lo: usize,
    hi: usize,
    targets: Targets<'_>,
) {
    let len = x.len();
    let Targets {
        windows,
        weights,
        lo: out_lo,
        hi: out_hi,
    } = targets;
    let mut s = lo;
    while s < hi {
        // Lanes past `hi` belong to the next chunk: never stored here.
        let lanes = B.min(hi - s);
        // Steps every lane can take without reading past the input's end.
        let vector_steps = (len + 1).saturating_sub(s + B);
        // Indexed only with constant lane numbers, so it stays in registers.
        let mut acc = [0.0f64; B];
        let mut k = 0;
        let mut done = 0;
        if lanes == B {
            for w in windows {
                if w.n > vector_steps {
                    break;
                }
                // The block's outputs of this window are indices first..first + B.
                let first = base + s + w.n - 1;
                if first >= out_hi {
                    // Past the range, and longer windows further still: the block is done.
                    done = windows.len();
                    break;
                }
                while k < w.n {
                    // The weight of step k is k + 1 (exact in f64).
                    let weight = weights[k];
                    // SAFETY: k < vector_steps, so s + k + B <= len.
                    let xs: &[f64; B] = unsafe { &*x.as_ptr().add(s + k).cast::<[f64; B]>() };
                    for j in 0..B {
                        acc[j] += xs[j] * weight;
                    }
                    k += 1;
                }
                if first + B > out_lo {
                    // Divided as one array (vector divisions), then stored.
                    let mut quotients = [0.0f64; B];
                    for j in 0..B {
                        quotients[j] = acc[j] / w.denom;
                    }
                    // SAFETY: every lane is a valid start of this window (s + B - 1 + n - 1 <=
                    // len - 1) owned by this pass (lanes == B, s + B <= hi); only indices in
                    // the range are written.
                    unsafe { store(w.out, first, &quotients, out_lo, out_hi) };
                }
                done += 1;
            }
        }
        if done < windows.len() {
            // SAFETY: the caller's contract, passed on.
            unsafe { finish_block(x, base, s, lanes, k, acc, &windows[done..], targets) };
        }
        s += B;
    }
}

/// Stores `values` as the outputs `first..` that lie in `lo..hi`; `out` is the element of
/// index `lo`.
///
/// # Safety
/// `out` must be valid for writes of `hi - lo` elements.
#[inline(always)]
unsafe fn store(out: *mut f64, first: usize, values: &[f64], lo: usize, hi: usize) {
    if first >= lo && first + values.len() <= hi {
        // SAFETY: the whole block is in the range.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), out.add(first - lo), values.len())
        };
    } else {
        for (j, &v) in values.iter().enumerate() {
            if (lo..hi).contains(&(first + j)) {
                // SAFETY: in the range.
                unsafe { *out.add(first + j - lo) = v };
            }
        }
    }
}

/// The rest of a block that the vector loop cannot finish: a block cut short by the chunk's end,
/// or near the input's end, where the last lanes would read past it. The lanes that still have
/// a window continue one by one. Out of line, so the vector loop's sums stay in registers.
///
/// # Safety
/// As [`pass`], for the starts `s..s + lanes`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn finish_block<const B: usize>(
    x: &[f64],
    base: usize,
    s: usize,
    lanes: usize,
    mut k: usize,
    mut acc: [f64; B],
    windows: &[Window],
    targets: Targets<'_>,
) {
    let len = x.len();
    for w in windows {
        let first = base + s + w.n - 1;
        // Lanes whose window of length n fits: s + j + n - 1 <= len - 1.
        let valid = lanes.min((len + 1).saturating_sub(s + w.n));
        if valid == 0 || first >= targets.hi {
            // Longer windows fit even fewer lanes, and store further past the range.
            break;
        }
        for (j, a) in acc.iter_mut().enumerate().take(valid) {
            for kk in k..w.n {
                *a += x[s + j + kk] * (kk + 1) as f64;
            }
        }
        k = w.n;
        let mut quotients = [0.0f64; B];
        for (q, a) in quotients.iter_mut().zip(&acc).take(valid) {
            *q = a / w.denom;
        }
        // SAFETY: lanes j < valid are valid starts of this window owned by this pass (j <
        // lanes); only indices in the range are written.
        unsafe { store(w.out, first, &quotients[..valid], targets.lo, targets.hi) };
    }
}

/// Reused storage for [`wma_range`]'s per-call window list.
#[derive(Default)]
pub(crate) struct RangeScratch(Vec<Window>);

// SAFETY: between calls the list is empty of meaning: every call clears it before use, and
// the pointers it held are never read again.
unsafe impl Send for RangeScratch {}

/// `WMA` of every window of `windows` (strictly ascending, at least 1) at the input indices
/// `lo..hi` only, on the calling thread: `outs[t]` is the element of index `lo` of window
/// `t`'s output. NaN where undefined (index `< n - 1`).
///
/// `x` holds the input's values from index `base` on, with `base <= lo + 1 - max(windows)`
/// (or 0), and at least up to index `hi - 1`; values past it, where the input has them, let
/// the pass's last blocks run vectorised. `weights` are `1.0, 2.0, ...`, at least as many as
/// the longest window or `x.len()`, whichever is smaller.
///
/// # Safety
/// Each pointer must be valid for writes of `hi - lo` elements and not aliased by anything else
/// during the call.
///
/// # Panics
/// If the windows are not strictly ascending and at least 1, or `x` does not cover the range.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn wma_range(
    x: &[f64],
    base: usize,
    lo: usize,
    hi: usize,
    windows: &[usize],
    outs: &[*mut f64],
    weights: &[f64],
    scratch: &mut RangeScratch,
) {
    assert_eq!(windows.len(), outs.len(), "one output per window");
    assert!(
        windows.first().is_none_or(|&n| n >= 1) && windows.windows(2).all(|w| w[0] < w[1]),
        "windows must be >= 1 and strictly ascending"
    );
    let Some(&longest) = windows.last() else {
        return;
    };
    let first_start = (lo + 1).saturating_sub(longest);
    assert!(
        base <= first_start && base + x.len() >= hi && lo <= hi,
        "wma_range: the values do not cover the range"
    );
    assert!(
        weights.len() >= longest.min(x.len()),
        "wma_range: too few weights"
    );
    let plan = &mut scratch.0;
    plan.clear();
    for (&n, &out) in windows.iter().zip(outs) {
        for i in lo..hi.min(n - 1) {
            // SAFETY: lo <= i < hi; the caller's contract.
            unsafe { out.add(i - lo).write(f64::NAN) };
        }
        plan.push(Window {
            n,
            denom: denominator(n),
            out,
        });
    }
    let targets = Targets {
        windows: plan,
        weights,
        lo,
        hi,
    };
    // Starts first_start..hi, counted in whole blocks of 64 (a multiple of every block size):
    // lanes past hi store nothing (their outputs lie past the range), and no block takes the
    // scalar tail for being cut short.
    let starts = (hi - first_start).div_ceil(64) * 64;
    let from = first_start - base;
    // SAFETY: x holds the values from `base` on through index hi - 1, all that outputs in the
    // range read; the caller's contract covers the outputs.
    unsafe { pass(x, base, from, from + starts, targets) };
    plan.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle;
    use crate::oracle::same_bits as same;

    fn series(len: usize) -> Vec<f64> {
        (0..len)
            .map(|i| 100.0 + (i as f64 * 0.37).sin() * 3.0 + (i as f64 * 0.011).cos())
            .collect()
    }

    #[test]
    fn matches_oracle_bit_for_bit_across_block_edges() {
        let x = series(20_000);
        for n in [
            1, 2, 3, 7, 31, 32, 33, 63, 64, 65, 200, 8191, 8192, 8193, 19_999, 20_000, 20_001,
        ] {
            assert!(same(&wma(&x, n), &oracle::wma(&x, n)), "n={n}");
        }
    }

    #[test]
    fn many_windows_in_one_pass_equal_one_pass_each() {
        for len in [0, 1, 5, 63, 64, 65, 1_000, 20_000] {
            let x = series(len);
            let windows = [
                1, 2, 3, 17, 31, 32, 33, 64, 65, 200, 999, 1_000, 1_001, 25_000,
            ];
            let mut outs: Vec<Vec<f64>> = windows.iter().map(|_| vec![0.0; len]).collect();
            let mut views: Vec<&mut [f64]> = outs.iter_mut().map(Vec::as_mut_slice).collect();
            wma_multi(&x, &windows, &mut views, true);
            for (n, got) in windows.iter().zip(&outs) {
                assert!(same(got, &oracle::wma(&x, *n)), "len={len} n={n}");
            }
            // The same on one thread.
            let mut serial: Vec<Vec<f64>> = windows.iter().map(|_| vec![0.0; len]).collect();
            let mut views: Vec<&mut [f64]> = serial.iter_mut().map(Vec::as_mut_slice).collect();
            wma_multi(&x, &windows, &mut views, false);
            assert_eq!(
                outs.iter()
                    .flatten()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>(),
                serial
                    .iter()
                    .flatten()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn any_range_of_outputs_equals_the_oracle() {
        let x = series(3_000);
        let windows = [1, 2, 5, 31, 32, 33, 100, 999, 2_999, 3_000, 3_001];
        let want: Vec<Vec<f64>> = windows.iter().map(|&n| oracle::wma(&x, n)).collect();
        let weights: Vec<f64> = (1..=3_001).map(|k| k as f64).collect();
        let mut scratch = RangeScratch::default();
        for (lo, hi) in [
            (0, 3_000),
            (0, 1),
            (1, 2),
            (40, 41),
            (500, 563),
            (2_000, 3_000),
            (2_999, 3_000),
            (7, 7),
        ] {
            let mut outs: Vec<Vec<f64>> = windows.iter().map(|_| vec![0.0; hi - lo]).collect();
            let ptrs: Vec<*mut f64> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
            // The values from the first start the longest window needs, and a few past hi.
            let base = (lo + 1).saturating_sub(3_001);
            let end = (hi + 10).min(x.len());
            // SAFETY: each pointer is a distinct vector of hi - lo values.
            unsafe {
                wma_range(
                    &x[base..end],
                    base,
                    lo,
                    hi,
                    &windows,
                    &ptrs,
                    &weights,
                    &mut scratch,
                )
            };
            for ((n, got), want) in windows.iter().zip(&outs).zip(&want) {
                assert!(same(got, &want[lo..hi]), "n={n} range {lo}..{hi}");
            }
        }
        // Values from a later start, enough for the range's windows only.
        let mut out = vec![0.0; 100];
        let base = 1_000 - 32;
        // SAFETY: one vector of 100 values.
        unsafe {
            wma_range(
                &x[base..1_100],
                base,
                1_000,
                1_100,
                &[33],
                &[out.as_mut_ptr()],
                &weights,
                &mut scratch,
            )
        };
        assert!(same(&out, &want[5][1_000..1_100]));
    }

    #[test]
    fn window_longer_than_series_is_all_nan() {
        assert!(wma(&series(10), 11).iter().all(|v| v.is_nan()));
        assert!(wma(&[], 3).is_empty());
    }

    #[test]
    fn window_one_is_identity() {
        let x = series(100);
        assert_eq!(wma(&x, 1), x);
    }

    #[test]
    fn nan_propagates_to_windows_that_hold_it() {
        let mut x = series(300);
        x[150] = f64::NAN;
        let out = wma(&x, 10);
        assert!(out[149].is_finite());
        assert!(out[150..160].iter().all(|v| v.is_nan()));
        assert!(out[160].is_finite());
    }
}
