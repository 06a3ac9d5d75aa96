//! Certified lines: WMAs and SMAs in O(1) per output, each with a proven bound on its distance
//! to the reference's value, so that a comparison of two lines is decided from the fast values
//! wherever the gap between them exceeds the two bounds, and from the reference's own values,
//! recomputed exactly, at the rare bars where it does not.
//!
//! The exact rule (docs/kernel.md) sums every output afresh, which costs the window per output;
//! the trades depend only on the *signs* of the line comparisons. A running sum (re-anchored
//! every few hundred to few thousand outputs) costs a few operations per output, and the
//! argument in docs/architecture.md ("Certified lines") bounds how far its value can be from
//! the reference's: the running sum's own rounding (tracked step by step in closed form) plus
//! the reference's rounding (Higham's bound for a dot product) plus, on the second level, how
//! far the inputs already were. The functions here follow that argument term by term; the
//! comment on each term names its line there.
//!
//! Bounds are kept per block of [`BLOCK`] outputs (the largest over the block), 1/64 of a
//! line's size. A series takes this path only where every value is finite and its magnitude is
//! within `2^-500 ..= 2^500` ([`certifiable`]): far from overflow (the reference itself would
//! overflow near 1e300 with long windows) and far enough from underflow that the absolute term
//! per operation ([`TINY`]) stays negligible. Elsewhere the exact path runs, as before.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::lines::Line;
use crate::lines::indicators::sma_multi;
use crate::lines::vector::{ABOVE, BELOW, UNDEFINED};
use crate::lines::wma::{RangeScratch, denominator, wma_multi_raw, wma_range};

/// Outputs per bound: a line's bounds take 1/64 of its size.
pub(crate) const BLOCK: usize = 64;

/// The unit roundoff, `2^-53`: `fl(a op b) = (a op b)(1 + d)`, `|d| <= U`, for normal results.
const U: f64 = f64::EPSILON / 2.0;

/// An absolute term per operation that covers underflow (a product or quotient that lands
/// below the normal range is off by at most `2^-1075`; a sum that does is exact) and the
/// underflow of the bound's own terms. `2^-1022`: with magnitudes of at least `2^-500` it is
/// never what decides a comparison.
const TINY: f64 = f64::MIN_POSITIVE;

/// Every bound is computed in floating point from a handful of non-negative terms, each
/// rounded once or twice: multiplying by `1 + 2^-20` covers that rounding many times over.
const SLACK: f64 = 1.0 + 1.0 / (1u64 << 20) as f64;

/// Longest window the certified path takes: `n * U <= 2^-27`, so `gamma` below is a bound and
/// every error stays far below the magnitudes it is compared with.
pub(crate) const MAX_WINDOW: usize = 1 << 26;

/// Shortest window for which a certified line pays: below it the exact pass (which costs the
/// window per output, vectorised) is as fast as a running sum with its anchors and bounds.
pub(crate) const MIN_WINDOW: usize = 256;

/// Higham's `gamma_n = n U / (1 - n U)`, rounded up (`n <= MAX_WINDOW`).
fn gamma(n: usize) -> f64 {
    debug_assert!(n <= 2 * MAX_WINDOW);
    n as f64 * U * SLACK
}

/// Whether lines over `x` may be certified: every value finite, the largest magnitude within
/// `2^-500 ..= 2^500` (see the module docs).
pub(crate) fn certifiable(x: &[f64]) -> bool {
    let mut top = 0.0f64;
    for &v in x {
        if !v.is_finite() {
            return false;
        }
        top = top.max(v.abs());
    }
    x.is_empty() || (2f64.powi(-500)..=2f64.powi(500)).contains(&top)
}

/// Whether a window of `n` bars over a series of `bars` takes the certified path.
pub(crate) fn pays(n: usize, bars: usize) -> bool {
    (MIN_WINDOW..=MAX_WINDOW).contains(&n) && n <= bars
}

/// What a certified line costs a bar, in units of the shared exact pass's work per window and
/// bar (one vectorised add or multiply-add; the pass costs its longest window for all of its
/// windows together). Measured with kernel-timer on this kind of machine, comparisons
/// included: about 6 for an SMA line, about 9 for a WMA line; one round figure serves both.
const LINE_COST: usize = 8;

/// Of the `windows` one shared exact pass would compute over a series of `bars`, the
/// shortest that takes a certified line (it and every longer one that [`pays`]), or `None`:
/// the longest windows are certified while that lowers the cost, `LINE_COST` per certified
/// line plus the longest window left to the pass. Many closely spaced windows stay in the
/// pass (each certified one would save it a few operations a bar and cost eight), a few
/// long ones leave it; ties keep the exact path (its lines are the reference's, and
/// cacheable).
pub(crate) fn certified_from(
    windows: impl IntoIterator<Item = usize>,
    bars: usize,
) -> Option<usize> {
    let mut w: Vec<usize> = windows.into_iter().filter(|&n| n <= bars).collect();
    w.sort_unstable_by(|a, b| b.cmp(a));
    w.dedup();
    let eligible = w.iter().take_while(|&&n| pays(n, bars)).count();
    let cost = |k: usize| k * LINE_COST + w.get(k).copied().unwrap_or(0);
    let mut best = 0;
    for k in 1..=eligible {
        if cost(k) < cost(best) {
            best = k;
        }
    }
    best.checked_sub(1).map(|k| w[k])
}

/// Counts of one sweep's comparisons on certified lines: how many bars were compared, and at
/// how many the fast values could not decide, so the reference's values were recomputed.
#[derive(Debug, Default)]
pub struct CertifiedBars {
    compared: AtomicU64,
    recomputed: AtomicU64,
}

impl CertifiedBars {
    /// Bars compared on at least one certified line.
    pub fn compared(&self) -> u64 {
        self.compared.load(Ordering::Relaxed)
    }

    /// Bars among them decided from the reference's recomputed values (the fallback).
    pub fn recomputed(&self) -> u64 {
        self.recomputed.load(Ordering::Relaxed)
    }

    fn add(&self, compared: u64, recomputed: u64) {
        self.compared.fetch_add(compared, Ordering::Relaxed);
        self.recomputed.fetch_add(recomputed, Ordering::Relaxed);
    }
}

/// The allocations of one sweep's certified lines, handed back once the lines are no longer
/// read and reused by the next ones: a fresh allocation costs the OS a zeroed page per 4 KiB
/// on first touch, which on long series was a fifth of a certified sweep. Holds no more than
/// the lines it was given (at most one group's).
#[derive(Debug, Default)]
pub(crate) struct Recycler(Mutex<Vec<Arc<[MaybeUninit<f64>]>>>);

impl Recycler {
    /// Keeps `line`'s allocation for reuse if nothing else holds it.
    pub(crate) fn give(&self, line: Arc<[f64]>) {
        if Arc::strong_count(&line) == 1 && Arc::weak_count(&line) == 0 {
            // SAFETY: `MaybeUninit<f64>` has `f64`'s layout, and the `Arc` is the only one.
            let line = unsafe { Arc::from_raw(Arc::into_raw(line) as *const [MaybeUninit<f64>]) };
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }

    /// An allocation of `len` values: a recycled one if there is one of that length.
    fn take(&self, len: usize) -> Arc<[MaybeUninit<f64>]> {
        let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match pool.iter().position(|a| a.len() == len) {
            Some(i) => pool.swap_remove(i),
            None => Arc::new_uninit_slice(len),
        }
    }
}

/// A line computed by the certified path: its values (NaN exactly where the reference's are)
/// and, per [`BLOCK`] of outputs, a bound on `|value - reference|` over the block.
#[derive(Debug, Clone)]
pub(crate) struct Certified {
    pub(crate) values: Arc<[f64]>,
    pub(crate) bounds: Arc<[f64]>,
}

impl Certified {
    pub(crate) fn view(&self) -> Bounded<'_> {
        Bounded {
            values: &self.values,
            bounds: Some(&self.bounds),
        }
    }
}

/// A line as the comparisons and the second level read it: its values, and their bounds per
/// block if it is certified (`None`: the reference's values themselves).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounded<'a> {
    pub(crate) values: &'a [f64],
    pub(crate) bounds: Option<&'a [f64]>,
}

impl<'a> Bounded<'a> {
    /// An exact line.
    pub(crate) fn exact(values: &'a [f64]) -> Self {
        Self {
            values,
            bounds: None,
        }
    }

    fn bound(&self, block: usize) -> f64 {
        self.bounds.map_or(0.0, |b| b[block])
    }
}

/// Blocks of a line of `len` outputs.
fn blocks(len: usize) -> usize {
    len.div_ceil(BLOCK)
}

/// The largest magnitude per block of `x` (NaN ignored: a NaN input only ever gives NaN
/// outputs, which no bound is asked for).
pub(crate) fn block_max_abs(x: &[f64]) -> Vec<f64> {
    const _: () = assert!(BLOCK == 64, "vector::block_max_abs works in blocks of 64");
    let mut out = Vec::with_capacity(blocks(x.len()));
    crate::lines::vector::block_max_abs(x, &mut out);
    out
}

/// For each block `b` of outputs of a window of `n`, the largest of `per_block` over the input
/// blocks its windows read: inputs `64b + 1 - n ..= 64b + 63`, that is blocks `b - s ..= b`
/// with `s = ceil((n - 1) / 64)` (from 0 near the start). Van Herk's sliding maximum: the
/// running maxima within segments of `s + 1` blocks, forwards and backwards, give any such
/// window's maximum as the larger of two values.
fn window_max(per_block: &[f64], n: usize) -> Vec<f64> {
    let w = (n - 1).div_ceil(BLOCK) + 1;
    let len = per_block.len();
    let mut forward = per_block.to_vec();
    let mut backward = per_block.to_vec();
    for seg in (0..len).step_by(w) {
        let end = (seg + w).min(len);
        for i in seg + 1..end {
            forward[i] = forward[i].max(forward[i - 1]);
        }
        for i in (seg..end - 1).rev() {
            backward[i] = backward[i].max(backward[i + 1]);
        }
    }
    (0..len)
        .map(|b| match (b + 1).checked_sub(w) {
            // The window [b + 1 - w, b] spans at most two segments.
            Some(lo) => backward[lo].max(forward[b]),
            None => forward[b],
        })
        .collect()
}

/// Outputs per anchor of a running sum over a window of `n`: each anchor costs `n` operations
/// and resets the running error, which grows with the square of the outputs since the last one
/// (docs/architecture.md, "the running sum"). One window keeps the running error a few times
/// the reference's own and the anchors at one operation an output.
fn anchor_every(n: usize) -> usize {
    n.max(4 * BLOCK)
}

/// Windows from which a running sum beats the exact pass on a certified input (which must be
/// certified anyway): the pass costs the window per output, a running sum about four.
const RUNNING_MIN: usize = 48;

/// `WMA(x, n)` of a fast input `x` whose values before `from` are not read (they are NaN):
/// outputs from `from + n - 1` on into `out` (every element written; the rest NaN), by a
/// running sum anchored every [`anchor_every`] outputs; `fast[b]` receives the largest bound
/// over block `b`'s outputs on `|out[i] - W_i(x)|`, the distance of the running sum's value
/// from the exact real WMA of the same inputs ("the running sum"). `block_max` holds the
/// inputs' largest magnitude per block.
fn running_wma(
    x: &[f64],
    from: usize,
    n: usize,
    (out, fast): (&mut [MaybeUninit<f64>], &mut [f64]),
    block_max: &[f64],
) {
    let len = x.len();
    let first = from + n - 1;
    for o in &mut out[..first.min(len)] {
        o.write(f64::NAN);
    }
    if first >= len {
        return;
    }
    let every = anchor_every(n);
    let anchors: Vec<usize> = (first..len).step_by(every).collect();
    // The running sums are chains of dependent adds: LANES anchors' segments run side by side
    // so their chains overlap. Full segments go in groups; the rest one by one.
    let full = anchors.iter().take_while(|&&a| a + every <= len).count();
    let mut groups = anchors[..full].chunks_exact(LANES);
    for g in &mut groups {
        let starts: [usize; LANES] = g.try_into().expect("LANES anchors");
        let outs = disjoint(out, starts, every);
        segments(x, starts.map(|a| (n, a)), every, outs);
    }
    for &a in groups.remainder().iter().chain(&anchors[full..]) {
        let steps = (a + every).min(len) - a;
        segments(x, [(n, a)], steps, [&mut out[a..a + steps]]);
    }
    let d = denominator(n);
    for &a in &anchors {
        let e = (a + every).min(len);
        let lo = a + 1 - n;
        // M: the largest input magnitude any sum of this anchor's outputs reads (over the
        // blocks that hold those inputs).
        let m = block_max[lo / BLOCK..=(e - 1) / BLOCK]
            .iter()
            .fold(0.0f64, |m, &v| m.max(v));
        // The bound at output a + k grows with k: per block, the largest is at its last output.
        let terms = RunningTerms::new(n, d, m);
        let mut i = a;
        while i < e {
            let block_end = ((i / BLOCK + 1) * BLOCK).min(e);
            let k = (block_end - 1 - a) as f64;
            let b = i / BLOCK;
            fast[b] = fast[b].max(terms.at(k));
            i = block_end;
        }
    }
}

/// Anchored segments run side by side in [`running_wma`].
const LANES: usize = 4;

/// `L` running WMAs side by side, lane `j` of window `n` anchored at output `start`
/// (`>= n - 1`, `start + steps <= x.len()`): `steps` outputs from the anchor into `outs[j]`.
#[inline(always)]
fn segments<const L: usize>(
    x: &[f64],
    lanes: [(usize, usize); L],
    steps: usize,
    outs: [&mut [MaybeUninit<f64>]; L],
) {
    let rho: [f64; L] = lanes.map(|(n, _)| 1.0 / denominator(n));
    let nf: [f64; L] = lanes.map(|(n, _)| n as f64);
    let new: [&[f64]; L] = lanes.map(|(_, a)| &x[a..a + steps]);
    // x[i - n] for outputs i = start + 1 .. start + steps - 1.
    let old: [&[f64]; L] = lanes.map(|(n, a)| &x[a + 1 - n..a + steps - n]);
    let (mut s, mut t) = ([0.0f64; L], [0.0f64; L]);
    for j in 0..L {
        let (n, a) = lanes[j];
        // The anchor: both sums in any order: gamma_n of the sum of the terms' magnitudes
        // (Higham's bound holds for any summation order).
        (s[j], t[j]) = anchor(&x[a + 1 - n..=a]);
        outs[j][0].write(s[j] * rho[j]);
    }
    for k in 1..steps {
        for j in 0..L {
            // S[i] = S[i-1] + (n*x[i] - T[i-1]); T[i] = T[i-1] + (x[i] - x[i-n]): one add on
            // each chain per output.
            let q = nf[j] * new[j][k] - t[j];
            s[j] += q;
            t[j] += new[j][k] - old[j][k - 1];
            outs[j][k].write(s[j] * rho[j]);
        }
    }
}

/// `L` disjoint slices of `steps` elements of `out`, from each of `starts` (ascending, at
/// least `steps` apart).
fn disjoint<const L: usize>(
    out: &mut [MaybeUninit<f64>],
    starts: [usize; L],
    steps: usize,
) -> [&mut [MaybeUninit<f64>]; L] {
    let mut rest = out;
    let mut at = 0;
    let mut parts: [Option<&mut [MaybeUninit<f64>]>; L] = std::array::from_fn(|_| None);
    for (j, part) in parts.iter_mut().enumerate() {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(starts[j] - at);
        let (mine, tail) = tail.split_at_mut(steps);
        *part = Some(mine);
        rest = tail;
        at = starts[j] + steps;
    }
    parts.map(|p| p.expect("filled"))
}

/// `(sum x[k] * (k + 1), sum x[k])` over a window, eight terms at a time (independent sums,
/// so they vectorise and pipeline).
fn anchor(w: &[f64]) -> (f64, f64) {
    const LANES: usize = 8;
    let (mut s, mut t) = ([0.0f64; LANES], [0.0f64; LANES]);
    let mut weights: [f64; LANES] = std::array::from_fn(|j| (j + 1) as f64);
    let mut chunks = w.chunks_exact(LANES);
    for c in &mut chunks {
        for j in 0..LANES {
            s[j] += c[j] * weights[j];
            t[j] += c[j];
            weights[j] += LANES as f64;
        }
    }
    let k = weights[0];
    let (mut s1, mut t1) = (s.iter().sum::<f64>(), t.iter().sum::<f64>());
    for (j, &v) in chunks.remainder().iter().enumerate() {
        s1 += v * (k + j as f64);
        t1 += v;
    }
    (s1, t1)
}

/// The running WMA's error after `k` steps from an anchor, in closed form
/// (docs/architecture.md, "the running sum"; every `A` bounds a magnitude, `M` the inputs').
struct RunningTerms {
    /// `E_S0`, `E_T0`: the anchor's errors.
    e_s0: f64,
    e_t0: f64,
    /// Per step: `c_T` added to `E_T`; `c_S` added to `E_S` (besides `E_T`).
    c_t: f64,
    c_s: f64,
    /// `1 / D` and the output's own rounding.
    inv_d: f64,
    out: f64,
}

impl RunningTerms {
    fn new(n: usize, d: f64, m: f64) -> Self {
        let nf = n as f64;
        // |T| <= (n + 1) M, |S| <= (D + 2n + 1) M, |q| <= (2n + 1) M, |n x| <= n M (each with
        // the errors, far below 2^-20 of them, inside SLACK).
        let a_t = (nf + 1.0) * m * SLACK;
        let a_s = (d + 2.0 * nf + 1.0) * m * SLACK;
        let a_q = (2.0 * nf + 1.0) * m * SLACK;
        Self {
            e_s0: gamma(n) * d * m + nf * TINY,
            e_t0: gamma(n) * nf * m,
            // delta = x[i] - x[i-n] (|delta| <= 2M) and T + delta, each rounded.
            c_t: U * (2.0 * m + a_t),
            // n * x[i] (with underflow), q = n x - T, S + q, each rounded.
            c_s: U * (nf * m + a_q + a_s) + TINY,
            inv_d: 1.0 / d * SLACK,
            // S * fl(1/D): the reciprocal's rounding and the product's.
            out: 2.0 * U * a_s / d * SLACK + TINY,
        }
    }

    /// The bound on `|out - W(x)|` at `k` steps past the anchor.
    fn at(&self, k: f64) -> f64 {
        // E_T(j) = E_T0 + j c_T; E_S(k) = E_S0 + sum_{j<k} (E_T(j) + c_S).
        let e_s =
            self.e_s0 + k * self.e_t0 + self.c_t * k * (k - 1.0).max(0.0) / 2.0 + k * self.c_s;
        (e_s * self.inv_d + self.out) * SLACK
    }
}

/// `WMA(x, n)` certified, over a fast input `x` (NaN before `from`) whose values are within
/// `eps[b]` of the reference's inputs over each block `b` (`None`: they are the reference's).
/// Short windows take the exact pass over `x` (the reference's arithmetic on these inputs),
/// long ones a running sum; either way the bound adds the reference's own rounding and the
/// inputs' distance ("a line's bound"). `block_max` is [`block_max_abs`] of `x` (computed
/// once for the many lines over one series).
pub(crate) fn wma(
    x: &[f64],
    from: usize,
    n: usize,
    (eps, block_max): (Option<&[f64]>, &[f64]),
    recycler: &Recycler,
) -> Certified {
    let len = x.len();
    let nb = blocks(len);
    // Made as the `Arc` it is shared as (no copy into one), uninitialised or recycled: both
    // paths write every element.
    let mut values = recycler.take(len);
    let out = Arc::get_mut(&mut values).expect("just made");
    let magnitude = window_max(block_max, n);
    let mut fast = vec![0.0f64; nb];
    if n >= RUNNING_MIN {
        running_wma(x, from, n, (out, &mut fast), block_max);
    } else {
        for o in &mut out[..from.min(len)] {
            o.write(f64::NAN);
        }
        if from < len {
            // SAFETY: `out[from..]` is one slice of `len - from` elements, borrowed whole; the
            // pass writes every one of them.
            unsafe {
                wma_multi_raw(
                    crate::lines::wma::Input::Series(&x[from..]),
                    &[n],
                    &[out[from..].as_mut_ptr().cast::<f64>()],
                    false,
                )
            };
        }
        // The reference's arithmetic on the fast inputs: gamma_{n+1} of the weighted
        // magnitudes (at most the window's largest), and underflow per product.
        for (f, m) in fast.iter_mut().zip(&magnitude) {
            *f = gamma(n + 1) * m + (n as f64 + 1.0) * TINY;
        }
    }
    // SAFETY: every element was written above.
    let values = unsafe { values.assume_init() };
    let input = eps.map(|e| window_max(e, n));
    let g = gamma(n + 1);
    let bounds: Arc<[f64]> = (0..nb)
        .map(|b| {
            let e = input.as_ref().map_or(0.0, |e| e[b]);
            // Fast arithmetic, then the reference's own rounding on its inputs (whose
            // magnitudes are at most the fast ones' plus their distance), then the inputs'
            // distance itself carried through the (averaging) WMA.
            (fast[b] + g * (magnitude[b] + e) + (n as f64 + 1.0) * TINY + (1.0 + g) * e) * SLACK
        })
        .collect();
    Certified { values, bounds }
}

/// `SMA(x, n)` certified, over the closes: a running sum anchored every [`anchor_every`]
/// outputs ("SMA").
pub(crate) fn sma(x: &[f64], n: usize) -> Certified {
    let len = x.len();
    let nb = blocks(len);
    let mut values: Arc<[f64]> = std::iter::repeat_n(f64::NAN, len).collect();
    let mut bounds = vec![0.0f64; nb];
    if n > len || n == 0 {
        return Certified {
            values,
            bounds: bounds.into(),
        };
    }
    let values_mut = Arc::get_mut(&mut values).expect("just made");
    let nf = n as f64;
    let inv = 1.0 / nf;
    let every = anchor_every(n);
    let mut a = n - 1;
    while a < len {
        let e = (a + every).min(len);
        let lo = a + 1 - n;
        let m = x[lo..e].iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let mut t = anchor(&x[lo..=a]).1;
        values_mut[a] = t * inv;
        for i in a + 1..e {
            t += x[i] - x[i - n];
            values_mut[i] = t * inv;
        }
        let a_t = (nf + 1.0) * m * SLACK;
        let e_t0 = gamma(n) * nf * m;
        let c_t = U * (2.0 * m + a_t);
        // The output's rounding (reciprocal and product), and the reference's: a sum of n
        // terms from 0.0 and one division, gamma_{n+1} of the window's magnitudes.
        let tail = 2.0 * U * a_t * inv * SLACK + TINY + gamma(n + 1) * m + TINY;
        let mut i = a;
        while i < e {
            let block_end = ((i / BLOCK + 1) * BLOCK).min(e);
            let k = (block_end - 1 - a) as f64;
            let b = i / BLOCK;
            let bound = ((e_t0 + k * c_t) * inv * SLACK + tail) * SLACK;
            bounds[b] = bounds[b].max(bound);
            i = block_end;
        }
        a = e;
    }
    Certified {
        values,
        bounds: bounds.into(),
    }
}

/// A difference series of the second level, as the fast path has it: its values (the
/// reference's expression on the fast inputs), and per block how far they can be from the
/// reference's (`None`: they are the reference's, from exact inputs).
pub(crate) struct Difference {
    pub(crate) values: Vec<f64>,
    pub(crate) eps: Option<Vec<f64>>,
    /// [`block_max_abs`] of the values.
    pub(crate) block_max: Vec<f64>,
    /// Leading NaN values (the longer first-level window's warm-up).
    pub(crate) from: usize,
}

/// One rounded operation on both sides: fast inputs within `delta` of the reference's (after
/// the exact operation), fast result of magnitude at most `r`. Both results are rounded:
/// `|fl(y) - fl(y')| <= delta + U|y| + U|y'|`, `|y| <= |r| / (1 - U)`, `|y'| <= |y| + delta`
/// ("the difference series").
fn op(delta: f64, r: f64) -> f64 {
    delta * (1.0 + U) + 2.0 * U * r * SLACK + 2.0 * TINY
}

/// A first-level input of a difference series.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part<'a> {
    /// A line computed before (the exact pass's, or the cache's).
    Line(Bounded<'a>),
    /// `WMA(close, n)` by a running sum, made a chunk at a time as the difference series is:
    /// never written out whole.
    Running(usize),
}

/// Which difference series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `2*h - f` of parts `[h, f]`.
    Hma,
    /// `3*w3 - w2 - w1` of parts `[w3, w2, w1]`.
    Hma3,
}

/// A difference series of the second level straight from the closes (`close_max`: their
/// [`block_max_abs`]): running parts computed a chunk of bars at a time into small buffers
/// (anchored at each chunk's start), the difference made from them and the line parts with
/// the reference's expression, into `values` (whose allocation is reused). Outputs before
/// `from` (the longest part's warm-up) are NaN. Each part's bound is a first-level line's
/// ("a line's bound", `eps = 0`), the difference's follows ("the difference series").
pub(crate) fn difference(
    (close, close_max): (&[f64], &[f64]),
    shape: Shape,
    parts: &[Part<'_>],
    from: usize,
    mut values: Vec<f64>,
) -> Difference {
    let len = close.len();
    let nb = blocks(len);
    values.clear();
    values.reserve_exact(len);
    values.resize(from.min(len), f64::NAN);
    let windows: Vec<usize> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Running(n) => Some(*n),
            Part::Line(_) => None,
        })
        .collect();
    let all_running = windows.len() == parts.len();
    let chunk = windows
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(4_096)
        .next_multiple_of(BLOCK);
    // Per running part: a chunk's values (when some part is a line) and its bounds.
    let mut bufs: Vec<Vec<f64>> = Vec::new();
    let mut part_bounds: Vec<Vec<f64>> = windows.iter().map(|_| vec![0.0; nb]).collect();
    let mut eps = vec![0.0f64; nb];
    let mut block_max = vec![0.0f64; nb];
    let mut a = from;
    while a < len {
        let e = ((a / chunk + 1) * chunk).min(len);
        let steps = e - a;
        for (j, &n) in windows.iter().enumerate() {
            let lo = a + 1 - n;
            let m = close_max[lo / BLOCK..=(e - 1) / BLOCK]
                .iter()
                .fold(0.0f64, |m, &v| m.max(v));
            let terms = RunningTerms::new(n, denominator(n), m);
            // The reference's own error: M bounds every window of the chunk too.
            let reference = gamma(n + 1) * m + (n as f64 + 1.0) * TINY;
            let mut i = a;
            while i < e {
                let block_end = ((i / BLOCK + 1) * BLOCK).min(e);
                let fast = terms.at((block_end - 1 - a) as f64);
                part_bounds[j][i / BLOCK] = (fast + reference) * SLACK;
                i = block_end;
            }
        }
        // The chunk's differences, and per block (of the chunk) the largest |d| and, for the
        // HMA3's intermediate results, the largest |w3| and |w2|.
        let (d_max, m3, m2) = if all_running {
            let mut ns = [windows[0]; 4];
            ns[..windows.len()].copy_from_slice(&windows);
            let mut maxima = Vec::new();
            fused(
                close,
                (ns, a, steps),
                shape,
                &mut values.spare_capacity_mut()[..steps],
                &mut maxima,
            );
            // SAFETY: `fused` wrote the chunk's `steps` values.
            unsafe { values.set_len(e) };
            let pick = |j: usize| maxima.iter().map(|m| m[j]).collect::<Vec<f64>>();
            (pick(3), pick(0), pick(1))
        } else {
            bufs.resize_with(windows.len(), || Vec::with_capacity(chunk));
            mixed_chunk(
                (close, a, steps),
                (&windows, &mut bufs),
                shape,
                parts,
                &mut values,
            )
        };
        let mut running = 0;
        let bounds: Vec<Option<&[f64]>> = parts
            .iter()
            .map(|p| match p {
                Part::Line(l) => l.bounds,
                Part::Running(_) => {
                    running += 1;
                    Some(&part_bounds[running - 1][..])
                }
            })
            .collect();
        let bound = |p: usize, b: usize| bounds[p].map_or(0.0, |v| v[b]);
        for (j, b) in (a / BLOCK..=(e - 1) / BLOCK).enumerate() {
            let r = d_max[j];
            block_max[b] = block_max[b].max(r);
            let e_b = match shape {
                Shape::Hma => op(2.0 * bound(0, b) + bound(1, b), r),
                Shape::Hma3 => {
                    let t1 = 3.0 * m3[j] * SLACK;
                    let t2 = (t1 + m2[j]) * SLACK;
                    let d1 = op(3.0 * bound(0, b), t1);
                    let d2 = op(d1 + bound(1, b), t2);
                    op(d2 + bound(2, b), r)
                }
            };
            eps[b] = eps[b].max(e_b * SLACK);
        }
        a = e;
    }
    let exact = parts
        .iter()
        .all(|p| matches!(p, Part::Line(l) if l.bounds.is_none()));
    Difference {
        values,
        // The reference's operations on the reference's values: the same values.
        eps: (!exact).then_some(eps),
        block_max,
        from,
    }
}

/// One chunk of [`difference`] where some part is a line: the running parts into `bufs`, then
/// the difference from them and the lines onto `values`. Returns the chunk's per-block
/// largest `|d|`, `|w3|` and `|w2|` (the last two for the HMA3).
fn mixed_chunk(
    (close, a, steps): (&[f64], usize, usize),
    (windows, bufs): (&[usize], &mut [Vec<f64>]),
    shape: Shape,
    parts: &[Part<'_>],
    values: &mut Vec<f64>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let e = a + steps;
    for buf in bufs.iter_mut() {
        buf.clear();
    }
    {
        let mut outs = bufs
            .iter_mut()
            .map(|b| &mut b.spare_capacity_mut()[..steps]);
        let mut next = || outs.next().expect("a buffer per running part");
        match *windows {
            [] => {}
            [n] => segments(close, [(n, a)], steps, [next()]),
            [n, m] => segments(close, [(n, a), (m, a)], steps, [next(), next()]),
            _ => unreachable!("a line among at most three parts"),
        }
    }
    for buf in bufs.iter_mut() {
        // SAFETY: `segments` wrote the first `steps` values of every buffer.
        unsafe { buf.set_len(steps) };
    }
    let mut running = 0;
    let views: Vec<&[f64]> = parts
        .iter()
        .map(|p| match p {
            Part::Line(l) => &l.values[a..e],
            Part::Running(_) => {
                running += 1;
                &bufs[running - 1][..]
            }
        })
        .collect();
    // The reference's expression, element by element, straight onto the series.
    match shape {
        Shape::Hma => values.extend(views[0].iter().zip(views[1]).map(|(h, f)| 2.0 * h - f)),
        Shape::Hma3 => values.extend(
            views[0]
                .iter()
                .zip(views[1])
                .zip(views[2])
                .map(|((w3, w2), w1)| 3.0 * w3 - w2 - w1),
        ),
    }
    let d_max = chunk_block_max(&values[a..e], a);
    match shape {
        Shape::Hma => (d_max, Vec::new(), Vec::new()),
        Shape::Hma3 => (
            d_max,
            chunk_block_max(views[0], a),
            chunk_block_max(views[1], a),
        ),
    }
}

/// [`difference`]'s chunk when every part is a running sum: the parts are the four lanes of
/// one vector (an HMA's two padded with copies), stepped together (the new close is one
/// broadcast), the difference made from the lanes in the same loop and stored, and per block
/// of the chunk the lanes' largest magnitudes (lanes 0 and 1) and the difference's (lane 3
/// of `maxima`) kept. Compiled for AVX2 where the CPU has it.
fn fused(
    x: &[f64],
    (ns, a, steps): ([usize; 4], usize, usize),
    shape: Shape,
    out: &mut [MaybeUninit<f64>],
    maxima: &mut Vec<[f64; 4]>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2")]
        fn avx2(
            x: &[f64],
            lanes: ([usize; 4], usize, usize),
            shape: Shape,
            out: &mut [MaybeUninit<f64>],
            maxima: &mut Vec<[f64; 4]>,
        ) {
            fused_lanes(x, lanes, shape, out, maxima);
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { avx2(x, (ns, a, steps), shape, out, maxima) };
            return;
        }
    }
    fused_lanes(x, (ns, a, steps), shape, out, maxima);
}

#[inline(always)]
fn fused_lanes(
    x: &[f64],
    (ns, a, steps): ([usize; 4], usize, usize),
    shape: Shape,
    out: &mut [MaybeUninit<f64>],
    maxima: &mut Vec<[f64; 4]>,
) {
    let rho: [f64; 4] = ns.map(|n| 1.0 / denominator(n));
    let nf: [f64; 4] = ns.map(|n| n as f64);
    let new = &x[a..a + steps];
    // x[i - n] for outputs i = a + 1 .. a + steps - 1.
    let old: [&[f64]; 4] = ns.map(|n| &x[a + 1 - n..a + steps - n]);
    let (mut s, mut t) = ([0.0f64; 4], [0.0f64; 4]);
    for j in 0..4 {
        // The anchor: both sums in any order (Higham's bound holds for any order).
        (s[j], t[j]) = anchor(&x[a + 1 - ns[j]..=a]);
    }
    let (c0, c1) = match shape {
        Shape::Hma => (2.0, 0.0),
        Shape::Hma3 => (3.0, 1.0),
    };
    maxima.clear();
    let mut k = 0;
    while k < steps {
        // One block of the whole series at a time (the first may start mid-block).
        let end = (((a + k) / BLOCK + 1) * BLOCK - a).min(steps);
        let mut mx = [0.0f64; 4];
        while k < end {
            if k > 0 {
                let xv = new[k];
                for j in 0..4 {
                    // S[i] = S[i-1] + (n*x[i] - T[i-1]); T[i] = T[i-1] + (x[i] - x[i-n]).
                    let q = nf[j] * xv - t[j];
                    s[j] += q;
                    t[j] += xv - old[j][k - 1];
                }
            }
            let w: [f64; 4] = std::array::from_fn(|j| s[j] * rho[j]);
            // The reference's expression: `2*h - f`, or `3*w3 - w2 - w1` (`c1 * w[2]` with
            // c1 = 1 is exact, and 0 adds nothing for the HMA).
            let d = c0 * w[0] - w[1] - c1 * w[2];
            out[k].write(d);
            let lanes = [w[0].abs(), w[1].abs(), 0.0, d.abs()];
            for j in 0..4 {
                mx[j] = if lanes[j] > mx[j] { lanes[j] } else { mx[j] };
            }
            k += 1;
        }
        maxima.push(mx);
    }
}

/// [`block_max_abs`] of `v`, the values from index `at` on, per block of the whole series:
/// one value per block that `at..at + v.len()` touches.
fn chunk_block_max(v: &[f64], at: usize) -> Vec<f64> {
    // The values of the block `at` falls in, if it starts mid-block.
    let head = match at % BLOCK {
        0 => 0,
        r => (BLOCK - r).min(v.len()),
    };
    let mut out = Vec::with_capacity(v.len() / BLOCK + 2);
    if head > 0 {
        out.push(v[..head].iter().fold(0.0f64, |m, x| m.max(x.abs())));
    }
    out.extend(block_max_abs(&v[head..]));
    out
}

/// The reference's values of line `key` over `close` at `bars` (ascending, distinct): each
/// summed in the reference's order by the exact path's own routines, so bit for bit the
/// values an exact sweep computes. Bars close together share their first-level work.
pub(crate) fn exact_at(close: &[f64], key: Line, bars: &[usize]) -> Vec<f64> {
    let mut out = Vec::with_capacity(bars.len());
    let reach = match key {
        Line::Hma([_, _, q]) => q as usize,
        Line::Hma3([_, _, p]) => p as usize,
        Line::Wma(n) | Line::Sma(n) => n as usize,
    };
    let mut start = 0;
    while start < bars.len() {
        // A cluster: bars no further apart than the line's last window.
        let mut end = start + 1;
        while end < bars.len() && bars[end] - bars[end - 1] <= reach {
            end += 1;
        }
        let (lo, hi) = (bars[start], bars[end - 1] + 1);
        let values = exact_range(close, key, lo, hi);
        out.extend(bars[start..end].iter().map(|&i| values[i - lo]));
        start = end;
    }
    out
}

/// The reference's values of `key` at bars `lo..hi`.
fn exact_range(close: &[f64], key: Line, lo: usize, hi: usize) -> Vec<f64> {
    match key {
        Line::Sma(n) => {
            // The exact SMA pass itself over the closes these outputs read.
            let n = n as usize;
            let first = lo.max(n - 1).min(hi);
            let mut out = vec![f64::NAN; first - lo];
            if first < hi {
                let line = &sma_multi(&close[first + 1 - n..hi], &[n], false)[0];
                out.extend_from_slice(&line[n - 1..]);
            }
            out
        }
        Line::Wma(n) => wmas_at(close, 0, &[n as usize], lo, hi).remove(0),
        Line::Hma([h, f, q]) => {
            let q = q as usize;
            let dlo = (lo + 1).saturating_sub(q);
            let w = wmas_at(close, 0, &[h as usize, f as usize], dlo, hi);
            let d: Vec<f64> = w[0].iter().zip(&w[1]).map(|(h, f)| 2.0 * h - f).collect();
            wmas_at(&d, dlo, &[q], lo, hi).remove(0)
        }
        Line::Hma3([p3, p2, p]) => {
            let p = p as usize;
            let dlo = (lo + 1).saturating_sub(p);
            let w = wmas_at(close, 0, &[p3 as usize, p2 as usize, p], dlo, hi);
            let d: Vec<f64> = (0..w[0].len())
                .map(|i| 3.0 * w[0][i] - w[1][i] - w[2][i])
                .collect();
            wmas_at(&d, dlo, &[p], lo, hi).remove(0)
        }
    }
}

/// The reference's `WMA(x, n)` at indices `lo..hi` for each of `windows` (any order, repeats
/// allowed), where `x` holds the input from index `base` on.
fn wmas_at(x: &[f64], base: usize, windows: &[usize], lo: usize, hi: usize) -> Vec<Vec<f64>> {
    let mut distinct: Vec<usize> = windows.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let longest = *distinct.last().expect("at least one window");
    let mut outs: Vec<Vec<f64>> = distinct.iter().map(|_| vec![0.0; hi - lo]).collect();
    let ptrs: Vec<*mut f64> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
    let from = (lo + 1).saturating_sub(longest).max(base);
    let weights: Vec<f64> = (1..=longest).map(|k| k as f64).collect();
    // SAFETY: each pointer is a distinct vector of `hi - lo` values; `x` holds the input from
    // `base` on, through its end (past `hi - 1`).
    unsafe {
        wma_range(
            &x[from - base..],
            from,
            lo,
            hi,
            &distinct,
            &ptrs,
            &weights,
            &mut RangeScratch::default(),
        )
    };
    windows
        .iter()
        .map(|n| outs[distinct.binary_search(n).expect("listed")].clone())
        .collect()
}

/// A line of a comparison: its values and, if certified, its bounds, and what line it is (to
/// recompute the reference's values).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Side<'a> {
    pub(crate) line: Bounded<'a>,
    pub(crate) key: Line,
}

/// Makes the state bytes of `a` and `b` (computed from the fast values) the reference's: at
/// every bar where both are defined and the gap between the fast values is within the two
/// bounds, both lines' reference values are recomputed ([`exact_at`]) and the byte is set
/// from them. Counted into `counts`.
pub(crate) fn settle(
    close: &[f64],
    a: Side<'_>,
    b: Side<'_>,
    states: &mut [u8],
    counts: Option<&CertifiedBars>,
) {
    if a.line.bounds.is_none() && b.line.bounds.is_none() {
        return;
    }
    let (av, bv) = (a.line.values, b.line.values);
    let mut open: Vec<usize> = Vec::new();
    let mut compared = 0u64;
    for (blk, (ac, bc)) in av.chunks(BLOCK).zip(bv.chunks(BLOCK)).enumerate() {
        let limit = (a.line.bound(blk) + b.line.bound(blk)) * SLACK;
        for (j, (&x, &y)) in ac.iter().zip(bc).enumerate() {
            if x.is_nan() || y.is_nan() {
                continue;
            }
            compared += 1;
            // Not decided unless the gap exceeds the bounds (a NaN bound decides nothing).
            #[allow(clippy::neg_cmp_op_on_partial_ord, reason = "NaN must leave it open")]
            if !((y - x).abs() > limit) {
                open.push(blk * BLOCK + j);
            }
        }
    }
    if !open.is_empty() {
        let exact = |s: &Side<'_>| -> Vec<f64> {
            match s.line.bounds {
                Some(_) => exact_at(close, s.key, &open),
                None => open.iter().map(|&i| s.line.values[i]).collect(),
            }
        };
        let (ea, eb) = (exact(&a), exact(&b));
        for ((&i, &x), &y) in open.iter().zip(&ea).zip(&eb) {
            states[i] = state(x, y);
        }
    }
    if let Some(c) = counts {
        c.add(compared, open.len() as u64);
    }
}

/// One bar's state byte from the two lines' values, as `vector::signs` makes it.
fn state(a: f64, b: f64) -> u8 {
    if a.is_nan() || b.is_nan() {
        UNDEFINED
    } else if b > a {
        ABOVE
    } else if b < a {
        BELOW
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle;

    /// Series of every kind the bounds must hold on: a random walk, integer and half-cent
    /// prices, constant stretches, a repeated pattern, and a walk scaled by powers of two.
    fn series(len: usize) -> Vec<(&'static str, Vec<f64>)> {
        let mut seed = 7u64;
        let mut rand = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let walk: Vec<f64> = (0..len)
            .scan(100.0, |p, _| {
                *p *= 1.0 + (rand() - 0.5) * 0.01;
                Some(*p)
            })
            .collect();
        let integers: Vec<f64> = walk.iter().map(|p| p.round()).collect();
        let half_cents: Vec<f64> = walk.iter().map(|p| (p * 200.0).round() / 200.0).collect();
        let stretches: Vec<f64> = walk
            .iter()
            .enumerate()
            .map(|(i, p)| if (i / 500) % 2 == 0 { 100.0 } else { *p })
            .collect();
        let pattern: Vec<f64> = (0..len).map(|i| [1.25, 1.5, 1.0, 1.5][i % 4]).collect();
        let mut out = vec![
            ("walk", walk.clone()),
            ("integers", integers),
            ("half cents", half_cents),
            ("constant stretches", stretches),
            ("pattern", pattern),
        ];
        for k in [-60, 40] {
            let s = 2f64.powi(k);
            out.push(("scaled", walk.iter().map(|p| p * s).collect()));
        }
        out
    }

    /// Every defined value within its block's bound of the reference's, NaN exactly where the
    /// reference's are.
    fn assert_within(what: &str, got: &Certified, want: &[f64]) {
        assert_eq!(got.values.len(), want.len(), "{what}");
        for (i, (&g, &w)) in got.values.iter().zip(want).enumerate() {
            assert_eq!(g.is_nan(), w.is_nan(), "{what}: NaN at {i}");
            if !w.is_nan() {
                let bound = got.bounds[i / BLOCK];
                assert!(
                    (g - w).abs() <= bound,
                    "{what}: |{g} - {w}| > {bound} at {i}"
                );
            }
        }
    }

    /// A recycler holding a used allocation of the right length, as a sweep's would.
    fn hl_pool() -> Recycler {
        let pool = Recycler::default();
        pool.give(vec![f64::NAN; 6_000].into());
        pool
    }

    fn first(x: &[f64], n: usize) -> Certified {
        wma(x, 0, n, (None, &block_max_abs(x)), &Recycler::default())
    }

    #[test]
    fn first_level_wma_and_sma_are_within_their_bounds() {
        for (name, x) in series(6_000) {
            for n in [
                1, 2, 47, 48, 64, 255, 256, 300, 1_000, 4_097, 5_999, 6_000, 6_001,
            ] {
                assert_within(
                    &format!("{name} WMA {n}"),
                    &first(&x, n),
                    &oracle::wma(&x, n),
                );
                assert_within(&format!("{name} SMA {n}"), &sma(&x, n), &oracle::sma(&x, n));
            }
        }
    }

    /// A first-level part of each kind: running, a certified line with its bounds, the
    /// reference's own line.
    fn parts(x: &[f64], n: usize, kind: usize) -> (Option<Certified>, Vec<f64>) {
        match kind {
            0 => (None, Vec::new()),
            1 => (Some(first(x, n)), Vec::new()),
            _ => (None, oracle::wma(x, n)),
        }
    }

    fn part<'a>(n: usize, held: &'a (Option<Certified>, Vec<f64>)) -> Part<'a> {
        match held {
            (Some(c), _) => Part::Line(c.view()),
            (None, v) if !v.is_empty() => Part::Line(Bounded::exact(v)),
            _ => Part::Running(n),
        }
    }

    #[test]
    fn second_level_lines_are_within_their_bounds() {
        for (name, x) in series(6_000) {
            let close = (&x[..], &block_max_abs(&x)[..]);
            for (i, [h, f, q]) in [
                [500, 1_000, 32],
                [3, 7, 300],
                [1_200, 2_400, 49],
                [60, 60, 60],
            ]
            .into_iter()
            .enumerate()
            {
                let (hh, ff) = (parts(&x, h, i % 3), parts(&x, f, (i + 1) % 3));
                let p = [part(h, &hh), part(f, &ff)];
                let d = difference(close, Shape::Hma, &p, h.max(f) - 1, Vec::new());
                let line = wma(
                    &d.values,
                    d.from,
                    q,
                    (d.eps.as_deref(), &d.block_max),
                    &hl_pool(),
                );
                assert_within(
                    &format!("{name} HMA {h} {f} {q}"),
                    &line,
                    &oracle::hma(&x, h, f, q),
                );
            }
            for (i, [p3, p2, p]) in [[167, 250, 500], [5, 8, 300], [1_000, 1_500, 3_000]]
                .into_iter()
                .enumerate()
            {
                let held = [
                    parts(&x, p3, i % 3),
                    parts(&x, p2, (i + 1) % 3),
                    parts(&x, p, (i + 2) % 3),
                ];
                let ps = [part(p3, &held[0]), part(p2, &held[1]), part(p, &held[2])];
                let d = difference(close, Shape::Hma3, &ps, p - 1, Vec::new());
                let line = wma(
                    &d.values,
                    d.from,
                    p,
                    (d.eps.as_deref(), &d.block_max),
                    &hl_pool(),
                );
                let want = oracle::hma3(&x, p3, p2, p);
                assert_within(&format!("{name} HMA3 {p3} {p2} {p}"), &line, &want);
            }
        }
    }

    #[test]
    fn exact_values_at_any_bars_are_the_references() {
        let x = &series(3_000)[0].1;
        let bars = [0, 1, 5, 40, 41, 42, 600, 601, 1_500, 2_999];
        let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let pick = |v: Vec<f64>| bars.iter().map(|&i| v[i]).collect::<Vec<_>>();
        for (key, want) in [
            (Line::Wma(300), oracle::wma(x, 300)),
            (Line::Sma(41), oracle::sma(x, 41)),
            (Line::Sma(1), oracle::sma(x, 1)),
            (Line::Sma(3_000), oracle::sma(x, 3_000)),
            (Line::Hma([300, 600, 24]), oracle::hma(x, 300, 600, 24)),
            (Line::Hma([9, 9, 9]), oracle::hma(x, 9, 9, 9)),
            (Line::Hma3([100, 150, 300]), oracle::hma3(x, 100, 150, 300)),
            (Line::Hma3([1, 1, 1]), oracle::hma3(x, 1, 1, 1)),
        ] {
            assert_eq!(bits(&exact_at(x, key, &bars)), bits(&pick(want)), "{key:?}");
        }
    }

    #[test]
    fn sliding_maximum_equals_the_plain_one() {
        let v: Vec<f64> = (0..300).map(|i| ((i * 37) % 101) as f64).collect();
        for n in [1, 2, 63, 64, 65, 128, 1_000, 20_000] {
            let want: Vec<f64> = (0..v.len())
                .map(|b| {
                    let first = (b * BLOCK + 1).saturating_sub(n) / BLOCK;
                    v[first..=b].iter().fold(0.0f64, |m, &x| m.max(x))
                })
                .collect();
            assert_eq!(window_max(&v, n), want, "n = {n}");
        }
    }

    #[test]
    fn only_finite_moderate_series_are_certifiable() {
        assert!(certifiable(&[1.0, 2.0, 1e-100, 1e100]));
        assert!(certifiable(&[]));
        assert!(!certifiable(&[1.0, f64::NAN]));
        assert!(!certifiable(&[1.0, f64::INFINITY]));
        assert!(!certifiable(&[1e300, 1.0]));
        assert!(!certifiable(&[1e-300, 2e-300]));
        assert!(!certifiable(&[0.0, 0.0]));
    }

    #[test]
    fn long_windows_leave_the_shared_pass_only_where_that_costs_less() {
        let bars = 1_000_000;
        // A few long windows: all certified.
        assert_eq!(
            certified_from([5_000, 20_000, 10_000, 50], bars),
            Some(5_000)
        );
        // Many closely spaced ones: the pass costs its longest for all of them, less.
        assert_eq!(certified_from(1..=3_200, bars), None);
        // Both: only the far one leaves it.
        assert_eq!(
            certified_from((1..=3_200).chain([100_000]), bars),
            Some(100_000)
        );
        // Spaced by more than a line costs: every long one.
        assert_eq!(certified_from((20..=2_000).step_by(20), bars), Some(260));
        // Short windows, and windows past the series, never.
        assert_eq!(certified_from([10, 200, 255], bars), None);
        assert_eq!(certified_from([2_000_000], bars), None);
        assert_eq!(certified_from([300, 2_000_000], bars), Some(300));
        assert_eq!(certified_from([], bars), None);
    }
}
