//! Portfolio strategies (protocol v1.4): at each decision row of a universe's calendar, rank the
//! eligible series, choose the long and short sets (with a `keep` buffer), weight them, and fill
//! the target weights with the cash shared; the book's equity per calendar row and its metrics.
//!
//! This module owns the selection and the accounting, written plainly in the order the contract
//! gives them (every sum in series or row order from 0.0, every product and division as
//! written), so it is also the oracle any faster form is tested against. It takes what the
//! server computes per series: each series' rows placed on the calendar ([`OnCalendar`]), its
//! prices, and one combo's formula values on its own rows ([`ComboArrays`]). The sweep the
//! server runs is [`panel`]: every combo of a call at once, the formula values planned and
//! evaluated by the formula layer (`crate::eval`) and kept at the decision rows only, the
//! selection lists shared between combos; it equals [`run`] bit for bit.
//!
//! Accounting (the contract's "Fills and accounting"): cash starts at 1.0; a trade of `d`
//! shares at price `p` fills at `p * (1 + u)` (buy) or `p * (1 - u)` (sell) and pays `fee / 2`
//! of its value; a held series without a bar at a fill is not traded; an ended series is closed
//! at its last close; sells go before buys (ascending target-less-held value, vectorbt's
//! `call_seq="auto"`), and a buy the cash cannot pay is filled in part.

pub mod panel;

/// A calendar row where a series has no bar (in [`OnCalendar::row_of`]).
pub const NO_BAR: u32 = u32::MAX;

/// One series on the call's calendar: for each calendar row, the series' own row with that
/// time, or [`NO_BAR`]; and its prices on its own rows.
#[derive(Debug, Clone, Copy)]
pub struct OnCalendar<'a> {
    /// Calendar row -> the series' own row, or [`NO_BAR`].
    pub row_of: &'a [u32],
    /// Opens on its own rows (needed with [`PortfolioFill::NextOpen`]).
    pub open: Option<&'a [f64]>,
    /// Closes on its own rows.
    pub close: &'a [f64],
}

impl OnCalendar<'_> {
    /// The series' own row at calendar row `t`, if it has a bar there.
    #[inline]
    pub fn at(&self, t: usize) -> Option<usize> {
        let r = self.row_of[t];
        (r != NO_BAR).then_some(r as usize)
    }
}

/// One combo's formula values of one series, on the series' own rows.
#[derive(Debug, Clone, Copy)]
pub struct ComboArrays<'a> {
    /// `rank` (higher is better).
    pub rank: &'a [f64],
    /// `filter`: 1 where it holds (absent: every row).
    pub filter: Option<&'a [u8]>,
    /// `weight` (absent: 1.0).
    pub weight: Option<&'a [f64]>,
    /// False where a window of the combo's formulas exceeds the series' bars: never eligible.
    pub fits: bool,
}

/// Where a decision fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortfolioFill {
    /// At the decision row's close.
    Close,
    /// At the next calendar row's open (the default for portfolios).
    NextOpen,
}

/// One combo's rules besides its arrays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// Series held long.
    pub longs: usize,
    /// Series held short.
    pub shorts: usize,
    /// A held series stays while its position in its list is within this (`None`: no buffer).
    pub keep: Option<usize>,
    /// Where decisions fill.
    pub fill: PortfolioFill,
    /// The round-trip fee as a fraction (each side pays half).
    pub fee: f64,
    /// Slippage as a fraction of each fill price.
    pub slippage: f64,
}

/// One trade, as the `trades` reply lists it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortfolioTrade {
    /// The fill's calendar row.
    pub row: usize,
    /// The series' position in the call's series.
    pub series: usize,
    /// Shares (positive buys).
    pub shares: f64,
    /// The price before slippage.
    pub price: f64,
    /// `shares * fill price`.
    pub value: f64,
    /// The fee paid.
    pub fee: f64,
}

/// The book after one calendar row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BookRow {
    /// Equity: cash plus the holdings at their last closes.
    pub equity: f64,
    /// Cash.
    pub cash: f64,
    /// Series held (shares != 0).
    pub holdings: usize,
}

/// A run's metrics (the contract's "Metrics" table; `None` is null).
#[derive(Debug, Clone, PartialEq)]
pub struct PortfolioMetrics {
    /// `(E_last - 1) * 100`.
    pub total_return: f64,
    /// `(E_last ** (P / n) - 1) * 100`; null if `E_last <= 0`.
    pub annual_return: Option<f64>,
    /// `std(ret) * sqrt(P) * 100`; null if `n < 2`.
    pub volatility: Option<f64>,
    /// `mean(ret) / std(ret) * sqrt(P)`; null if `n < 2` or the std is 0.
    pub sharpe: Option<f64>,
    /// `mean(ret) / sqrt(sum(min(ret, 0)^2) / n) * sqrt(P)`; null if no return is negative.
    pub sortino: Option<f64>,
    /// The largest fall below the running peak (from 1.0), in percent.
    pub max_drawdown: f64,
    /// The fills' traded value over their tradable equity, summed.
    pub turnover: f64,
    /// Every fee, in percent of the starting equity.
    pub fees: f64,
    /// Fills counted (tradable equity > 0).
    pub rebalances: u64,
    /// Mean count of series held after each row.
    pub avg_holdings: f64,
    /// Each block's return in percent (with `blocks`).
    pub block_pnl: Option<Vec<f64>>,
}

/// What a run keeps besides its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Keep {
    /// The trades, in the order they happen.
    pub trades: bool,
    /// The book after every row.
    pub rows: bool,
}

/// One combo's run over calendar rows `[start, end)`.
#[derive(Debug, Clone, PartialEq)]
pub struct PortfolioRun {
    /// Its metrics.
    pub metrics: PortfolioMetrics,
    /// The trades (with [`Keep::trades`]).
    pub trades: Vec<PortfolioTrade>,
    /// The book after each row of the range (with [`Keep::rows`]).
    pub rows: Vec<BookRow>,
}

/// A universe's calendar (the contract's "The universe and its calendar"): the sorted union of
/// its series' times, and each series' rows placed on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    /// The distinct times, ascending: calendar row `t` is `times[t]`.
    pub times: Vec<i64>,
    /// Per series, calendar row -> its own row with that time, or [`NO_BAR`].
    pub row_of: Vec<Vec<u32>>,
}

impl Calendar {
    /// The calendar of `series`, each a strictly increasing list of times (as a usable time
    /// column is within a series). Memory: one `u32` per series per calendar row.
    ///
    /// # Panics
    /// If a series' times are not strictly increasing, or a series has `u32::MAX` rows or more.
    pub fn of(series: &[&[i64]]) -> Self {
        // Each series merged into the union in one pass (series of one market share most of
        // their times, so the union stays about as long as the longest); a union that grows
        // far past that (series of disjoint times) is sorted whole instead.
        let longest = series.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut times: Vec<i64> = Vec::new();
        let mut merged: Vec<i64> = Vec::new();
        for s in series {
            if times.len() > 4 * longest.max(1024) {
                times = series.iter().flat_map(|s| s.iter().copied()).collect();
                times.sort_unstable();
                times.dedup();
                break;
            }
            if **s == times[..] {
                // Series of one market usually share their times: nothing to merge.
                continue;
            }
            merged.clear();
            let (mut i, mut j) = (0, 0);
            while i < times.len() && j < s.len() {
                let (a, b) = (times[i], s[j]);
                merged.push(a.min(b));
                i += usize::from(a <= b);
                j += usize::from(b <= a);
            }
            merged.extend_from_slice(&times[i..]);
            merged.extend_from_slice(&s[j..]);
            std::mem::swap(&mut times, &mut merged);
        }
        let row_of = series
            .iter()
            .map(|s| {
                assert!(
                    s.len() < NO_BAR as usize,
                    "a series of 2^32 - 1 rows or more"
                );
                assert!(
                    s.windows(2).all(|w| w[0] < w[1]),
                    "times strictly increasing"
                );
                let mut rows = vec![NO_BAR; times.len()];
                // Both ascending: one pass.
                let mut t = 0;
                for (own, &time) in s.iter().enumerate() {
                    while times[t] < time {
                        t += 1;
                    }
                    rows[t] = own as u32;
                }
                rows
            })
            .collect();
        Self { times, row_of }
    }

    /// Calendar rows.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// True with no row.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }
}

/// Calendar rows `start, start + k, ...` below `end`.
pub fn every(start: usize, end: usize, k: usize) -> Vec<usize> {
    (start..end).step_by(k.max(1)).collect()
}

/// Calendar rows of `[start, end)` that begin a period: `start`, and every later row whose
/// `period` key differs from the row before it (keys from [`day_key`], [`week_key`],
/// [`month_key`]).
pub fn period_starts(start: usize, end: usize, period: &[i64]) -> Vec<usize> {
    (start..end)
        .filter(|&t| t == start || period[t] != period[t - 1])
        .collect()
}

pub use crate::timeframe::{civil, day_key, days_from_civil, month_key, week_key};

/// The chosen sets of one decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Chosen {
    long: Vec<usize>,
    short: Vec<usize>,
}

/// The sets chosen at decision row `r` (the contract's "Rebalances and selection").
fn choose(
    series: &[OnCalendar<'_>],
    arrays: &[ComboArrays<'_>],
    rules: &Rules,
    r: usize,
    previous: &Chosen,
) -> Chosen {
    // Eligible: a bar at r, a finite rank, the filter holding, a finite weight > 0.
    let mut eligible: Vec<(usize, f64)> = Vec::new();
    for (s, (on, a)) in series.iter().zip(arrays).enumerate() {
        let Some(i) = on.at(r) else { continue };
        let rank = a.rank[i];
        let filtered = a.filter.is_none_or(|f| f[i] != 0);
        let weighted = a.weight.is_none_or(|w| w[i].is_finite() && w[i] > 0.0);
        if a.fits && rank.is_finite() && filtered && weighted {
            eligible.push((s, rank));
        }
    }
    // Largest first, ties by series order (a stable sort of the series-ordered list; -0.0
    // equals 0.0 under partial_cmp).
    let mut descending = eligible.clone();
    descending.sort_by(|a, b| b.1.partial_cmp(&a.1).expect("finite ranks"));
    let pick = |list: &[(usize, f64)], prev: &[usize], count: usize, not: &[usize]| {
        let mut set: Vec<usize> = Vec::new();
        if count == 0 {
            return set;
        }
        let within = rules.keep.unwrap_or(count).max(count);
        for &s in prev {
            let position = list.iter().position(|&(x, _)| x == s);
            if position.is_some_and(|p| p < within) && !not.contains(&s) {
                set.push(s);
            }
        }
        for &(s, _) in list {
            if set.len() >= count {
                break;
            }
            if !set.contains(&s) {
                set.push(s);
            }
        }
        set
    };
    let long = pick(&descending, &previous.long, rules.longs, &[]);
    let mut ascending: Vec<(usize, f64)> = eligible
        .into_iter()
        .filter(|(s, _)| !long.contains(s))
        .collect();
    ascending.sort_by(|a, b| a.1.partial_cmp(&b.1).expect("finite ranks"));
    let short = pick(&ascending, &previous.short, rules.shorts, &long);
    Chosen { long, short }
}

/// The target weight of every series for the sets `chosen` at row `r`.
fn weights(
    series: &[OnCalendar<'_>],
    arrays: &[ComboArrays<'_>],
    rules: &Rules,
    r: usize,
    chosen: &Chosen,
) -> Vec<f64> {
    let g = if rules.longs > 0 && rules.shorts > 0 {
        0.5
    } else {
        1.0
    };
    let w_of = |s: usize| {
        let i = series[s]
            .at(r)
            .expect("a chosen series has a bar at the decision");
        arrays[s].weight.map_or(1.0, |w| w[i])
    };
    let mut out = vec![0.0; series.len()];
    for (set, sign) in [(&chosen.long, 1.0), (&chosen.short, -1.0)] {
        // The set's sum in series order, from 0.0.
        let mut members = set.clone();
        members.sort_unstable();
        let mut total = 0.0;
        for &s in &members {
            total += w_of(s);
        }
        for &s in &members {
            let w = (g * w_of(s)) / total;
            out[s] = if sign > 0.0 { w } else { -w };
        }
    }
    out
}

/// The book while a run goes.
struct Book<'k> {
    cash: f64,
    shares: Vec<f64>,
    fees: f64,
    keep: Keep,
    trades: &'k mut Vec<PortfolioTrade>,
}

impl Book<'_> {
    /// A trade of `d` shares of `s` at `p`, in full; returns `abs(d) * p` (the traded value).
    fn trade(&mut self, row: usize, s: usize, d: f64, p: f64, phi: f64, u: f64) -> f64 {
        let q = if d > 0.0 {
            p * (1.0 + u)
        } else {
            p * (1.0 - u)
        };
        let v = d.abs() * q;
        let fee = v * phi;
        self.cash = if d > 0.0 {
            (self.cash - v) - fee
        } else {
            (self.cash + v) - fee
        };
        self.record(row, s, d, p, d * q, fee);
        d.abs() * p
    }

    /// A buy of `d` shares that the cash cannot pay in full: as much as it can.
    fn partial_buy(&mut self, row: usize, s: usize, d: f64, p: f64, u: f64) -> f64 {
        let q = p * (1.0 + u);
        let v = d.abs() * q;
        let fee = (self.cash - v).max(0.0);
        self.cash = 0.0;
        self.record(row, s, d, p, d * q, fee);
        d.abs() * p
    }

    fn record(&mut self, row: usize, series: usize, shares: f64, price: f64, value: f64, fee: f64) {
        self.fees += fee;
        if self.keep.trades {
            self.trades.push(PortfolioTrade {
                row,
                series,
                shares,
                price,
                value,
                fee,
            });
        }
    }
}

/// One combo's run over calendar rows `[start, end)`: the decisions at `decisions` (sorted
/// calendar rows in the range), the accounting, the equity and the metrics. `periods_per_year`
/// annualises; `blocks` adds `block_pnl`.
///
/// # Panics
/// If `series` and `arrays` differ in length, or a decision row is outside `[start, end)`.
#[expect(
    clippy::too_many_arguments,
    reason = "the contract's inputs of one run, each named"
)]
pub fn run(
    series: &[OnCalendar<'_>],
    arrays: &[ComboArrays<'_>],
    rules: &Rules,
    decisions: &[usize],
    range: (usize, usize),
    periods_per_year: f64,
    blocks: Option<usize>,
    keep: Keep,
) -> PortfolioRun {
    assert_eq!(series.len(), arrays.len(), "one array set per series");
    let mut previous = Chosen::default();
    let decide = |t: usize| {
        let chosen = choose(series, arrays, rules, t, &previous);
        let w = weights(series, arrays, rules, t, &chosen);
        previous = chosen;
        w
    };
    simulate(
        series,
        rules,
        decisions,
        range,
        (periods_per_year, blocks, keep),
        decide,
    )
}

/// [`run`] with each decision's target weights given (`targets[k]` for `decisions[k]`, one
/// weight a series, negative for a short): the accounting alone, for checks against other
/// engines fed the same weights.
///
/// # Panics
/// If `targets` and `decisions` differ in length.
#[expect(
    clippy::too_many_arguments,
    reason = "the contract's inputs of one run, each named"
)]
pub fn run_targets(
    series: &[OnCalendar<'_>],
    targets: &[Vec<f64>],
    rules: &Rules,
    decisions: &[usize],
    range: (usize, usize),
    periods_per_year: f64,
    blocks: Option<usize>,
    keep: Keep,
) -> PortfolioRun {
    assert_eq!(
        targets.len(),
        decisions.len(),
        "one target set per decision"
    );
    let mut k = 0;
    let decide = |_: usize| {
        k += 1;
        targets[k - 1].clone()
    };
    simulate(
        series,
        rules,
        decisions,
        range,
        (periods_per_year, blocks, keep),
        decide,
    )
}

/// The run's loop: `decide(t)` gives the target weights decided at decision row `t`.
fn simulate(
    series: &[OnCalendar<'_>],
    rules: &Rules,
    decisions: &[usize],
    (start, end): (usize, usize),
    (periods_per_year, blocks, keep): (f64, Option<usize>, Keep),
    mut decide: impl FnMut(usize) -> Vec<f64>,
) -> PortfolioRun {
    let n_series = series.len();
    let phi = rules.fee / 2.0;
    let u = rules.slippage;
    let mut trades = Vec::new();
    let mut book = Book {
        cash: 1.0,
        shares: vec![0.0; n_series],
        fees: 0.0,
        keep,
        trades: &mut trades,
    };
    // Each series' last calendar row with a bar before `end` (an ended series has none at or
    // after a fill), and its last close so far.
    let last_bar: Vec<Option<usize>> = series
        .iter()
        .map(|on| (0..end).rev().find(|&t| on.at(t).is_some()))
        .collect();
    let mut last_close: Vec<f64> = vec![f64::NAN; n_series];
    // Fill row -> the decision's target weights; decisions in row order.
    let lag = usize::from(rules.fill == PortfolioFill::NextOpen);
    let mut pending: Option<(usize, Vec<f64>)> = None;
    let mut next_decision = 0;
    let (mut turnover, mut rebalances) = (0.0, 0u64);
    let mut equity: Vec<f64> = Vec::with_capacity(end.saturating_sub(start));
    let mut rows: Vec<BookRow> = Vec::new();
    let mut held_sum = 0.0;
    for t in 0..end {
        if t >= start {
            // Two steps: before the decision at t, the fill due at t from the one before it
            // (next open: first of anything at its row); after it, this decision's own fill
            // when it fills at the close. One fill is due at a row at most.
            for after_decision in [false, true] {
                if after_decision
                    && next_decision < decisions.len()
                    && decisions[next_decision] == t
                {
                    // Chosen on t's values; filled at t (close) or t + 1 (next open).
                    next_decision += 1;
                    let w = decide(t);
                    pending = (t + lag < end).then_some((t + lag, w));
                }
                if let Some((f, w)) = pending.take_if(|(f, _)| *f == t) {
                    fill(
                        series,
                        &mut book,
                        &w,
                        f,
                        rules,
                        (phi, u),
                        &last_bar,
                        &last_close,
                        (&mut turnover, &mut rebalances),
                    );
                }
            }
        }
        for (s, on) in series.iter().enumerate() {
            if let Some(i) = on.at(t) {
                last_close[s] = on.close[i];
            }
        }
        if t >= start {
            let mut e = book.cash;
            let mut held = 0;
            for (sh, c) in book.shares.iter().zip(&last_close) {
                if *sh != 0.0 {
                    e += sh * c;
                    held += 1;
                }
            }
            held_sum += held as f64;
            equity.push(e);
            if keep.rows {
                rows.push(BookRow {
                    equity: e,
                    cash: book.cash,
                    holdings: held,
                });
            }
        }
    }
    let fees = book.fees;
    let n = equity.len();
    let metrics = metrics(
        &equity,
        periods_per_year,
        blocks,
        (turnover, fees, rebalances),
        held_sum / n as f64,
    );
    PortfolioRun {
        metrics,
        trades,
        rows,
    }
}

/// The fill at row `f` of the target weights `w`: ended series closed, the marks, the trades.
#[expect(
    clippy::too_many_arguments,
    reason = "one fill's inputs, each the contract's"
)]
fn fill(
    series: &[OnCalendar<'_>],
    book: &mut Book<'_>,
    w: &[f64],
    f: usize,
    rules: &Rules,
    (phi, u): (f64, f64),
    last_bar: &[Option<usize>],
    last_close: &[f64],
    (turnover, rebalances): (&mut f64, &mut u64),
) {
    let mut traded = 0.0;
    // 1. Held series with no bar at a row in [f, end): closed at their last close.
    for (s, (last, close)) in last_bar.iter().zip(last_close).enumerate() {
        if book.shares[s] != 0.0 && last.is_none_or(|b| b < f) {
            let d = -book.shares[s];
            traded += book.trade(f, s, d, *close, phi, u);
            book.shares[s] = 0.0;
        }
    }
    // 2. Marks: the book's equity, and the part held in series without a bar at f.
    let price = |s: usize| -> Option<f64> {
        let on = &series[s];
        let i = on.at(f)?;
        Some(match rules.fill {
            PortfolioFill::NextOpen => on.open.expect("next_open needs opens")[i],
            PortfolioFill::Close => on.close[i],
        })
    };
    let mut ep = book.cash;
    let mut untradable = 0.0;
    for (s, (&sh, &m)) in book.shares.iter().zip(last_close).enumerate() {
        if sh != 0.0 {
            match price(s) {
                Some(p) => ep += sh * p,
                None => {
                    ep += sh * m;
                    untradable += sh * m;
                }
            }
        }
    }
    let et = ep - untradable;
    if et <= 0.0 {
        return;
    }
    // 3. Targets, ordered by the target value less the held value (sells first), ties by
    //    series order.
    let mut orders: Vec<(f64, usize, f64, f64)> = Vec::new();
    for (s, (&ws, &sh)) in w.iter().zip(&book.shares).enumerate() {
        let Some(p) = price(s) else { continue };
        let target = (ws * et) / p;
        let d = target - sh;
        let k = (ws * et) - (sh * p);
        orders.push((k, s, d, target));
    }
    orders.sort_by(|a, b| a.0.partial_cmp(&b.0).expect("finite").then(a.1.cmp(&b.1)));
    for (_, s, d, target) in orders {
        if d == 0.0 {
            continue;
        }
        let p = price(s).expect("ordered series have a bar");
        if d < 0.0 {
            traded += book.trade(f, s, d, p, phi, u);
            book.shares[s] = target;
            continue;
        }
        let q = p * (1.0 + u);
        if (d * q) * (1.0 + phi) > book.cash {
            if book.cash > 0.0 {
                let part = book.cash / (q * (1.0 + phi));
                traded += book.partial_buy(f, s, part, p, u);
                book.shares[s] += part;
            }
        } else {
            traded += book.trade(f, s, d, p, phi, u);
            book.shares[s] = target;
        }
    }
    *turnover += traded / et;
    *rebalances += 1;
}

/// The mean of `x`: a sum in order from 0.0, one division.
fn mean_of(x: &[f64]) -> f64 {
    let mut sum = 0.0;
    for v in x {
        sum += v;
    }
    sum / x.len() as f64
}

/// The sample standard deviation (ddof 1) of `x` around its `mean`: the squared deviations
/// summed in order from 0.0.
fn std_of(x: &[f64], mean: f64) -> f64 {
    let mut sq = 0.0;
    for v in x {
        sq += (v - mean) * (v - mean);
    }
    (sq / (x.len() as f64 - 1.0)).sqrt()
}

pub(crate) fn metrics(
    equity: &[f64],
    p: f64,
    blocks: Option<usize>,
    (turnover, fees, rebalances): (f64, f64, u64),
    avg_holdings: f64,
) -> PortfolioMetrics {
    let n = equity.len();
    let last = equity.last().copied().unwrap_or(1.0);
    let mut ret = Vec::with_capacity(n);
    let mut before = 1.0;
    for &e in equity {
        ret.push(e / before - 1.0);
        before = e;
    }
    let mean = mean_of(&ret);
    let std = if n >= 2 { std_of(&ret, mean) } else { f64::NAN };
    let mut neg = 0.0;
    let mut any_negative = false;
    for &r in &ret {
        let m = r.min(0.0);
        neg += m * m;
        any_negative |= r < 0.0;
    }
    let mut peak = 1.0f64;
    let mut max_drawdown = 0.0f64;
    for &e in equity {
        peak = peak.max(e);
        max_drawdown = max_drawdown.max((1.0 - e / peak) * 100.0);
    }
    let block_pnl = blocks.map(|b| {
        (0..b)
            .map(|k| {
                let (from, to) = (k * n / b, (k + 1) * n / b);
                let before = if from == 0 { 1.0 } else { equity[from - 1] };
                (equity[to - 1] / before - 1.0) * 100.0
            })
            .collect()
    });
    PortfolioMetrics {
        total_return: (last - 1.0) * 100.0,
        annual_return: (last > 0.0).then(|| (last.powf(p / n as f64) - 1.0) * 100.0),
        volatility: (n >= 2).then(|| std * p.sqrt() * 100.0),
        sharpe: (n >= 2 && std != 0.0).then(|| mean / std * p.sqrt()),
        sortino: any_negative.then(|| mean / (neg / n as f64).sqrt() * p.sqrt()),
        max_drawdown,
        turnover,
        fees: fees * 100.0,
        rebalances,
        avg_holdings,
        block_pnl,
    }
}

/// One combo's `rank`, `filter` and `weight` over one series' bars, plainly (the formula
/// oracle, node by node: the reference the planned evaluation will be tested against).
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesValues {
    /// `rank` at each bar (a constant broadcast).
    pub rank: Vec<f64>,
    /// `filter` at each bar (1 where it holds), if the program has one.
    pub filter: Option<Vec<u8>>,
    /// `weight` at each bar, if the program has one.
    pub weight: Option<Vec<f64>>,
    /// False where a window of the combo's formulas exceeds the series' bars (the series is
    /// then never eligible for the combo).
    pub fits: bool,
}

impl SeriesValues {
    /// The values of a `program` of [`crate::expr::Program::portfolio`] for the combo of
    /// parameter `values` on `bars` (all of a series' own rows).
    ///
    /// # Panics
    /// If the program has no `rank`, or reads a column the bars lack.
    pub fn of(
        bars: &crate::lines::Bars<'_>,
        program: &crate::expr::Program,
        values: &[f64],
    ) -> Self {
        use crate::eval::oracle::{Value, evaluate};
        use crate::expr::Field;
        let len = bars.len();
        let mut fits = true;
        let mut read = |field: Field| {
            program.formula(field).map(|bound| {
                let (v, f) = evaluate(bars, bound, values);
                fits &= f;
                v
            })
        };
        let numbers = |v: Value| match v {
            Value::Const(c) => vec![c; len],
            Value::Series(s) => s,
            Value::Bool(_) | Value::Cond(_) => unreachable!("the binder checked a number"),
        };
        let rank = numbers(read(Field::Rank).expect("a portfolio has a rank"));
        let filter = read(Field::Filter).map(|v| match v {
            Value::Bool(b) => vec![u8::from(b); len],
            Value::Cond(c) => c.into_iter().map(u8::from).collect(),
            Value::Const(_) | Value::Series(_) => unreachable!("the binder checked a condition"),
        });
        let weight = read(Field::Weight).map(numbers);
        Self {
            rank,
            filter,
            weight,
            fits,
        }
    }

    /// The arrays as [`run`] reads them.
    pub fn arrays(&self) -> ComboArrays<'_> {
        ComboArrays {
            rank: &self.rank,
            filter: self.filter.as_deref(),
            weight: self.weight.as_deref(),
            fits: self.fits,
        }
    }
}
