//! The stop checks of the general loop (strategies.md, "Execution, v1.3", step 2): an open
//! trade's stop prices and the test of one bar ([`TradeStops`]), the walk from bar to bar that
//! passes over whole blocks where no stop can hit ([`TradeStops::walk`]), and what every combo
//! of a sweep shares for it, computed once per series ([`Extrema`]): each block's lowest and
//! highest price, at four sizes, so a walk over hundreds of quiet bars takes a few steps.

use super::{Execution, ExitReason, StopsOn};
use crate::lines::Bars;

/// Bars per block of [`Extrema`]; each coarser level's blocks hold this many of the level
/// below.
pub(super) const EXTREMA_BLOCK: usize = 8;

/// Coarser levels of blocks kept above the finest (of 64, 512 and 4,096 bars): a trade's walk
/// to its first stop, often hundreds of bars away, passes over the quiet stretches in a few
/// steps.
const COARSE_LEVELS: usize = 3;

/// The lowest and highest price a stop can be hit at (lows and highs with `stops: high_low`,
/// closes otherwise) over any range of bars, in a few reads: computed once per series and
/// shared by every combo of a sweep. Each block of 8 bars has its extremes (and so do the
/// blocks of 64, 512 and 4,096), and each bar the extremes from its block's first bar to it and
/// from it to its block's last; a range is the tail of its first block, the whole blocks
/// between, and the head of its last. NaN prices are left out, as the per-bar checks never hit
/// on them. [`extrema_bytes`] a bar.
#[derive(Debug)]
pub(crate) struct Extrema {
    /// Per level (blocks of 8 bars, then of 64, 512 and 4,096), per block: its lowest and
    /// highest price.
    levels: Vec<Vec<[f64; 2]>>,
    /// Per bar: the lowest and highest price from it to its block's last bar, then from its
    /// block's first bar to it. One bar's four are read together (a range's ends are two reads
    /// of memory, not eight).
    runs: Vec<[f64; 4]>,
}

/// Where and how a trade's stops close it: the bar, the exit price (slippage included) and
/// why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Hit {
    pub price: f64,
    pub bar: usize,
    pub reason: ExitReason,
}

/// Bytes of the stop blocks (`Extrema`) a sweep over `bars` bars builds with `exec` (with
/// `formula_stops` if a stop is a formula): none with v1.2's options alone. A sweep that builds
/// the table of first stops instead ([`super::exits_bytes`]) takes less.
pub fn extrema_bytes(bars: usize, exec: &Execution, formula_stops: bool) -> usize {
    if exec.is_v12() && !formula_stops {
        return 0;
    }
    // Each level's blocks (the finest, then each coarser level's of the one below).
    let blocks: usize = std::iter::successors(Some(bars.div_ceil(EXTREMA_BLOCK)), |&b| {
        Some(b.div_ceil(EXTREMA_BLOCK))
    })
    .take(1 + COARSE_LEVELS)
    .sum();
    (4 * bars + 2 * blocks) * size_of::<f64>()
}

impl Extrema {
    /// The blocks of `bars` for `exec`'s stops, if the general loop may check stops (v1.3's
    /// options, or stop formulas).
    pub(crate) fn of(bars: &Bars<'_>, exec: &Execution, formula_stops: bool) -> Option<Self> {
        if exec.is_v12() && !formula_stops {
            return None;
        }
        let (low, high) = stop_prices(bars, exec);
        let finest: Vec<[f64; 2]> = low
            .chunks(EXTREMA_BLOCK)
            .zip(high.chunks(EXTREMA_BLOCK))
            .map(|(l, h)| {
                let lo = l.iter().fold(f64::INFINITY, |m, &v| m.min(v));
                [lo, h.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v))]
            })
            .collect();
        let mut levels = vec![finest];
        for level in 0..COARSE_LEVELS {
            let coarser = levels[level]
                .chunks(EXTREMA_BLOCK)
                .map(|c| {
                    c.iter()
                        .fold([f64::INFINITY, f64::NEG_INFINITY], |[lo, hi], b| {
                            [lo.min(b[0]), hi.max(b[1])]
                        })
                })
                .collect();
            levels.push(coarser);
        }
        // Running extremes within each block, backwards (from each bar to the block's last)
        // and forwards (from the block's first to each bar).
        let mut runs = vec![[0.0; 4]; low.len()];
        for ((l, h), r) in low
            .chunks(EXTREMA_BLOCK)
            .zip(high.chunks(EXTREMA_BLOCK))
            .zip(runs.chunks_mut(EXTREMA_BLOCK))
        {
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for k in (0..l.len()).rev() {
                (lo, hi) = (lo.min(l[k]), hi.max(h[k]));
                r[k][0] = lo;
                r[k][1] = hi;
            }
            let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
            for k in 0..l.len() {
                (lo, hi) = (lo.min(l[k]), hi.max(h[k]));
                r[k][2] = lo;
                r[k][3] = hi;
            }
        }
        Some(Self { levels, runs })
    }

    /// The lowest and highest of `lows` and `highs` (the series these extrema are of) over bars
    /// `from..=to`, exactly.
    pub(super) fn exact(&self, lows: &[f64], highs: &[f64], from: usize, to: usize) -> (f64, f64) {
        if from / EXTREMA_BLOCK != to / EXTREMA_BLOCK {
            return self.across(from, to);
        }
        let lo = lows[from..=to].iter().fold(f64::INFINITY, |m, &v| m.min(v));
        let hi = highs[from..=to]
            .iter()
            .fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        (lo, hi)
    }

    /// The lowest and highest price over bars `from..=to` of two different blocks.
    #[inline]
    pub(super) fn across(&self, from: usize, to: usize) -> (f64, f64) {
        let (a, z) = (self.runs[from], self.runs[to]);
        let (mut lo, mut hi) = (a[0].min(z[2]), a[1].max(z[3]));
        for b in &self.levels[0][from / EXTREMA_BLOCK + 1..to / EXTREMA_BLOCK] {
            lo = lo.min(b[0]);
            hi = hi.max(b[1]);
        }
        (lo, hi)
    }

    /// The lowest and highest price from bar `k` to the last of its block.
    #[inline]
    pub(super) fn rest_of_block(&self, k: usize) -> (f64, f64) {
        let r = self.runs[k];
        (r[0], r[1])
    }

    /// The blocks of every level that start at `k` and end at or before `to`, the largest
    /// first: each one's size and its lowest and highest price.
    #[inline]
    fn blocks_at(&self, k: usize, to: usize) -> impl Iterator<Item = (usize, f64, f64)> + '_ {
        let size = |level: usize| EXTREMA_BLOCK << (3 * level);
        let fit = (0..=COARSE_LEVELS)
            .take_while(|&level| k.is_multiple_of(size(level)) && k + size(level) <= to + 1)
            .count();
        (0..fit).rev().map(move |level| {
            let s = size(level);
            let [lo, hi] = self.levels[level][k / s];
            (s, lo, hi)
        })
    }
}

/// The prices stops are checked against: lows and highs with `stops: high_low`, else the
/// closes twice.
pub(super) fn stop_prices<'a>(bars: &Bars<'a>, exec: &Execution) -> (&'a [f64], &'a [f64]) {
    match (exec.stops, bars.low, bars.high) {
        (StopsOn::HighLow, Some(l), Some(h)) => (l, h),
        _ => (bars.close, bars.close),
    }
}

/// What the stop checks of a run read: the prices stops are hit at ([`stop_prices`]), the
/// opens a gap fills at (`stops: high_low` only) and the closes.
#[derive(Debug, Clone, Copy)]
pub(super) struct StopBars<'a> {
    pub lows: &'a [f64],
    pub highs: &'a [f64],
    /// `Some` with `stops: high_low`: a stop inside the bar fills at its price, one the bar
    /// gapped through at the open.
    pub open: Option<&'a [f64]>,
    pub close: &'a [f64],
}

impl<'a> StopBars<'a> {
    pub(super) fn of(bars: &Bars<'a>, exec: &Execution) -> Self {
        let (lows, highs) = stop_prices(bars, exec);
        Self {
            lows,
            highs,
            open: match exec.stops {
                StopsOn::HighLow => Some(bars.open.expect("high_low stops are checked for `open`")),
                StopsOn::Close => None,
            },
            close: bars.close,
        }
    }
}

/// An open trade's stops: the fixed prices computed once at entry (NaN: no such stop; NaN
/// compares false everywhere) and the trail's fraction.
#[derive(Debug, Clone, Copy)]
pub(super) struct TradeStops {
    pub long: bool,
    /// `entry * (1 - stop_loss)` for a long, `entry * (1 + stop_loss)` for a short.
    pub loss: f64,
    /// `entry * (1 + take_profit)` for a long, `entry * (1 - take_profit)` for a short.
    pub profit: f64,
    pub trail: Option<f64>,
}

impl TradeStops {
    /// The stops of a trade on the side `long` entered at `entry` with the fractions
    /// `[stop_loss, take_profit, trailing_stop]`.
    pub(super) fn new(long: bool, entry: f64, fractions: [Option<f64>; 3]) -> Self {
        // The prices below and above the entry, as the spec computes them at every bar.
        let price = |f: Option<f64>, below: bool| match f {
            Some(f) if below => entry * (1.0 - f),
            Some(f) => entry * (1.0 + f),
            None => f64::NAN,
        };
        Self {
            long,
            loss: price(fractions[0], long),
            profit: price(fractions[1], !long),
            trail: fractions[2],
        }
    }

    /// The stop-loss price with the trail's best price at `peak`: the fixed one, the trail, or
    /// the tighter of the two (a tie is the fixed one; NaN: none).
    #[inline]
    pub(super) fn stop_price(&self, peak: f64) -> f64 {
        match self.trail {
            Some(f) => {
                let (long, fixed) = (self.long, self.loss);
                let t = if long {
                    peak * (1.0 - f)
                } else {
                    peak * (1.0 + f)
                };
                let tighter = fixed.is_nan() || if long { t > fixed } else { t < fixed };
                if tighter { t } else { fixed }
            }
            None => self.loss,
        }
    }

    /// With the trail's best price at `peak`: the best price after bars whose prices lie within
    /// `lo..=hi`, if no stop can hit on any of them. A bound of the prices (lower `lo`, higher
    /// `hi`) and of the best price (further from the entry) gives a bound of the best price
    /// after, and a test no less strict: the stop only tightens as the best price moves.
    #[inline]
    pub(super) fn quiet_from(&self, peak: f64, lo: f64, hi: f64) -> Option<f64> {
        let (best, clear) = if self.long {
            // The highest the stop can be: with the best price at most `hi`.
            let best = peak.max(hi);
            (best, !(lo <= self.stop_price(best) || hi >= self.profit))
        } else {
            let best = peak.min(lo);
            (best, !(hi >= self.stop_price(best) || lo <= self.profit))
        };
        clear.then_some(best)
    }

    /// Step 2 at bar `k` with the trail's best price at `peak`: the price a stop fills at
    /// (before slippage) and why, or `None` and the best price after the bar.
    #[inline]
    pub(super) fn at(
        &self,
        p: &StopBars<'_>,
        k: usize,
        peak: f64,
    ) -> Result<f64, (f64, ExitReason)> {
        let long = self.long;
        // The stop-loss price: the fixed one, the trail, or the tighter of the two (a tie is
        // the stop-loss); the trail is the stop when it is strictly tighter, then unlike `loss`.
        let slp = self.stop_price(peak);
        let trailing = self.trail.is_some() && slp.to_bits() != self.loss.to_bits();
        let loss = if trailing {
            ExitReason::TrailingStop
        } else {
            ExitReason::StopLoss
        };
        let (low, high) = (p.lows[k], p.highs[k]);
        // A stop inside the bar fills at its price, one the bar gapped through at the open;
        // on closes, at the close.
        let fill = |price: f64, worse_low: bool| match p.open {
            Some(open) if worse_low => open[k].min(price),
            Some(open) => open[k].max(price),
            None => p.close[k],
        };
        if long && low <= slp {
            Err((fill(slp, true), loss))
        } else if !long && high >= slp {
            Err((fill(slp, false), loss))
        } else if long && high >= self.profit {
            Err((fill(self.profit, false), ExitReason::TakeProfit))
        } else if !long && low <= self.profit {
            Err((fill(self.profit, true), ExitReason::TakeProfit))
        } else if self.trail.is_none() {
            Ok(peak)
        } else if long {
            Ok(peak.max(high))
        } else {
            Ok(peak.min(low))
        }
    }

    /// Step 2 for bars `from..=to` with the trail's best price at `peak`: the first stop hit
    /// (`Err`, its exit price with `exec`'s slippage), else the best price after `to`. Whole
    /// blocks of `x` where no stop can hit are passed over, the largest first.
    pub(super) fn walk(
        &self,
        p: &StopBars<'_>,
        x: Option<&Extrema>,
        exec: &Execution,
        mut peak: f64,
        (from, to): (usize, usize),
    ) -> Result<f64, Hit> {
        let mut k = from;
        'bars: while k <= to {
            if let Some(x) = x
                && k.is_multiple_of(EXTREMA_BLOCK)
            {
                for (size, lo, hi) in x.blocks_at(k, to) {
                    if let Some(best) = self.quiet_from(peak, lo, hi) {
                        peak = best;
                        k += size;
                        continue 'bars;
                    }
                }
            }
            match self.at(p, k, peak) {
                Ok(best) => peak = best,
                Err(stop) => return Err(self.hit(exec, k, stop)),
            }
            k += 1;
        }
        Ok(peak)
    }

    /// The stop `(price, reason)` of [`TradeStops::at`] on bar `k` as booked: a stop-loss or
    /// trail filled with `exec`'s slippage, a take-profit at its price.
    pub(super) fn hit(
        &self,
        exec: &Execution,
        k: usize,
        (price, reason): (f64, ExitReason),
    ) -> Hit {
        let pos = if self.long { 1.0 } else { -1.0 };
        let price = match reason {
            ExitReason::TakeProfit => price,
            _ => exec.exit_at(pos, price),
        };
        Hit {
            price,
            bar: k,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::Fill;

    /// Bars of a slow random walk (long quiet stretches for a wide stop), with a NaN gap.
    fn bars(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut unit = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let (mut open, mut high, mut low, mut close) = (vec![], vec![], vec![], vec![]);
        let mut c = 100.0;
        for i in 0..n {
            let o = c;
            c *= 1.0 + (unit() - 0.5) * 0.004;
            let (h, l) = (
                o.max(c) * (1.0 + unit() * 0.001),
                o.min(c) * (1.0 - unit() * 0.001),
            );
            let gap = (3000..3010).contains(&i);
            open.push(o);
            high.push(if gap { f64::NAN } else { h });
            low.push(if gap { f64::NAN } else { l });
            close.push(c);
        }
        (open, high, low, close)
    }

    #[test]
    fn a_walk_over_blocks_of_every_size_stops_where_the_bar_by_bar_walk_does() {
        let (open, high, low, close) = bars(20_000);
        let b = Bars::ohlc(&open, &high, &low, &close);
        let mut checked = 0;
        for stops in [StopsOn::HighLow, StopsOn::Close] {
            let exec = Execution {
                fill: Fill::NextOpen,
                stops,
                slippage: 0.001,
                ..Execution::new(0.0)
            };
            let x = Extrema::of(&b, &exec, false).expect("v1.3 options build blocks");
            let p = StopBars::of(&b, &exec);
            // Tight and wide stops, a trail alone and with fixed stops, both sides.
            let fractions = [
                [None, None, Some(0.01)],
                [None, None, Some(0.3)],
                [Some(0.02), Some(0.05), Some(0.015)],
                [Some(0.4), Some(0.6), None],
            ];
            for fr in fractions {
                for long in [true, false] {
                    for entry in (0..20_000).step_by(997) {
                        let t = TradeStops::new(long, open[entry], fr);
                        let range = (entry, close.len() - 1);
                        let fast = t.walk(&p, Some(&x), &exec, open[entry], range);
                        let plain = t.walk(&p, None, &exec, open[entry], range);
                        // The best price after the walk matters only to a trail.
                        let (fast, plain) = match (fast, plain, fr[2]) {
                            (Ok(_), Ok(_), None) => (Ok(0.0), Ok(0.0)),
                            other => (other.0, other.1),
                        };
                        assert_eq!(fast, plain, "{fr:?} long {long} entry {entry}");
                        checked += usize::from(fast.is_err());
                    }
                }
            }
        }
        // Most walks end at a stop; the wide ones pass over blocks of 512 and 4,096 bars.
        assert!(checked > 100, "{checked} stops hit");
    }
}
