//! The first stop of every trade a sweep can open, found once per series ([`Exits`]).
//!
//! With fixed stop fractions, a trade's stops depend only on the bar it is entered on and its
//! side: the entry price is that bar's fill (slippage included) and the stop prices follow from
//! it and the bars after. A sweep of hundreds of combos enters the same (bar, side) tens of
//! times, and each entry used to walk the bars to its first stop again, event by event. Here
//! every (bar, side) gets its first stop in one backward pass over the series, and a combo's
//! loop reads one entry per trade and compares one bar number per event.
//!
//! The pass, for a long (a short is the same over negated prices, with the trail's factor
//! `1 + f`): keeping, from the current bar on, the bars whose low is lower than every low before
//! them and those whose high is higher than every high before them (two stacks), the first bar
//! at or after `a` whose low is at or below a price, or whose high is above one, is a search of
//! a stack from its top. A stop-loss or take-profit is one such search. The trail's stop moves with the
//! best price since entry, which is the entry until the first high above it, then the highs of
//! the chain of each bar's next higher high: each bar `k` knows the first bar up to its next
//! higher high where the low reaches its high's trail, and so the first trail hit of the chain
//! from `k` (from the chain's next bar, found earlier in the backward pass), with the chain's
//! bar whose high is the best price before that hit. The exit price and reason at the hit bar
//! come from [`TradeStops::at`], the loop's own test, with that best price.
//!
//! A stop-loss or take-profit that is a formula depends on the entry's bar too (its value at
//! the deciding bar): the combos that share a formula's values share a table
//! ([`Exits::with_fractions`]). A trailing stop's fraction must be one number for the chain.
//!
//! NaN prices never hit a stop and never move the best price (as in the loop): a NaN low counts
//! as `+inf`, a NaN high as `-inf`. An entry at a NaN price is left to the loop's walk.

use super::stops::{Hit, StopBars, TradeStops};
use super::{Execution, ExitReason, Fill, Fractions, Side};
use crate::lines::Bars;

/// Fewest combos for which a sweep builds `Exits`: below it the combos' own walks cost less
/// than the pass (about as much as a few combos' loops).
pub const EXITS_MIN_COMBOS: usize = 16;

/// No stop hits the trade before the last bar.
const NEVER_BAR: u32 = u32::MAX;
/// Not in the table (an entry at a NaN price): the loop walks the trade's bars itself.
const WALK_BAR: u32 = u32::MAX - 1;
/// The loop has not read the trade's entry yet ([`Exit::UNREAD`]).
const UNREAD_BAR: u32 = u32::MAX - 2;

/// The bar of a trade's first stop as the table holds it, or what stands for none
/// ([`Exit::NEVER`], [`Exit::WALK`], [`Exit::UNREAD`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exit(u32);

impl Exit {
    /// Left to the loop's walk.
    pub(super) const WALK: Self = Self(WALK_BAR);

    /// In the table, not read yet: the loop reads a trade's entry at its first stop check,
    /// an event after the entry, so that the read (asked for at the entry) has arrived.
    pub(super) const UNREAD: Self = Self(UNREAD_BAR);

    /// No stop: the trade runs until a signal or the end.
    pub(super) const NEVER: Self = Self(NEVER_BAR);

    /// The table does not know this trade: the loop walks it.
    #[inline(always)]
    pub(super) fn walks(self) -> bool {
        self == Self::WALK
    }

    /// Not read from the table yet.
    #[inline(always)]
    pub(super) fn unread(self) -> bool {
        self == Self::UNREAD
    }

    /// The stop hits at or before bar `to` ([`Exits::hit`] says how).
    #[inline(always)]
    pub(super) fn by(self, to: usize) -> bool {
        // The sentinels are above every bar a table is built for.
        (self.0 as usize) <= to
    }
}

/// Per side, per entry bar: the first stop of a trade entered there with a sweep's fixed stop
/// fractions. What every event reads, the stop's bar, is kept apart from what only a stopped
/// trade reads (the exit price and the reason): the bars of a 150,000-bar series are 600 KB a
/// side. [`exits_bytes`] a bar.
#[derive(Debug)]
pub(crate) struct Exits {
    /// Long, then short; indexed by the entry's bar (empty for a side the sweep never holds).
    bars: [Vec<Exit>; 2],
    /// The exit price (slippage included) and the reason, where a stop hits.
    prices: [Vec<f64>; 2],
    reasons: [Vec<ExitReason>; 2],
    /// Every entry is in the table (none is left to the walk).
    complete: bool,
}

/// Bytes a bar of [`Exits`] takes per side.
const EXIT_BYTES: usize = size_of::<Exit>() + size_of::<f64>() + size_of::<ExitReason>();

/// Bytes of the table a sweep over `bars` bars builds for `combos` combos with `exec` (none
/// where `Exits::of` builds none).
pub fn exits_bytes(bars: usize, combos: usize, exec: &Execution, formula_stops: bool) -> usize {
    if builds(bars, combos, exec, formula_stops) {
        let sides = if exec.side == Side::Both { 2 } else { 1 };
        sides * bars * EXIT_BYTES
    } else {
        0
    }
}

/// Whether a sweep builds the table: fixed stops under the general loop, enough combos to
/// share it, and bar numbers that fit its entries.
fn builds(bars: usize, combos: usize, exec: &Execution, formula_stops: bool) -> bool {
    !formula_stops
        && !exec.is_v12()
        && exec.has_stops()
        && combos >= EXITS_MIN_COMBOS
        && bars < UNREAD_BAR as usize
}

/// One side of [`Exits`]: the stops' bars, exit prices and reasons.
type SideTable = (Vec<Exit>, Vec<f64>, Vec<ExitReason>);

/// A stop's fraction for the trades of a table (`stop_loss`, `take_profit`, `trailing_stop`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fraction<'a> {
    /// The number of the body, or no such stop.
    Fixed(Option<f64>),
    /// A stop formula's values: a trade takes the value at the bar whose close decided its
    /// entry (NaN or <= 0: no such stop for that trade). Not for the trailing stop, whose
    /// fraction the pass shares between trades.
    PerBar(&'a [f64]),
}

/// Bytes of a table over `bars` bars for trades on `side` (what a stop formula's table takes,
/// [`Exits::with_fractions`]).
pub(crate) fn table_bytes(bars: usize, side: Side) -> usize {
    let sides = if side == Side::Both { 2 } else { 1 };
    sides * bars * EXIT_BYTES
}

impl Exits {
    /// The table for a sweep of `combos` combos over `bars` with `exec`, if it builds one
    /// ([`exits_bytes`]). The two sides are built at once.
    pub(crate) fn of(
        bars: &Bars<'_>,
        exec: &Execution,
        combos: usize,
        formula_stops: bool,
    ) -> Option<Self> {
        if !builds(bars.len(), combos, exec, formula_stops) {
            return None;
        }
        let fixed = [exec.stop_loss, exec.take_profit, exec.trailing_stop].map(Fraction::Fixed);
        Some(Self::build(bars, exec, fixed))
    }

    /// The table of trades whose stop fractions are `fractions` (stop formulas' values, or
    /// numbers), for a sweep's combos that share them; `None` for a trailing stop that is a
    /// formula or a series too long for the table's bar numbers.
    pub(crate) fn with_fractions(
        bars: &Bars<'_>,
        exec: &Execution,
        fractions: [Fraction<'_>; 3],
    ) -> Option<Self> {
        let fits = bars.len() < UNREAD_BAR as usize;
        (fits && matches!(fractions[2], Fraction::Fixed(_)))
            .then(|| Self::build(bars, exec, fractions))
    }

    fn build(bars: &Bars<'_>, exec: &Execution, fr: [Fraction<'_>; 3]) -> Self {
        let side = |long: bool| -> SideTable {
            let held = match exec.side {
                Side::Both => true,
                Side::Long => long,
                Side::Short => !long,
            };
            if held {
                side(bars, exec, fr, long)
            } else {
                Default::default()
            }
        };
        let (long, short) = rayon::join(|| side(true), || side(false));
        let complete = !long.0.iter().chain(&short.0).any(|e| e.walks());
        Self {
            bars: [long.0, short.0],
            prices: [long.1, short.1],
            reasons: [long.2, short.2],
            complete,
        }
    }

    /// Every entry is in the table: a loop need never walk a trade's bars.
    pub(super) fn complete(&self) -> bool {
        self.complete
    }

    /// The bar of the first stop of a trade on the side `long` entered on bar `entry`.
    #[inline(always)]
    pub(super) fn get(&self, long: bool, entry: usize) -> Exit {
        self.bars[usize::from(!long)][entry]
    }

    /// The first stop of that trade, which hits ([`Exit::by`]).
    #[inline]
    pub(super) fn hit(&self, long: bool, entry: usize) -> Hit {
        let side = usize::from(!long);
        Hit {
            price: self.prices[side][entry],
            bar: self.bars[side][entry].0 as usize,
            reason: self.reasons[side][entry],
        }
    }

    /// Asks the memory for [`Exits::get`]'s entry ahead of the read: a sweep's trades enter
    /// all over the series, and a loop's events are a few nanoseconds apart.
    #[inline(always)]
    pub(super) fn prefetch(&self, long: bool, entry: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(e) = self.bars[usize::from(!long)].get(entry) {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: SSE is part of every x86_64 target, and a prefetch reads nothing (the
            // address is an element of the table anyway).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(e).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (long, entry);
    }
}

/// A stack of bars, each with its price, that are records going forward from the current bar:
/// the last element is the current bar, and bars deeper down are later, with prices ordered
/// (lower for lows, higher for highs) toward the bottom.
#[derive(Default)]
struct Records(Vec<(f64, u32)>);

impl Records {
    /// Puts bar `k` on top, after taking off the bars it makes no record of (`beaten`: at
    /// least as extreme as their price).
    #[inline(always)]
    fn push(&mut self, price: f64, k: usize, beaten: impl Fn(f64) -> bool) {
        while self.0.last().is_some_and(|&(p, _)| beaten(p)) {
            self.0.pop();
        }
        self.0.push((price, k as u32));
    }

    /// The first bar whose price `hits` (true for every record from some depth down: the
    /// prices are ordered). Searched from the top in growing steps, then halving: the answer
    /// is often a few records deep.
    #[inline(always)]
    fn first(&self, hits: impl Fn(f64) -> bool) -> Option<usize> {
        let s = &self.0;
        // Records at `top` and above miss; the one at `low` hits, or `low` is 0.
        let (mut low, mut top, mut step) = (0, s.len(), 1);
        while step <= top {
            if hits(s[top - step].0) {
                low = top - step;
                break;
            }
            top -= step;
            step *= 2;
        }
        let k = low + s[low..top].partition_point(|&(p, _)| hits(p));
        k.checked_sub(1).map(|v| s[v].1 as usize)
    }

    /// [`Records::first`] if it is at or before bar `last`, else `None`: the few records up
    /// to `last` are read from the top, one by one, before a search of the whole stack.
    #[inline(always)]
    fn first_by(&self, last: usize, hits: impl Fn(f64) -> bool) -> Option<usize> {
        for &(p, k) in self.0.iter().rev().take(8) {
            if k as usize > last {
                return None;
            }
            if hits(p) {
                return Some(k as usize);
            }
        }
        self.first(hits).filter(|&j| j <= last)
    }

    /// The bar just below the top: the first record after the current bar.
    fn second(&self) -> Option<u32> {
        self.0.len().checked_sub(2).map(|v| self.0[v].1)
    }
}

/// One side's table: per entry bar, the first stop (see the module's notes).
fn side(bars: &Bars<'_>, exec: &Execution, fr: [Fraction<'_>; 3], long: bool) -> SideTable {
    let p = StopBars::of(bars, exec);
    let n = bars.len();
    // Long-space prices: a short's are negated (its lows are the long's highs).
    let (sign, lows, highs) = if long {
        (1.0, p.lows, p.highs)
    } else {
        (-1.0, p.highs, p.lows)
    };
    // Read as the pass goes (each bar once), not copied: fresh memory costs more than this.
    let lo = |j: usize| {
        let v = lows[j];
        if v.is_nan() { f64::INFINITY } else { sign * v }
    };
    let hi = |j: usize| {
        let v = highs[j];
        if v.is_nan() {
            f64::NEG_INFINITY
        } else {
            sign * v
        }
    };
    let factor = match fr[2] {
        Fraction::Fixed(f) => f.map(|f| if long { 1.0 - f } else { 1.0 + f }),
        Fraction::PerBar(_) => unreachable!("a trailing formula has no table"),
    };
    let pos = sign;
    let (entries, offset) = match exec.fill {
        Fill::NextOpen => (
            bars.open.expect("next_open fills are checked for `open`"),
            0,
        ),
        Fill::Close => (bars.close, 1),
    };
    let mut table = vec![Exit::NEVER; n];
    let mut prices = vec![f64::NAN; n];
    let mut reasons = vec![ExitReason::StopLoss; n];
    // Per bar k: the first trail hit of the chain of next higher highs from k (from k + 1),
    // and the chain's bar whose high is the best price before that hit (the trail's peak
    // there, which the exit's price needs: read here, not searched for in the stack).
    let mut chain = vec![(NEVER_BAR, 0u32); if factor.is_some() { n } else { 0 }];
    let (mut lows_from, mut highs_from) = (Records::default(), Records::default());
    for a in (0..n).rev() {
        let (lo_a, hi_a) = (lo(a), hi(a));
        highs_from.push(hi_a, a, |h| h <= hi_a);
        if let Some(m) = factor {
            // `highs_from` below `a` is the next higher high; `lows_from` still starts at a + 1.
            let next = highs_from.second();
            let level = m * hi_a;
            // A hit after g is g's chain's (only the lows up to g are looked at: often a few).
            let seg = match next {
                Some(g) => lows_from.first_by(g as usize, |l| l <= level),
                None => lows_from.first(|l| l <= level),
            };
            // Bars a + 1 .. g - 1 have highs at most a's: up to a hit before g, a's high is
            // the best price.
            chain[a] = match (seg, next) {
                (Some(s), _) => (s as u32, a as u32),
                (None, Some(g)) => chain[g as usize],
                (None, None) => (NEVER_BAR, a as u32),
            };
        }
        lows_from.push(lo_a, a, |l| l >= lo_a);
        // The trade whose first checked bar is `a`.
        let Some(e) = a.checked_sub(offset) else {
            continue;
        };
        let entry = exec.enter_at(pos, entries[e]);
        if entry.is_nan() {
            table[e] = Exit::WALK;
            continue;
        }
        // A formula's value at the bar whose close decided the entry (an entry at the first
        // bar's open, which no bar decides, never happens).
        let decided = e.checked_sub(1 - offset);
        let fractions: Fractions = fr.map(|f| match f {
            Fraction::Fixed(f) => f,
            Fraction::PerBar(v) => decided.map(|d| v[d]).filter(|&v| v > 0.0),
        });
        let t = TradeStops::new(long, entry, fractions);
        let start = sign * entry;
        let mut first = u32::MAX;
        // The first bar whose high is above the entry (the best price is the entry before
        // it), and the trail's first hit with the bar whose high is the best price before it.
        let mut rise = None;
        let mut trail = (NEVER_BAR, None);
        if let Some(m) = factor {
            let level = m * start;
            // Most often bar `a`'s own high is above the entry (an open below the high): then
            // the trail's first hit is bar `a` itself or its chain's, no search needed.
            if hi_a > start {
                rise = Some(a);
                trail = if lo_a <= level {
                    (a as u32, None)
                } else {
                    let (hit, best) = chain[a];
                    (hit, Some(best))
                };
            } else {
                rise = highs_from.first(|h| h > start);
                trail = match (lows_from.first(|l| l <= level), rise) {
                    (Some(j), Some(r)) if j <= r => (j as u32, None),
                    (Some(j), None) => (j as u32, None),
                    (_, Some(r)) => {
                        let (hit, best) = chain[r];
                        (hit, Some(best))
                    }
                    (None, None) => (NEVER_BAR, None),
                };
            }
            first = trail.0;
        }
        let (loss, profit) = (sign * t.loss, sign * t.profit);
        if !loss.is_nan()
            && let Some(j) = lows_from.first(|l| l <= loss)
        {
            first = first.min(j as u32);
        }
        if !profit.is_nan()
            && let Some(j) = highs_from.first(|h| h >= profit)
        {
            first = first.min(j as u32);
        }
        if first == NEVER_BAR {
            continue;
        }
        let j = first as usize;
        // The best price before bar j: the entry, or the highest high of bars a..j. Known
        // without a search where the trail hits first (its chain's bar), where no high before
        // j is above the entry, or without a trail (which alone reads it); else the last
        // record before j (records go deeper as their bars get later).
        let best = if factor.is_none() || rise.is_none_or(|r| j <= r) {
            start
        } else if let (true, Some(b)) = (first == trail.0, trail.1) {
            start.max(hi(b as usize))
        } else {
            let before = highs_from.0.partition_point(|&(_, k)| k as usize >= j);
            highs_from
                .0
                .get(before)
                .map_or(start, |&(h, _)| start.max(h))
        };
        table[e] = match t.at(&p, j, sign * best) {
            Err(stop) => {
                let Hit { price, bar, reason } = t.hit(exec, j, stop);
                (prices[e], reasons[e]) = (price, reason);
                Exit(bar as u32)
            }
            // Not expected (the searches are the test's own comparisons); the walk is right.
            Ok(_) => {
                debug_assert!(false, "entry {e} long {long}: no stop at bar {j}");
                Exit::WALK
            }
        };
    }
    (table, prices, reasons)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::StopsOn;

    /// Bars of a random walk with `vol` moves, a NaN gap in highs and lows (and closes, for the
    /// closes-only case), flat stretches (ties of highs and lows), and for seed 7 a NaN warm-up
    /// of 40 bars (highs, lows and closes).
    fn bars(n: usize, vol: f64, seed: u64) -> [Vec<f64>; 4] {
        let mut state = seed;
        let mut unit = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let [mut open, mut high, mut low, mut close] = [vec![], vec![], vec![], vec![]];
        let mut c = 100.0;
        for i in 0..n {
            let flat = (500..560).contains(&i);
            let o = if flat {
                c
            } else {
                c * (1.0 + (unit() - 0.5) * vol)
            };
            if !flat {
                c = o * (1.0 + (unit() - 0.5) * vol);
            }
            let (h, l) = if flat {
                (c, c)
            } else {
                (
                    o.max(c) * (1.0 + unit() * vol / 4.0),
                    o.min(c) * (1.0 - unit() * vol / 4.0),
                )
            };
            let prefix = seed == 7 && i < 40;
            let gap = (3000..3010).contains(&i) || prefix;
            open.push(o);
            high.push(if gap { f64::NAN } else { h });
            low.push(if gap { f64::NAN } else { l });
            close.push(if i == 3005 || prefix { f64::NAN } else { c });
        }
        [open, high, low, close]
    }

    #[test]
    fn every_entry_stops_where_its_walk_does() {
        let mut checked = [0usize; 2];
        for (seed, vol) in [(0x9e37_79b9_7f4a_7c15, 0.004), (7, 0.02), (11, 0.0005)] {
            let [open, high, low, close] = bars(6_000, vol, seed);
            let b = Bars::ohlc(&open, &high, &low, &close);
            let fractions: [Fractions; 6] = [
                [None, None, Some(0.01)],
                [None, None, Some(0.002)],
                [Some(0.02), Some(0.05), Some(0.015)],
                [Some(0.01), None, Some(0.01)],
                [Some(0.4), Some(0.6), None],
                [None, Some(0.003), None],
            ];
            for fill in [Fill::NextOpen, Fill::Close] {
                for stops in [StopsOn::HighLow, StopsOn::Close] {
                    for slippage in [0.0, 0.001] {
                        for fr in fractions {
                            let exec = Execution {
                                fill,
                                stops,
                                slippage,
                                stop_loss: fr[0],
                                take_profit: fr[1],
                                trailing_stop: fr[2],
                                ..Execution::new(0.0)
                            };
                            if exec.is_v12() {
                                continue;
                            }
                            let x = Exits::of(&b, &exec, EXITS_MIN_COMBOS, false)
                                .expect("fixed stops under the general loop build a table");
                            let p = StopBars::of(&b, &exec);
                            for long in [true, false] {
                                let pos = if long { 1.0 } else { -1.0 };
                                for e in 0..close.len() {
                                    let (raw, from) = match fill {
                                        Fill::NextOpen => (open[e], e),
                                        Fill::Close => (close[e], e + 1),
                                    };
                                    let got = x.get(long, e);
                                    let entry = exec.enter_at(pos, raw);
                                    if entry.is_nan() {
                                        assert!(got.walks());
                                        continue;
                                    }
                                    if from >= close.len() {
                                        assert!(!got.by(close.len() - 1));
                                        continue;
                                    }
                                    let t = TradeStops::new(long, entry, fr);
                                    let want =
                                        t.walk(&p, None, &exec, entry, (from, close.len() - 1));
                                    let label = format!("{exec:?} long {long} entry {e}");
                                    match want {
                                        Ok(_) => assert!(!got.by(close.len() - 1), "{label}"),
                                        Err(hit) => {
                                            assert!(got.by(hit.bar), "{label}");
                                            assert!(hit.bar == from || !got.by(hit.bar - 1));
                                            assert_eq!(x.hit(long, e), hit, "{label}");
                                        }
                                    }
                                    checked[usize::from(want.is_err())] += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        // Both kinds of trade are common: stopped and running to the end.
        assert!(checked[0] > 10_000 && checked[1] > 100_000, "{checked:?}");
    }
}
