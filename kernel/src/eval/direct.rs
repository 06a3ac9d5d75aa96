//! Combos a tuned path runs whole, recognised by the shape of their signal (never by a
//! strategy's name). A combo whose `long` and `short` are the two ways of one crossing, or the
//! two sides of one channel breakout, with no exit and no stop formula, needs nothing of the
//! per-combo phase but that signal, and a tuned path makes the signal and runs the execution
//! loop on it in one pass, with no per-combo array of the whole series:
//! - **the HMA3 line of the closes crossing above / below the HMA line**: the paper kernel's
//!   sweep ([`crate::sweep`]), whose tiles compute the lines, their state bytes and the trades
//!   a tile at a time (the cache asked for its lines and bytes, under the keys the formula
//!   path's served crossings use);
//! - **a column without NaN breaking above the highest / below the lowest of the `n` values
//!   before it**: the channels' pass gives one signal byte a bar for each `n`, which the
//!   execution loop reads as it is;
//! - **one SMA line of the closes crossing above / below another, one of them long enough for
//!   a certified line** (docs/architecture.md, "Certified lines"): the pair's state bytes from
//!   the fast values, settled exactly where the bounds leave them open.
//!
//! The same shapes with anything more (a filter, an exit, a stop formula, the other
//! orientation) run on the formula path, which serves the crossings and breakouts inside any
//! formula ([`super::Shape`]); the tests hold both paths equal bit for bit. The built-ins are
//! formula rows like any other strategy: three of them have these shapes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rayon::prelude::*;

use super::{Facts, Shape, column, crossing_operands, tuned_line};
use crate::certified::{self, Bounded, Certified, Side};
use crate::execution::{Execution, run_signals};
use crate::expr::registry::Crossing;
use crate::expr::{Column, Field, Program};
use crate::keys::ArrayCache;
use crate::ledger::Books;
use crate::lines::indicators::{donchian_channels, sma_multi};
use crate::lines::{Bars, Line};
use crate::plan::{Cond, Def, Plan, Windows, line_array_key};
use crate::sweep::SweepControl;
use crate::{Combo, ComboResult, Error, Result, signal};

/// A combo's whole signal, as a tuned path makes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Direct {
    /// The HMA3 line crossing above (long) and below (short) the HMA line: the paper kernel's
    /// combo.
    Paper(Combo),
    /// Column `column` above the highest (long) and below the lowest (short) of its `n` values
    /// before each bar.
    Channel { column: Column, n: u32 },
    /// `SMA(close, b)` crossing above (long) and below (short) `SMA(close, a)`.
    Smas { a: u32, b: u32 },
}

/// An array the direct combos of a call share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Sma(u32),
    Channel(Column, u32),
}

enum Array {
    /// An exact line, shared with the cache.
    Line(Arc<[f64]>),
    /// A certified line and its bounds: never offered to the cache.
    Certified(Certified),
    Signals(Vec<i8>),
}

impl Direct {
    fn keys(self) -> [Option<Key>; 2] {
        match self {
            Self::Paper(_) => [None, None],
            Self::Channel { column, n } => [Some(Key::Channel(column, n)), None],
            Self::Smas { a, b } => [Some(Key::Sma(a)), Some(Key::Sma(b))],
        }
    }
}

/// Finds the combos of one program that have a direct shape.
pub(super) struct Recogniser<'a> {
    bars: &'a Bars<'a>,
    program: &'a Program,
    /// Every combo is bound here once (nodes interned: it grows by distinct nodes).
    plan: Plan,
    facts: Facts,
}

impl<'a> Recogniser<'a> {
    /// `None` where no combo of `program` can have a direct shape: formulas other than
    /// `long`, `short` and a constraint, or a `long` or `short` missing.
    pub(super) fn of(bars: &'a Bars<'a>, program: &'a Program, certify: bool) -> Option<Self> {
        let fields_fit = program
            .formulas
            .iter()
            .all(|b| matches!(b.field, Field::Long | Field::Short | Field::Constraint));
        if !fields_fit || program.formula(Field::Long).is_none() {
            return None;
        }
        program.formula(Field::Short)?;
        Some(Self {
            bars,
            program,
            plan: Plan::new(),
            facts: Facts::new(certify),
        })
    }

    /// The direct shape of the combo with `values`, and the windows it needs.
    pub(super) fn direct(&mut self, values: &[f64]) -> Option<(Direct, Windows)> {
        let combo = self.plan.bind(self.program, values);
        let [
            Cond::Node(long),
            Cond::Node(short),
            Cond::Always(false),
            Cond::Always(false),
        ] = combo.conditions
        else {
            return None;
        };
        if combo.stops.iter().any(Option::is_some) {
            return None;
        }
        let (defs, frames) = (self.plan.defs(), self.plan.frames());
        if frames[long as usize].is_some() || frames[short as usize].is_some() {
            return None;
        }
        let bars = self.bars;
        let facts = &mut self.facts;
        let mut shape = |id: u32| Shape::of(bars, (defs, frames), &defs[id as usize], facts);
        if let (
            Some(Shape::Breakout { x, n, above: true }),
            Some(Shape::Breakout {
                x: x2,
                n: n2,
                above: false,
            }),
        ) = (shape(long), shape(short))
            && (x, n) == (x2, n2)
            && let Def::Column(column) = defs[x as usize]
        {
            let n = u32::try_from(n).ok()?;
            return Some((Direct::Channel { column, n }, combo.windows));
        }
        let (a, b) = normal(defs, long, true)?;
        if normal(defs, short, false)? != (a, b) || frames[a as usize].is_some() {
            return None;
        }
        let line = |n: u32| tuned_line(defs, &defs[n as usize]);
        let direct = match (line(a)?, line(b)?) {
            (Line::Hma([h, f, s]), Line::Hma3([p3, p2, p])) => {
                Direct::Paper(Combo::new([h, f, s, p3, p2, p]).ok()?)
            }
            (Line::Sma(a), Line::Sma(b))
                if self.facts.certify
                    && [a, b]
                        .iter()
                        .any(|&n| certified::pays(n as usize, bars.len())) =>
            {
                Direct::Smas { a, b }
            }
            _ => return None,
        };
        Some((direct, combo.windows))
    }
}

/// Crossing node `id` as a pair `(a, b)` where it is `b` crossing above `a` (`long`) or below
/// `a` (not `long`): `x` crossing below `y` is `y` crossing above `x`, exactly (the language's
/// crossings compare the same two values at the same two bars).
fn normal(defs: &[Def], id: u32, long: bool) -> Option<(u32, u32)> {
    let (way, p, q) = crossing_operands(&defs[id as usize])?;
    // `p` crosses `way` `q`: it is `b` when that is the way asked.
    let p_is_b = (way == Crossing::Above) == long;
    Some(if p_is_b { (q, p) } else { (p, q) })
}

/// Runs the direct `combos` (each one's position in the call, its shape and windows) into
/// `results`: the paper kernel's combos as one sweep of it, the others a group of shared
/// arrays at a time within the working set.
///
/// # Errors
/// [`Error::Cancelled`] once `control.cancelled` answers true.
pub(super) fn sweep(
    combos: &[(usize, Direct, Windows)],
    (exec, have, books, (parallel, certify)): (&Execution, &Windows, Books<'_>, (bool, bool)),
    control: &SweepControl<'_>,
    results: &mut [ComboResult],
) -> Result<()> {
    let bars = &books.bars;
    let len = bars.len();
    let check = || {
        if (control.cancelled)() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    };
    // A combo with a window longer than the series gives no signal (expressions.md).
    let (idle, combos): (Vec<_>, Vec<_>) = combos.iter().partition(|c| !c.2.fit(have));
    for &&(i, ..) in &idle {
        results[i] = books.ledger(exec, i).done();
    }
    control.report(idle.len(), len);
    let (paper, mut order): (Vec<_>, Vec<_>) = combos
        .into_iter()
        .map(|&(i, d, _)| (i, d))
        .partition(|(_, d)| matches!(d, Direct::Paper(_)));
    if !paper.is_empty() {
        let windows: Vec<Combo> = paper
            .iter()
            .map(|(_, d)| match d {
                Direct::Paper(c) => *c,
                _ => unreachable!("partitioned"),
            })
            .collect();
        let at: Vec<usize> = paper.iter().map(|&(i, _)| i).collect();
        control.part(&at, results, |sub| {
            crate::sweep::sweep_executed_on(bars, &windows, exec, sub)
        })?;
    }
    order.sort_by_key(|&(_, d)| d.keys());
    let max_arrays = (control.working_set_bytes / (len.max(1) * 8)).max(2);
    let mut rest = &order[..];
    while !rest.is_empty() {
        // The longest prefix whose distinct arrays fit (never empty).
        let mut held: BTreeSet<Key> = BTreeSet::new();
        let mut taken = 0;
        for &(_, d) in rest {
            let new: Vec<Key> = d
                .keys()
                .into_iter()
                .flatten()
                .filter(|k| !held.contains(k))
                .collect();
            if taken > 0 && held.len() + new.len() > max_arrays {
                break;
            }
            held.extend(new);
            taken += 1;
        }
        let (group, tail) = rest.split_at(taken);
        rest = tail;
        check()?;
        let arrays = compute(bars, &held, (parallel, certify), control.cache);
        let run =
            |states: &mut Vec<u8>, &(i, d): &(usize, Direct)| -> Result<(usize, ComboResult)> {
                check()?;
                let r = run_one((books, i), d, &arrays, exec, states, control);
                control.report(1, len);
                Ok((i, r))
            };
        for (i, r) in crate::par::map(parallel, group, run)? {
            results[i] = r;
        }
    }
    Ok(())
}

/// Every array of `keys` over `bars`: the exact SMA lines `cache` holds, the rest computed (the
/// SMA windows in one shared pass, the long ones certified where that pays, the channels of
/// each column in one pass) and the exact lines offered to it.
fn compute(
    bars: &Bars<'_>,
    keys: &BTreeSet<Key>,
    (parallel, certify): (bool, bool),
    cache: &dyn ArrayCache,
) -> BTreeMap<Key, Array> {
    let close = bars.close;
    let smas: Vec<usize> = keys
        .iter()
        .filter_map(|k| match k {
            Key::Sma(n) => Some(*n as usize),
            Key::Channel(..) => None,
        })
        .collect();
    // The long windows worth certifying, against the shared pass's cost for all of them.
    let from = certify
        .then(|| certified::certified_from(smas.iter().copied(), close.len()))
        .flatten();
    let long = |n: usize| from.is_some_and(|f| n >= f) && certified::pays(n, close.len());
    let mut out: BTreeMap<Key, Array> = BTreeMap::new();
    let mut exact: Vec<usize> = Vec::new();
    for &n in &smas {
        let key = line_array_key(Line::Sma(n as u32));
        match cache
            .may_hold()
            .then(|| cache.get(key))
            .flatten()
            .filter(|l| l.len() == close.len())
        {
            Some(line) if !long(n) => {
                out.insert(Key::Sma(n as u32), Array::Line(line));
            }
            _ if !long(n) => exact.push(n),
            _ => {}
        }
    }
    for (&n, line) in exact.iter().zip(sma_multi(close, &exact, parallel)) {
        if cache.keeps() {
            cache.insert(line_array_key(Line::Sma(n as u32)), Arc::clone(&line));
        }
        out.insert(Key::Sma(n as u32), Array::Line(line));
    }
    let certified: Vec<usize> = smas.iter().copied().filter(|&n| long(n)).collect();
    let lines = |&n: &usize| {
        (
            Key::Sma(n as u32),
            Array::Certified(certified::sma(close, n)),
        )
    };
    if parallel {
        out.extend(certified.par_iter().map(lines).collect::<Vec<_>>());
    } else {
        out.extend(certified.iter().map(lines));
    }
    // Channels: each column's windows in one pass.
    let mut channels: BTreeMap<Column, Vec<usize>> = BTreeMap::new();
    for k in keys {
        if let Key::Channel(c, n) = *k {
            channels.entry(c).or_default().push(n as usize);
        }
    }
    for (c, windows) in channels {
        let x = column(bars, c).expect("a checked column");
        for (&n, s) in windows.iter().zip(donchian_channels(x, &windows, parallel)) {
            out.insert(Key::Channel(c, n as u32), Array::Signals(s));
        }
    }
    out
}

/// The SMA line of window `n` as a side of a comparison.
fn side(arrays: &BTreeMap<Key, Array>, n: u32) -> Side<'_> {
    let line = match &arrays[&Key::Sma(n)] {
        Array::Line(l) => Bounded::exact(l),
        Array::Certified(c) => c.view(),
        Array::Signals(_) => unreachable!("an SMA is a line"),
    };
    Side {
        line,
        key: Line::Sma(n),
    }
}

/// The state bytes of each SMA pair `(a, b)` of `pairs` over the closes of `bars` (as
/// [`signal::states`] makes them from lines `a` and `b`): each line once, certified where
/// that pays, the comparisons the bounds leave open settled exactly.
pub(super) fn pair_states(
    bars: &Bars<'_>,
    pairs: &[(u32, u32)],
    parallel: bool,
    control: &SweepControl<'_>,
) -> Vec<Arc<[u8]>> {
    if pairs.is_empty() {
        return Vec::new();
    }
    let keys: BTreeSet<Key> = pairs
        .iter()
        .flat_map(|&(a, b)| [Key::Sma(a), Key::Sma(b)])
        .collect();
    // Only crossings the closes certify are served this way.
    let arrays = compute(bars, &keys, (parallel, true), control.cache);
    let one = |&(a, b): &(u32, u32)| -> Arc<[u8]> {
        let mut states = Vec::new();
        let sides = (side(&arrays, a), side(&arrays, b));
        signal::states(bars.close, sides, &mut states, control.certified);
        states.into()
    };
    if parallel {
        pairs.par_iter().map(one).collect()
    } else {
        pairs.iter().map(one).collect()
    }
}

/// Combo `combo` (`d`) from its arrays; `states` is scratch.
fn run_one(
    (books, combo): (Books<'_>, usize),
    d: Direct,
    arrays: &BTreeMap<Key, Array>,
    exec: &Execution,
    states: &mut Vec<u8>,
    control: &SweepControl<'_>,
) -> ComboResult {
    match d {
        Direct::Smas { a, b } => signal::run_fast(
            books,
            combo,
            (side(arrays, a), side(arrays, b)),
            exec,
            states,
            control.certified,
        ),
        Direct::Channel { column, n } => match &arrays[&Key::Channel(column, n)] {
            Array::Signals(s) => {
                run_signals(&books.bars, books.stops, s, exec, books.ledger(exec, combo)).done()
            }
            Array::Line(_) | Array::Certified(_) => unreachable!("a channel's array is signals"),
        },
        Direct::Paper(_) => unreachable!("the paper kernel runs these"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct shape of one combo of the program `long` / `short` (with `more` formulas).
    fn shape(texts: &[(Field, &str)], values: &[f64], close: &[f64]) -> Option<Direct> {
        let program = Program::new(texts).unwrap();
        let bars = Bars::closes(close);
        Recogniser::of(&bars, &program, certified::certifiable(close))?
            .direct(values)
            .map(|(d, _)| d)
    }

    #[test]
    fn shapes_are_recognised_by_their_form_and_orientation() {
        let close: Vec<f64> = (0..2000)
            .map(|i| 100.0 + (f64::from(i) * 0.1).sin())
            .collect();
        let (hma, hma3) = ("hma(close, 2, 4, 2)", "hma3(close, 1, 2, 3)");
        let paper = Direct::Paper(Combo::new([2, 4, 2, 1, 2, 3]).unwrap());
        let form = |long: String, short: String| {
            shape(&[(Field::Long, &long), (Field::Short, &short)], &[], &close)
        };
        // The paper's orientation, written either way round.
        assert_eq!(
            form(
                format!("cross_below({hma}, {hma3})"),
                format!("cross_above({hma}, {hma3})")
            ),
            Some(paper)
        );
        assert_eq!(
            form(
                format!("cross_above({hma3}, {hma})"),
                format!("cross_below({hma3}, {hma})")
            ),
            Some(paper)
        );
        assert_eq!(
            form(
                format!("cross_above({hma3}, {hma})"),
                format!("cross_above({hma}, {hma3})")
            ),
            Some(paper)
        );
        // The other orientation, two longs, a filter: not the paper kernel's.
        assert_eq!(
            form(
                format!("cross_above({hma}, {hma3})"),
                format!("cross_below({hma}, {hma3})")
            ),
            None
        );
        assert_eq!(
            form(
                format!("cross_below({hma}, {hma3})"),
                format!("cross_below({hma}, {hma3})")
            ),
            None
        );
        assert_eq!(
            form(
                format!("cross_below({hma}, {hma3}) and close > 0"),
                format!("cross_above({hma}, {hma3})")
            ),
            None
        );
        // Channels: both sides of one window, either side of the comparison.
        let up = "close > lag(highest(close, 7), 1)";
        let down = "lag(lowest(close, 7), 1) > close";
        assert_eq!(
            form(up.into(), down.into()),
            Some(Direct::Channel {
                column: Column::Close,
                n: 7
            })
        );
        assert_eq!(form(down.into(), up.into()), None);
        assert_eq!(
            form(up.into(), "close < lag(lowest(close, 8), 1)".into()),
            None
        );
        assert_eq!(
            form(up.into(), "close < lag(lowest(close, 7), 2)".into()),
            None
        );
        // SMA pairs: only where one line is long enough to certify.
        let smas = |f: u32, s: u32| {
            form(
                format!("cross_above(sma(close, {f}), sma(close, {s}))"),
                format!("cross_below(sma(close, {f}), sma(close, {s}))"),
            )
        };
        assert_eq!(smas(20, 300), Some(Direct::Smas { a: 300, b: 20 }));
        assert_eq!(smas(20, 30), None);
        // An exit or a stop formula: not a whole signal.
        let texts = [
            (Field::Long, up),
            (Field::Short, down),
            (Field::ExitLong, "close < 0"),
        ];
        assert_eq!(shape(&texts, &[], &close), None);
        let texts = [
            (Field::Long, up),
            (Field::Short, down),
            (Field::StopLoss, "0.01"),
        ];
        assert_eq!(shape(&texts, &[], &close), None);
    }
}
