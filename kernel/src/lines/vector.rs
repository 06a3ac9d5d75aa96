//! The element-wise loops between the WMA passes, compiled for AVX2 as well as the baseline and
//! picked at run time (the crate is built for the portable baseline; tuning for one CPU is
//! not a default). Each computes exactly the reference's expression per element. The sign
//! bytes the crossing loops read ([`ABOVE`], [`BELOW`], [`UNDEFINED`]) are defined here, with
//! the loop that writes them.

/// Per-bar state of the two lines, one byte each: [`ABOVE`] where `b > a`, [`BELOW`] where
/// `b < a`, `0` where they are equal, [`UNDEFINED`] where either is NaN.
pub(crate) const ABOVE: u8 = 1;
/// See [`ABOVE`].
pub(crate) const BELOW: u8 = 2;
/// See [`ABOVE`]. Both bits: the sign loop ([`signs`]) and `signal::cross_mask` rely on it.
pub(crate) const UNDEFINED: u8 = 3;
const _: () = assert!(UNDEFINED == ABOVE | BELOW && ABOVE == 1 && BELOW == 2);

/// Defines `fn $name(args)` (with the given visibility) that runs
/// `$body` compiled for AVX-512 or AVX2 when the CPU has it and for the baseline otherwise.
/// The body must be safe code: only the instruction set differs (no fused multiply-add is
/// enabled, so every result is the baseline's bit for bit).
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn generic($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) {
                    generic($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) {
                    generic($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports AVX-512F, checked just above.
                    unsafe { avx512($($arg),*) };
                    return;
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2, checked just above.
                    unsafe { avx2($($arg),*) };
                    return;
                }
            }
            generic($($arg),*)
        }
    };
}
pub(crate) use multiversion;

multiversion! {
    /// `out = 2*h - f`, element by element: the HMA's difference series.
    pub(crate) fn hma_difference(h: &[f64], f: &[f64], out: &mut Vec<f64>) {
        out.clear();
        out.extend(h.iter().zip(f).map(|(h, f)| 2.0 * h - f));
    }
}

multiversion! {
    /// `out = 3*w3 - w2 - w1`, element by element: the HMA3's difference series.
    pub(crate) fn hma3_difference(w3: &[f64], w2: &[f64], w1: &[f64], out: &mut Vec<f64>) {
        out.clear();
        out.extend(w3.iter().zip(w2).zip(w1).map(|((w3, w2), w1)| 3.0 * w3 - w2 - w1));
    }
}

multiversion! {
    /// One state byte per bar (see [`crate::signal`]): above, below, equal or undefined, into
    /// the first `a.len()` bytes of `out`.
    pub(crate) fn signs(a: &[f64], b: &[f64], out: &mut [u8]) {
        // Two unordered-true comparisons, no branch: `b > a` gives 1, `b < a` gives 2,
        // equal gives 0, and a NaN on either side makes both true, 3.
        for ((&a, &b), out) in a.iter().zip(b).zip(out) {
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            let (above, below) = (!(b <= a), !(b >= a));
            *out = (u8::from(above) * ABOVE) | (u8::from(below) * BELOW);
        }
    }
}

multiversion! {
    /// The largest magnitude of each block of 64 values of `x` into `out` (NaN ignored), as
    /// [`crate::certified`] bounds its lines per block: eight running maxima per block, so
    /// the loop is vector compares.
    pub(crate) fn block_max_abs(x: &[f64], out: &mut Vec<f64>) {
        out.clear();
        for block in x.chunks(64) {
            let mut acc = [0.0f64; 8];
            let mut lanes = block.chunks_exact(8);
            for c in &mut lanes {
                for j in 0..8 {
                    let a = c[j].abs();
                    // `a > m` is false for a NaN: it is skipped.
                    acc[j] = if a > acc[j] { a } else { acc[j] };
                }
            }
            for (j, v) in lanes.remainder().iter().enumerate() {
                let a = v.abs();
                acc[j] = if a > acc[j] { a } else { acc[j] };
            }
            out.push(acc.iter().fold(0.0f64, |m, &a| if a > m { a } else { m }));
        }
    }
}
