//! Calendar periods: UTC dates, ISO weeks and months as keys of days since 1970-01-01 (the
//! decision words of a portfolio's `rebalance` and the higher timeframes of the formula
//! language, protocol v1.4), and a series' bars gathered into the bars of such periods.
//!
//! The period bars are expressions.md's "Higher timeframes" written out: each maximal run of
//! consecutive bars in one period is one bar (open the run's first, high its largest, low its
//! smallest, close its last, volume its sum from 0.0 in row order, an input its last value), and
//! a value computed on them is seen at the bars of the **next** period only
//! ([`seen_from_next`]), so nothing of an unfinished period is read. Serving the functions
//! (`daily(x)`, `weekly(x)`, `monthly(x)`) is the planner's and the server's; this module owns
//! the arithmetic every form of them shares.

use std::sync::Arc;

use crate::lines::Bars;

/// A period of the calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timeframe {
    /// A UTC date.
    Daily,
    /// An ISO week (ISO year and week number).
    Weekly,
    /// A month (year and month).
    Monthly,
}

impl Timeframe {
    /// The three, in the order the language names them.
    pub const ALL: [Self; 3] = [Self::Daily, Self::Weekly, Self::Monthly];

    /// Its periods, in words: `UTC days`, `ISO weeks`, `months`.
    pub fn periods(self) -> &'static str {
        match self {
            Self::Daily => "UTC days",
            Self::Weekly => "ISO weeks",
            Self::Monthly => "months",
        }
    }

    /// Its position in [`Timeframe::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The function's name in the language.
    pub fn name(self) -> &'static str {
        match self {
            Self::Daily => "daily",
            Self::Weekly => "weekly",
            Self::Monthly => "monthly",
        }
    }

    /// The days `[first, next)` of the period that holds day `day` (days since 1970-01-01).
    pub fn days_of(self, day: i64) -> (i64, i64) {
        match self {
            Self::Daily => (day, day + 1),
            Self::Weekly => {
                // 1970-01-01 was a Thursday: Monday is 0.
                let monday = day - (day + 3).rem_euclid(7);
                (monday, monday + 7)
            }
            Self::Monthly => {
                let (y, m, _) = civil(day);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (days_from_civil(y, m, 1), days_from_civil(ny, nm, 1))
            }
        }
    }

    /// The key of the period that holds day `days` (days since 1970-01-01, a UTC date).
    pub fn key(self, days: i64) -> i64 {
        match self {
            Self::Daily => day_key(days),
            Self::Weekly => week_key(days),
            Self::Monthly => month_key(days),
        }
    }
}

/// A series' bars gathered into periods, and which period bar each bar is in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeriodBars {
    /// Opens: each period's first.
    pub open: Option<Vec<f64>>,
    /// Highs: each period's largest.
    pub high: Option<Vec<f64>>,
    /// Lows: each period's smallest.
    pub low: Option<Vec<f64>>,
    /// Closes: each period's last.
    pub close: Vec<f64>,
    /// Volumes: each period's sum, from 0.0 in row order.
    pub volume: Option<Vec<f64>>,
    /// The strategy's own columns: each period's last value.
    pub inputs: Vec<Arc<[f64]>>,
    /// For each bar of the range, the index of its period bar.
    pub of_bar: Vec<u32>,
}

impl PeriodBars {
    /// The period bars of `bars` (a computed range) whose UTC dates are `days` (one per bar),
    /// for `timeframe`. Every column `bars` has is gathered (pass bars without the columns a
    /// call does not read to skip them).
    ///
    /// One pass finds the runs: a bar starts a period when its day is outside the current
    /// period's days `[first, next)` (a comparison per bar; the calendar arithmetic runs once
    /// per period). Then one pass per column over the runs.
    ///
    /// # Panics
    /// If `days` and the bars differ in length.
    pub fn of(bars: &Bars<'_>, days: &[i64], timeframe: Timeframe) -> Self {
        let n = bars.len();
        assert_eq!(days.len(), n, "one day per bar");
        let mut of_bar: Vec<u32> = Vec::with_capacity(n);
        // Where each period's run starts; its end is the next one's start.
        let mut starts: Vec<usize> = Vec::new();
        let (mut first, mut next) = (i64::MAX, i64::MIN);
        let mut period = u32::MAX;
        for (i, &d) in days.iter().enumerate() {
            if d < first || d >= next {
                (first, next) = timeframe.days_of(d);
                starts.push(i);
                period = period.wrapping_add(1);
            }
            of_bar.push(period);
        }
        starts.push(n);
        let runs = || starts.windows(2).map(|w| (w[0], w[1]));
        let first_of = |x: &[f64]| runs().map(|(a, _)| x[a]).collect::<Vec<f64>>();
        let last_of = |x: &[f64]| runs().map(|(_, b)| x[b - 1]).collect::<Vec<f64>>();
        let fold = |x: &[f64], f: fn(&[f64]) -> f64| {
            runs().map(|(a, b)| f(&x[a..b])).collect::<Vec<f64>>()
        };
        let sum = |x: &[f64]| {
            runs()
                .map(|(a, b)| x[a..b].iter().fold(0.0, |s, &v| s + v))
                .collect::<Vec<f64>>()
        };
        Self {
            open: bars.open.map(first_of),
            high: bars.high.map(|h| fold(h, largest)),
            low: bars.low.map(|l| fold(l, smallest)),
            close: last_of(bars.close),
            volume: bars.volume.map(sum),
            inputs: (0..bars.inputs.len())
                .map(|k| {
                    bars.input(k)
                        .map_or_else(|| vec![f64::NAN; starts.len() - 1], last_of)
                        .into()
                })
                .collect(),
            of_bar,
        }
    }

    /// The number of period bars.
    pub fn len(&self) -> usize {
        self.close.len()
    }

    /// True without a bar.
    pub fn is_empty(&self) -> bool {
        self.close.is_empty()
    }

    /// The period bars as bars a formula is evaluated on.
    pub fn bars(&self) -> Bars<'_> {
        Bars {
            open: self.open.as_deref(),
            high: self.high.as_deref(),
            low: self.low.as_deref(),
            close: &self.close,
            volume: self.volume.as_deref(),
            inputs: &self.inputs,
            inputs_from: 0,
            days: None,
        }
    }
}

/// The largest of `x` (not empty). Four lanes, so the loop vectorises: the largest of finite
/// values (highs are validated finite) is the same whatever order they are compared in.
fn largest(x: &[f64]) -> f64 {
    extreme(x, |a, b| if b > a { b } else { a })
}

/// The smallest of `x` (not empty), as [`largest`].
fn smallest(x: &[f64]) -> f64 {
    extreme(x, |a, b| if b < a { b } else { a })
}

#[inline(always)]
fn extreme(x: &[f64], pick: impl Fn(f64, f64) -> f64) -> f64 {
    let mut lanes = [x[0]; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = pick(*l, v);
        }
    }
    let tail = chunks.remainder().iter().fold(lanes[0], |m, &v| pick(m, v));
    lanes[1..].iter().fold(tail, |m, &v| pick(m, v))
}

/// A value computed on the period bars (`per_period`, one per period bar) as seen at each bar:
/// the value of the period bar **before** the bar's own, NaN in the first period.
pub fn seen_from_next(per_period: &[f64], of_bar: &[u32]) -> Vec<f64> {
    of_bar
        .iter()
        .map(|&p| match p {
            0 => f64::NAN,
            p => per_period[p as usize - 1],
        })
        .collect()
}

/// The civil date (year, month 1-12, day 1-31) of `days` since 1970-01-01.
pub fn civil(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's days-to-civil algorithm (public domain), in the proleptic Gregorian
    // calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A day's key: the day itself.
pub fn day_key(days: i64) -> i64 {
    days
}

/// A day's ISO week as one key (ISO year * 100 + week): weeks start on Monday, and week 1 is
/// the one holding the year's first Thursday.
pub fn week_key(days: i64) -> i64 {
    // 1970-01-01 was a Thursday: Monday is 0.
    let weekday = (days + 3).rem_euclid(7);
    let thursday = days - weekday + 3;
    let (year, _, _) = civil(thursday);
    let jan1 = days_from_civil(year, 1, 1);
    let week = (thursday - jan1) / 7 + 1;
    year * 100 + week
}

/// A day's month as one key (year * 12 + month - 1).
pub fn month_key(days: i64) -> i64 {
    let (y, m, _) = civil(days);
    y * 12 + i64::from(m) - 1
}

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
