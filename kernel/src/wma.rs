//! The weighted moving average, the kernel's only primitive, in its fast bit-exact form.
//!
//! `WMA(x, n)[i] = (sum_{k=0..n-1} x[i-n+1+k] * (k+1)) / (n(n+1)/2)`, NaN for `i < n-1`.
//!
//! The reference sums each output on its own, `k` ascending. Reassociating that sum (a running
//! window, a reciprocal multiply, FMA) changes the last bits and, on near-tie crosses, the trade
//! count. So the speed here comes only from loop structure: the `k` loop is hoisted *outside* a
//! block of `B` neighbouring outputs, whose partial sums stay in vector registers for all `n`
//! steps. Each lane still performs exactly the reference's multiply-then-add sequence. Rust never
//! contracts `a * b + c` into an FMA, so the arithmetic is the reference's on every target.
//!
//! Blocks are compiled three times (AVX-512, AVX2, baseline) and picked at run time; output
//! ranges are spread over rayon's pool in chunks, which cannot change any value.

use rayon::prelude::*;

/// Outputs per rayon task. Large enough that a task is tens of microseconds of work even for
/// short windows; small enough that a single 150k-bar WMA still spreads over many cores.
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
    wma_into_with(x, n, out, true);
}

/// [`wma_into`], on the calling thread only unless `parallel` (and the input is long).
pub(crate) fn wma_into_with(x: &[f64], n: usize, out: &mut [f64], parallel: bool) {
    assert_eq!(
        x.len(),
        out.len(),
        "wma_into: output length must equal input length"
    );
    assert!(n >= 1, "wma_into: window must be >= 1");
    let lead = (n - 1).min(x.len());
    let (undefined, defined) = out.split_at_mut(lead);
    undefined.fill(f64::NAN);
    if defined.is_empty() {
        return;
    }
    let denom = denominator(n);
    // `defined[s]` is the output whose window starts at x[s].
    let chunk_job = |(c, chunk): (usize, &mut [f64])| {
        let start = c * CHUNK;
        let src = &x[start..start + chunk.len() + n - 1];
        wma_windows(src, n, denom, chunk);
    };
    // Even one chunk through rayon costs a hop to a pool thread and back; short inputs stay.
    if parallel && defined.len() > CHUNK {
        defined
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(chunk_job);
    } else {
        defined.chunks_mut(CHUNK).enumerate().for_each(chunk_job);
    }
}

/// `n(n+1)/2` computed in integers (exact) and converted once, as the reference does.
pub(crate) fn denominator(n: usize) -> f64 {
    let n = n as u64;
    (n * (n + 1) / 2) as f64
}

/// Fills `out[s] = WMA` of the window `src[s..s+n]` for every `s`; `src.len() == out.len()+n-1`.
fn wma_windows(src: &[f64], n: usize, denom: f64, out: &mut [f64]) {
    debug_assert_eq!(src.len(), out.len() + n - 1);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            unsafe { windows_avx512(src, n, denom, out) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { windows_avx2(src, n, denom, out) };
            return;
        }
    }
    windows_blocked::<16>(src, n, denom, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn windows_avx512(src: &[f64], n: usize, denom: f64, out: &mut [f64]) {
    // 64 lanes = 8 zmm accumulators: enough independent add chains to hide the add latency.
    windows_blocked::<64>(src, n, denom, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn windows_avx2(src: &[f64], n: usize, denom: f64, out: &mut [f64]) {
    windows_blocked::<32>(src, n, denom, out);
}

/// The register-blocked loop. `B` partial sums live in registers while `k` runs over the whole
/// window; lane `j` computes `sum_k src[s+j+k] * (k+1)` in ascending `k`, exactly the reference.
#[inline(always)]
fn windows_blocked<const B: usize>(src: &[f64], n: usize, denom: f64, out: &mut [f64]) {
    let mut blocks = out.chunks_exact_mut(B);
    let mut s = 0;
    for block in &mut blocks {
        let win = &src[s..s + B + n - 1];
        let mut acc = [0.0f64; B];
        for k in 0..n {
            let w = (k + 1) as f64;
            let xs: &[f64; B] = win[k..k + B].try_into().expect("slice of length B");
            for j in 0..B {
                acc[j] += xs[j] * w;
            }
        }
        for j in 0..B {
            block[j] = acc[j] / denom;
        }
        s += B;
    }
    for (j, o) in blocks.into_remainder().iter_mut().enumerate() {
        *o = window_sum(&src[s + j..s + j + n]) / denom;
    }
}

/// One output's sum in reference order; the scalar fallback for block remainders.
#[inline(always)]
fn window_sum(window: &[f64]) -> f64 {
    let mut acc = 0.0;
    for (k, &v) in window.iter().enumerate() {
        acc += v * (k + 1) as f64;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle;

    fn series(len: usize) -> Vec<f64> {
        (0..len)
            .map(|i| 100.0 + (i as f64 * 0.37).sin() * 3.0 + (i as f64 * 0.011).cos())
            .collect()
    }

    #[test]
    fn matches_oracle_bit_for_bit_across_block_edges() {
        let x = series(20_000);
        for n in [
            1, 2, 3, 7, 31, 32, 33, 63, 64, 65, 200, 8191, 8192, 8193, 19_999, 20_000,
        ] {
            let fast = wma(&x, n);
            let slow = oracle::wma(&x, n);
            for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "n={n} i={i}: {a} vs {b}"
                );
            }
        }
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
