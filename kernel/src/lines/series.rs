//! The fast computations of the language's functions: whole arrays, each value in the spec's
//! order of operations. Fresh window sums are blocked across outputs (64 outputs' sums advance
//! together one term at a time, so the compiler vectorises across outputs while each output
//! keeps its own oldest-first order); weighted sums are the paper kernel's WMA; channels use
//! monotone queues; recurrences are one pass.

use std::collections::VecDeque;

use super::vector::multiversion;
use super::{Bars, Input};

const NAN: f64 = f64::NAN;
/// Outputs whose fresh sums advance together.
const BLOCK: usize = 64;

/// A series argument as a slice (a constant is spread into `own`).
fn series<'a>(len: usize, x: &Input<'a>, own: &'a mut Vec<f64>) -> &'a [f64] {
    match *x {
        Input::Series(s) => s,
        Input::Const(v) => {
            own.resize(len, v);
            own
        }
        Input::Window(_) | Input::Cond(_) => unreachable!("not a number argument"),
    }
}

multiversion! {
    /// `out[i] = x[i-n+1] + ... + x[i]`, a fresh sum from 0.0 oldest first; NaN before bar
    /// `n - 1`.
    fn fresh_sums(x: &[f64], n: usize, out: &mut [f64]) {
        let len = x.len();
        if n > len {
            out.fill(NAN);
            return;
        }
        out[..n - 1].fill(NAN);
        let mut i0 = n - 1;
        while i0 < len {
            let b = BLOCK.min(len - i0);
            let mut acc = [0.0f64; BLOCK];
            for k in 0..n {
                let from = i0 + k + 1 - n;
                for (a, v) in acc.iter_mut().zip(&x[from..from + b]) {
                    *a += v;
                }
            }
            out[i0..i0 + b].copy_from_slice(&acc[..b]);
            i0 += b;
        }
    }
}

/// `sum(x, n)`.
pub fn sum(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    fresh_sums(
        series(bars.len(), &args[0], &mut own),
        args[1].window(),
        out,
    );
}

/// `sma(x, n)`.
pub fn sma(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    sum(bars, args, out);
    let n = args[1].window() as f64;
    for v in out.iter_mut() {
        *v /= n;
    }
}

/// `wma(x, n)`: the paper kernel's register-blocked WMA ([`super::wma`]), whose arithmetic is
/// the spec's (each output a fresh weighted sum from 0.0, oldest first, then one division).
fn wma_of(x: &[f64], n: usize, out: &mut [f64]) {
    super::wma::wma_into(x, n, out);
}

/// `wma(x, n)`.
pub fn wma(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    wma_of(
        series(bars.len(), &args[0], &mut own),
        args[1].window(),
        out,
    );
}

/// `std(x, n)`: the window's mean, then a fresh sum of squared deviations from it.
pub fn std(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    let n = args[1].window();
    // The means are `sma(x, n)`'s: the window's fresh sum over n, written where the
    // deviations' sums then overwrite them a block at a time.
    fresh_sums(x, n, out);
    let nf = n as f64;
    for v in out.iter_mut() {
        *v /= nf;
    }
    std_from_means(x, n, None, out);
}

multiversion! {
    /// `std(x, n)` into `line` from `means`, `sma(x, n)` bit for bit (`None`: `line` holds them,
    /// and is overwritten in place): at each bar the fresh sum of squared deviations of the
    /// window's values from its mean, over n, its square root.
    pub(crate) fn std_from_means(x: &[f64], n: usize, means: Option<&[f64]>, line: &mut [f64]) {
        let len = x.len();
        if n > len {
            line.fill(NAN);
            return;
        }
        line[..n - 1].fill(NAN);
        let mut i0 = n - 1;
        // Tiles of a fixed number of bars, so their sums and means stay in registers across the
        // window (a loop over a variable width keeps them in memory, one store and one load per
        // bar and step); each bar's sum is still taken oldest first from 0.0.
        while i0 + STD_TILE <= len {
            // A tile's means are read before its values are written (in place, the same bars).
            let m: [f64; STD_TILE] = means.unwrap_or(&*line)[i0..i0 + STD_TILE]
                .try_into()
                .expect("a tile");
            let mut acc = [0.0f64; STD_TILE];
            for k in 0..n {
                let from = i0 + k + 1 - n;
                let v: &[f64; STD_TILE] = x[from..from + STD_TILE].try_into().expect("a tile");
                for j in 0..STD_TILE {
                    let d = v[j] - m[j];
                    acc[j] += d * d;
                }
            }
            for (o, a) in line[i0..i0 + STD_TILE].iter_mut().zip(&acc) {
                *o = (a / n as f64).sqrt();
            }
            i0 += STD_TILE;
        }
        // The last bars, fewer than a tile: the same sums, one bar at a time.
        for i in i0..len {
            let m = means.map_or(line[i], |m| m[i]);
            let mut acc = 0.0f64;
            for &v in &x[i + 1 - n..=i] {
                let d = v - m;
                acc += d * d;
            }
            line[i] = (acc / n as f64).sqrt();
        }
    }
}

/// Bars of one tile of [`std_from_means`]: four AVX-512 registers of sums and four of means
/// (eight of each on AVX2).
const STD_TILE: usize = 32;

/// The extreme of each window by a monotone queue: `keep_back(back, v)` is true while the
/// queue's last value stays before `v` (strictly better), so the front is the window's
/// extreme, the earliest of equals (as a left-to-right scan with a strict comparison finds it).
fn extreme(x: &[f64], n: usize, out: &mut [f64], better: fn(f64, f64) -> bool) {
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut last_nan: Option<usize> = None;
    for (i, &v) in x.iter().enumerate() {
        if v.is_nan() {
            queue.clear();
            last_nan = Some(i);
        } else {
            while queue.back().is_some_and(|&b| better(v, x[b])) {
                queue.pop_back();
            }
            queue.push_back(i);
        }
        if i + 1 < n {
            out[i] = NAN;
            continue;
        }
        let start = i + 1 - n;
        while queue.front().is_some_and(|&f| f < start) {
            queue.pop_front();
        }
        out[i] = match (last_nan, queue.front()) {
            (Some(k), _) if k >= start => NAN,
            (_, Some(&f)) => x[f],
            (_, None) => NAN,
        };
    }
}

/// `highest(x, n)`.
pub fn highest(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    extreme(x, args[1].window(), out, |v, b| v > b);
}

/// `lowest(x, n)`.
pub fn lowest(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    extreme(x, args[1].window(), out, |v, b| v < b);
}

fn lagged(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64], f: impl Fn(f64, f64) -> f64) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    let n = args[1].window().min(x.len());
    out[..n].fill(NAN);
    for ((o, &now), &old) in out[n..].iter_mut().zip(&x[n..]).zip(x) {
        *o = f(now, old);
    }
}

/// `lag(x, n)`.
pub fn lag(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    lagged(bars, args, out, |_, old| old);
}

/// `change(x, n)`.
pub fn change(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    lagged(bars, args, out, |now, old| now - old);
}

/// `roc(x, n)`.
pub fn roc(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    lagged(bars, args, out, |now, old| (now / old - 1.0) * 100.0);
}

/// `ema(x, n)`.
pub fn ema(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    let n = args[1].window() as f64;
    let alpha = 2.0 / (n + 1.0);
    let beta = 1.0 - alpha;
    let j = x.iter().position(|v| !v.is_nan()).unwrap_or(x.len());
    out[..j].fill(NAN);
    if j < x.len() {
        let mut e = x[j];
        out[j] = e;
        for (o, &v) in out[j + 1..].iter_mut().zip(&x[j + 1..]) {
            e = alpha * v + beta * e;
            *o = e;
        }
    }
}

/// Wilder's smoothing of `x` (`rma`), from its first defined bar.
fn rma_of(x: &[f64], n: usize, out: &mut [f64]) {
    let j = x.iter().position(|v| !v.is_nan()).unwrap_or(x.len());
    let seed = j + n - 1;
    if seed >= x.len() {
        out.fill(NAN);
        return;
    }
    out[..seed].fill(NAN);
    let nf = n as f64;
    let mut s = 0.0;
    for v in &x[j..=seed] {
        s += v;
    }
    let mut r = s / nf;
    out[seed] = r;
    for (o, &v) in out[seed + 1..].iter_mut().zip(&x[seed + 1..]) {
        r = (r * (nf - 1.0) + v) / nf;
        *o = r;
    }
}

/// `rma(x, n)`.
pub fn rma(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    rma_of(
        series(bars.len(), &args[0], &mut own),
        args[1].window(),
        out,
    );
}

/// `rsi(x, n)`: gains and losses from the first defined bar, seeded `n` bars on, smoothed.
pub fn rsi(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    let n = args[1].window();
    let len = x.len();
    let j = x.iter().position(|v| !v.is_nan()).unwrap_or(len);
    if j + n >= len {
        out.fill(NAN);
        return;
    }
    out[..j + n].fill(NAN);
    // max(d, 0.0) keeping NaN (a NaN after the first defined bar poisons what follows).
    let up = |d: f64| if d > 0.0 || d.is_nan() { d } else { 0.0 };
    let nf = n as f64;
    let (mut g, mut l) = (0.0, 0.0);
    for k in j + 1..=j + n {
        g += up(x[k] - x[k - 1]);
        l += up(x[k - 1] - x[k]);
    }
    g /= nf;
    l /= nf;
    let value = |g: f64, l: f64| {
        if g == 0.0 && l == 0.0 {
            50.0
        } else if l == 0.0 {
            100.0
        } else {
            100.0 - 100.0 / (1.0 + g / l)
        }
    };
    out[j + n] = value(g, l);
    for k in j + n + 1..len {
        g = (g * (nf - 1.0) + up(x[k] - x[k - 1])) / nf;
        l = (l * (nf - 1.0) + up(x[k - 1] - x[k])) / nf;
        out[k] = value(g, l);
    }
}

/// The true range into `out`, its first bar `first`.
fn true_range(bars: &Bars<'_>, first: Option<f64>, out: &mut [f64]) {
    let (high, low, close) = bars.hlc();
    if out.is_empty() {
        return;
    }
    out[0] = first.unwrap_or(high[0] - low[0]);
    for i in 1..out.len() {
        let range = high[i] - low[i];
        let up = (high[i] - close[i - 1]).abs();
        let down = (low[i] - close[i - 1]).abs();
        out[i] = range.max(up).max(down);
    }
}

/// `tr()`.
pub fn tr(bars: &Bars<'_>, _args: &[Input<'_>], out: &mut [f64]) {
    true_range(bars, None, out);
}

/// `atr(n)`.
pub fn atr(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut range = vec![0.0; bars.len()];
    true_range(bars, Some(NAN), &mut range);
    rma_of(&range, args[0].window(), out);
}

/// `hma(x, half, full, sqrt)`.
pub fn hma(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    let mut a = vec![0.0; x.len()];
    let mut b = vec![0.0; x.len()];
    wma_of(x, args[1].window(), &mut a);
    wma_of(x, args[2].window(), &mut b);
    for (a, b) in a.iter_mut().zip(&b) {
        *a = 2.0 * *a - b;
    }
    wma_of(&a, args[3].window(), out);
}

/// `hma3(x, p3, p2, p)`.
pub fn hma3(bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    let mut own = Vec::new();
    let x = series(bars.len(), &args[0], &mut own);
    let p = args[3].window();
    let mut a = vec![0.0; x.len()];
    let mut b = vec![0.0; x.len()];
    wma_of(x, args[1].window(), &mut a);
    wma_of(x, args[2].window(), &mut b);
    for (a, b) in a.iter_mut().zip(&b) {
        *a = 3.0 * *a - b;
    }
    wma_of(x, p, &mut b);
    for (a, b) in a.iter_mut().zip(&b) {
        *a -= b;
    }
    wma_of(&a, p, out);
}

fn map1(args: &[Input<'_>], out: &mut [f64], f: impl Fn(f64) -> f64) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = f(args[0].at(i));
    }
}

/// `abs(x)`.
pub fn abs(_bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    map1(args, out, f64::abs);
}

/// `sqrt(x)`.
pub fn sqrt(_bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    map1(args, out, f64::sqrt);
}

/// `log(x)`.
pub fn log(_bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    map1(args, out, f64::ln);
}

/// `min(a, b)`: NaN if either is, else `b` only where it is smaller.
pub fn min(_bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    for (i, o) in out.iter_mut().enumerate() {
        let (a, b) = (args[0].at(i), args[1].at(i));
        *o = if a.is_nan() || b.is_nan() {
            NAN
        } else if b < a {
            b
        } else {
            a
        };
    }
}

/// `max(a, b)`: NaN if either is, else `b` only where it is larger.
pub fn max(_bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    for (i, o) in out.iter_mut().enumerate() {
        let (a, b) = (args[0].at(i), args[1].at(i));
        *o = if a.is_nan() || b.is_nan() {
            NAN
        } else if b > a {
            b
        } else {
            a
        };
    }
}

/// `where(c, a, b)`.
pub fn where_(_bars: &Bars<'_>, args: &[Input<'_>], out: &mut [f64]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = if args[0].cond(i) {
            args[1].at(i)
        } else {
            args[2].at(i)
        };
    }
}

/// `a` crossing `b` at each bar of `from..from + out.len()` as `now(a[i], b[i])` and
/// `before(a[i-1], b[i-1])`, one byte each; false at bar 0. IEEE comparisons are false with a
/// NaN side, so a NaN anywhere in the four leaves the byte 0. A loop per shape of the
/// arguments, so none of them matches on its inputs per bar.
#[inline(always)]
fn crossing(
    args: &[Input<'_>],
    from: usize,
    out: &mut [u8],
    now: impl Fn(f64, f64) -> bool,
    before: impl Fn(f64, f64) -> bool,
) {
    let mut start = 0;
    if from == 0 && !out.is_empty() {
        out[0] = 0;
        start = 1;
    }
    let at = from + start;
    let out = &mut out[start..];
    let n = out.len();
    let cross = |a1, b1, a0, b0| u8::from(now(a1, b1) && before(a0, b0));
    match (args[0], args[1]) {
        (Input::Series(a), Input::Series(b)) => {
            for (j, o) in out.iter_mut().enumerate() {
                let i = at + j;
                *o = cross(a[i], b[i], a[i - 1], b[i - 1]);
            }
        }
        (Input::Series(a), Input::Const(c)) => {
            for ((o, a1), a0) in out.iter_mut().zip(&a[at..at + n]).zip(&a[at - 1..]) {
                *o = cross(*a1, c, *a0, c);
            }
        }
        (Input::Const(c), Input::Series(b)) => {
            for ((o, b1), b0) in out.iter_mut().zip(&b[at..at + n]).zip(&b[at - 1..]) {
                *o = cross(c, *b1, c, *b0);
            }
        }
        (x, y) => {
            let (x, y) = (x.at(0), y.at(0));
            out.fill(cross(x, y, x, y));
        }
    }
}

/// `cross_above(a, b)` over bars `from..from + out.len()`, one byte each.
pub fn cross_above(args: &[Input<'_>], from: usize, out: &mut [u8]) {
    crossing(args, from, out, |a, b| a > b, |a, b| a <= b);
}

/// `cross_below(a, b)`, as [`cross_above`].
pub fn cross_below(args: &[Input<'_>], from: usize, out: &mut [u8]) {
    crossing(args, from, out, |a, b| a < b, |a, b| a >= b);
}
