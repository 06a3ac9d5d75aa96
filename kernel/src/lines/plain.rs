//! The oracle's computations: every function of docs/language.md's table as the spec writes it,
//! one bar at a time, with no sharing and no cleverness. Slow on purpose; the fast ones in
//! [`super::series`] must agree with these bit for bit.

use super::{Bars, Input};

const NAN: f64 = f64::NAN;

fn x_of(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    (0..bars.len()).map(|i| args[0].at(i)).collect()
}

/// The window `i-n+1 ..= i` of `x`, if it lies in the range and holds no NaN.
fn window(x: &[f64], i: usize, n: usize) -> Option<&[f64]> {
    if i + 1 < n {
        return None;
    }
    let w = &x[i + 1 - n..=i];
    if w.iter().any(|v| v.is_nan()) {
        None
    } else {
        Some(w)
    }
}

fn windowed(bars: &Bars<'_>, args: &[Input<'_>], f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let x = x_of(bars, args);
    let n = args[1].window();
    (0..x.len())
        .map(|i| window(&x, i, n).map_or(NAN, &f))
        .collect()
}

fn fresh_sum(w: &[f64]) -> f64 {
    let mut s = 0.0;
    for v in w {
        s += v;
    }
    s
}

/// `sum(x, n)`.
pub fn sum(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    windowed(bars, args, fresh_sum)
}

/// `sma(x, n)`.
pub fn sma(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    windowed(bars, args, |w| fresh_sum(w) / w.len() as f64)
}

fn wma_of(x: &[f64], n: usize) -> Vec<f64> {
    let nn = n as u64;
    let denom = (nn * (nn + 1) / 2) as f64;
    (0..x.len())
        .map(|i| {
            window(x, i, n).map_or(NAN, |w| {
                let mut s = 0.0;
                for (k, v) in w.iter().enumerate() {
                    s += v * (k + 1) as f64;
                }
                s / denom
            })
        })
        .collect()
}

/// `wma(x, n)`.
pub fn wma(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    wma_of(&x_of(bars, args), args[1].window())
}

/// `std(x, n)` (population).
pub fn std(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    windowed(bars, args, |w| {
        let m = fresh_sum(w) / w.len() as f64;
        let mut v = 0.0;
        for x in w {
            v += (x - m) * (x - m);
        }
        (v / w.len() as f64).sqrt()
    })
}

/// `highest(x, n)`.
pub fn highest(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    windowed(bars, args, |w| {
        w.iter()
            .copied()
            .fold(f64::NEG_INFINITY, |a, b| if b > a { b } else { a })
    })
}

/// `lowest(x, n)`.
pub fn lowest(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    windowed(bars, args, |w| {
        w.iter()
            .copied()
            .fold(f64::INFINITY, |a, b| if b < a { b } else { a })
    })
}

fn lagged(bars: &Bars<'_>, args: &[Input<'_>], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    let x = x_of(bars, args);
    let n = args[1].window();
    (0..x.len())
        .map(|i| if i < n { NAN } else { f(x[i], x[i - n]) })
        .collect()
}

/// `lag(x, n)`.
pub fn lag(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    lagged(bars, args, |_, old| old)
}

/// `change(x, n)`.
pub fn change(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    lagged(bars, args, |now, old| now - old)
}

/// `roc(x, n)`.
pub fn roc(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    lagged(bars, args, |now, old| (now / old - 1.0) * 100.0)
}

fn first_defined(x: &[f64]) -> Option<usize> {
    x.iter().position(|v| !v.is_nan())
}

/// `ema(x, n)`.
pub fn ema(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    let x = x_of(bars, args);
    let n = args[1].window() as f64;
    let alpha = 2.0 / (n + 1.0);
    let beta = 1.0 - alpha;
    let mut e = vec![NAN; x.len()];
    if let Some(j) = first_defined(&x) {
        e[j] = x[j];
        for i in j + 1..x.len() {
            e[i] = alpha * x[i] + beta * e[i - 1];
        }
    }
    e
}

fn rma_of(x: &[f64], n: usize) -> Vec<f64> {
    let mut r = vec![NAN; x.len()];
    let Some(j) = first_defined(x) else {
        return r;
    };
    if j + n > x.len() {
        return r;
    }
    let nf = n as f64;
    let mut s = 0.0;
    for v in &x[j..j + n] {
        s += v;
    }
    r[j + n - 1] = s / nf;
    for i in j + n..x.len() {
        r[i] = (r[i - 1] * (nf - 1.0) + x[i]) / nf;
    }
    r
}

/// `rma(x, n)`.
pub fn rma(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    rma_of(&x_of(bars, args), args[1].window())
}

/// `max(d, 0.0)` with a NaN kept NaN.
fn gain(d: f64) -> f64 {
    if d.is_nan() {
        NAN
    } else if d > 0.0 {
        d
    } else {
        0.0
    }
}

/// `rsi(x, n)`.
pub fn rsi(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    let x = x_of(bars, args);
    let n = args[1].window();
    let mut out = vec![NAN; x.len()];
    let Some(j) = first_defined(&x) else {
        return out;
    };
    if j + n >= x.len() {
        return out;
    }
    let nf = n as f64;
    let g = |k: usize| gain(x[k] - x[k - 1]);
    let l = |k: usize| gain(x[k - 1] - x[k]);
    let (mut sg, mut sl) = (0.0, 0.0);
    for k in j + 1..=j + n {
        sg += g(k);
        sl += l(k);
    }
    let (mut gg, mut ll) = (sg / nf, sl / nf);
    let value = |gg: f64, ll: f64| {
        if gg == 0.0 && ll == 0.0 {
            50.0
        } else if ll == 0.0 {
            100.0
        } else {
            100.0 - 100.0 / (1.0 + gg / ll)
        }
    };
    out[j + n] = value(gg, ll);
    for (k, o) in out.iter_mut().enumerate().skip(j + n + 1) {
        gg = (gg * (nf - 1.0) + g(k)) / nf;
        ll = (ll * (nf - 1.0) + l(k)) / nf;
        *o = value(gg, ll);
    }
    out
}

fn true_range(bars: &Bars<'_>, first_undefined: bool) -> Vec<f64> {
    let (high, low, close) = bars.hlc();
    (0..bars.len())
        .map(|i| {
            if i == 0 {
                if first_undefined {
                    NAN
                } else {
                    high[0] - low[0]
                }
            } else {
                let a = high[i] - low[i];
                let b = (high[i] - close[i - 1]).abs();
                let c = (low[i] - close[i - 1]).abs();
                a.max(b).max(c)
            }
        })
        .collect()
}

/// `tr()`.
pub fn tr(bars: &Bars<'_>, _args: &[Input<'_>]) -> Vec<f64> {
    true_range(bars, false)
}

/// `atr(n)`: Wilder's smoothing of the true range with its first bar undefined.
pub fn atr(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    rma_of(&true_range(bars, true), args[0].window())
}

/// `hma(x, half, full, sqrt)`.
pub fn hma(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    let x = x_of(bars, args);
    let h = wma_of(&x, args[1].window());
    let f = wma_of(&x, args[2].window());
    let d: Vec<f64> = (0..x.len()).map(|i| 2.0 * h[i] - f[i]).collect();
    wma_of(&d, args[3].window())
}

/// `hma3(x, p3, p2, p)`.
pub fn hma3(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    let x = x_of(bars, args);
    let p = args[3].window();
    let a = wma_of(&x, args[1].window());
    let b = wma_of(&x, args[2].window());
    let c = wma_of(&x, p);
    let d: Vec<f64> = (0..x.len()).map(|i| 3.0 * a[i] - b[i] - c[i]).collect();
    wma_of(&d, p)
}

fn map1(bars: &Bars<'_>, args: &[Input<'_>], f: fn(f64) -> f64) -> Vec<f64> {
    (0..bars.len()).map(|i| f(args[0].at(i))).collect()
}

/// `abs(x)`.
pub fn abs(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    map1(bars, args, f64::abs)
}

/// `sqrt(x)`.
pub fn sqrt(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    map1(bars, args, f64::sqrt)
}

/// `log(x)`.
pub fn log(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    map1(bars, args, f64::ln)
}

/// `min(a, b)`.
pub fn min(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    (0..bars.len())
        .map(|i| {
            let (a, b) = (args[0].at(i), args[1].at(i));
            if a.is_nan() || b.is_nan() {
                NAN
            } else if b < a {
                b
            } else {
                a
            }
        })
        .collect()
}

/// `max(a, b)`.
pub fn max(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    (0..bars.len())
        .map(|i| {
            let (a, b) = (args[0].at(i), args[1].at(i));
            if a.is_nan() || b.is_nan() {
                NAN
            } else if b > a {
                b
            } else {
                a
            }
        })
        .collect()
}

/// `where(c, a, b)`.
pub fn where_(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<f64> {
    (0..bars.len())
        .map(|i| {
            if args[0].cond(i) {
                args[1].at(i)
            } else {
                args[2].at(i)
            }
        })
        .collect()
}

/// `a` crossing `b`: `now(a[i], b[i])` and `before(a[i-1], b[i-1])`, false at the first bar and
/// wherever any of the four is NaN.
fn crossing(
    bars: &Bars<'_>,
    args: &[Input<'_>],
    now: fn(f64, f64) -> bool,
    before: fn(f64, f64) -> bool,
) -> Vec<bool> {
    (0..bars.len())
        .map(|i| {
            i > 0 && {
                let (a0, b0) = (args[0].at(i - 1), args[1].at(i - 1));
                let (a1, b1) = (args[0].at(i), args[1].at(i));
                let any_nan = a0.is_nan() || b0.is_nan() || a1.is_nan() || b1.is_nan();
                !any_nan && now(a1, b1) && before(a0, b0)
            }
        })
        .collect()
}

/// `cross_above(a, b)`.
pub fn cross_above(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<bool> {
    crossing(bars, args, |a, b| a > b, |a, b| a <= b)
}

/// `cross_below(a, b)`.
pub fn cross_below(bars: &Bars<'_>, args: &[Input<'_>]) -> Vec<bool> {
    crossing(bars, args, |a, b| a < b, |a, b| a >= b)
}
