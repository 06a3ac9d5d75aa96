//! The portfolio sweep (protocol v1.4): every combo of a call over one universe, fast and flat.
//!
//! The plain run ([`super::run`]) is the contract written out and the oracle of this one. Here
//! the work is split by what combos share:
//! 1. **The universe** ([`Universe`]): each series' rows on the calendar and each calendar
//!    row's last close of every series (row-major, so a row's marks are contiguous), once per
//!    call.
//! 2. **The panel** ([`Panel`]): the call's distinct `rank`, `filter` and `weight` values
//!    (one per distinct formula node, planned as a sweep plans them, so `sma(close, 200)` of
//!    200 combos is computed once a series), evaluated on each series' own bars and kept only
//!    at the call's decision rows, row-major: a decision reads one contiguous row per array.
//! 3. **The combos**, in parallel: at each decision a partial selection of the eligible (the
//!    best `max(keep, longs)` found with a selection, then sorted; never a full sort), target
//!    weights as a sparse list, and the book touched only where it holds or targets a series;
//!    the equity marks only the holdings. No combo holds a dense array of rows x series.
//!
//! Every sum and every order of operations is the plain run's, so the two agree exactly
//! (`kernel/tests/portfolio.rs` checks it on random gappy universes).

use std::cmp::Ordering;
use std::collections::HashMap;

use rayon::prelude::*;

use super::{
    BookRow, Keep, NO_BAR, OnCalendar, PortfolioFill, PortfolioRun, PortfolioTrade, Rules, metrics,
};
use crate::eval::{NodeArray, node_arrays};
use crate::expr::Program;
use crate::keys::ArrayCache;
use crate::lines::Bars;
use crate::plan::{Plan, Root, Windows};
use crate::{Error, Result};

/// A call's series on its calendar, with what every combo reads of their prices.
#[derive(Debug)]
pub struct Universe<'a> {
    /// Each series' rows and prices.
    pub series: Vec<OnCalendar<'a>>,
    /// Calendar rows.
    pub rows: usize,
    /// Calendar row -> its position among the fill rows copied ([`NO_BAR`] where not one).
    fill_at: Vec<u32>,
    /// `closes[k * S + s]`: series `s`'s close at fill row `k` (NaN without a bar there).
    closes: Vec<f64>,
    /// Its open there, likewise (empty unless every series has opens).
    opens: Vec<f64>,
}

impl<'a> Universe<'a> {
    /// The universe of `series` (each `row_of` as long as the calendar), with the prices of
    /// the calendar rows `fill_rows` (those a call's decisions fill at) copied row-major.
    pub fn new(series: Vec<OnCalendar<'a>>, fill_rows: &[usize]) -> Self {
        let n = series.len();
        let rows = series.first().map_or(0, |on| on.row_of.len());
        let with_opens = !series.is_empty() && series.iter().all(|on| on.open.is_some());
        let mut fill_at = vec![NO_BAR; rows];
        let mut kept = 0usize;
        for &f in fill_rows {
            if f < rows && fill_at[f] == NO_BAR {
                fill_at[f] = kept as u32;
                kept += 1;
            }
        }
        let mut closes = vec![f64::NAN; kept * n];
        let mut opens = if with_opens {
            vec![f64::NAN; kept * n]
        } else {
            Vec::new()
        };
        let mut rows_kept: Vec<usize> = fill_rows.iter().copied().filter(|&f| f < rows).collect();
        rows_kept.sort_unstable();
        rows_kept.dedup();
        for (s, on) in series.iter().enumerate() {
            for &f in &rows_kept {
                let k = fill_at[f];
                if let Some(i) = on.at(f) {
                    closes[k as usize * n + s] = on.close[i];
                    if let Some(open) = on.open.filter(|_| with_opens) {
                        opens[k as usize * n + s] = open[i];
                    }
                }
            }
        }
        Self {
            series,
            rows,
            fill_at,
            closes,
            opens,
        }
    }

    /// Series `s`'s price at calendar row `f` for `fill` (its open or close there), if it has
    /// a bar there. Read from the row-major copy of the fill rows, so a fill's prices are one
    /// row; a NaN there is a missing bar unless the series' own row says otherwise.
    #[inline]
    fn price(&self, f: usize, s: usize, fill: PortfolioFill) -> Option<f64> {
        let on = &self.series[s];
        let k = self.fill_at[f];
        if k == NO_BAR {
            let i = on.at(f)?;
            return Some(match fill {
                PortfolioFill::NextOpen => on.open.expect("next_open needs opens")[i],
                PortfolioFill::Close => on.close[i],
            });
        }
        let at = k as usize * self.series.len() + s;
        let p = match fill {
            PortfolioFill::NextOpen => self.opens[at],
            PortfolioFill::Close => self.closes[at],
        };
        if !p.is_nan() {
            return Some(p);
        }
        on.at(f).map(|_| p)
    }

    /// Bytes it holds besides the series' own columns, for `fill_rows` fill rows of a
    /// calendar of `rows`.
    pub fn bytes(series: usize, rows: usize, fill_rows: usize) -> usize {
        rows * 4 + 2 * series * fill_rows * 8
    }

    /// Each series' last calendar row with a bar below `end`.
    fn last_bars(&self, end: usize) -> Vec<usize> {
        self.series
            .iter()
            .map(|on| {
                (0..end)
                    .rev()
                    .find(|&t| on.at(t).is_some())
                    .unwrap_or(NO_BAR as usize)
            })
            .collect()
    }
}

/// One combo of a portfolio sweep besides its formulas' values.
#[derive(Debug, Clone)]
pub struct PortfolioCombo<'a> {
    /// Its parameter values, in the program's order.
    pub values: &'a [f64],
    /// Its counts, fill, fee and slippage.
    pub rules: Rules,
    /// Its decision rows (calendar rows in the range, ascending).
    pub decisions: &'a [usize],
}

/// Everything a portfolio sweep runs on.
pub struct PortfolioSweep<'a> {
    /// The universe.
    pub universe: &'a Universe<'a>,
    /// Each series' own bars (all of them: formulas read the history before `range`).
    pub bars: &'a [Bars<'a>],
    /// The formulas.
    pub program: &'a Program,
    /// The combos, in order.
    pub combos: &'a [PortfolioCombo<'a>],
    /// Calendar rows `[start, end)`.
    pub range: (usize, usize),
    /// Annualisation of the metrics.
    pub periods_per_year: f64,
    /// `block_pnl`'s blocks.
    pub blocks: Option<usize>,
    /// What each run keeps besides its metrics.
    pub keep: Keep,
    /// Series `s`'s array cache (formula nodes of its bars).
    pub cache: &'a (dyn Fn(usize) -> Box<dyn ArrayCache + 'a> + Sync),
    /// Polled between combos.
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
    /// Told of each finished combo.
    pub progress: &'a (dyn Fn() + Sync),
}

/// A formula's values in a panel: which array of numbers or conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Numbers(usize),
    Cond(usize),
}

/// What a slot holds before it is evaluated.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Source {
    Const(f64),
    Bool(bool),
    Node(u32),
}

/// A combo's formulas as slots of the panel.
#[derive(Debug, Clone, Copy)]
struct Slots {
    rank: usize,
    filter: Option<usize>,
    weight: Option<usize>,
    longest: Windows,
}

/// The call's distinct formula values at its decision rows, row-major.
#[derive(Debug)]
pub struct Panel {
    /// Calendar row -> its index among the decision rows held, or [`NO_BAR`].
    at: Vec<u32>,
    series: usize,
    /// `numbers[k][u * S + s]` (NaN where `s` has no bar).
    numbers: Vec<Vec<f64>>,
    /// `conds[k][u * S + s]`, 1 where it holds (0 where `s` has no bar).
    conds: Vec<Vec<u8>>,
    /// Each series' own bars and period bars (a combo's longest windows must fit them).
    lengths: Vec<Windows>,
}

impl Panel {
    /// Bytes of a panel of `numbers` and `conds` arrays at `rows` decision rows of `series`.
    pub fn bytes(numbers: usize, conds: usize, rows: usize, series: usize) -> usize {
        (numbers * 8 + conds) * rows * series
    }
}

/// Runs every combo of `call`, in order. Combos run in groups whose panel fits
/// `max_panel_bytes` (consecutive combos, so those of one rank array, as a grid lists them,
/// share a group); a group's panel is dropped before the next is built. A combo whose own
/// panel is past the cap still runs alone (the caller checks one combo fits its memory).
///
/// # Errors
/// [`Error::Strategy`] for a column a series lacks; [`Error::Cancelled`].
pub fn sweep(
    call: &PortfolioSweep<'_>,
    parallel: bool,
    max_panel_bytes: usize,
) -> Result<Vec<PortfolioRun>> {
    let universe = call.universe;
    let n = universe.series.len();
    let rows = decision_rows(call.combos).len();
    let last_bars = universe.last_bars(call.range.1);
    let mut out = Vec::with_capacity(call.combos.len());
    let mut first = 0;
    while first < call.combos.len() {
        // The group: combos while the distinct values they read fit the cap.
        let mut plan = Plan::new();
        let mut seen: Vec<(Source, bool)> = Vec::new();
        let mut last = first;
        while last < call.combos.len() {
            let (roots, _, _) = plan.bind_portfolio(call.program, call.combos[last].values);
            let mut more = seen.clone();
            for (k, root) in roots.into_iter().enumerate() {
                if let Some(r) = root {
                    let key = (source(r), k == 1);
                    if !more.contains(&key) {
                        more.push(key);
                    }
                }
            }
            let conds = more.iter().filter(|(_, c)| *c).count();
            if last > first && Panel::bytes(more.len() - conds, conds, rows, n) > max_panel_bytes {
                break;
            }
            seen = more;
            last += 1;
        }
        let combos = &call.combos[first..last];
        let (panel, slots) = panel(call, combos, parallel)?;
        // The combos of one key share their selection lists.
        let mut keys: Vec<(usize, Option<usize>, Option<usize>, Windows)> = Vec::new();
        let mut key_of: Vec<usize> = Vec::with_capacity(combos.len());
        for s in &slots {
            let key = (s.rank, s.filter, s.weight, s.longest);
            key_of.push(keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                keys.push(key);
                keys.len() - 1
            }));
        }
        let shared: Vec<Lists> = (0..keys.len())
            .map(|k| {
                let members: Vec<&PortfolioCombo<'_>> = (0..combos.len())
                    .filter(|&c| key_of[c] == k)
                    .map(|c| &combos[c])
                    .collect();
                let first = key_of
                    .iter()
                    .position(|&x| x == k)
                    .expect("a key has a combo");
                lists(&panel, &slots[first], &members, universe.rows, parallel)
            })
            .collect();
        let run = |c: usize| -> Result<PortfolioRun> {
            if (call.cancelled)() {
                return Err(Error::Cancelled);
            }
            let out = run_combo(
                call,
                &panel,
                (&slots[c], &shared[key_of[c]]),
                &combos[c],
                &last_bars,
            );
            (call.progress)();
            Ok(out)
        };
        let runs: Vec<PortfolioRun> = if parallel {
            (0..combos.len())
                .into_par_iter()
                .map(run)
                .collect::<Result<_>>()?
        } else {
            (0..combos.len()).map(run).collect::<Result<_>>()?
        };
        out.extend(runs);
        first = last;
    }
    Ok(out)
}

/// The distinct `rank` / `weight` arrays and `filter` arrays of `combos` (what their panel
/// holds per decision row and series), for the caller's memory plan.
pub fn panel_arrays(program: &Program, combos: &[PortfolioCombo<'_>]) -> (usize, usize) {
    let mut plan = Plan::new();
    let mut seen: std::collections::HashSet<(u64, u8, bool)> = std::collections::HashSet::new();
    for combo in combos {
        let (roots, _, _) = plan.bind_portfolio(program, combo.values);
        for (k, root) in roots.into_iter().enumerate() {
            if let Some(r) = root {
                let (bits, tag) = key(source(r));
                seen.insert((bits, tag, k == 1));
            }
        }
    }
    let conds = seen.iter().filter(|k| k.2).count();
    (seen.len() - conds, conds)
}

/// Every decision row of `combos`, ascending, once.
pub fn decision_rows(combos: &[PortfolioCombo<'_>]) -> Vec<usize> {
    decision_rows_of(combos.iter())
}

fn decision_rows_of<'c, 'a: 'c>(
    combos: impl Iterator<Item = &'c PortfolioCombo<'a>>,
) -> Vec<usize> {
    let mut rows: Vec<usize> = combos.flat_map(|c| c.decisions.iter().copied()).collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

fn source(root: Root) -> Source {
    match root {
        Root::Const(c) => Source::Const(c),
        Root::Bool(b) => Source::Bool(b),
        Root::Node(id) => Source::Node(id),
    }
}

/// A value's identity within one plan.
fn key(source: Source) -> (u64, u8) {
    match source {
        Source::Const(c) => (c.to_bits(), 0),
        Source::Bool(b) => (u64::from(b), 1),
        Source::Node(id) => (u64::from(id), 2),
    }
}

/// The panel of `combos` of `call`: bound into one plan, each distinct root evaluated on every
/// series (in parallel over series) and kept at their decision rows.
fn panel(
    call: &PortfolioSweep<'_>,
    combos: &[PortfolioCombo<'_>],
    parallel: bool,
) -> Result<(Panel, Vec<Slots>)> {
    let universe = call.universe;
    let n = universe.series.len();
    let mut plan = Plan::new();
    let mut sources: Vec<(Source, bool)> = Vec::new();
    let mut index: HashMap<(u64, u8), usize> = HashMap::new();
    let mut slot_of = |source: Source, cond: bool| -> usize {
        *index.entry(key(source)).or_insert_with(|| {
            sources.push((source, cond));
            sources.len() - 1
        })
    };
    let mut raw: Vec<(usize, Option<usize>, Option<usize>, Windows)> = Vec::new();
    for combo in combos {
        let ([rank, filter, weight], longest, _) = plan.bind_portfolio(call.program, combo.values);
        let rank = slot_of(source(rank.expect("a portfolio has a rank")), false);
        let filter = filter.map(|f| slot_of(source(f), true));
        let weight = weight.map(|w| slot_of(source(w), false));
        raw.push((rank, filter, weight, longest));
    }
    // Slots numbered within their kind.
    let mut kinds: Vec<Slot> = Vec::with_capacity(sources.len());
    let (mut numbers, mut conds) = (0, 0);
    for &(_, cond) in &sources {
        kinds.push(if cond {
            conds += 1;
            Slot::Cond(conds - 1)
        } else {
            numbers += 1;
            Slot::Numbers(numbers - 1)
        });
    }
    let within = |k: usize| match kinds[k] {
        Slot::Numbers(i) | Slot::Cond(i) => i,
    };
    let slots: Vec<Slots> = raw
        .into_iter()
        .map(|(rank, filter, weight, longest)| Slots {
            rank: within(rank),
            filter: filter.map(within),
            weight: weight.map(within),
            longest,
        })
        .collect();
    let rows = decision_rows(combos);
    let mut at = vec![NO_BAR; universe.rows];
    for (u, &t) in rows.iter().enumerate() {
        at[t] = u as u32;
    }
    let nodes: Vec<u32> = sources
        .iter()
        .filter_map(|(s, _)| match s {
            Source::Node(id) => Some(*id),
            _ => None,
        })
        .collect();
    let u_n = rows.len();
    // One series' column of every slot: `numbers` slots' values then `conds`', each at
    // every decision row.
    let column = |s: usize| -> Result<(Vec<f64>, Vec<u8>, Windows)> {
        let on = &universe.series[s];
        let cache = (call.cache)(s);
        let (arrays, have) =
            node_arrays(&call.bars[s], call.program, &plan, &nodes, false, &*cache)?;
        let mut of_node = arrays.into_iter();
        let mut nums = vec![f64::NAN; numbers * u_n];
        let mut flags = vec![0u8; conds * u_n];
        for (k, (source, _)) in sources.iter().enumerate() {
            let array = match source {
                Source::Node(_) => of_node.next(),
                _ => None,
            };
            for (u, &t) in rows.iter().enumerate() {
                let Some(i) = on.at(t) else { continue };
                match (kinds[k], source, &array) {
                    (Slot::Numbers(j), Source::Const(c), _) => nums[j * u_n + u] = *c,
                    (Slot::Numbers(j), _, Some(NodeArray::Numbers(a))) => nums[j * u_n + u] = a[i],
                    (Slot::Cond(j), Source::Bool(b), _) => flags[j * u_n + u] = u8::from(*b),
                    (Slot::Cond(j), _, Some(NodeArray::Cond(a))) => flags[j * u_n + u] = a[i],
                    _ => unreachable!("the binder checked each formula's kind"),
                }
            }
        }
        Ok((nums, flags, have))
    };
    let mut panel = Panel {
        at,
        series: n,
        numbers: vec![vec![f64::NAN; u_n * n]; numbers],
        conds: vec![vec![0u8; u_n * n]; conds],
        lengths: vec![Windows::default(); n],
    };
    // Series in batches: a batch's columns are written into the row-major panel, then
    // dropped, so the transposition holds one batch besides the panel.
    let batch = if parallel { 64 } else { 1 };
    for first in (0..n).step_by(batch) {
        if (call.cancelled)() {
            return Err(Error::Cancelled);
        }
        let last = (first + batch).min(n);
        let columns: Vec<(Vec<f64>, Vec<u8>, Windows)> = if parallel {
            (first..last)
                .into_par_iter()
                .map(column)
                .collect::<Result<_>>()?
        } else {
            (first..last).map(column).collect::<Result<_>>()?
        };
        for (s, (nums, flags, have)) in (first..last).zip(columns) {
            panel.lengths[s] = have;
            for (j, out) in panel.numbers.iter_mut().enumerate() {
                for u in 0..u_n {
                    out[u * n + s] = nums[j * u_n + u];
                }
            }
            for (j, out) in panel.conds.iter_mut().enumerate() {
                for u in 0..u_n {
                    out[u * n + s] = flags[j * u_n + u];
                }
            }
        }
    }
    Ok((panel, slots))
}

/// The selection lists combos share (those of one `rank`, `filter`, `weight` and longest
/// window): at each of their decision rows, the first eligible series by descending rank and
/// by ascending rank, sorted (ties by series order), as deep as the deepest of them needs
/// (`max(keep, longs)`; `max(keep, shorts) + longs` on the short side, whose list leaves the
/// long set out). Each combo then only picks from them.
#[derive(Debug, Default)]
struct Lists {
    /// Calendar row -> its position among the lists' rows ([`NO_BAR`] where none).
    at: Vec<u32>,
    desc: Vec<(usize, f64)>,
    desc_at: Vec<u32>,
    asc: Vec<(usize, f64)>,
    asc_at: Vec<u32>,
}

/// Series with their ranks, in a list's order.
type Ranked = Vec<(usize, f64)>;

/// The series eligible at panel row `row` for `slots` (a bar, a finite rank, the filter, a
/// weight > 0, the window fits), with their ranks, in series order.
fn eligible(panel: &Panel, slots: &Slots, row: usize, out: &mut Vec<(usize, f64)>) {
    out.clear();
    let base = row * panel.series;
    let ranks = &panel.numbers[slots.rank];
    for s in 0..panel.series {
        let r = ranks[base + s];
        if !r.is_finite() || !slots.longest.fit(&panel.lengths[s]) {
            continue;
        }
        if let Some(f) = slots.filter
            && panel.conds[f][base + s] == 0
        {
            continue;
        }
        if let Some(w) = slots.weight {
            let w = panel.numbers[w][base + s];
            if !(w.is_finite() && w > 0.0) {
                continue;
            }
        }
        out.push((s, r));
    }
}

/// The lists of the combos `members` of one key, at the union of their decision rows.
fn lists(
    panel: &Panel,
    slots: &Slots,
    members: &[&PortfolioCombo<'_>],
    calendar: usize,
    parallel: bool,
) -> Lists {
    let rows = decision_rows_of(members.iter().copied());
    let depth_desc = members
        .iter()
        .filter(|c| c.rules.longs > 0)
        .map(|c| c.rules.keep.unwrap_or(0).max(c.rules.longs))
        .max()
        .unwrap_or(0);
    let depth_asc = members
        .iter()
        .filter(|c| c.rules.shorts > 0)
        .map(|c| c.rules.keep.unwrap_or(0).max(c.rules.shorts) + c.rules.longs)
        .max()
        .unwrap_or(0);
    let one = |&t: &usize| {
        let mut all = Vec::new();
        eligible(panel, slots, panel.at[t] as usize, &mut all);
        let mut desc = all.clone();
        let d = best(&mut desc, depth_desc, descending);
        desc.truncate(d);
        let a = best(&mut all, depth_asc, ascending);
        all.truncate(a);
        (desc, all)
    };
    let per_row: Vec<(Ranked, Ranked)> = if parallel {
        rows.par_iter().map(one).collect()
    } else {
        rows.iter().map(one).collect()
    };
    let mut out = Lists {
        at: vec![NO_BAR; calendar],
        desc_at: vec![0],
        asc_at: vec![0],
        ..Lists::default()
    };
    for (k, (&t, (desc, asc))) in rows.iter().zip(per_row).enumerate() {
        out.at[t] = k as u32;
        out.desc.extend(desc);
        out.asc.extend(asc);
        out.desc_at.push(out.desc.len() as u32);
        out.asc_at.push(out.asc.len() as u32);
    }
    out
}

/// The order of the descending list: larger rank first, ties by series order.
#[inline]
fn descending(a: &(usize, f64), b: &(usize, f64)) -> Ordering {
    b.1.partial_cmp(&a.1)
        .unwrap_or(Ordering::Equal)
        .then(a.0.cmp(&b.0))
}

/// The order of the ascending list: smaller rank first, ties by series order.
#[inline]
fn ascending(a: &(usize, f64), b: &(usize, f64)) -> Ordering {
    a.1.partial_cmp(&b.1)
        .unwrap_or(Ordering::Equal)
        .then(a.0.cmp(&b.0))
}

/// The first `depth` of `list` in `order`, sorted (a selection, then a sort of the few).
fn best(
    list: &mut [(usize, f64)],
    depth: usize,
    order: fn(&(usize, f64), &(usize, f64)) -> Ordering,
) -> usize {
    let depth = depth.min(list.len());
    if depth == 0 {
        return 0;
    }
    if depth < list.len() {
        list.select_nth_unstable_by(depth - 1, order);
    }
    list[..depth].sort_unstable_by(order);
    depth
}

/// One side's set: members of `previous` within the first `within` of `list` (`list` holds at
/// least those, sorted), then `list` in order until `count`.
fn pick(
    list: &[(usize, f64)],
    within: usize,
    previous: &[usize],
    count: usize,
    out: &mut Vec<usize>,
) {
    out.clear();
    if count == 0 {
        return;
    }
    let head = &list[..within.min(list.len())];
    for &s in previous {
        if head.iter().any(|&(x, _)| x == s) {
            out.push(s);
        }
    }
    for &(s, _) in list {
        if out.len() >= count {
            break;
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
}

/// One combo's run (the plain run's arithmetic, touching only what it holds or targets).
fn run_combo(
    call: &PortfolioSweep<'_>,
    panel: &Panel,
    (slots, lists): (&Slots, &Lists),
    combo: &PortfolioCombo<'_>,
    last_bars: &[usize],
) -> PortfolioRun {
    let universe = call.universe;
    let n = universe.series.len();
    let rules = &combo.rules;
    let (start, end) = call.range;
    let phi = rules.fee / 2.0;
    let u = rules.slippage;
    let lag = usize::from(rules.fill == PortfolioFill::NextOpen);
    let g = if rules.longs > 0 && rules.shorts > 0 {
        0.5
    } else {
        1.0
    };
    let mut book = Book {
        cash: 1.0,
        shares: vec![0.0; n],
        last: vec![f64::NAN; n],
        held: Vec::new(),
        fees: 0.0,
        trades: Vec::new(),
        keep: call.keep,
    };
    let mut list: Vec<(usize, f64)> = Vec::with_capacity(n);
    let (mut prev_long, mut prev_short): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let (mut long, mut short): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let mut pending: Option<(usize, Vec<(usize, f64)>)> = None;
    let mut next_decision = 0;
    let (mut turnover, mut rebalances) = (0.0, 0u64);
    let mut equity: Vec<f64> = Vec::with_capacity(end.saturating_sub(start));
    let mut rows: Vec<BookRow> = Vec::new();
    let mut held_sum = 0.0;
    let decisions = combo.decisions;
    let mut fill_here = |book: &mut Book, f: usize, w: &[(usize, f64)]| {
        fill(
            universe,
            book,
            w,
            f,
            rules,
            (phi, u),
            last_bars,
            (&mut turnover, &mut rebalances),
        );
    };
    for t in start..end {
        if let Some((f, w)) = pending.take_if(|(f, _)| *f == t) {
            fill_here(&mut book, f, &w);
        }
        if next_decision < decisions.len() && decisions[next_decision] == t {
            next_decision += 1;
            let row = panel.at[t] as usize;
            let base = row * panel.series;
            // The shared lists of this decision row: the best by descending rank, the best by
            // ascending rank, each as deep as any combo of the lists needs.
            let k = lists.at[t] as usize;
            let desc = &lists.desc[lists.desc_at[k] as usize..lists.desc_at[k + 1] as usize];
            let asc = &lists.asc[lists.asc_at[k] as usize..lists.asc_at[k + 1] as usize];
            let within_long = rules.keep.unwrap_or(rules.longs).max(rules.longs);
            if rules.longs > 0 {
                pick(desc, within_long, &prev_long, rules.longs, &mut long);
            } else {
                long.clear();
            }
            if rules.shorts > 0 {
                let within_short = rules.keep.unwrap_or(rules.shorts).max(rules.shorts);
                list.clear();
                list.extend(asc.iter().filter(|(s, _)| !long.contains(s)));
                pick(&list, within_short, &prev_short, rules.shorts, &mut short);
            } else {
                short.clear();
            }
            // Target weights: each set's sum in series order, from 0.0.
            let weight_of = |s: usize| slots.weight.map_or(1.0, |w| panel.numbers[w][base + s]);
            let mut targets: Vec<(usize, f64)> = Vec::with_capacity(long.len() + short.len());
            for (set, sign) in [(&long, false), (&short, true)] {
                let mut members = set.clone();
                members.sort_unstable();
                let mut total = 0.0;
                for &s in &members {
                    total += weight_of(s);
                }
                for &s in &members {
                    let w = (g * weight_of(s)) / total;
                    targets.push((s, if sign { -w } else { w }));
                }
            }
            targets.sort_unstable_by_key(|&(s, _)| s);
            std::mem::swap(&mut prev_long, &mut long);
            std::mem::swap(&mut prev_short, &mut short);
            if t + lag < end {
                if lag == 0 {
                    fill_here(&mut book, t, &targets);
                } else {
                    pending = Some((t + lag, targets));
                }
            }
        }
        // Each holding's last close (a gap keeps the one before), then the marks.
        let mut e = book.cash;
        for &s in &book.held {
            let on = &universe.series[s];
            if let Some(i) = on.at(t) {
                book.last[s] = on.close[i];
            }
            e += book.shares[s] * book.last[s];
        }
        held_sum += book.held.len() as f64;
        equity.push(e);
        if call.keep.rows {
            rows.push(BookRow {
                equity: e,
                cash: book.cash,
                holdings: book.held.len(),
            });
        }
    }
    let metrics = metrics(
        &equity,
        call.periods_per_year,
        call.blocks,
        (turnover, book.fees, rebalances),
        held_sum / equity.len() as f64,
    );
    PortfolioRun {
        metrics,
        trades: book.trades,
        rows,
    }
}

/// A combo's book: cash, shares, the series held (ascending) and each one's last close, fees,
/// trades.
struct Book {
    cash: f64,
    shares: Vec<f64>,
    /// A held series' close at its last bar so far (kept up to date for held series only).
    last: Vec<f64>,
    held: Vec<usize>,
    fees: f64,
    trades: Vec<PortfolioTrade>,
    keep: Keep,
}

impl Book {
    fn record(&mut self, trade: PortfolioTrade) {
        self.fees += trade.fee;
        if self.keep.trades {
            self.trades.push(trade);
        }
    }

    /// A trade of `d` shares at `p` in full; returns `abs(d) * p`.
    fn trade(&mut self, row: usize, s: usize, d: f64, p: f64, (phi, u): (f64, f64)) -> f64 {
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
        self.record(PortfolioTrade {
            row,
            series: s,
            shares: d,
            price: p,
            value: d * q,
            fee,
        });
        d.abs() * p
    }
}

/// The fill at row `f` of the sparse targets `w` (ascending series): the plain run's three
/// steps over the series held or targeted only (any other series' trade is 0 shares).
#[expect(
    clippy::too_many_arguments,
    reason = "one fill's inputs, each the contract's"
)]
fn fill(
    universe: &Universe<'_>,
    book: &mut Book,
    w: &[(usize, f64)],
    f: usize,
    rules: &Rules,
    (phi, u): (f64, f64),
    last_bars: &[usize],
    (turnover, rebalances): (&mut f64, &mut u64),
) {
    let mut traded = 0.0;
    // 1. Held series with no bar in [f, end): closed at their last close.
    let held = std::mem::take(&mut book.held);
    for &s in &held {
        let last = last_bars[s];
        if last == NO_BAR as usize || last < f {
            let d = -book.shares[s];
            traded += book.trade(f, s, d, book.last[s], (phi, u));
            book.shares[s] = 0.0;
        }
    }
    let price = |s: usize| universe.price(f, s, rules.fill);
    // 2. Marks.
    let mut ep = book.cash;
    let mut untradable = 0.0;
    for &s in &held {
        let sh = book.shares[s];
        if sh != 0.0 {
            match price(s) {
                Some(p) => ep += sh * p,
                None => {
                    let m = book.last[s];
                    ep += sh * m;
                    untradable += sh * m;
                }
            }
        }
    }
    let et = ep - untradable;
    if et > 0.0 {
        // 3. The orders of the series held or targeted, with a bar at f.
        let mut orders: Vec<(f64, usize, f64, f64, f64)> = Vec::with_capacity(held.len() + w.len());
        let (mut i, mut j) = (0, 0);
        while i < held.len() || j < w.len() {
            let (s, ws) = match (held.get(i), w.get(j)) {
                (Some(&h), Some(&(t, ws))) if h == t => {
                    i += 1;
                    j += 1;
                    (h, ws)
                }
                (Some(&h), Some(&(t, _))) if h < t => {
                    i += 1;
                    (h, 0.0)
                }
                (Some(&h), None) => {
                    i += 1;
                    (h, 0.0)
                }
                (_, Some(&(t, ws))) => {
                    j += 1;
                    (t, ws)
                }
                (None, None) => unreachable!("the loop's condition"),
            };
            let Some(p) = price(s) else { continue };
            let sh = book.shares[s];
            let target = (ws * et) / p;
            let d = target - sh;
            let k = (ws * et) - (sh * p);
            orders.push((k, s, d, target, p));
        }
        orders.sort_by(|a, b| a.0.partial_cmp(&b.0).expect("finite").then(a.1.cmp(&b.1)));
        for (_, s, d, target, p) in orders {
            if d == 0.0 {
                continue;
            }
            if d < 0.0 {
                traded += book.trade(f, s, d, p, (phi, u));
                book.shares[s] = target;
                continue;
            }
            let q = p * (1.0 + u);
            if (d * q) * (1.0 + phi) > book.cash {
                if book.cash > 0.0 {
                    let part = book.cash / (q * (1.0 + phi));
                    let v = part.abs() * q;
                    let fee = (book.cash - v).max(0.0);
                    book.cash = 0.0;
                    book.record(PortfolioTrade {
                        row: f,
                        series: s,
                        shares: part,
                        price: p,
                        value: part * q,
                        fee,
                    });
                    traded += part.abs() * p;
                    book.shares[s] += part;
                }
            } else {
                traded += book.trade(f, s, d, p, (phi, u));
                book.shares[s] = target;
            }
        }
        *turnover += traded / et;
        *rebalances += 1;
    }
    // The held set: every series with shares, ascending.
    let mut now: Vec<usize> = held;
    now.extend(w.iter().map(|&(s, _)| s));
    now.sort_unstable();
    now.dedup();
    now.retain(|&s| book.shares[s] != 0.0);
    book.held = now;
}
