//! Evaluation of a formula strategy over one series: the sweep entry of protocol v1.3's own
//! strategies ([`sweep_program`]) and its oracle ([`oracle`]).
//!
//! Combos are bound into a [`Plan`] a group at a time (a group closes once the arrays it must
//! hold pass the working set), then in two phases on the pool:
//! 1. **Shared arrays.** Every function call's series and every input of a call is computed
//!    once for the group, level by level (a level's nodes in parallel), by the registry's fast
//!    computation. These are the arrays two combos or two formulas share.
//! 2. **Combos.** Each combo evaluates what is its own (arithmetic and comparisons of the shared
//!    arrays with its constants, `and`/`or`/`not`, crosses) in blocks of bars that stay in
//!    cache, its conditions as bits (`bits.rs`: a comparison's vector masks, sixty-four bars a
//!    word; `and`/`or`/`not` a word at a time), and hands each block's four condition words
//!    straight to the execution loop, which finds the next bar that can change its position
//!    by a count of trailing zeros. A
//!    worker's combos take each block in turn (blocks outer, combos inner), so the block of
//!    the shared arrays they read is read from cache rather than once per combo from memory.
//!    A combo whose own nodes are only crossings of whole arrays and `and`/`or`/`not` takes
//!    the word path (`words.rs`): its bits from the lines' state bytes, no number pass. No
//!    per-combo array of the whole series is ever written.
//!
//! The results do not depend on grouping, block size or thread count.
//!
//! Higher timeframes (protocol v1.4): a series' period bars are gathered once per call for
//! each timeframe its formulas call ([`Frames`]); the nodes of a timeframe are phase-1 arrays
//! computed on those period bars by the same code as any other, and the call itself
//! (`weekly(x)`) is a phase-1 array on the bars, each bar reading the previous period's value.

mod bits;
mod direct;
pub mod oracle;
mod words;

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use self::bits::Word;

use crate::execution::{Book, EXITS_MIN_COMBOS, Engine, Execution, Exits, Fraction, table_bytes};
use crate::expr::registry::{Breakout, Compute, Crossing, function};
use crate::expr::{BinOp, CmpOp, Column, Program};
use crate::keys::{ArrayCache, ArrayKey};
use crate::ledger::{Books, Moves};
use crate::lines::multi::Hull;
use crate::lines::vector::multiversion;
use crate::lines::{Bars, Input, Line};
use crate::plan::{CallArg, ComboPlan, Cond, Def, Operand, Plan, Windows};
use crate::sweep::{PARALLEL_MIN_WORK, SweepControl};
use crate::timeframe::{PeriodBars, Timeframe, seen_from_next};
use crate::{Combo, ComboResult, Error, Result};

/// Bars per block of the per-combo phase: a few blocks of f64 and bytes stay in L1/L2.
const BLOCK: usize = 1024;
/// The first-level WMA lines one shared pass of Hull-type lines holds at once, in bytes, at
/// most (a sweep's working set, when smaller, caps it instead).
const HULL_BYTES: usize = 256 << 20;
/// A group holds at most this many distinct nodes (the plan's own memory stays flat).
const MAX_GROUP_DEFS: usize = 1 << 20;

/// The columns of `bars` by name, checking the formulas' columns are there.
///
/// # Errors
/// [`Error::Strategy`] naming a column the formulas read and the bars lack.
pub fn check_columns(program: &Program, bars: &Bars<'_>) -> Result<()> {
    for c in program.columns() {
        if column(bars, c).is_none() {
            return Err(Error::Strategy(format!(
                "the strategy reads `{}`, which this dataset does not have",
                c.name()
            )));
        }
    }
    if bars.inputs.len() < program.inputs.len() {
        return Err(Error::Strategy(format!(
            "the strategy reads {} inputs ({}); the bars hold {}",
            program.inputs.len(),
            program.inputs.join(", "),
            bars.inputs.len()
        )));
    }
    Ok(())
}

/// Column `c` of `bars`, if they have it.
pub(crate) fn column<'a>(bars: &Bars<'a>, c: Column) -> Option<&'a [f64]> {
    match c {
        Column::Open => bars.open,
        Column::High => bars.high,
        Column::Low => bars.low,
        Column::Close => Some(bars.close),
        Column::Volume => bars.volume,
        Column::Input(k) => bars.input(usize::from(k)),
    }
}

/// A series' period bars for each higher timeframe a call's formulas use, gathered once per
/// series and call (only the columns the formulas read).
#[derive(Debug, Default)]
pub struct Frames {
    periods: [Option<PeriodBars>; 3],
}

impl Frames {
    /// The period bars `program` needs over `bars`.
    ///
    /// # Errors
    /// [`Error::Strategy`] when the formulas call a higher timeframe and the bars carry no
    /// days (no time of a timestamp or date type).
    pub fn of(bars: &Bars<'_>, program: &Program) -> Result<Self> {
        let mut out = Self::default();
        let timeframes = program.timeframes();
        if timeframes.is_empty() {
            return Ok(out);
        }
        let Some(days) = bars.days else {
            return Err(Error::Strategy(format!(
                "`{}(x)` reads the bars' periods, which need a time of a timestamp or date type",
                timeframes[0].name()
            )));
        };
        // Only the columns the formulas read are gathered.
        let reads = program.columns();
        let read = Bars {
            open: bars.open.filter(|_| reads.contains(&Column::Open)),
            high: bars.high.filter(|_| reads.contains(&Column::High)),
            low: bars.low.filter(|_| reads.contains(&Column::Low)),
            volume: bars.volume.filter(|_| reads.contains(&Column::Volume)),
            ..*bars
        };
        for tf in timeframes {
            out.periods[tf.index()] = Some(PeriodBars::of(&read, days, tf));
        }
        Ok(out)
    }

    /// What a series has for windows to fit in: its bars and its period bars.
    pub fn have(&self, bars: usize) -> Windows {
        Windows {
            bars,
            periods: self
                .periods
                .each_ref()
                .map(|p| p.as_ref().map_or(0, PeriodBars::len)),
        }
    }

    fn views(&self) -> Views<'_> {
        Views {
            bars: self
                .periods
                .each_ref()
                .map(|p| p.as_ref().map(PeriodBars::bars)),
            of_bar: self
                .periods
                .each_ref()
                .map(|p| p.as_ref().map(|p| &p.of_bar[..])),
        }
    }
}

/// The period bars of [`Frames`] as evaluation reads them.
struct Views<'a> {
    bars: [Option<Bars<'a>>; 3],
    of_bar: [Option<&'a [u32]>; 3],
}

/// A materialised node of a group.
enum Array {
    Series(Vec<f64>),
    /// A series from a shared multi-window pass (written straight into its allocation).
    Shared(Arc<[f64]>),
    Cond(Conds),
}

/// A condition over the whole series: its truths as bits, as the per-combo phase reads them
/// ([`bits`]; the bits past the last bar clear), and as a byte a bar (1 where it holds), as a
/// function taking a condition and [`node_arrays`] read it: made from the bits only when one of
/// them asks (most conditions, an exit of a grid, are read only as bits).
struct Conds {
    bits: Vec<u64>,
    len: usize,
    bytes: std::sync::OnceLock<Vec<u8>>,
}

impl Conds {
    fn of_bytes(bytes: Vec<u8>) -> Self {
        let mut bits = Vec::new();
        bits::pack_bytes(&bytes, &mut bits);
        Self {
            bits,
            len: bytes.len(),
            bytes: bytes.into(),
        }
    }

    /// The condition's bytes.
    fn bytes(&self) -> &[u8] {
        self.bytes.get_or_init(|| {
            let mut bytes = vec![0u8; self.len];
            bits::unpack(&self.bits, &mut bytes);
            bytes
        })
    }

    /// The first `len` bars of `bits`.
    fn of_bits(mut bits: Vec<u64>, len: usize) -> Self {
        bits.truncate(len.div_ceil(64));
        if !len.is_multiple_of(64)
            && let Some(last) = bits.last_mut()
        {
            *last &= u64::MAX >> (64 - len % 64);
        }
        Self {
            bits,
            len,
            bytes: std::sync::OnceLock::new(),
        }
    }
}

/// A crossing a tuned path serves: the state bytes of its pair of lines over the whole series
/// (one a bar, [`crate::signal`]'s), made by that path without either line written out whole,
/// and whether its operands come in the other order than the bytes' lines (then each of its
/// crossings is read as the other way's).
struct Served {
    states: Arc<[u8]>,
    swapped: bool,
}

impl Served {
    /// The way to read from the bytes for a crossing `way` of the node's operands.
    fn way(&self, way: Crossing) -> Crossing {
        match (self.swapped, way) {
            (false, w) => w,
            (true, Crossing::Above) => Crossing::Below,
            (true, Crossing::Below) => Crossing::Above,
        }
    }
}

/// A node a tuned computation serves whole by its shape, not computed from its operands
/// (which are then not computed for it).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// A crossing of an `hma` and an `hma3` line of the closes, in either order: the paper
    /// kernel's combo whose state bytes give it, and whether the HMA3 line comes first. The
    /// crossing stays the combo's own node, read from the bytes ([`Served`]).
    Paper(Combo, bool),
    /// A crossing of two `sma` lines of the closes, one long enough for a certified line
    /// (`crate::certified`): the windows in ascending order, and whether the longer comes
    /// first. Read from the pair's state bytes, settled exactly where the bounds leave them
    /// open ([`Served`]).
    Certified { lo: u32, hi: u32, swapped: bool },
    /// A channel breakout ([`Breakout`]) of column node `x` over `n` bars, above the highest
    /// or below the lowest: a shared condition, made by the channels' pass over `x`.
    Breakout { x: u32, n: usize, above: bool },
}

impl Shape {
    /// The shape of node `def`, if a tuned computation serves it over `bars`.
    fn of(
        bars: &Bars<'_>,
        (defs, frames): (&[Def], &[Option<Timeframe>]),
        def: &Def,
        facts: &mut Facts,
    ) -> Option<Self> {
        if let Some((combo, swapped)) = paper_pair(defs, def) {
            return Some(Self::Paper(combo, swapped));
        }
        if facts.certify
            && let Some((Line::Sma(x), Line::Sma(y))) = crossing_lines(defs, def)
        {
            return [x, y]
                .iter()
                .any(|&n| crate::certified::pays(n as usize, bars.len()))
                .then_some(Self::Certified {
                    lo: x.min(y),
                    hi: x.max(y),
                    swapped: x > y,
                });
        }
        let Def::Compare(op, Operand::Node(a), Operand::Node(b)) = *def else {
            return None;
        };
        // `x > edge` and `edge < x` alike: `x` on the left.
        let flipped = match op {
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Lt => CmpOp::Gt,
            _ => return None,
        };
        [(a, op, b), (b, flipped, a)]
            .into_iter()
            .find_map(|(x, op, edge)| {
                let Def::Column(c) = defs[x as usize] else {
                    return None;
                };
                let call = |n: u32| match &defs[n as usize] {
                    Def::Call { func, args } if frames[n as usize].is_none() => match args[..] {
                        [CallArg::Operand(Operand::Node(x)), CallArg::Window(w)] => {
                            Some((function(*func).breakout?, x, w as usize))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                let (Breakout::Lag, inner, 1) = call(edge)? else {
                    return None;
                };
                let (way, of, n) = call(inner)?;
                let above = match (op, way) {
                    (CmpOp::Gt, Breakout::Highest) => true,
                    (CmpOp::Lt, Breakout::Lowest) => false,
                    _ => return None,
                };
                (of == x && facts.clean(bars, c)).then_some(Self::Breakout { x, n, above })
            })
    }
}

/// What the shapes ask of a series, each answered once.
struct Facts {
    /// Which columns have no NaN (the channels' pass is the language's only there), as asked.
    clean: Vec<(Column, bool)>,
    /// Whether the closes take certified lines.
    certify: bool,
}

impl Facts {
    fn new(certify: bool) -> Self {
        Self {
            clean: Vec::new(),
            certify,
        }
    }

    /// Whether column `c` of `bars` has no NaN.
    fn clean(&mut self, bars: &Bars<'_>, c: Column) -> bool {
        if let Some(&(_, v)) = self.clean.iter().find(|(k, _)| *k == c) {
            return v;
        }
        let v = column(bars, c).is_some_and(|x| !x.iter().any(|v| v.is_nan()));
        self.clean.push((c, v));
        v
    }
}

/// A crossing's way and its two operand nodes, in its operands' order (`None` for any other
/// node, or a crossing of a constant).
fn crossing_operands(def: &Def) -> Option<(Crossing, u32, u32)> {
    let Def::Call { func, args } = def else {
        return None;
    };
    let way = function(*func).crossing?;
    let [
        CallArg::Operand(Operand::Node(a)),
        CallArg::Operand(Operand::Node(b)),
    ] = args[..]
    else {
        return None;
    };
    Some((way, a, b))
}

/// The tuned lines ([`tuned_line`]) of a crossing's two operands, in its operands' order.
fn crossing_lines(defs: &[Def], def: &Def) -> Option<(Line, Line)> {
    let (_, a, b) = crossing_operands(def)?;
    let line = |n: u32| tuned_line(defs, &defs[n as usize]);
    Some((line(a)?, line(b)?))
}

/// The paper kernel's combo whose state bytes give crossing `def` (`b` of the bytes is the
/// HMA3 line, `a` the HMA line): a crossing of an `hma` and an `hma3` line of the closes, in
/// either order (`true`: the HMA3 line first), windows alone.
fn paper_pair(defs: &[Def], def: &Def) -> Option<(Combo, bool)> {
    let (hma, hma3, swapped) = match crossing_lines(defs, def)? {
        (Line::Hma(h), Line::Hma3(t)) => (h, t, false),
        (Line::Hma3(t), Line::Hma(h)) => (h, t, true),
        _ => return None,
    };
    let [h, f, q] = hma;
    let [p3, p2, p] = hma3;
    Some((Combo::new([h, f, q, p3, p2, p]).ok()?, swapped))
}

/// One group's plan and what phase 1 computed.
struct Group {
    plan: Plan,
    /// Which defs phase 1 computes.
    shared: Vec<bool>,
    /// Bytes of those, and of the paper kernel's state bytes the group reads.
    bytes: usize,
    /// The nodes a tuned computation serves by their shape ([`Shape`]).
    shapes: Vec<Option<Shape>>,
    /// The paper kernel's combos the group's crossings read, numbered in order of first use.
    combos: HashMap<Combo, usize>,
    /// The certified SMA pairs (windows ascending) its crossings read, numbered likewise.
    pairs: HashMap<(u32, u32), usize>,
    facts: Facts,
}

impl Group {
    fn new(certify: bool) -> Self {
        Self {
            pairs: HashMap::new(),
            facts: Facts::new(certify),
            plan: Plan::new(),
            shared: Vec::new(),
            bytes: 0,
            shapes: Vec::new(),
            combos: HashMap::new(),
        }
    }

    /// Marks what the defs added since `from` (and the stop operands `roots` of their combo)
    /// need whole as shared, and whatever those read: every series call they read (a call's
    /// series is computed once for the group, never a block at a time) and every input of a
    /// condition call. A node a tuned computation serves ([`Shape`]) does not read its operands: a
    /// crossing of the paper kernel's lines reads its state bytes (counted once per distinct
    /// pair), a breakout is a shared condition of its own; a line read by nothing else is
    /// never computed.
    fn mark(&mut self, from: usize, bars: &Bars<'_>, roots: &[u32]) {
        let defs = self.plan.defs();
        let frames = self.plan.frames();
        self.shared.resize(defs.len(), false);
        self.shapes.resize(defs.len(), None);
        let series_call =
            |n: u32| matches!(defs[n as usize], Def::Call { .. }) && defs[n as usize].is_series();
        let mut stack: Vec<u32> = roots.iter().copied().filter(|&n| series_call(n)).collect();
        for (id, def) in defs.iter().enumerate().skip(from) {
            if frames[id].is_none()
                && let Some(shape) = Shape::of(bars, (defs, frames), def, &mut self.facts)
            {
                self.shapes[id] = Some(shape);
                match shape {
                    Shape::Paper(combo, _) => {
                        let n = self.combos.len();
                        if *self.combos.entry(combo).or_insert(n) == n {
                            self.bytes += bars.len();
                        }
                    }
                    Shape::Certified { lo, hi, .. } => {
                        let n = self.pairs.len();
                        if *self.pairs.entry((lo, hi)).or_insert(n) == n {
                            self.bytes += bars.len();
                        }
                    }
                    Shape::Breakout { .. } => stack.push(id as u32),
                }
                continue;
            }
            match def {
                // A condition call is evaluated a block at a time from whole inputs; a series
                // call's inputs are shared with it, once something reads it.
                Def::Call { .. } if def.is_series() => {}
                Def::Call { .. } => stack.extend(def.inputs()),
                _ => stack.extend(def.inputs().into_iter().filter(|&n| series_call(n))),
            }
        }
        self.share(stack, bars.len());
    }

    /// Marks every node two or more of the group's combos reach (`rsi(close, 14) < 35` of a
    /// grid over other parameters, an exit shared by every band width) as shared, so it is
    /// computed once for the group rather than once per combo; but not a line only served
    /// nodes read.
    fn mark_common(&mut self, bars: usize) {
        let defs = self.plan.defs();
        // Which nodes a served node reads, and which any other def reads.
        let mut read = vec![[false; 2]; defs.len()];
        for (def, shape) in defs.iter().zip(&self.shapes) {
            for n in def.inputs() {
                read[n as usize][usize::from(shape.is_some())] = true;
            }
        }
        let only_served = |id: usize| read[id] == [false, true];
        let common: Vec<u32> = (0..defs.len() as u32)
            .filter(|&id| {
                !self.shared[id as usize]
                    && !matches!(defs[id as usize], Def::Column(_) | Def::Always(_))
                    && !only_served(id as usize)
                    && self.plan.combos_reaching(id) >= 2
            })
            .collect();
        self.share(common, bars);
    }

    fn share(&mut self, mut stack: Vec<u32>, bars: usize) {
        let defs = self.plan.defs();
        while let Some(id) = stack.pop() {
            let def = &defs[id as usize];
            if self.shared[id as usize] || matches!(def, Def::Column(_)) {
                continue;
            }
            self.shared[id as usize] = true;
            // A condition is held as bits, and as bytes where a function reads them.
            self.bytes += if def.is_series() {
                bars * 8
            } else {
                bars + bars.div_ceil(64) * 8
            };
            if self.shapes.get(id as usize).is_none_or(Option::is_none) {
                stack.extend(def.inputs());
            }
        }
    }

    /// The state bytes of every crossing a tuned path serves, by node: the paper kernel's
    /// (one computation per distinct pair, the cache asked first) and the certified SMA
    /// pairs' (each line once, the exact ones asked of the cache).
    fn served(
        &self,
        bars: &Bars<'_>,
        control: &SweepControl<'_>,
        parallel: bool,
    ) -> Result<Vec<Option<Served>>> {
        if self.combos.is_empty() && self.pairs.is_empty() {
            return Ok(Vec::new());
        }
        let paper = if self.combos.is_empty() {
            Vec::new()
        } else {
            crate::sweep::states(bars.close, &numbered(&self.combos), control)?
        };
        let pairs = direct::pair_states(bars, &numbered(&self.pairs), parallel, control);
        debug_assert!(self.pairs.is_empty() || self.facts.certify);
        Ok(self
            .shapes
            .iter()
            .map(|shape| match *shape {
                Some(Shape::Paper(c, swapped)) => Some(Served {
                    states: Arc::clone(&paper[self.combos[&c]]),
                    swapped,
                }),
                Some(Shape::Certified { lo, hi, swapped }) => Some(Served {
                    states: Arc::clone(&pairs[self.pairs[&(lo, hi)]]),
                    swapped,
                }),
                _ => None,
            })
            .collect())
    }
}

/// The keys of `numbered` in the order of their numbers.
fn numbered<K: Copy>(numbered: &HashMap<K, usize>) -> Vec<K> {
    let mut out: Vec<Option<K>> = vec![None; numbered.len()];
    for (k, &n) in numbered {
        out[n] = Some(*k);
    }
    out.into_iter().flatten().collect()
}

/// Runs `program` for every combo of `values` (`width` values each, in the program's
/// parameter order) over `bars` under `exec`, in input order.
///
/// # Errors
/// As [`Execution::validate`]; [`Error::Strategy`] for a column the bars lack;
/// [`Error::Cancelled`] once `control.cancelled` answers true.
pub fn sweep_program(
    bars: &Bars<'_>,
    program: &Program,
    values: &[f64],
    combos: usize,
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    exec.validate()?;
    exec.check_bars(bars)?;
    check_columns(program, bars)?;
    let frames = Frames::of(bars, program)?;
    let have = frames.have(bars.len());
    let views = frames.views();
    let width = program.params.len();
    debug_assert_eq!(values.len(), width * combos);
    let value = |i: usize| &values[i * width..(i + 1) * width];
    let len = bars.len();
    let parallel = control
        .parallel
        .unwrap_or_else(|| (combos as u64).saturating_mul(len as u64 * 8) >= PARALLEL_MIN_WORK);
    let moves = control
        .bar_metrics
        .then(|| Moves::cached(bars.close, control.cache));
    // Stop formulas run the general loop whatever the options: it gets the blocks too.
    let formula_stops = crate::expr::Field::STOPS
        .iter()
        .any(|f| program.formula(*f).is_some());
    let shared = crate::execution::SharedStops::of(bars, exec, combos, formula_stops);
    let books = Books {
        bars: *bars,
        stops: &shared,
        moves: moves.as_ref(),
        records: control.records,
    };
    let check = || {
        if (control.cancelled)() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    };
    let mut results = vec![ComboResult::default(); combos];
    // A combo whose values equal an earlier one's (a grid that lists a value twice, grids
    // concatenated) has its results: it is run once and its copies take them, unless every
    // combo's trades are kept (each copy then books its own).
    let mut first: HashMap<Vec<u64>, usize> = HashMap::new();
    let mut copies: Vec<(usize, usize)> = Vec::new();
    // Combos whose whole signal a tuned path makes (`direct.rs`): they run there, after the
    // groups.
    // Whether the closes take certified lines (long SMA windows' crossings).
    let certify = !control.exact_lines && crate::certified::certifiable(bars.close);
    let mut recogniser = direct::Recogniser::of(bars, program, certify);
    let mut directs = Vec::new();
    let mut next = 0;
    while next < combos {
        check()?;
        let mut group = Group::new(certify);
        let mut members: Members = Vec::new();
        // How many combos share each set of stop formulas' values: enough of them share a
        // table of first stops, counted in the group's bytes.
        let mut sharing: HashMap<StopOperands, usize> = HashMap::new();
        while next < combos {
            if control.records.is_none() {
                let key: Vec<u64> = value(next).iter().map(|v| v.to_bits()).collect();
                if let Some(&original) = first.get(&key) {
                    copies.push((next, original));
                    next += 1;
                    continue;
                }
                first.insert(key, next);
            }
            if let Some((d, windows)) = recogniser.as_mut().and_then(|r| r.direct(value(next))) {
                directs.push((next, d, windows));
                next += 1;
                continue;
            }
            let before = group.plan.defs().len();
            let combo = group.plan.bind(program, value(next));
            let roots: Vec<u32> = combo
                .stops
                .iter()
                .filter_map(|s| match s {
                    Some(Operand::Node(n)) => Some(*n),
                    _ => None,
                })
                .collect();
            group.mark(before, bars, &roots);
            if formula_stops {
                let n = sharing.entry(combo.stops).or_default();
                *n += 1;
                if *n == EXITS_MIN_COMBOS {
                    group.bytes += table_bytes(len, exec.side);
                }
            }
            members.push((next, combo));
            next += 1;
            if group.bytes > control.working_set_bytes || group.plan.defs().len() > MAX_GROUP_DEFS {
                break;
            }
        }
        group.mark_common(len);
        let served = group.served(bars, control, parallel)?;
        let arrays = materialise(
            (bars, &views),
            (&group.plan, &served, &group.shapes),
            &group.shared,
            (parallel, control.working_set_bytes.min(HULL_BYTES)),
            control.cache,
        )?;
        for (stops, members) in by_table(members, &sharing) {
            let tables: StopTables = stops
                .and_then(|s| stop_table(bars, exec, (group.plan.defs(), &arrays), &s))
                .into_iter()
                .collect();
            let ctx = Ctx {
                bars,
                defs: group.plan.defs(),
                frames: group.plan.frames(),
                views: &views,
                arrays: &arrays,
                served: &served,
                stops: books.stops,
                tables: &tables,
            };
            // A worker's combos run block by block, each block for all of them in turn, so the
            // arrays' block they read is read from cache, not once per combo from memory. Two
            // parts a worker, for balance.
            let part = if parallel {
                members
                    .len()
                    .div_ceil(2 * rayon::current_num_threads())
                    .max(1)
            } else {
                members.len().max(1)
            };
            let parts: Vec<&[(usize, ComboPlan)]> = members.chunks(part).collect();
            let run = |scratch: &mut Scratch,
                       part: &&[(usize, ComboPlan)]|
             -> Result<Vec<(usize, ComboResult)>> {
                check()?;
                let mut out: Vec<(usize, ComboResult)> = Vec::with_capacity(part.len());
                let mut runs = Vec::with_capacity(part.len());
                for &(i, combo) in part.iter() {
                    let ledger = books.ledger(exec, i);
                    if combo.windows.fit(&have) {
                        runs.push((i, ComboRun::new(&ctx, combo, exec, ledger, scratch)));
                    } else {
                        out.push((i, ledger.done()));
                        control.report(1, len);
                    }
                }
                // Blocks start on a multiple of 64 bars, so a shared condition's bits are read
                // a word at a time as they are; the loop acts from `start` on.
                let mut b0 = exec.start.min(len) / 64 * 64;
                while b0 < len {
                    check()?;
                    let b1 = (b0 + BLOCK).min(len);
                    for (_, run) in &mut runs {
                        run.block(&ctx, (b0, b1), scratch);
                    }
                    b0 = b1;
                }
                for (i, run) in runs {
                    out.push((i, run.finish().done()));
                    control.report(1, len);
                }
                Ok(out)
            };
            for (i, r) in crate::par::map(parallel, &parts, run)?
                .into_iter()
                .flatten()
            {
                results[i] = r;
            }
        }
    }
    direct::sweep(
        &directs,
        (exec, &have, books, (parallel, certify)),
        control,
        &mut results,
    )?;
    for (copy, original) in copies {
        results[copy] = results[original];
        control.report(1, len);
    }
    Ok(results)
}

/// A shared pass's windows (ascending) and its line for each.
type Lines = (Vec<usize>, Vec<Arc<[f64]>>);

/// A group's combos: each one's position in the sweep and its plan.
type Members = Vec<(usize, ComboPlan)>;

/// A combo's stop formulas' values (`stop_loss`, `take_profit`, `trailing_stop`), as its plan
/// gives them.
type StopOperands = [Option<Operand>; 3];

/// Tables of first stops, by the stop formulas' values they were built for.
type StopTables = HashMap<StopOperands, Exits>;

/// A group's combos in runs that share a table of first stops: each set of stop formulas'
/// values that at least [`EXITS_MIN_COMBOS`] of them share (`sharing`) is a run of its own,
/// the rest one run without a table. A run's table is built for it and dropped after it, so
/// one table is live at a time (13 bytes a bar and side): a grid sweeping a stop formula's
/// parameter would otherwise hold a table per value at once, and every combo's events would
/// read from all of them (ten values of `m` over 150,000 bars: 39 MB, past a core's caches).
fn by_table(
    members: Members,
    sharing: &HashMap<StopOperands, usize>,
) -> Vec<(Option<StopOperands>, Members)> {
    let shared = |stops: &StopOperands| sharing.get(stops).is_some_and(|&n| n >= EXITS_MIN_COMBOS);
    let mut runs: HashMap<StopOperands, Members> = HashMap::new();
    let mut rest = Vec::new();
    for member in members {
        if shared(&member.1.stops) {
            runs.entry(member.1.stops).or_default().push(member);
        } else {
            rest.push(member);
        }
    }
    let mut out: Vec<_> = runs.into_iter().map(|(k, v)| (Some(k), v)).collect();
    if !rest.is_empty() {
        out.push((None, rest));
    }
    out
}

/// The table of first stops for a set of stop formulas' values (`stops`), where phase 1
/// computed those values: a stop-loss or take-profit formula's trades, like a fixed stop's,
/// depend only on the entry's bar and side (the formula is read at the deciding bar). A
/// trailing stop that is a formula gets none.
fn stop_table(
    bars: &Bars<'_>,
    exec: &Execution,
    (defs, arrays): (&[Def], &[Option<Array>]),
    stops: &StopOperands,
) -> Option<(StopOperands, Exits)> {
    let fixed = [exec.stop_loss, exec.take_profit, exec.trailing_stop];
    let mut fractions = fixed.map(Fraction::Fixed);
    for (f, operand) in fractions.iter_mut().zip(stops) {
        *f = match *operand {
            None => continue,
            Some(Operand::Const(bits)) => {
                Fraction::Fixed(Some(f64::from_bits(bits)).filter(|&v| v > 0.0))
            }
            Some(Operand::Node(n)) => Fraction::PerBar(whole_series(bars, defs, arrays, n)?),
        };
    }
    Some((*stops, Exits::with_fractions(bars, exec, fractions)?))
}

/// A node's values over a whole series, as [`node_arrays`] gives them.
#[derive(Debug, Clone)]
pub enum NodeArray {
    /// A number per bar.
    Numbers(Arc<[f64]>),
    /// A truth per bar (1 where it holds).
    Cond(Arc<[u8]>),
}

/// The values of the nodes `roots` of `plan` over the whole of `bars` (a portfolio's rank,
/// filter and weight of one series, protocol v1.4): every node they reach is computed once,
/// by the same computation as a sweep's shared arrays ([`sweep_program`]'s phase 1, the cache
/// asked first and offered what is computed), and the roots are returned in order, with what
/// the series has for windows to fit in (its bars and period bars).
///
/// # Errors
/// [`Error::Strategy`] for a column the bars lack.
pub fn node_arrays(
    bars: &Bars<'_>,
    program: &Program,
    plan: &Plan,
    roots: &[u32],
    parallel: bool,
    cache: &dyn ArrayCache,
) -> Result<(Vec<NodeArray>, Windows)> {
    check_columns(program, bars)?;
    let frames = Frames::of(bars, program)?;
    let views = frames.views();
    let mut shared = vec![false; plan.defs().len()];
    let mut stack: Vec<u32> = roots.to_vec();
    while let Some(id) = stack.pop() {
        let def = &plan.defs()[id as usize];
        if shared[id as usize] || matches!(def, Def::Column(_)) {
            continue;
        }
        shared[id as usize] = true;
        stack.extend(def.inputs());
    }
    let arrays = materialise(
        (bars, &views),
        (plan, &[], &[]),
        &shared,
        (parallel, HULL_BYTES),
        cache,
    )?;
    let have = frames.have(bars.len());
    let roots = roots
        .iter()
        .map(
            |&id| match (&plan.defs()[id as usize], &arrays[id as usize]) {
                (Def::Column(c), _) => {
                    NodeArray::Numbers(column(bars, *c).expect("checked").into())
                }
                (_, Some(Array::Shared(s))) => NodeArray::Numbers(Arc::clone(s)),
                (_, Some(Array::Series(s))) => NodeArray::Numbers(s.as_slice().into()),
                (_, Some(Array::Cond(c))) => NodeArray::Cond(c.bytes().into()),
                (_, None) => unreachable!("a root is shared"),
            },
        )
        .collect();
    Ok((roots, have))
}

/// Phase 1: the nodes of `plan` marked `shared`, in dependency order, each level's in
/// parallel. A function's series is asked of `cache` first, under its canonical key
/// ([`ArrayKey::Node`]: the plan's fingerprint), and what is computed is offered to it.
fn materialise(
    (bars, views): (&Bars<'_>, &Views<'_>),
    (plan, served, shapes): (&Plan, &[Option<Served>], &[Option<Shape>]),
    shared: &[bool],
    (parallel, hull_bytes): (bool, usize),
    cache: &dyn ArrayCache,
) -> Result<Vec<Option<Array>>> {
    let no_tables = StopTables::new();
    let defs = plan.defs();
    let frames = plan.frames();
    // A node's length: its timeframe's period bars, or the bars.
    let len_of = |id: usize| match frames[id] {
        Some(tf) => views.bars[tf.index()].as_ref().map_or(0, Bars::len),
        None => bars.len(),
    };
    // The keys of the function series (others are not cached: conditions are bytes, and an
    // operator node costs about what reading it would).
    let keys: Vec<Option<ArrayKey>> = if cache.may_hold() || cache.keeps() {
        plan.node_keys()
            .into_iter()
            .zip(defs)
            .map(|(k, d)| match d {
                Def::Call { func, .. } if matches!(function(*func).compute, Compute::Series(_)) => {
                    Some(ArrayKey::Node(k))
                }
                _ => None,
            })
            .collect()
    } else {
        vec![None; defs.len()]
    };
    let mut level = vec![0usize; defs.len()];
    for (id, def) in defs.iter().enumerate() {
        level[id] = def
            .inputs()
            .iter()
            .map(|&i| level[i as usize] + 1)
            .max()
            .unwrap_or(0);
    }
    let mut arrays: Vec<Option<Array>> = (0..defs.len()).map(|_| None).collect();
    let top = level.iter().copied().max().unwrap_or(0);
    for l in 0..=top {
        let mut ids: Vec<usize> = (0..defs.len())
            .filter(|&id| shared[id] && level[id] == l)
            .collect();
        // What the cache holds is not computed.
        ids.retain(|&id| {
            let held = keys[id]
                .and_then(|k| cache.get(k))
                .filter(|line| line.len() == len_of(id));
            match held {
                Some(line) => {
                    arrays[id] = Some(Array::Shared(line));
                    false
                }
                None => true,
            }
        });
        let ctx = Ctx {
            bars,
            defs,
            frames,
            views,
            arrays: &arrays,
            served,
            stops: &crate::execution::NO_SHARED_STOPS,
            tables: &no_tables,
        };
        // Calls of a function with a shared multi-window pass (SMA: one pass whose cost is the
        // longest window, not the sum of them) over the same input: one pass for all of them.
        let mut done: Vec<(usize, Array)> = Vec::new();
        let mut batches: HashMap<(u16, CallArg), Vec<(usize, u32)>> = HashMap::new();
        for &id in &ids {
            if let Def::Call { func, args } = &defs[id]
                && function(*func).multi.is_some()
                && let [x @ CallArg::Operand(Operand::Node(_)), CallArg::Window(n)] = args[..]
            {
                batches.entry((*func, x)).or_default().push((id, n));
            }
        }
        batches.retain(|_, calls| calls.len() > 1);
        let mut batched: Vec<usize> = batches.values().flatten().map(|&(id, _)| id).collect();
        // Hull-type lines (hma, hma3) over one input share their first-level WMAs: one shared
        // pass for all of them (in pieces whose first-level lines fit `hull_bytes`).
        let mut hulls: HashMap<CallArg, Vec<(usize, Hull)>> = HashMap::new();
        for &id in &ids {
            if let Def::Call { func, args } = &defs[id]
                && let Some((scale, firsts)) = function(*func).hull
                && let x @ CallArg::Operand(Operand::Node(_)) = args[0]
            {
                let window = |a: &CallArg| match *a {
                    CallArg::Window(w) => w as usize,
                    CallArg::Operand(_) => unreachable!("a hull's windows are windows"),
                };
                let hull = Hull {
                    scale,
                    first: args[1..=firsts].iter().map(window).collect(),
                    outer: window(&args[args.len() - 1]),
                };
                hulls.entry(x).or_default().push((id, hull));
            }
        }
        hulls.retain(|_, calls| calls.len() > 1);
        for (x, calls) in &hulls {
            let Input::Series(xs) = ctx.of_node(calls[0].0).input(x) else {
                unreachable!("a node input is a series")
            };
            // At least one call a piece, whatever its windows (series::hma holds as much).
            let most = (hull_bytes / (xs.len().max(1) * 8)).max(1);
            let mut from = 0;
            while from < calls.len() {
                // As many calls as keep the distinct first-level windows within `most`.
                let mut seen: Vec<usize> = Vec::new();
                let mut to = from;
                while to < calls.len() {
                    let mut more = seen.clone();
                    more.extend(&calls[to].1.first);
                    more.sort_unstable();
                    more.dedup();
                    if to > from && more.len() > most {
                        break;
                    }
                    seen = more;
                    to += 1;
                }
                let specs: Vec<Hull> = calls[from..to].iter().map(|(_, h)| h.clone()).collect();
                let lines = crate::lines::multi::hulls(xs, &specs, parallel);
                for (&(id, _), line) in calls[from..to].iter().zip(lines) {
                    done.push((id, Array::Shared(line)));
                    batched.push(id);
                }
                from = to;
            }
        }
        // Channel breakouts over one column: one pass (or a queue a channel) for all of them.
        let mut channels: HashMap<u32, Vec<(usize, usize, bool)>> = HashMap::new();
        for &id in &ids {
            if let Some(Some(Shape::Breakout { x, n, above })) = shapes.get(id) {
                channels.entry(*x).or_default().push((id, *n, *above));
            }
        }
        for (&x, calls) in &channels {
            let Def::Column(c) = defs[x as usize] else {
                unreachable!("a breakout's series is a column")
            };
            let xs = column(bars, c).expect("checked");
            let mut windows: Vec<usize> = calls.iter().map(|&(_, n, _)| n).collect();
            windows.sort_unstable();
            windows.dedup();
            let signals = crate::lines::indicators::donchian_channels(xs, &windows, parallel);
            for (signal, &n) in signals.into_iter().zip(&windows) {
                // Each window's signal bytes become one side's condition in place (no second
                // allocation, no fresh pages), the other side's, if also asked, a new array.
                let sides: Vec<(usize, bool)> = calls
                    .iter()
                    .filter(|&&(_, m, _)| m == n)
                    .map(|&(id, _, above)| (id, above))
                    .collect();
                let (last, first) = sides.split_last().expect("every window is asked");
                let cond = |s: i8, above: bool| u8::from(s == if above { 1 } else { -1 });
                for &(id, above) in first {
                    let bytes = signal.iter().map(|&s| cond(s, above)).collect();
                    done.push((id, Array::Cond(Conds::of_bytes(bytes))));
                    batched.push(id);
                }
                let (id, above) = *last;
                let bytes: Vec<u8> = signal.into_iter().map(|s| cond(s, above)).collect();
                done.push((id, Array::Cond(Conds::of_bytes(bytes))));
                batched.push(id);
            }
        }
        // A function computed from another's lines of the same input (`std` from `sma`'s
        // means) after that one, reading its lines where the group has them all.
        let mut order: Vec<&(u16, CallArg)> = batches.keys().collect();
        order.sort_by_key(|(func, _)| function(*func).from_lines.is_some());
        let mut computed: HashMap<(u16, CallArg), Lines> = HashMap::new();
        for key in order {
            let (func, x) = key;
            let calls = &batches[key];
            let Input::Series(xs) = ctx.input(x) else {
                unreachable!("a node input is a series")
            };
            let mut windows: Vec<usize> = calls.iter().map(|&(_, n)| n as usize).collect();
            windows.sort_unstable();
            windows.dedup();
            let f = function(*func);
            let means = f.from_lines.and_then(|from| {
                let of = crate::expr::registry::lookup(from.of, 2).expect("a function's name");
                let (have, lines) = computed.get(&(of, *x))?;
                let means: Option<Vec<&[f64]>> = windows
                    .iter()
                    .map(|n| have.binary_search(n).ok().map(|k| &lines[k][..]))
                    .collect();
                Some((from.pass, means?))
            });
            let lines = match means {
                Some((pass, means)) => pass(xs, &windows, &means, parallel),
                None => f.multi.expect("kept above")(xs, &windows, parallel),
            };
            for &(id, n) in calls {
                let at = windows
                    .binary_search(&(n as usize))
                    .expect("every window is passed");
                done.push((id, Array::Shared(Arc::clone(&lines[at]))));
            }
            computed.insert((*func, *x), (windows, lines));
        }
        let ids: Vec<usize> = ids.into_iter().filter(|id| !batched.contains(id)).collect();
        let compute = |&id: &usize| (id, ctx.whole(id));
        done.extend(if parallel && ids.len() > 1 {
            ids.par_iter().map(compute).collect::<Vec<_>>()
        } else {
            ids.iter().map(compute).collect()
        });
        for (id, a) in done {
            if let (Some(k), Array::Shared(line)) = (keys[id], &a)
                && cache.keeps()
            {
                cache.insert(k, Arc::clone(line));
            }
            arrays[id] = Some(a);
        }
    }
    Ok(arrays)
}

/// The line a call is that a tuned computation makes ([`Line`]): `sma`, `wma`, `hma` and
/// `hma3` of the closes, bit for bit the lines the paper kernel and the certified SMA lines
/// compute (the same arithmetic, held equal by the tests).
fn tuned_line(defs: &[Def], def: &Def) -> Option<Line> {
    let Def::Call { func, args } = def else {
        return None;
    };
    let (CallArg::Operand(Operand::Node(x)), windows) = args.split_first()? else {
        return None;
    };
    if defs[*x as usize] != Def::Column(Column::Close) {
        return None;
    }
    let windows: Vec<u32> = windows
        .iter()
        .map(|w| match *w {
            CallArg::Window(n) => Some(n),
            CallArg::Operand(_) => None,
        })
        .collect::<Option<_>>()?;
    Line::of_call(function(*func).name, &windows)
}

/// The arrays of one combo of `program` (its `values`) that a sweep over a row range can cut
/// from the same arrays over the whole series ([`ArrayKey::of_range`]): its function series
/// on the bars whose values are fresh over their windows (their keys have a warm-up) but a
/// channel breakout's parts, and the paper kernel's state bytes of its crossings of an HMA and
/// an HMA3 line.
pub fn cuttable_lines(program: &Program, values: &[f64]) -> Vec<ArrayKey> {
    let mut plan = Plan::new();
    plan.bind(program, values);
    let defs = plan.defs();
    let mut keys: Vec<ArrayKey> = defs
        .iter()
        .zip(plan.node_keys())
        .filter_map(|(def, key)| {
            if let Some((combo, _)) = paper_pair(defs, def) {
                return Some(crate::sweep::signs_key(&combo));
            }
            // A channel breakout's parts are read from the channels' pass where the column is
            // clean (the usual case), never asked of the cache: no cover is worth sweeping
            // for them.
            let series = matches!(def, Def::Call { func, .. }
                if matches!(function(*func).compute, Compute::Series(_))
                    && function(*func).breakout.is_none());
            (series && ArrayKey::Node(key).of_range(&[], 0, 0).is_some())
                .then_some(ArrayKey::Node(key))
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The paper kernel's combos of those of `program` (`count` combos of `values`) that the
/// sweep runs whole on it (`direct.rs`), whatever the series: what the call's estimates
/// count for them.
pub fn paper_combos(program: &Program, values: &[f64], count: usize) -> Vec<Combo> {
    let bars = Bars::closes(&[]);
    let Some(mut recogniser) = direct::Recogniser::of(&bars, program, false) else {
        return Vec::new();
    };
    let width = program.params.len();
    (0..count)
        .filter_map(
            |i| match recogniser.direct(&values[i * width..(i + 1) * width]) {
                Some((direct::Direct::Paper(c), _)) => Some(c),
                _ => None,
            },
        )
        .collect()
}

/// What evaluation reads: the bars, the group's nodes and its shared arrays.
struct Ctx<'a> {
    /// The bars of the nodes evaluated (a timeframe's period bars inside [`Ctx::whole`] of one
    /// of its nodes).
    bars: &'a Bars<'a>,
    defs: &'a [Def],
    /// Each def's timeframe ([`Plan::frames`]).
    frames: &'a [Option<Timeframe>],
    /// The series' period bars.
    views: &'a Views<'a>,
    arrays: &'a [Option<Array>],
    /// The crossings a tuned path serves, by node (empty: none).
    served: &'a [Option<Served>],
    /// What the execution loop's stop checks share (phase 2).
    stops: &'a crate::execution::SharedStops,
    /// The tables of first stops for the stop formulas' values enough combos share.
    tables: &'a StopTables,
}

impl<'a> Ctx<'a> {
    /// The context of node `id`'s bars: the period bars of its timeframe, or these.
    fn of_node(&self, id: usize) -> Self {
        match self.frames[id] {
            None => Self { ..*self },
            Some(tf) => Self {
                bars: self.views.bars[tf.index()]
                    .as_ref()
                    .expect("a timeframe's nodes have its period bars"),
                ..*self
            },
        }
    }

    /// Node `id`'s state bytes, if a tuned path serves it.
    fn served(&self, id: usize) -> Option<&'a Served> {
        self.served.get(id)?.as_ref()
    }

    /// A whole-series input (a column, a shared array or a constant).
    fn input(&self, a: &CallArg) -> Input<'a> {
        match *a {
            CallArg::Window(w) => Input::Window(w as usize),
            CallArg::Operand(Operand::Const(bits)) => Input::Const(f64::from_bits(bits)),
            CallArg::Operand(Operand::Node(n)) => match &self.defs[n as usize] {
                // A column of the node's own bars (a higher-timeframe call reads its period
                // bars' column).
                Def::Column(c) => {
                    Input::Series(column(self.of_node(n as usize).bars, *c).expect("checked"))
                }
                _ => match self.arrays[n as usize]
                    .as_ref()
                    .expect("a call's inputs are shared")
                {
                    Array::Series(s) => Input::Series(s),
                    Array::Shared(s) => Input::Series(s),
                    Array::Cond(c) => Input::Cond(c.bytes()),
                },
            },
        }
    }

    /// Node `id` over the whole series (phase 1); a node of a timeframe over its period bars.
    fn whole(&self, id: usize) -> Array {
        self.of_node(id).whole_here(id)
    }

    /// [`Ctx::whole`] on these bars.
    fn whole_here(&self, id: usize) -> Array {
        let len = self.bars.len();
        let def = &self.defs[id];
        if let (Some(served), Def::Call { func, .. }) = (self.served(id), def) {
            let way = function(*func)
                .crossing
                .expect("a served node is a crossing");
            let mut out = vec![0u8; len];
            words::crossing_bytes(&served.states, served.way(way), 0, &mut out);
            return Array::Cond(Conds::of_bytes(out));
        }
        if let Def::Call { func, args } = def {
            let inputs: Vec<Input<'_>> = args.iter().map(|a| self.input(a)).collect();
            return match function(*func).compute {
                // The previous period's value at each bar (expressions.md).
                Compute::Frame(tf) => {
                    let of_bar = self.views.of_bar[tf.index()]
                        .expect("a timeframe's call has its period bars");
                    let seen = match inputs[0] {
                        Input::Series(x) => seen_from_next(x, of_bar),
                        Input::Const(c) => {
                            let periods = of_bar.last().map_or(0, |&p| p as usize + 1);
                            seen_from_next(&vec![c; periods], of_bar)
                        }
                        Input::Window(_) | Input::Cond(_) => {
                            unreachable!("the binder checked a timeframe's argument is a number")
                        }
                    };
                    Array::Shared(seen.into())
                }
                // Written where it may stay: the line a cache keeps (no copy to offer it).
                Compute::Series(f) => {
                    let mut line = crate::lines::filled_line(len, 0.0);
                    f(
                        self.bars,
                        &inputs,
                        Arc::get_mut(&mut line).expect("just allocated"),
                    );
                    Array::Shared(line)
                }
                Compute::Cond(f) => {
                    let mut out = vec![0u8; len];
                    f(&inputs, 0, &mut out);
                    Array::Cond(Conds::of_bytes(out))
                }
            };
        }
        // An operator node that a call reads: evaluated as one block of the whole series.
        let mut scratch = Scratch::default();
        let order = self.own_nodes(&[id as u32], &mut Vec::new());
        let mut slots = Slots::of_order(self.defs, &order, &[id as u32]);
        evaluate_block(self, &order, 0, len, &mut scratch, &mut slots);
        let slot = slots.of(id as u32);
        if def.is_series() {
            Array::Series(std::mem::take(&mut scratch.series[slot]))
        } else {
            Array::Cond(Conds::of_bits(
                std::mem::take(&mut scratch.conds[slot]),
                len,
            ))
        }
    }

    /// The nodes reachable from `roots` that are not shared arrays or columns, in dependency
    /// order: what a combo evaluates itself.
    fn own_nodes(&self, roots: &[u32], stack: &mut Vec<u32>) -> Vec<u32> {
        let mut seen: Vec<u32> = Vec::new();
        stack.clear();
        stack.extend_from_slice(roots);
        while let Some(id) = stack.pop() {
            let def = &self.defs[id as usize];
            if self.arrays[id as usize].is_some() || matches!(def, Def::Column(_)) {
                continue;
            }
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            // A served crossing reads its state bytes, not its operands.
            if self.served(id as usize).is_none() {
                stack.extend(def.inputs());
            }
        }
        // Ids are interned operands first: ascending is a dependency order.
        seen.sort_unstable();
        seen
    }
}

/// Per-worker buffers of the per-combo phase.
#[derive(Default)]
struct Scratch {
    series: Vec<Vec<f64>>,
    /// The own conditions' bits ([`bits`]).
    conds: Vec<Vec<u64>>,
    /// A condition call's bytes over a block, before they are packed.
    bytes: Vec<u8>,
    stack: Vec<u32>,
    /// The word path's buffers.
    words: words::WordScratch,
}

/// Where each of a combo's own nodes lives in the scratch: the series and the conditions
/// each numbered in the order the nodes are evaluated.
#[derive(Default)]
struct Slots {
    /// The own nodes, ascending (the evaluation order), and each one's slot.
    ids: Vec<u32>,
    slots: Vec<usize>,
    /// The own arithmetic nodes whose one reader is a comparison, which computes them inline
    /// (one pass for both, [`compare_inline`]): they have no pass of their own.
    inline: Vec<bool>,
    /// The own products of a constant and a whole array (`k * std(close, n)`) every reader of
    /// which is an inline arithmetic node: each of those comparisons multiplies as it goes
    /// (one multiplication a bar, where a pass of its own would write and read the product).
    scaled: Vec<bool>,
}

impl Slots {
    /// The slots of the own nodes `order` (ascending) whose roots (read from outside the
    /// nodes: conditions, stop operands) are `roots`.
    fn of_order(defs: &[Def], order: &[u32], roots: &[u32]) -> Self {
        let (mut series, mut conds) = (0, 0);
        let slots = order
            .iter()
            .map(|&id| {
                let counter = if defs[id as usize].is_series() {
                    &mut series
                } else {
                    &mut conds
                };
                *counter += 1;
                *counter - 1
            })
            .collect();
        // How often each own node is read, and by which node when once.
        let at = |n: u32| order.binary_search(&n).ok();
        let mut reads = vec![(0usize, 0u32); order.len()];
        for &id in order {
            for n in defs[id as usize].inputs() {
                if let Some(k) = at(n) {
                    reads[k].0 += 1;
                    reads[k].1 = id;
                }
            }
        }
        for &r in roots {
            if let Some(k) = at(r) {
                reads[k].0 += 2;
            }
        }
        let mut inline = vec![false; order.len()];
        for (k, &id) in order.iter().enumerate() {
            let (count, reader) = reads[k];
            if count != 1 || !matches!(defs[id as usize], Def::Arith(..)) {
                continue;
            }
            // A comparison takes at most one operand inline: its right one if both could be.
            if let Def::Compare(_, a, b) = defs[reader as usize] {
                let other = if b == Operand::Node(id) { a } else { b };
                let taken = matches!(other, Operand::Node(o) if at(o).is_some_and(|j| inline[j]));
                if !taken {
                    inline[k] = true;
                }
            }
        }
        // Products of a constant and a whole array whose readers are all inline arithmetic
        // that can take them as their right operand (or either, for `+` and `*`), the other
        // operand not such a product too (one operand a pass is multiplied as it goes).
        let mut scaled = vec![false; order.len()];
        for (k, &id) in order.iter().enumerate() {
            if scaled_operand(defs, order, id).is_none() || roots.contains(&id) {
                continue;
            }
            let mut readers = order
                .iter()
                .enumerate()
                .filter(|&(_, &r)| defs[r as usize].inputs().contains(&id));
            let me = Operand::Node(id);
            scaled[k] = readers.all(|(j, &r)| {
                let Def::Arith(how, p, q) = defs[r as usize] else {
                    return false;
                };
                let other = match (p == me, q == me) {
                    (false, true) => p,
                    (true, false) if matches!(how, BinOp::Add | BinOp::Mul) => q,
                    _ => return false,
                };
                inline[j]
                    && !matches!(other, Operand::Node(o)
                        if scaled_operand(defs, order, o).is_some())
            });
        }
        Self {
            ids: order.to_vec(),
            slots,
            inline,
            scaled,
        }
    }

    /// Own node `id`, if its readers multiply it as they go ([`Slots::scaled`]).
    fn scaled(&self, id: u32) -> bool {
        self.ids.binary_search(&id).is_ok_and(|k| self.scaled[k])
    }

    /// Own node `id`'s def, if a comparison computes it inline.
    fn inlined<'d>(&self, defs: &'d [Def], o: Operand) -> Option<&'d Def> {
        let Operand::Node(id) = o else {
            return None;
        };
        let k = self.ids.binary_search(&id).ok()?;
        self.inline[k].then(|| &defs[id as usize])
    }

    fn of(&self, id: u32) -> usize {
        self.slots[self.ids.binary_search(&id).expect("an own node")]
    }
}

/// Node `id` as a product of a constant and a node outside `order` (a whole array: phase 1's or
/// a column): the constant and that node.
fn scaled_operand(defs: &[Def], order: &[u32], id: u32) -> Option<(f64, u32)> {
    let (c, r) = match defs[id as usize] {
        Def::Arith(BinOp::Mul, Operand::Const(c), Operand::Node(r))
        | Def::Arith(BinOp::Mul, Operand::Node(r), Operand::Const(c)) => (c, r),
        _ => return None,
    };
    order
        .binary_search(&r)
        .is_err()
        .then_some((f64::from_bits(c), r))
}

/// A block's view of a number operand.
enum Num<'a> {
    Const(f64),
    Slice(&'a [f64]),
}

/// `out[j] = f(a[j], b[j])`, with a loop per shape of the operands so each one vectorises
/// (`f` is one operation of the spec's, inlined).
#[inline(always)]
fn zip<T: Copy>(a: &Num<'_>, b: &Num<'_>, out: &mut [T], f: impl Fn(f64, f64) -> T) {
    match (a, b) {
        (Num::Slice(x), Num::Slice(y)) => {
            for ((o, x), y) in out.iter_mut().zip(*x).zip(*y) {
                *o = f(*x, *y);
            }
        }
        (Num::Slice(x), Num::Const(c)) => {
            for (o, x) in out.iter_mut().zip(*x) {
                *o = f(*x, *c);
            }
        }
        (Num::Const(c), Num::Slice(y)) => {
            for (o, y) in out.iter_mut().zip(*y) {
                *o = f(*c, *y);
            }
        }
        (Num::Const(c), Num::Const(d)) => out.fill(f(*c, *d)),
    }
}

/// [`zip`] into bits ([`bits`]): bit `j` is `f(a[j], b[j])`, over `n` bars.
#[inline(always)]
fn zip_bits(a: &Num<'_>, b: &Num<'_>, n: usize, out: &mut Vec<u64>, f: impl Fn(f64, f64) -> bool) {
    match (a, b) {
        (Num::Slice(x), Num::Slice(y)) => bits::pack2(x, y, out, f),
        (Num::Slice(x), Num::Const(c)) => bits::pack1(x, out, |x| f(x, *c)),
        (Num::Const(c), Num::Slice(y)) => bits::pack1(y, out, |y| f(*c, y)),
        (Num::Const(c), Num::Const(d)) => bits::fill(n, f(*c, *d), out),
    }
}

multiversion! {
    /// Evaluates `order` (a combo's own nodes) over bars `[b0, b1)` into the scratch (each
    /// node's pass compiled for the widest vectors the CPU has): numbers a value a bar,
    /// conditions as bits ([`bits`]; `b0` a multiple of 64, so a shared condition's words are
    /// read as they are).
    fn evaluate_block(
        ctx: &Ctx<'_>,
        order: &[u32],
        b0: usize,
        b1: usize,
        scratch: &mut Scratch,
        slots: &mut Slots,
    ) {
        let n = b1 - b0;
        debug_assert_eq!(order, &slots.ids[..]);
        for (k, (&id, &slot)) in order.iter().zip(&slots.slots).enumerate() {
            let def = &ctx.defs[id as usize];
            let series = def.is_series();
            if slots.inline[k] || slots.scaled[k] {
                continue;
            }
            if series {
                if scratch.series.len() <= slot {
                    scratch.series.resize_with(slot + 1, Vec::new);
                }
                let mut out = std::mem::take(&mut scratch.series[slot]);
                out.resize(n, 0.0);
                {
                    let num = |o: &Operand| num(ctx, scratch, slots, *o, b0, b1);
                    match def {
                        Def::Neg(a) => zip(&num(a), &Num::Const(0.0), &mut out, |x, _| -x),
                        Def::Arith(op, a, b) => {
                            let (a, b) = (num(a), num(b));
                            match op {
                                BinOp::Add => zip(&a, &b, &mut out, |x, y| x + y),
                                BinOp::Sub => zip(&a, &b, &mut out, |x, y| x - y),
                                BinOp::Mul => zip(&a, &b, &mut out, |x, y| x * y),
                                BinOp::Div => zip(&a, &b, &mut out, |x, y| x / y),
                            }
                        }
                        _ => unreachable!("series calls are shared arrays"),
                    }
                }
                scratch.series[slot] = out;
            } else {
                if scratch.conds.len() <= slot {
                    scratch.conds.resize_with(slot + 1, Vec::new);
                }
                let mut out = std::mem::take(&mut scratch.conds[slot]);
                let mut bytes = std::mem::take(&mut scratch.bytes);
                {
                    let num = |o: &Operand| num(ctx, scratch, slots, *o, b0, b1);
                    let scaled = |o: &Operand| scaled_view(ctx, slots, *o, b0, b1);
                    let word = |c: u32| word(ctx, scratch, slots, c, b0, b1);
                    let nw = n.div_ceil(64);
                    match def {
                        // A comparison of an arithmetic node only it reads: one pass.
                        Def::Compare(op, a, b)
                            if let Some(Def::Arith(how, p, q)) = slots.inlined(ctx.defs, *b) =>
                        {
                            compare_arith(*op, &num(a), (*how, *p, *q), (&num, &scaled), n, &mut out);
                        }
                        Def::Compare(op, a, b)
                            if let Some(Def::Arith(how, p, q)) = slots.inlined(ctx.defs, *a) =>
                        {
                            // `a op b` is `b op' a`, op' the mirrored comparison.
                            compare_arith(op.mirrored(), &num(b), (*how, *p, *q), (&num, &scaled), n, &mut out);
                        }
                        Def::Compare(op, a, b) => {
                            let (a, b) = (num(a), num(b));
                            let out = &mut out;
                            // The language's comparisons: false with a NaN side, `!=` included.
                            match op {
                                CmpOp::Lt => zip_bits(&a, &b, n, out, |x, y| x < y),
                                CmpOp::Le => zip_bits(&a, &b, n, out, |x, y| x <= y),
                                CmpOp::Gt => zip_bits(&a, &b, n, out, |x, y| x > y),
                                CmpOp::Ge => zip_bits(&a, &b, n, out, |x, y| x >= y),
                                CmpOp::Eq => zip_bits(&a, &b, n, out, |x, y| x == y),
                                CmpOp::Ne => zip_bits(&a, &b, n, out, |x, y| CmpOp::Ne.apply(x, y)),
                            }
                        }
                        Def::Not(a) => {
                            bits::combine(word(*a), Word::always(true), nw, &mut out, |x, y| x ^ y);
                        }
                        Def::And(a, b) => bits::combine(word(*a), word(*b), nw, &mut out, |x, y| x & y),
                        Def::Or(a, b) => bits::combine(word(*a), word(*b), nw, &mut out, |x, y| x | y),
                        Def::Always(b) => bits::fill(n, *b, &mut out),
                        Def::Call { func, .. } if let Some(served) = ctx.served(id as usize) => {
                            let way = function(*func)
                                .crossing
                                .expect("a served node is a crossing");
                            bytes.resize(n, 0);
                            words::crossing_bytes(&served.states, served.way(way), b0, &mut bytes);
                            bits::pack_bytes(&bytes, &mut out);
                        }
                        Def::Call { func, args } => {
                            let inputs: Vec<Input<'_>> = args.iter().map(|a| ctx.input(a)).collect();
                            match function(*func).compute {
                                Compute::Cond(f) => {
                                    bytes.resize(n, 0);
                                    f(&inputs, b0, &mut bytes);
                                    bits::pack_bytes(&bytes, &mut out);
                                }
                                Compute::Series(_) | Compute::Frame(_) => {
                                    unreachable!("series calls are shared")
                                }
                            }
                        }
                        Def::Column(_) | Def::Neg(_) | Def::Arith(..) => unreachable!("series"),
                    }
                }
                scratch.bytes = bytes;
                scratch.conds[slot] = out;
            }
        }
    }
}

/// A block's view of an operand ([`num`]).
type Operands<'f, 'a> = &'f dyn Fn(&Operand) -> Num<'a>;

/// A block's view of an operand if it is a scaled node ([`scaled_view`]).
type Scaled<'f, 'a> = &'f dyn Fn(&Operand) -> Option<(f64, &'a [f64])>;

/// The comparison `x op (p how q)` of an inline arithmetic node over a block of `n` bars into
/// `out`'s bits:
/// with a scaled operand ([`Slots::scaled`]) multiplied as it goes, `q`'s where it is one, else
/// `p`'s (then `how` is `+` or `*`, and `p how q` is `q how p` exactly), else as they are.
#[inline(always)]
fn compare_arith<'a>(
    op: CmpOp,
    x: &Num<'_>,
    (how, p, q): (BinOp, Operand, Operand),
    (num, scaled): (Operands<'_, 'a>, Scaled<'_, 'a>),
    n: usize,
    out: &mut Vec<u64>,
) {
    match (scaled(&q), scaled(&p)) {
        (Some((c, r)), _) => {
            compare_inline(op, x, (how, &num(&p), &Num::Slice(r)), Some(c), n, out);
        }
        (None, Some((c, r))) => {
            compare_inline(op, x, (how, &num(&q), &Num::Slice(r)), Some(c), n, out);
        }
        (None, None) => compare_inline(op, x, (how, &num(&p), &num(&q)), None, n, out),
    }
}

/// Bit `j` of `out` is `x[j] op (p[j] how q[j])`: a comparison and the arithmetic node it alone reads in
/// one pass, the same two operations as two passes (bit for bit: the arithmetic's result is
/// rounded to a double before it is compared either way); with `scale` `c`, `q[j]` is
/// `c * q[j]`, rounded so too.
#[inline(always)]
fn compare_inline(
    op: CmpOp,
    x: &Num<'_>,
    (how, p, q): (BinOp, &Num<'_>, &Num<'_>),
    scale: Option<f64>,
    n: usize,
    out: &mut Vec<u64>,
) {
    #[inline(always)]
    fn with(
        op: CmpOp,
        x: &Num<'_>,
        p: &Num<'_>,
        q: &Num<'_>,
        (n, out): (usize, &mut Vec<u64>),
        g: impl Fn(f64, f64) -> f64,
    ) {
        match op {
            CmpOp::Lt => zip3_bits(x, p, q, (n, out), |x, p, q| x < g(p, q)),
            CmpOp::Le => zip3_bits(x, p, q, (n, out), |x, p, q| x <= g(p, q)),
            CmpOp::Gt => zip3_bits(x, p, q, (n, out), |x, p, q| x > g(p, q)),
            CmpOp::Ge => zip3_bits(x, p, q, (n, out), |x, p, q| x >= g(p, q)),
            CmpOp::Eq => zip3_bits(x, p, q, (n, out), |x, p, q| x == g(p, q)),
            CmpOp::Ne => zip3_bits(x, p, q, (n, out), |x, p, q| CmpOp::Ne.apply(x, g(p, q))),
        }
    }
    let out = (n, out);
    match (how, scale) {
        (BinOp::Add, None) => with(op, x, p, q, out, |p, q| p + q),
        (BinOp::Sub, None) => with(op, x, p, q, out, |p, q| p - q),
        (BinOp::Mul, None) => with(op, x, p, q, out, |p, q| p * q),
        (BinOp::Div, None) => with(op, x, p, q, out, |p, q| p / q),
        (BinOp::Add, Some(c)) => with(op, x, p, q, out, |p, q| p + c * q),
        (BinOp::Sub, Some(c)) => with(op, x, p, q, out, |p, q| p - c * q),
        (BinOp::Mul, Some(c)) => with(op, x, p, q, out, |p, q| p * (c * q)),
        (BinOp::Div, Some(c)) => with(op, x, p, q, out, |p, q| p / (c * q)),
    }
}

/// Operand `o` of an inline arithmetic node, if it is a scaled node ([`Slots::scaled`]): its
/// constant and its whole array's block.
fn scaled_view<'a>(
    ctx: &'a Ctx<'_>,
    slots: &Slots,
    o: Operand,
    b0: usize,
    b1: usize,
) -> Option<(f64, &'a [f64])> {
    let Operand::Node(id) = o else {
        return None;
    };
    if !slots.scaled(id) {
        return None;
    }
    let (c, r) = scaled_operand(ctx.defs, &slots.ids, id).expect("a scaled node");
    let r = whole_series(ctx.bars, ctx.defs, ctx.arrays, r).expect("a whole array");
    Some((c, &r[b0..b1]))
}

/// Bit `j` of `out` is `f(x[j], p[j], q[j])`, over `n` bars. A constant operand is filled into
/// a block of its own first, so each comparison compiles one packed loop, not one per shape of
/// its operands (with 48 comparisons, three CPU targets and a 64-bar loop each, the shapes
/// multiplied the kernel's compile time); the bands of a grid read arrays on every side.
#[inline(always)]
fn zip3_bits<'a>(
    x: &Num<'a>,
    p: &Num<'a>,
    q: &Num<'a>,
    (n, out): (usize, &mut Vec<u64>),
    f: impl Fn(f64, f64, f64) -> bool,
) {
    let block = |v: &Num<'a>| match v {
        Num::Slice(s) => std::borrow::Cow::Borrowed(*s),
        Num::Const(c) => std::borrow::Cow::Owned(vec![*c; n]),
    };
    bits::pack3(&block(x), &block(p), &block(q), out, f);
}

fn num<'a>(
    ctx: &'a Ctx<'_>,
    scratch: &'a Scratch,
    slots: &Slots,
    o: Operand,
    b0: usize,
    b1: usize,
) -> Num<'a> {
    match o {
        Operand::Const(bits) => Num::Const(f64::from_bits(bits)),
        Operand::Node(n) => match whole_series(ctx.bars, ctx.defs, ctx.arrays, n) {
            Some(s) => Num::Slice(&s[b0..b1]),
            None => Num::Slice(&scratch.series[slots.of(n)]),
        },
    }
}

/// Number node `n`'s whole series, where it is one: a column, or a series phase 1 computed
/// (`None`: a combo's own node, computed a block at a time).
fn whole_series<'a>(
    bars: &'a Bars<'_>,
    defs: &[Def],
    arrays: &'a [Option<Array>],
    n: u32,
) -> Option<&'a [f64]> {
    match &defs[n as usize] {
        Def::Column(c) => Some(column(bars, *c).expect("checked")),
        _ => match arrays[n as usize].as_ref()? {
            Array::Series(s) => Some(s),
            Array::Shared(s) => Some(s),
            Array::Cond(_) => unreachable!("a number operand"),
        },
    }
}

/// Condition node `c`'s words over bars `[b0, b1)` (`b0` a multiple of 64, so a shared
/// array's words are read as they are).
fn word<'a>(
    ctx: &'a Ctx<'_>,
    scratch: &'a Scratch,
    slots: &Slots,
    c: u32,
    b0: usize,
    b1: usize,
) -> Word<'a> {
    match (&ctx.defs[c as usize], &ctx.arrays[c as usize]) {
        (Def::Always(b), _) => Word::always(*b),
        (_, Some(Array::Cond(a))) => {
            debug_assert_eq!(b0 % 64, 0, "blocks start on a word");
            Word::Of(&a.bits[b0 / 64..b1.div_ceil(64)])
        }
        (_, Some(Array::Series(_) | Array::Shared(_))) => unreachable!("a condition"),
        (_, None) => Word::Of(&scratch.conds[slots.of(c)]),
    }
}

/// Phase 2 for one combo: its own nodes, the blocks' events, and the execution loop's state,
/// advanced a block of bars at a time ([`ComboRun::block`]) so the combos of one worker run
/// each block in turn while the block of the arrays they read is in cache.
struct ComboRun<'a, B: Book> {
    combo: ComboPlan,
    /// Its own nodes in dependency order, and where they live in the scratch.
    order: Vec<u32>,
    slots: Slots,
    /// The word path, where its own nodes allow it.
    words: Option<words::Words>,
    /// The first bar the loop acts on (the execution's `start`).
    start: usize,
    /// The engine reads the stop formulas' values at events.
    stopped: bool,
    engine: Engines<'a, B>,
}

/// The execution loop of a combo: the paper's plain loop where the options are the paper's
/// (both sides, no stops, no warm-up, fills at closes) and no stop is a formula, so a formula
/// whose trades are many books them as fast as a built-in does; else the general one.
enum Engines<'a, B: Book> {
    Plain(Engine<'a, B, true>),
    General(Engine<'a, B, false>),
}

impl<'a, B: Book> ComboRun<'a, B> {
    fn new(
        ctx: &Ctx<'a>,
        combo: ComboPlan,
        exec: &Execution,
        book: B,
        scratch: &mut Scratch,
    ) -> Self {
        let roots: Vec<u32> = combo
            .conditions
            .iter()
            .filter_map(|c| match c {
                Cond::Node(n) => Some(*n),
                Cond::Always(_) => None,
            })
            .chain(combo.stops.iter().filter_map(|s| match s {
                Some(Operand::Node(n)) => Some(*n),
                _ => None,
            }))
            .collect();
        let mut stack = std::mem::take(&mut scratch.stack);
        let order = ctx.own_nodes(&roots, &mut stack);
        scratch.stack = stack;
        let formula_stops = combo.stops.map(|s| s.is_some());
        let (engine, stopped) = if exec.is_plain() && !formula_stops.contains(&true) {
            (
                Engines::Plain(Engine::<B, true>::new(ctx.bars, exec, book)),
                false,
            )
        } else {
            let engine = Engine::<B, false>::new(ctx.bars, exec, book)
                .with_formula_stops(formula_stops)
                .with_shared(ctx.stops)
                .with_table(ctx.tables.get(&combo.stops));
            // A table of the formulas' first stops has read them already.
            let stopped = engine.reads_stop_values();
            (Engines::General(engine), stopped)
        };
        // Conditions made only of crossings of whole arrays and and/or/not: bits from the
        // crossings' state bytes.
        let words = words::Words::of(ctx, &order, &combo.conditions);
        let slots = Slots::of_order(ctx.defs, &order, &roots);
        Self {
            combo,
            order,
            slots,
            words,
            start: exec.start,
            stopped,
            engine,
        }
    }

    /// Bars `[b0, b1)` (`b0` a multiple of 64): the combo's own nodes, its conditions' bits,
    /// and the execution loop over the bars with an event.
    fn block(&mut self, ctx: &Ctx<'_>, (b0, b1): (usize, usize), scratch: &mut Scratch) {
        let combo = &self.combo;
        let range = (b0, b1, self.start);
        // The word path: the conditions' bits from the crossings' state bytes, and the stop
        // formulas' values constants or whole arrays (no own node is a number).
        if let Some(words) = &self.words {
            let planes = words.events(ctx, (b0, b1), &mut scratch.words);
            let stop_views = combo.stops.map(|s| s.map(|o| num_whole(ctx, o, b0, b1)));
            apply(
                &mut self.engine,
                (&planes, range),
                self.stopped,
                &stop_views,
            );
            return;
        }
        let slots = &mut self.slots;
        evaluate_block(ctx, &self.order, b0, b1, scratch, slots);
        let view = |c: Cond| match c {
            Cond::Always(b) => Word::always(b),
            Cond::Node(n) => word(ctx, scratch, slots, n, b0, b1),
        };
        let planes = combo.conditions.map(view);
        // The stop formulas' values in this block, read at each event that may decide an entry.
        let stop_views = combo
            .stops
            .map(|s| s.map(|o| num(ctx, scratch, slots, o, b0, b1)));
        apply(
            &mut self.engine,
            (&planes, range),
            self.stopped,
            &stop_views,
        );
    }

    fn finish(self) -> B {
        match self.engine {
            Engines::Plain(engine) => engine.finish(),
            Engines::General(engine) => engine.finish(),
        }
    }
}

/// The execution loop over a block's condition bits ([`drive`]), the stop formulas' values
/// read from `stop_views` at each visited bar if the engine reads them (`stopped`).
fn apply<B: Book>(
    engine: &mut Engines<'_, B>,
    (planes, range): (&[Word<'_>; 4], (usize, usize, usize)),
    stopped: bool,
    stop_views: &[Option<Num<'_>>; 3],
) {
    match engine {
        Engines::Plain(engine) => drive(engine, planes, range, |_, _| {}),
        Engines::General(engine) => {
            let b0 = range.0;
            drive(
                engine,
                planes,
                range,
                |engine: &mut Engine<'_, B, false>, i: usize| {
                    if stopped {
                        engine.stop_values(stop_values(stop_views, i - b0));
                    }
                },
            );
        }
    }
}

/// The stop formulas' values at bar `j` of a block (NaN: no such formula).
#[inline(always)]
fn stop_values(views: &[Option<Num<'_>>; 3], j: usize) -> [f64; 3] {
    views.each_ref().map(|v| match v {
        Some(Num::Slice(x)) => x[j],
        Some(Num::Const(c)) => *c,
        None => f64::NAN,
    })
}

/// A number operand over bars `[b0, b1)` that is a constant or a whole array (on the word
/// path, no own node is a number).
fn num_whole<'a>(ctx: &'a Ctx<'_>, o: Operand, b0: usize, b1: usize) -> Num<'a> {
    match o {
        Operand::Const(bits) => Num::Const(f64::from_bits(bits)),
        Operand::Node(n) => Num::Slice(
            &whole_series(ctx.bars, ctx.defs, ctx.arrays, n).expect("a whole array")[b0..b1],
        ),
    }
}

/// The events of bar `i` that can change the position, as a mask of an event's bits (bit 0
/// long, 1 short, 2 exit long, 3 exit short). Without stops the position is exact between
/// events, so only these are visited: when flat the signals, when long a short signal or a
/// long exit, when short a long signal or a short exit (the others do nothing). With stops,
/// every event (a stop may have closed the position since the last one).
#[inline(always)]
fn relevant<B: Book, const PLAIN: bool>(engine: &Engine<'_, B, PLAIN>, every: bool) -> u8 {
    match engine.position() {
        _ if every => 0x0f,
        p if p > 0.0 => 0b0110,
        p if p < 0.0 => 0b1001,
        _ => 0b0011,
    }
}

/// Applies event `e` (bits as [`relevant`]'s) at bar `i`, calling `before` first.
#[inline(always)]
fn visit<B: Book, const PLAIN: bool>(
    engine: &mut Engine<'_, B, PLAIN>,
    i: usize,
    e: u8,
    before: &mut impl FnMut(&mut Engine<'_, B, PLAIN>, usize),
) {
    before(engine, i);
    if e & 0b1100 != 0 {
        engine.exit(i, e & 0b100 != 0, e & 0b1000 != 0);
    }
    // Both signals at once are no signal.
    match e & 0b11 {
        0b01 => engine.signal(i, 1.0),
        0b10 => engine.signal(i, -1.0),
        _ => {}
    }
}

/// The execution loop over one block's condition bits, `planes` (long, short, exit long, exit
/// short) over bars `[b0, b1)`: sixty-four bars a word, the next bar whose events can change
/// the position ([`relevant`]) found by one count of trailing zeros; bars before `from` and
/// past the block never visited.
#[inline(always)]
fn drive<B: Book, const PLAIN: bool>(
    engine: &mut Engine<'_, B, PLAIN>,
    planes: &[Word<'_>; 4],
    (b0, b1, from): (usize, usize, usize),
    mut before: impl FnMut(&mut Engine<'_, B, PLAIN>, usize),
) {
    let every = engine.checks_stops();
    let masks = |bits: u8| {
        std::array::from_fn::<u64, 4, _>(|p| 0u64.wrapping_sub(u64::from((bits >> p) & 1)))
    };
    let mut wanted = masks(relevant(engine, every));
    let n = b1 - b0;
    for w in 0..n.div_ceil(64) {
        let at = b0 + 64 * w;
        let [l, s, xl, xs] = planes.map(|p| p.at(w));
        // The word's bars in the block and from `from`.
        let mut rest = if n - 64 * w < 64 {
            u64::MAX >> (64 - (n - 64 * w))
        } else {
            u64::MAX
        };
        if from > at {
            rest &= u64::MAX.checked_shl((from - at) as u32).unwrap_or(0);
        }
        loop {
            let [a, b, c, d] = wanted;
            let mask = rest & ((l & a) | (s & b) | (xl & c) | (xs & d));
            if mask == 0 {
                break;
            }
            let k = mask.trailing_zeros();
            rest &= u64::MAX.checked_shl(k + 1).unwrap_or(0);
            let bit = |x: u64| ((x >> k) & 1) as u8;
            let e = bit(l) | (bit(s) << 1) | (bit(xl) << 2) | (bit(xs) << 3);
            visit(engine, at + k as usize, e, &mut before);
            wanted = masks(relevant(engine, every));
        }
    }
}
