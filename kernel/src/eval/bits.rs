//! Conditions as bits: bar `j` of a range is bit `j % 64` of word `j / 64`. The per-combo
//! phase writes its comparisons sixty-four bars a word (a vector compare's mask, not a byte a
//! bar), combines `and` / `or` / `not` a word at a time, and the execution loop finds a
//! block's next event with one count of trailing zeros a word; phase 1's conditions keep their
//! bytes (one a bar, what functions and the word path read) and the same truths as bits
//! ([`super::Conds`]).
//!
//! A range's last word may hold bits past its end (a `not`, a condition true everywhere):
//! whoever reads the words as bars masks them (`eval::drive`).

use crate::lines::vector::multiversion;

/// A condition's words over a range: an array, or the same word everywhere.
#[derive(Clone, Copy)]
pub(super) enum Word<'a> {
    Of(&'a [u64]),
    All(u64),
}

impl Word<'_> {
    /// True or false at every bar.
    pub(super) fn always(b: bool) -> Self {
        Self::All(if b { u64::MAX } else { 0 })
    }

    #[inline(always)]
    pub(super) fn at(self, w: usize) -> u64 {
        match self {
            Self::Of(x) => x[w],
            Self::All(v) => v,
        }
    }
}

/// `out = f(a, b)` word by word over `nw` words, a loop per shape so each vectorises.
#[inline(always)]
pub(super) fn combine(
    a: Word<'_>,
    b: Word<'_>,
    nw: usize,
    out: &mut Vec<u64>,
    f: impl Fn(u64, u64) -> u64,
) {
    // Loops over slices, never `extend` of an iterator: that is a function of its own, which
    // would be compiled without the caller's vector instructions.
    out.resize(nw, 0);
    match (a, b) {
        (Word::Of(x), Word::Of(y)) => {
            for ((o, x), y) in out.iter_mut().zip(x).zip(y) {
                *o = f(*x, *y);
            }
        }
        (Word::Of(x), Word::All(c)) => {
            for (o, x) in out.iter_mut().zip(x) {
                *o = f(*x, c);
            }
        }
        (Word::All(c), Word::Of(y)) => {
            for (o, y) in out.iter_mut().zip(y) {
                *o = f(c, *y);
            }
        }
        (Word::All(c), Word::All(d)) => out.fill(f(c, d)),
    }
}

/// The word of up to 64 truths, the first in bit 0. Written as a plain loop over a chunk of
/// known length: the compiler makes it vector compares whose masks are or-ed together.
#[inline(always)]
fn word<T>(values: impl Iterator<Item = T>, f: impl Fn(T) -> bool) -> u64 {
    let mut w = 0u64;
    for (b, v) in values.enumerate() {
        w |= u64::from(f(v)) << b;
    }
    w
}

/// `out`: bit `j` is `f(x[j])`, over `x.len()` bars.
#[inline(always)]
pub(super) fn pack1<T: Copy>(x: &[T], out: &mut Vec<u64>, f: impl Fn(T) -> bool) {
    out.resize(x.len().div_ceil(64), 0);
    let chunks = x.chunks_exact(64);
    let rest = chunks.remainder();
    for (o, c) in out.iter_mut().zip(chunks) {
        *o = word(c.iter(), |x| f(*x));
    }
    if !rest.is_empty() {
        *out.last_mut().expect("a word for the rest") = word(rest.iter(), |x| f(*x));
    }
}

/// `out`: bit `j` is `f(x[j], y[j])`, over `x.len()` bars.
#[inline(always)]
pub(super) fn pack2<T: Copy>(x: &[T], y: &[T], out: &mut Vec<u64>, f: impl Fn(T, T) -> bool) {
    debug_assert_eq!(x.len(), y.len());
    out.resize(x.len().div_ceil(64), 0);
    let (xc, yc) = (x.chunks_exact(64), y.chunks_exact(64));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for ((o, x), y) in out.iter_mut().zip(xc).zip(yc) {
        *o = word(x.iter().zip(y), |(x, y)| f(*x, *y));
    }
    if !xr.is_empty() {
        *out.last_mut().expect("a word for the rest") = word(xr.iter().zip(yr), |(x, y)| f(*x, *y));
    }
}

/// `out`: bit `j` is `f(x[j], y[j], z[j])`, over `x.len()` bars.
#[inline(always)]
pub(super) fn pack3(
    x: &[f64],
    y: &[f64],
    z: &[f64],
    out: &mut Vec<u64>,
    f: impl Fn(f64, f64, f64) -> bool,
) {
    debug_assert!(x.len() == y.len() && y.len() == z.len());
    out.resize(x.len().div_ceil(64), 0);
    let (xc, yc, zc) = (x.chunks_exact(64), y.chunks_exact(64), z.chunks_exact(64));
    let (xr, yr, zr) = (xc.remainder(), yc.remainder(), zc.remainder());
    for (((o, x), y), z) in out.iter_mut().zip(xc).zip(yc).zip(zc) {
        *o = word(x.iter().zip(y).zip(z), |((x, y), z)| f(*x, *y, *z));
    }
    if !xr.is_empty() {
        *out.last_mut().expect("a word for the rest") =
            word(xr.iter().zip(yr).zip(zr), |((x, y), z)| f(*x, *y, *z));
    }
}

/// `out`: bit `j` is `f(j)`, over `n` bars (a plain loop: the tests' reference).
#[cfg(test)]
fn pack_with(n: usize, out: &mut Vec<u64>, f: impl Fn(usize) -> bool) {
    out.resize(n.div_ceil(64), 0);
    for (w, o) in out.iter_mut().enumerate() {
        *o = word(w * 64..(w * 64 + 64).min(n), &f);
    }
}

/// `n` bars of the same truth `b` (the last word's bits past `n` set too if true).
pub(super) fn fill(n: usize, b: bool, out: &mut Vec<u64>) {
    out.clear();
    out.resize(n.div_ceil(64), if b { u64::MAX } else { 0 });
}

multiversion! {
    /// Condition bytes (non-zero where it holds) as bits into `out`.
    pub(super) fn pack_bytes(bytes: &[u8], out: &mut Vec<u64>) {
        pack1(bytes, out, |b| b != 0);
    }
}

multiversion! {
    /// The first `out.len()` bars of `bits` as condition bytes (1 where it holds).
    pub(super) fn unpack(bits: &[u64], out: &mut [u8]) {
        for (c, w) in out.chunks_mut(64).zip(bits) {
            for (b, o) in c.iter_mut().enumerate() {
                *o = ((w >> b) & 1) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_pack_to_bits_and_back() {
        for n in [0usize, 1, 63, 64, 65, 130, 1000] {
            let bytes: Vec<u8> = (0..n).map(|i| u8::from(i % 3 == 0 || i % 7 == 1)).collect();
            let mut bits = Vec::new();
            pack_bytes(&bytes, &mut bits);
            assert_eq!(bits.len(), n.div_ceil(64));
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!(
                    (bits[i / 64] >> (i % 64)) & 1,
                    u64::from(b),
                    "bar {i} of {n}"
                );
            }
            let mut back = vec![9u8; n];
            unpack(&bits, &mut back);
            assert_eq!(back, bytes);
        }
    }

    #[test]
    fn every_packing_shape_gives_the_same_bits() {
        let x: Vec<f64> = (0..200).map(|i| (i as f64 * 0.37).sin()).collect();
        let y: Vec<f64> = (0..200).map(|i| (i as f64 * 0.11).cos()).collect();
        let z: Vec<f64> = (0..200).map(|i| f64::from(i % 5) - 2.0).collect();
        for n in [0, 5, 64, 100, 128, 200] {
            let (x, y, z) = (&x[..n], &y[..n], &z[..n]);
            let mut want = Vec::new();
            pack_with(n, &mut want, |j| x[j] < y[j] + z[j]);
            let mut got = Vec::new();
            pack3(x, y, z, &mut got, |x, y, z| x < y + z);
            assert_eq!(got, want);
            pack_with(n, &mut want, |j| x[j] < y[j]);
            pack2(x, y, &mut got, |x, y| x < y);
            assert_eq!(got, want);
            pack_with(n, &mut want, |j| x[j] > 0.5);
            pack1(x, &mut got, |x| x > 0.5);
            assert_eq!(got, want);
            for j in 0..n {
                assert_eq!((want[j / 64] >> (j % 64)) & 1 == 1, x[j] > 0.5);
            }
        }
    }
}
