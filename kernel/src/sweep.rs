//! The parameter sweep: many combos over one close series, fast, in input order, and identical
//! for any thread count.
//!
//! A combo's two lines are `a = HMA(half, full, sqrt)` and `b = HMA3(p3, p2, p)`. Both are
//! functions of three of the six windows, and grids repeat them, so the sweep computes each
//! distinct array once, in three phases:
//!
//! 1. **First level**: every distinct `WMA(close, n)` the missing lines need, all of them in
//!    *one* pass over the closes ([`wma_multi`], prefix sharing): the pass costs the longest
//!    window in multiply-adds per bar, not the sum of the windows.
//! 2. **Second level**: each distinct HMA3 line (per `(p3, p2, p)`), and each distinct HMA line
//!    (per `(half, full, sqrt)`; the sqrt windows over one `(half, full)` difference series in
//!    one pass), in parallel.
//! 3. **Signals**: each combo's stop-and-reverse loop over its two lines, in parallel.
//!
//! Where windows are short next to the series (the usual case, the paper sweep included), the
//! phases run tile by tile along the bars ([`tiled`]): a tile's first-level WMAs and lines are
//! read back from cache by the next phase, and nothing is written out whole but one sign byte
//! per bar per combo, and the lines a cache keeps. Long windows run each phase over the whole
//! series.
//!
//! An [`ArrayCache`] that outlives the sweep (the server's) is asked for every line before it
//! is computed and offered every array after; a warm cache turns a repeated sweep into phase 3
//! alone. Memory is bounded: combos are taken in groups whose arrays fit the working-set
//! budget.
//!
//! None of this changes the arithmetic of any output (see [`crate::lines::wma`]): every result is the
//! reference's bit for bit, whatever the grouping, the cache state or the number of threads.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::{MaybeUninit, take};
use std::sync::{Arc, OnceLock};

use crate::certified::{self, Bounded, CertifiedBars, Side};
use crate::execution::Execution;
use crate::ledger::{Books, Moves};
use crate::lines::Bars;
use crate::lines::wma::{Input, wma_multi_raw};
use crate::record::Records;
use crate::{Combo, ComboResult, Error, Result, signal};

mod tiled;

pub use crate::keys::{ArrayCache, ArrayKey, NoCache};
use crate::lines::Line;
use crate::plan;
use tiled::Tiling;

/// Below this many multiply-adds (about a millisecond of one core) a sweep runs on the calling
/// thread: handing work to the pool and back would cost more than it saves.
pub const PARALLEL_MIN_WORK: u64 = 4 << 20;

/// Multiply-adds a sweep of `combos` over `bars` bars costs, an upper bound that ignores
/// sharing: it decides between running inline and running on the pool.
pub fn work(bars: usize, combos: &[Combo]) -> u64 {
    let per_bar: u64 = combos.iter().map(Combo::cost).sum();
    per_bar.saturating_mul(bars as u64)
}

/// Multiply-adds a cold sweep performs when its arrays fit one group (no cache): one pass over
/// the closes as long as the longest first-level window, one pass per distinct `(half, full)`
/// difference series as long as its longest `sqrt`, and one per distinct HMA3 triple of length
/// `p`. This is the arithmetic the answer needs (see the module docs), the figure a measured
/// rate is quoted against; windows longer than the series cost what the series has.
pub fn multiply_adds(bars: usize, combos: &[Combo]) -> u64 {
    let bars = bars as u64;
    let clamp = |w: u32| u64::from(w).min(bars);
    let first = combos
        .iter()
        .flat_map(Combo::close_windows)
        .map(clamp)
        .max()
        .unwrap_or(0);
    let mut hma: BTreeMap<[u32; 2], u64> = BTreeMap::new();
    let mut hma3: BTreeSet<[u32; 3]> = BTreeSet::new();
    for c in combos {
        let longest = hma.entry([c.half(), c.full()]).or_default();
        *longest = (*longest).max(clamp(c.sqrt()));
        hma3.insert([c.p3(), c.p2(), c.p()]);
    }
    let second: u64 = hma.values().sum::<u64>() + hma3.iter().map(|t| clamp(t[2])).sum::<u64>();
    bars * (first + second)
}

/// Bytes of new lines a batch of combos computes before running their signals: well inside a
/// server CPU's last-level cache, so the signals read them from cache, not memory.
const BATCH_BYTES: usize = 16 << 20;

/// Arrays one combo can need at once: five first-level windows and its two lines.
const ARRAYS_PER_COMBO: usize = 7;

/// Bytes of per-worker scratch per bar, at most: a chunk of a difference series (f64; a whole
/// one for windows longer than a quarter of a chunk) and the signal bytes.
const SCRATCH_BYTES_PER_BAR: usize = size_of::<f64>() + size_of::<u8>();

/// Bytes a sweep allocates besides its input series, at most: its arrays (all the distinct
/// ones, but never more than `shared_cap` bytes of them, and never fewer than one combo's),
/// `workers` sets of per-worker scratch, and the results.
pub fn memory_bytes(bars: usize, combos: &[Combo], workers: usize, shared_cap: usize) -> usize {
    // The results, and the closes' moves for the per-bar metrics.
    let results = combos.len() * size_of::<ComboResult>() + Moves::bytes(bars);
    // The certified path may leave untiled what the exact path tiles (which one runs depends
    // on the closes): then the larger of the two bounds it.
    let [certified, exact] = plans(bars, combos, workers);
    let tiled = |t: Tiling| t.held_bytes(bars, combos, shared_cap) + workers * t.scratch_bytes();
    let arrays = match (certified, exact) {
        (Some(t), _) => tiled(t),
        (None, Some(t)) => tiled(t).max(untiled_bytes(bars, combos, workers, shared_cap)),
        (None, None) => untiled_bytes(bars, combos, workers, shared_cap),
    };
    arrays + results
}

/// The tilings of a sweep with and without certified lines (`None`: untiled).
fn plans(bars: usize, combos: &[Combo], workers: usize) -> [Option<Tiling>; 2] {
    [true, false].map(|certify| Tiling::plan(bars, combos, workers, None, certify))
}

/// [`memory_bytes`] of the untiled path, without the results.
fn untiled_bytes(bars: usize, combos: &[Combo], workers: usize, shared_cap: usize) -> usize {
    let array = bars.max(1) * size_of::<f64>();
    let uses = line_uses(combos);
    let windows: BTreeSet<u32> = combos.iter().flat_map(Combo::close_windows).collect();
    let shared = uses.values().filter(|&&n| n > 1).count();
    let single = uses.len() - shared;
    // First-level arrays and shared lines stay for a group; single-use lines only for a batch.
    let distinct = windows.len() + shared + single.min(batch_lines(array, workers));
    let least = ARRAYS_PER_COMBO.min(distinct.max(1)) * array;
    // Certified lines carry a bound per 64 bars, and a worker recomputing reference values
    // holds a few first-level windows' worth of them: inside the per-bar scratch's margin.
    let arrays = (distinct * array).min(shared_cap.max(least));
    arrays + workers * bars * SCRATCH_BYTES_PER_BAR
}

/// Bytes a sweep of `combos` over `bars` bars offers a cache that keeps arrays: each combo's
/// sign bytes or its distinct lines (two per combo, fewer where combos share them), whichever
/// take less (`keeps_signs`).
pub fn line_bytes(bars: usize, combos: &[Combo]) -> usize {
    (line_uses(combos).len() * bars * size_of::<f64>()).min(combos.len() * bars)
}

/// Whether a sweep of `combos` keeps (and looks up first) each combo's sign bytes rather than
/// its lines: one byte a bar per combo against eight per distinct line, so unless more than
/// eight combos share each line (a grid of a few lines crossed with each other) the signs are
/// the smaller. The paper grid's lines are nearly all single-use (149 for 80 combos, 179 MB over
/// 150,000 bars) and its signs 12 MB, which is what a repeated sweep of it reads and what
/// keeping it writes into fresh memory. The rule depends only on the combos, not on the bars,
/// so sweeps of the same grid over a series and over a range of it (a walk-forward's folds)
/// keep and look up the same arrays.
pub(crate) fn keeps_signs(combos: &[Combo]) -> bool {
    combos.len() <= line_uses(combos).len() * size_of::<f64>()
}

/// How many lines a batch computes before running its signals (see [`BATCH_BYTES`]).
fn batch_lines(array_bytes: usize, workers: usize) -> usize {
    (BATCH_BYTES / array_bytes.max(1)).max(4 * workers).max(2)
}

/// How many combos read each line.
fn line_uses(combos: &[Combo]) -> HashMap<Line, usize> {
    let mut uses: HashMap<Line, usize> = HashMap::new();
    for c in combos {
        for key in [hma_key(c), hma3_key(c)] {
            *uses.entry(key).or_default() += 1;
        }
    }
    uses
}

/// Per-worker scratch bytes of a sweep of `combos` over `bars` bars on `workers` threads.
pub fn scratch_bytes(bars: usize, combos: &[Combo], workers: usize) -> usize {
    match plans(bars, combos, workers) {
        [Some(t), _] => t.scratch_bytes(),
        [None, Some(t)] => t.scratch_bytes().max(bars * SCRATCH_BYTES_PER_BAR),
        [None, None] => bars * SCRATCH_BYTES_PER_BAR,
    }
}

/// Per-worker scratch bytes of any sweep over `bars` bars, at most: what [`scratch_bytes`]
/// answers for the largest tiled or untiled plan.
pub(crate) fn scratch_bound(bars: usize) -> usize {
    tiled::SCRATCH_BOUND.max(bars * SCRATCH_BYTES_PER_BAR)
}

fn hma_key(c: &Combo) -> Line {
    Line::Hma([c.half(), c.full(), c.sqrt()])
}

fn hma3_key(c: &Combo) -> Line {
    Line::Hma3([c.p3(), c.p2(), c.p()])
}

/// The cache's key of combo `c`'s state bytes: its two lines' pair.
pub(crate) fn signs_key(c: &Combo) -> ArrayKey {
    plan::signs_key(hma_key(c), hma3_key(c))
}

/// How a sweep is run: where arrays come from, when to stop, how much memory to use.
pub struct SweepControl<'a> {
    /// Cache of arrays for this series.
    pub cache: &'a dyn ArrayCache,
    /// Polled between tasks; once it answers true the sweep ends with [`Error::Cancelled`].
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
    /// Upper bound on the bytes of arrays the sweep holds at once (besides scratch and
    /// results); at least one combo's arrays are always allowed.
    pub working_set_bytes: usize,
    /// Use rayon (`Some(true)`), stay on the calling thread (`Some(false)`), or decide by
    /// [`work`] against [`PARALLEL_MIN_WORK`] (`None`). The results are the same either way.
    pub parallel: Option<bool>,
    /// Bars per tile of the tiled sweep (see the module docs); `None` chooses (tiles where the
    /// windows are short next to a tile and the series has tiles for every thread), `Some(0)`
    /// never tiles. The results are the same either way.
    pub tile_bars: Option<usize>,
    /// Compute the per-bar metrics (`sharpe`, `sortino`: [`crate::Moves`] and a few operations
    /// per trade); false leaves their accumulators empty, for callers that read only the trade
    /// figures (pnl, trades, wins, drawdown) and the other metrics.
    pub bar_metrics: bool,
    /// What to keep per combo besides its result (trades, block marks): `None` keeps nothing.
    /// Its slots are indexed like the combos.
    pub records: Option<&'a Records>,
    /// Compute every line by the exact rule, even where a certified line would be faster
    /// (docs/architecture.md, "Certified lines"). The results are the same either way; this
    /// is for comparing the two.
    pub exact_lines: bool,
    /// Counts the bars compared on certified lines and those decided from recomputed
    /// reference values. `None` counts nothing.
    pub certified: Option<&'a CertifiedBars>,
    /// Told the work done as it is done, in combo-bars (a combo run over `n` bars is `n`),
    /// from any worker: the calls of one sweep add up to its combos times the bars of `close`
    /// exactly, each reported once its signals are read. `None` reports nothing.
    pub progress: Option<&'a (dyn Fn(u64) + Sync)>,
}

impl Default for SweepControl<'_> {
    fn default() -> Self {
        Self {
            cache: &NoCache,
            cancelled: &|| false,
            working_set_bytes: 512 << 20,
            parallel: None,
            tile_bars: None,
            bar_metrics: true,
            records: None,
            exact_lines: false,
            certified: None,
            progress: None,
        }
    }
}

impl SweepControl<'_> {
    /// Reports `combos` combos run over `bars` bars each (see [`SweepControl::progress`]).
    pub(crate) fn report(&self, combos: usize, bars: usize) {
        if let Some(progress) = self.progress {
            progress((combos as u64).saturating_mul(bars as u64));
        }
    }

    /// Runs the call's combos at positions `at` as a sweep of their own (`run`, given a
    /// control with record slots of their own) and moves its results and records to those
    /// positions of the call's.
    ///
    /// # Errors
    /// As `run`.
    pub(crate) fn part(
        &self,
        at: &[usize],
        results: &mut [ComboResult],
        run: impl FnOnce(&SweepControl<'_>) -> Result<Vec<ComboResult>>,
    ) -> Result<()> {
        let records = self.records.map(|r| r.like(at.len()));
        let sub = SweepControl {
            records: records.as_ref(),
            ..*self
        };
        for (&i, r) in at.iter().zip(run(&sub)?) {
            results[i] = r;
        }
        if let (Some(all), Some(part)) = (self.records, records) {
            for (&i, record) in at.iter().zip(part.into_records()) {
                all.put(i, record);
            }
        }
        Ok(())
    }
}

/// Runs every combo over `close` with the given round-trip `fee` (a fraction), in parallel on
/// the current rayon pool. Results are in input order.
///
/// # Errors
/// [`Error::InvalidFee`] if `fee` is negative or not finite.
pub fn sweep(close: &[f64], combos: &[Combo], fee: f64) -> Result<Vec<ComboResult>> {
    sweep_with(close, combos, fee, &SweepControl::default())
}

/// [`sweep`] with a cache, a cancellation check and a memory budget.
///
/// # Errors
/// [`Error::InvalidFee`] if `fee` is negative or not finite; [`Error::Cancelled`] once
/// `control.cancelled` answers true.
pub fn sweep_with(
    close: &[f64],
    combos: &[Combo],
    fee: f64,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    sweep_executed(close, combos, &Execution::new(fee), control)
}

/// [`sweep_with`] under any [`Execution`]: sides, stops and a warm-up (`exec.start`: the
/// lines are computed over all of `close`, signals read from bar `start` on).
///
/// # Errors
/// As [`Execution::validate`]; [`Error::Cancelled`] once `control.cancelled` answers true.
pub fn sweep_executed(
    close: &[f64],
    combos: &[Combo],
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    sweep_executed_on(&Bars::closes(close), combos, exec, control)
}

/// [`sweep_executed`] over bars, whose opens, highs and lows the v1.3 execution options read.
///
/// # Errors
/// As [`sweep_executed`], and [`Error::InvalidOption`] for an option whose column `bars`
/// lacks.
pub fn sweep_executed_on(
    bars: &Bars<'_>,
    combos: &[Combo],
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    exec.validate()?;
    exec.check_bars(bars)?;
    let results = run(bars, combos, exec, control, None)?;
    Ok(results)
}

/// Each combo's state bytes over `close` (one a bar: the sign of `HMA3 - HMA`, or undefined,
/// as [`crate::signal`] reads them), what the sweep's last phase reads, without its trades:
/// how a formula's crossing of the two lines is served without computing either line whole
/// (the tiles write only these bytes). The cache is asked for each combo's bytes first
/// ([`ArrayKey::Signs`]) and offered those computed, as a sweep of the combos would; nothing
/// is reported to `control.progress` or recorded.
///
/// # Errors
/// [`Error::Cancelled`] once `control.cancelled` answers true.
pub(crate) fn states(
    close: &[f64],
    combos: &[Combo],
    control: &SweepControl<'_>,
) -> Result<Vec<Arc<[u8]>>> {
    let quiet = SweepControl {
        cache: control.cache,
        cancelled: control.cancelled,
        working_set_bytes: control.working_set_bytes,
        parallel: control.parallel,
        tile_bars: control.tile_bars,
        bar_metrics: false,
        records: None,
        exact_lines: control.exact_lines,
        certified: control.certified,
        progress: None,
    };
    let sink: Vec<OnceLock<Arc<[u8]>>> = combos.iter().map(|_| OnceLock::new()).collect();
    run(
        &Bars::closes(close),
        combos,
        &Execution::default(),
        &quiet,
        Some(&sink),
    )?;
    Ok(sink
        .into_iter()
        .map(|s| s.into_inner().expect("every combo's bytes are made"))
        .collect())
}

/// The sweep of [`sweep_executed_on`] (checked); with `sink`, each combo's state bytes go
/// there instead of into trades ([`states`]).
fn run(
    bars: &Bars<'_>,
    combos: &[Combo],
    exec: &Execution,
    control: &SweepControl<'_>,
    sink: Option<&[OnceLock<Arc<[u8]>>]>,
) -> Result<Vec<ComboResult>> {
    let close = bars.close;
    let parallel = control
        .parallel
        .unwrap_or_else(|| work(close.len(), combos) >= PARALLEL_MIN_WORK);
    let certify = !control.exact_lines && certified::certifiable(close);
    let run = Run {
        close,
        bars: *bars,
        stops: crate::execution::SharedStops::of(bars, exec, combos.len(), false),
        combos,
        certify,
        signs: sink.is_some() || keeps_signs(combos),
        sink,
        recycler: certified::Recycler::default(),
        exec: *exec,
        moves: control
            .bar_metrics
            .then(|| Moves::cached(close, control.cache)),
        control,
        parallel,
    };
    // Combos sorted so that neighbours share arrays (the paper rule's lengths in order share
    // half/p windows), which keeps groups small when the budget forces several.
    let mut order: Vec<usize> = (0..combos.len()).collect();
    order.sort_by_key(|&i| {
        let c = &combos[i];
        (c.p(), c.full(), c.p3(), c.p2(), c.half(), c.sqrt())
    });
    let workers = if parallel {
        rayon::current_num_threads()
    } else {
        1
    };
    if let Some(tiling) = Tiling::plan(close.len(), combos, workers, control.tile_bars, certify) {
        return run.tiled(&order, &tiling);
    }
    let array_bytes = size_of_val(close).max(1);
    let max_arrays = (control.working_set_bytes / array_bytes).max(ARRAYS_PER_COMBO);
    let uses = line_uses(combos);
    let batch = batch_lines(array_bytes, workers).min(max_arrays.saturating_sub(5).max(2));
    let mut results = vec![ComboResult::default(); combos.len()];
    let mut rest = &order[..];
    while !rest.is_empty() {
        let taken = group_len(rest, combos, max_arrays, &uses, batch);
        let (group, tail) = rest.split_at(taken);
        rest = tail;
        for (i, r) in run.group(group, batch)? {
            results[i] = r;
        }
    }
    Ok(results)
}

/// The length of the longest prefix of `order` whose distinct arrays number at most
/// `max_arrays` (never empty).
/// The length of the longest prefix of `order` whose arrays fit `max_arrays` at once: its
/// first-level windows and its shared lines (read by several combos of the sweep, `uses`) for
/// the whole group, plus `batch` single-use lines, which live only as long as their batch.
/// Never empty.
fn group_len(
    order: &[usize],
    combos: &[Combo],
    max_arrays: usize,
    uses: &HashMap<Line, usize>,
    batch: usize,
) -> usize {
    let mut keys: BTreeSet<Line> = BTreeSet::new();
    for (taken, &i) in order.iter().enumerate() {
        let c = &combos[i];
        let new: Vec<Line> = c
            .close_windows()
            .map(Line::Wma)
            .into_iter()
            .chain(
                [hma_key(c), hma3_key(c)]
                    .into_iter()
                    .filter(|k| uses[k] > 1),
            )
            .filter(|k| !keys.contains(k))
            .collect();
        if taken > 0 && keys.len() + new.len() + batch > max_arrays {
            return taken;
        }
        keys.extend(new);
    }
    order.len()
}

type Arrays = HashMap<Line, Arc<[f64]>>;

/// The bounds of the certified lines among [`Arrays`] (per 64 bars, [`certified`]).
type Bounds = HashMap<Line, Arc<[f64]>>;

/// One sweep's inputs, shared by its phases.
struct Run<'a> {
    close: &'a [f64],
    /// The bars the execution reads (their `close` is `close`).
    bars: Bars<'a>,
    /// What the general loop's stop checks share.
    stops: crate::execution::SharedStops,
    combos: &'a [Combo],
    /// Long windows take certified lines (the series allows it and the caller did not ask
    /// for the exact rule).
    certify: bool,
    /// The cache keeps, and is asked first for, each combo's sign bytes rather than its lines
    /// ([`keeps_signs`]).
    signs: bool,
    /// Where each combo's state bytes go instead of into trades ([`states`]).
    sink: Option<&'a [OnceLock<Arc<[u8]>>]>,
    /// Certified lines' allocations, reused once their lines are no longer read.
    recycler: certified::Recycler,
    exec: Execution,
    /// The closes' moves, for every combo's per-bar metrics (if asked for).
    moves: Option<Moves>,
    control: &'a SweepControl<'a>,
    parallel: bool,
}

impl Run<'_> {
    /// What every combo's ledger shares.
    fn books(&self) -> Books<'_> {
        Books {
            bars: self.bars,
            stops: &self.stops,
            moves: self.moves.as_ref(),
            records: self.control.records,
        }
    }

    fn check(&self) -> Result<()> {
        if (self.control.cancelled)() {
            return Err(Error::Cancelled);
        }
        Ok(())
    }

    /// Maps `f` over `items`, on the pool if the sweep is parallel, with per-worker scratch.
    fn map<T: Sync, R: Send>(
        &self,
        items: &[T],
        f: impl Fn(&mut Scratch, &T) -> Result<R> + Sync,
    ) -> Result<Vec<R>> {
        crate::par::map(self.parallel, items, f)
    }

    /// Hands combo `i`'s state bytes to the sink, if the sweep has one (then its trades are
    /// not run).
    fn sink(&self, i: usize, signs: &Arc<[u8]>) -> bool {
        let Some(sink) = self.sink else {
            return false;
        };
        // Each combo runs once, so its slot is empty here; a second set would change nothing.
        let _ = sink[i].set(Arc::clone(signs));
        true
    }

    /// Combo `c`'s sign bytes, if the sweep keeps signs and the cache has them.
    fn cached_signs(&self, c: &Combo) -> Option<Arc<[u8]>> {
        self.signs
            .then(|| self.control.cache.get_bytes(signs_key(c)))
            .flatten()
            .filter(|s| s.len() == self.close.len())
    }

    /// Offers combo `c`'s sign bytes, if the sweep keeps signs and the cache may keep them.
    fn offer_signs(&self, c: &Combo, signs: impl FnOnce() -> Arc<[u8]>) {
        if self.signs && self.control.cache.keeps() {
            self.control.cache.insert_bytes(signs_key(c), signs());
        }
    }

    /// Line `line` of the closes, if the cache holds it (the cache is not asked, nor its key
    /// made, where it never holds one).
    fn cached(&self, line: Line) -> Option<Arc<[f64]>> {
        let cache = self.control.cache;
        cache
            .may_hold()
            .then(|| cache.get(plan::line_array_key(line)))
            .flatten()
            .filter(|l| l.len() == self.close.len())
    }

    /// Offers a computed line, unless the sweep keeps signs instead.
    fn offer_line(&self, line_of: Line, line: &Arc<[f64]>) {
        if !self.signs && self.control.cache.keeps() {
            self.control
                .cache
                .insert(plan::line_array_key(line_of), Arc::clone(line));
        }
    }

    /// The three phases for one group of combos (indices into `combos`).
    fn group(&self, group: &[usize], per_batch: usize) -> Result<Vec<(usize, ComboResult)>> {
        // Combos whose sign bytes the cache has need no line: their trades first.
        let mut kept = Vec::new();
        let mut rest = Vec::with_capacity(group.len());
        for &i in group {
            match self.cached_signs(&self.combos[i]) {
                Some(signs) => kept.push((i, signs)),
                None => rest.push(i),
            }
        }
        let mut results = self.map(&kept, |_, (i, signs)| {
            self.check()?;
            if self.sink(*i, signs) {
                return Ok((*i, ComboResult::default()));
            }
            let books = self.books();
            Ok((*i, signal::crosses(books, *i, [&signs[..]], &self.exec)))
        })?;
        self.control.report(kept.len(), self.close.len());
        let group = &rest[..];
        let mut lines = Arrays::new();
        let mut bounds = Bounds::new();
        // What the lines need, and which of them the cache already has.
        let mut hma: BTreeMap<(u32, u32), BTreeSet<u32>> = BTreeMap::new();
        let mut hma3: BTreeSet<[u32; 3]> = BTreeSet::new();
        for &i in group {
            let c = &self.combos[i];
            for key in [hma_key(c), hma3_key(c)] {
                if lines.contains_key(&key) {
                    continue;
                }
                if let Some(line) = self.cached(key) {
                    lines.insert(key, line);
                    continue;
                }
                match key {
                    Line::Hma([h, f, s]) => {
                        hma.entry((h, f)).or_default().insert(s);
                    }
                    Line::Hma3(t) => {
                        hma3.insert(t);
                    }
                    _ => unreachable!("HMA and HMA3 lines only"),
                }
            }
        }
        // Phase 1: the first-level WMAs the missing lines read.
        let mut windows: BTreeSet<u32> = BTreeSet::new();
        for &(h, f) in hma.keys() {
            windows.extend([h, f]);
        }
        for &[p3, p2, p] in &hma3 {
            windows.extend([p3, p2, p]);
        }
        let wmas = self.first_level(&windows)?;
        // The closes' magnitudes per block, for every certified line's bound.
        let close_max = if self.certify {
            certified::block_max_abs(self.close)
        } else {
            Vec::new()
        };
        // Phases 2 and 3 by batches of combos whose new lines fit in the last-level cache:
        // each batch's signals read the lines just written, before they are evicted to memory.
        // Lines are dropped once the last combo of the group that reads them has run (they have
        // been offered to the cache): a grid of single-use lines then holds about a batch of
        // them at a time, not the whole group's.
        let mut uses: HashMap<Line, usize> = HashMap::new();
        for &i in group {
            let c = &self.combos[i];
            for key in [hma_key(c), hma3_key(c)] {
                *uses.entry(key).or_default() += 1;
            }
        }
        let mut start = 0;
        while start < group.len() {
            let mut batch_lines: BTreeSet<Line> = BTreeSet::new();
            let mut end = start;
            while end < group.len() && (end == start || batch_lines.len() < per_batch) {
                let c = &self.combos[group[end]];
                batch_lines.extend(
                    [hma_key(c), hma3_key(c)]
                        .into_iter()
                        .filter(|k| !lines.contains_key(k)),
                );
                end += 1;
            }
            let batch = &group[start..end];
            start = end;
            // Phase 2: the batch's missing lines, largest first so the long tail does not land
            // last.
            let mut tasks: Vec<Task> = Vec::new();
            for key in &batch_lines {
                match *key {
                    Line::Hma([h, f, q]) => match tasks.last_mut() {
                        Some(Task::Hma(h0, f0, sqrts)) if (*h0, *f0) == (h, f) => sqrts.push(q),
                        _ => tasks.push(Task::Hma(h, f, vec![q])),
                    },
                    Line::Hma3(t) => tasks.push(Task::Hma3(t)),
                    _ => unreachable!("HMA and HMA3 lines only"),
                }
            }
            tasks.sort_by_key(|t| std::cmp::Reverse(t.cost()));
            let computed = self.map(&tasks, |s, task| {
                self.check()?;
                Ok(task.compute(self, &wmas, (&mut s.diff, &close_max)))
            })?;
            for (key, line, bound) in computed.into_iter().flatten() {
                match bound {
                    // A certified line is not the reference's: never offered to the cache.
                    Some(bound) => {
                        bounds.insert(key, bound);
                    }
                    None => self.offer_line(key, &line),
                }
                lines.insert(key, line);
            }
            // Phase 3: the batch's trades.
            results.extend(self.map(batch, |s, &i| {
                self.check()?;
                let c = &self.combos[i];
                let side = |key: Line| Side {
                    line: Bounded {
                        values: &lines[&key],
                        bounds: bounds.get(&key).map(|b| &b[..]),
                    },
                    key,
                };
                let sides = (side(hma_key(c)), side(hma3_key(c)));
                if self.sink.is_some() {
                    let mut signs = Vec::new();
                    signal::states(self.close, sides, &mut signs, self.control.certified);
                    let signs: Arc<[u8]> = signs.into();
                    self.offer_signs(c, || Arc::clone(&signs));
                    self.sink(i, &signs);
                    return Ok((i, ComboResult::default()));
                }
                let result = signal::run_fast(
                    self.books(),
                    i,
                    sides,
                    &self.exec,
                    &mut s.signs,
                    self.control.certified,
                );
                // Settled: the reference's bytes, certified lines or not.
                self.offer_signs(c, || Arc::from(&s.signs[..]));
                Ok((i, result))
            })?);
            self.control.report(batch.len(), self.close.len());
            for &i in batch {
                let c = &self.combos[i];
                for key in [hma_key(c), hma3_key(c)] {
                    let left = uses.get_mut(&key).expect("counted above");
                    *left -= 1;
                    if *left == 0 {
                        let line = lines.remove(&key);
                        if let (Some(line), Some(_)) = (line, bounds.remove(&key)) {
                            self.recycler.give(line);
                        }
                    }
                }
            }
        }
        Ok(results)
    }

    /// `WMA(close, n)` for each window: from the cache, the rest in one shared pass; windows
    /// that take certified lines are left out (their lines' difference series computes them
    /// as it goes, [`certified::difference`]) unless the cache holds them.
    fn first_level(&self, windows: &BTreeSet<u32>) -> Result<Arrays> {
        self.check()?;
        let len = self.close.len();
        let mut out = Arrays::with_capacity(windows.len());
        let mut missing = Vec::new();
        for &n in windows {
            match self.cached(Line::Wma(n)) {
                Some(a) => {
                    out.insert(Line::Wma(n), a);
                }
                None => missing.push(n),
            }
        }
        // The long windows worth certifying against the pass's cost for all of them.
        if let Some(from) = self
            .certify
            .then(|| certified::certified_from(missing.iter().map(|&n| n as usize), len))
            .flatten()
        {
            missing.retain(|&n| !(n as usize >= from && certified::pays(n as usize, len)));
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let sizes: Vec<usize> = missing.iter().map(|&n| n as usize).collect();
        let arrays = computed(Input::Series(self.close), &sizes, self.parallel);
        for (n, a) in missing.into_iter().zip(arrays) {
            self.offer_line(Line::Wma(n), &a);
            out.insert(Line::Wma(n), a);
        }
        Ok(out)
    }
}

/// `WMA(x, n)` for each of `windows` (ascending), each in an `Arc` of its own, as the cache and
/// the later phases share them.
fn computed(x: Input<'_>, windows: &[usize], parallel: bool) -> Vec<Arc<[f64]>> {
    // Allocated as the `Arc`s they end up in (no copy into one) and left uninitialised: the
    // pass writes every element, so zeroing them first would be a wasted pass over memory.
    let mut arrays: Vec<Arc<[MaybeUninit<f64>]>> = windows
        .iter()
        .map(|_| Arc::new_uninit_slice(x.len()))
        .collect();
    let outs: Vec<*mut f64> = arrays
        .iter_mut()
        .map(|a| {
            Arc::get_mut(a)
                .expect("just allocated, not shared")
                .as_mut_ptr()
                .cast::<f64>()
        })
        .collect();
    // SAFETY: each pointer is a fresh allocation of x.len() elements owned by `arrays`.
    unsafe { wma_multi_raw(x, windows, &outs, parallel) };
    arrays
        .into_iter()
        // SAFETY: wma_multi_raw wrote every element.
        .map(|a| unsafe { a.assume_init() })
        .collect()
}

/// Per-worker buffers: the signal bytes.
#[derive(Default)]
struct Scratch {
    signs: Vec<u8>,
    /// A certified line's difference series, reused (fresh memory costs a page fault per 4 KiB).
    diff: Vec<f64>,
}

/// A computed line: its key, its values and, if certified, its bounds.
type Computed = (Line, Arc<[f64]>, Option<Arc<[f64]>>);

/// A second-level task: the lines over one difference series.
enum Task {
    /// `2*WMA(half) - WMA(full)`, smoothed by each of the sqrt windows.
    Hma(u32, u32, Vec<u32>),
    /// `3*WMA(p3) - WMA(p2) - WMA(p)`, smoothed by `p`.
    Hma3([u32; 3]),
}

impl Task {
    /// Multiply-adds per bar.
    fn cost(&self) -> u64 {
        match self {
            Self::Hma(_, _, sqrts) => u64::from(sqrts.iter().copied().max().unwrap_or(0)),
            Self::Hma3([_, _, p]) => u64::from(*p),
        }
    }

    /// The task's lines, each with its bounds if certified (`None`: the reference's values).
    /// A window over exact first-level WMAs is certified only if long; over certified ones,
    /// always (its inputs are not the reference's).
    fn compute(
        &self,
        run: &Run<'_>,
        wmas: &Arrays,
        (diff, close_max): (&mut Vec<f64>, &[f64]),
    ) -> Vec<Computed> {
        let bars = run.close.len();
        let wma = |n: u32| -> Option<&[f64]> { wmas.get(&Line::Wma(n)).map(|a| &a[..]) };
        // A first-level input: the exact line if there is one, else a running sum.
        let part = |n: u32| match wma(n) {
            Some(line) => certified::Part::Line(Bounded::exact(line)),
            None => certified::Part::Running(n as usize),
        };
        let long = |w: u32| run.certify && certified::pays(w as usize, bars);
        let exact = |lines: Vec<(Line, Arc<[f64]>)>| lines.into_iter().map(|(k, l)| (k, l, None));
        let certified = |key: Line, d: &certified::Difference, w: u32| {
            let line = certified::wma(
                &d.values,
                d.from,
                w as usize,
                (d.eps.as_deref(), &d.block_max),
                &run.recycler,
            );
            (key, line.values, Some(line.bounds))
        };
        match self {
            Self::Hma(h, f, sqrts) => {
                let key = |q: u32| Line::Hma([*h, *f, q]);
                let (long, short): (Vec<u32>, Vec<u32>) = match (wma(*h), wma(*f)) {
                    (Some(_), Some(_)) => sqrts.iter().partition(|&&q| long(q)),
                    _ => (sqrts.clone(), Vec::new()),
                };
                let mut lines: Vec<Computed> = Vec::new();
                if let (Some(hl), Some(fl)) = (wma(*h), wma(*f)) {
                    let sizes: Vec<usize> = short.iter().map(|&w| w as usize).collect();
                    let outs = computed(Input::HmaDifference(hl, fl), &sizes, run.parallel);
                    lines.extend(exact(short.iter().map(|&q| key(q)).zip(outs).collect()));
                }
                if !long.is_empty() {
                    let from = h.max(f).saturating_sub(1) as usize;
                    let d = certified::difference(
                        (run.close, close_max),
                        certified::Shape::Hma,
                        &[part(*h), part(*f)],
                        from,
                        take(diff),
                    );
                    lines.extend(long.iter().map(|&q| certified(key(q), &d, q)));
                    *diff = d.values;
                }
                lines
            }
            Self::Hma3([p3, p2, p]) => {
                let key = Line::Hma3([*p3, *p2, *p]);
                if let (Some(a), Some(b), Some(c), false) = (wma(*p3), wma(*p2), wma(*p), long(*p))
                {
                    let input = Input::Hma3Difference(a, b, c);
                    let mut lines = computed(input, &[*p as usize], run.parallel);
                    return exact(vec![(key, lines.remove(0))]).collect();
                }
                let from = (*p3).max(*p2).max(*p).saturating_sub(1) as usize;
                let d = certified::difference(
                    (run.close, close_max),
                    certified::Shape::Hma3,
                    &[part(*p3), part(*p2), part(*p)],
                    from,
                    take(diff),
                );
                let line = vec![certified(key, &d, *p)];
                *diff = d.values;
                line
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::oracle;

    fn series(len: usize) -> Vec<f64> {
        let mut p = 100.0;
        (0..len)
            .map(|i| {
                p *= 1.0 + 0.002 * ((i as f64 * 1.7).sin() + (i as f64 * 0.13).cos() * 0.5);
                p
            })
            .collect()
    }

    fn grid() -> Vec<Combo> {
        (1..60)
            .step_by(3)
            .map(|l| Combo::from_length(l).unwrap())
            .collect()
    }

    #[test]
    fn multiply_adds_counts_one_pass_per_input() {
        // One combo: the close pass runs to its longest window (full = 200), then one pass of
        // sqrt = 14 and one of p = 100.
        let one = [Combo::from_length(200).unwrap()];
        assert_eq!(multiply_adds(1000, &one), 1000 * (200 + 14 + 100));
        // Two combos sharing (half, full): one difference series, its longest sqrt.
        let shared = [
            Combo::new([4, 8, 2, 1, 2, 4]).unwrap(),
            Combo::new([4, 8, 3, 1, 2, 5]).unwrap(),
        ];
        assert_eq!(multiply_adds(10, &shared), 10 * (8 + 3 + 4 + 5));
        // Windows longer than the series cost what the series has.
        assert_eq!(multiply_adds(5, &one), 5 * 15);
        // The paper sweep: the arithmetic the issue derives (~0.64 G).
        let paper = multiply_adds(150_000, &crate::paper::combos());
        assert!((0.55e9..0.7e9).contains(&(paper as f64)), "{paper}");
    }

    /// A cache that keeps everything offered and counts its hits.
    #[derive(Default)]
    struct Counting {
        lines: Mutex<HashMap<ArrayKey, Arc<[f64]>>>,
        bytes: Mutex<HashMap<ArrayKey, Arc<[u8]>>>,
        hits: AtomicUsize,
    }

    impl Counting {
        fn hits(&self) -> usize {
            self.hits.load(Ordering::Relaxed)
        }
        fn held(&self) -> BTreeSet<ArrayKey> {
            let lines = self.lines.lock().unwrap();
            let bytes = self.bytes.lock().unwrap();
            lines.keys().chain(bytes.keys()).copied().collect()
        }
        fn count<T>(&self, hit: Option<T>) -> Option<T> {
            self.hits
                .fetch_add(usize::from(hit.is_some()), Ordering::Relaxed);
            hit
        }
    }

    impl ArrayCache for Counting {
        fn get(&self, key: ArrayKey) -> Option<Arc<[f64]>> {
            self.count(self.lines.lock().unwrap().get(&key).cloned())
        }
        fn insert(&self, key: ArrayKey, array: Arc<[f64]>) {
            self.lines.lock().unwrap().insert(key, array);
        }
        fn get_bytes(&self, key: ArrayKey) -> Option<Arc<[u8]>> {
            self.count(self.bytes.lock().unwrap().get(&key).cloned())
        }
        fn insert_bytes(&self, key: ArrayKey, bytes: Arc<[u8]>) {
            self.bytes.lock().unwrap().insert(key, bytes);
        }
    }

    /// A sweep over bars `from..to` of a series reads a cache filled by a sweep of the whole
    /// series, cut to the range ([`ArrayKey::of_range`]), as the server's does.
    struct RangeOf<'a>(&'a Counting, usize, usize);

    impl ArrayCache for RangeOf<'_> {
        fn get(&self, key: ArrayKey) -> Option<Arc<[f64]>> {
            let whole = self.0.lines.lock().unwrap().get(&key).cloned()?;
            self.0.count(key.of_range(&whole, self.1, self.2))
        }
        fn insert(&self, _key: ArrayKey, _array: Arc<[f64]>) {}
        fn get_bytes(&self, key: ArrayKey) -> Option<Arc<[u8]>> {
            let whole = self.0.bytes.lock().unwrap().get(&key).cloned()?;
            self.0.count(key.bytes_of_range(&whole, self.1, self.2))
        }
    }

    /// A sweep of `combos`, tiled (256 bars a tile, in parallel), through `cache`: the oracle's
    /// answer.
    fn tiled_through(cache: &Counting, close: &[f64], combos: &[Combo], want: &[ComboResult]) {
        let control = SweepControl {
            cache,
            tile_bars: Some(256),
            parallel: Some(true),
            ..SweepControl::default()
        };
        assert_eq!(sweep_with(close, combos, 0.0009, &control).unwrap(), want);
    }

    fn signs_keys(combos: &[Combo]) -> BTreeSet<ArrayKey> {
        combos.iter().map(signs_key).collect()
    }

    #[test]
    fn equals_oracle() {
        let close = series(3_000);
        let combos = grid();
        assert_eq!(
            sweep(&close, &combos, 0.0009).unwrap(),
            oracle::sweep(&close, &combos, 0.0009)
        );
    }

    #[test]
    fn explicit_tuples_share_lines_and_still_equal_the_oracle() {
        // Many combos over few lines: 3 HMA lines x 4 HMA3 lines, in a scrambled order.
        let close = series(2_000);
        let mut combos = Vec::new();
        for (h, f, s) in [(3, 6, 2), (5, 10, 3), (3, 6, 5)] {
            for (p3, p2, p) in [(1, 2, 3), (2, 3, 7), (4, 4, 4), (7, 2, 40)] {
                combos.push(Combo::new([h, f, s, p3, p2, p]).unwrap());
            }
        }
        combos.reverse();
        assert_eq!(
            sweep(&close, &combos, 0.001).unwrap(),
            oracle::sweep(&close, &combos, 0.001)
        );
    }

    #[test]
    fn tiny_working_set_and_a_cache_give_the_same_answer() {
        // Untiled (too few bars for tiles), one combo a group.
        let close = series(2_000);
        let combos = grid();
        let want = sweep(&close, &combos, 0.0009).unwrap();
        let cache = Counting::default();
        let control = SweepControl {
            cache: &cache,
            working_set_bytes: 1,
            ..SweepControl::default()
        };
        assert_eq!(sweep_with(&close, &combos, 0.0009, &control).unwrap(), want);
        // Each combo's sign bytes kept, not its lines (the grid's lines are single-use).
        let held = cache.held();
        assert!(held.is_superset(&signs_keys(&combos)), "{held:?}");
        assert!(
            held.iter()
                .all(|k| matches!(k, ArrayKey::Signs(_) | ArrayKey::Moves))
        );
        let hits_first = cache.hits();
        assert_eq!(sweep_with(&close, &combos, 0.0009, &control).unwrap(), want);
        // The second sweep found every combo's bytes.
        let hits = cache.hits() - hits_first;
        assert!(hits >= combos.len(), "{hits} hits");
    }

    #[test]
    fn tiled_sweeps_fill_and_use_a_cache() {
        let close = series(5_000);
        let combos = grid();
        let want = oracle::sweep(&close, &combos, 0.0009);
        let cache = Counting::default();
        tiled_through(&cache, &close, &combos, &want);
        // Every combo's sign bytes were offered whole (one byte a bar: its single-use lines
        // would take sixteen), and the moves of the per-bar metrics; no line, no first-level
        // WMA.
        let mut expected = signs_keys(&combos);
        expected.insert(ArrayKey::Moves);
        assert_eq!(cache.held(), expected);
        // Half the combos' bytes gone: the next sweep computes those and reads the rest.
        let mut n = 0;
        cache.bytes.lock().unwrap().retain(|_, _| {
            n += 1;
            n % 2 == 0
        });
        let hits = cache.hits();
        tiled_through(&cache, &close, &combos, &want);
        assert!(cache.hits() >= hits + combos.len() / 2);
        assert_eq!(cache.held(), expected, "the missing ones kept again");
        // Tiled sweeps on a tiny budget (one combo per group) give the same answer.
        let tight = SweepControl {
            working_set_bytes: 1,
            tile_bars: Some(1_000),
            ..SweepControl::default()
        };
        assert_eq!(sweep_with(&close, &combos, 0.0009, &tight).unwrap(), want);
    }

    #[test]
    fn a_grid_of_few_lines_crossed_keeps_its_lines() {
        // 17 HMA lines x 17 HMA3 lines: 289 combos over 34 lines, more than eight combos a
        // line, so the lines are the smaller to keep.
        let close = series(5_000);
        let combos: Vec<Combo> = (0..17u32)
            .flat_map(|h| {
                (0..17u32).map(move |k| {
                    Combo::new([2 + h, 4 + 2 * h, 2 + h % 3, 1 + k % 4, 2 + k % 5, 3 + k]).unwrap()
                })
            })
            .collect();
        assert!(!keeps_signs(&combos));
        let want = oracle::sweep(&close, &combos, 0.0009);
        let cache = Counting::default();
        tiled_through(&cache, &close, &combos, &want);
        let held = cache.held();
        assert_eq!(held.len(), distinct_lines(&combos) + 1, "{held:?}");
        assert!(held.iter().all(|k| !matches!(k, ArrayKey::Signs(_))));
        assert_eq!(
            line_bytes(close.len(), &combos),
            distinct_lines(&combos) * close.len() * 8
        );
        let hits = cache.hits();
        tiled_through(&cache, &close, &combos, &want);
        assert!(cache.hits() >= hits + distinct_lines(&combos));
    }

    #[test]
    fn range_sweeps_read_sign_bytes_cut_from_the_whole_series() {
        // A walk-forward's folds: the whole series swept once, keeping; then ranges of it,
        // tiled and untiled, each equal to a fresh sweep of the range.
        let close = series(6_000);
        let combos = grid();
        let cache = Counting::default();
        let keep = SweepControl {
            cache: &cache,
            ..SweepControl::default()
        };
        sweep_with(&close, &combos, 0.0009, &keep).unwrap();
        for (from, to) in [(0, 3_000), (1_234, 6_000), (5_990, 6_000)] {
            let fresh = sweep(&close[from..to], &combos, 0.0009).unwrap();
            for tile_bars in [Some(256), None] {
                let range = RangeOf(&cache, from, to);
                let control = SweepControl {
                    cache: &range,
                    tile_bars,
                    ..SweepControl::default()
                };
                let hits = cache.hits();
                let got = sweep_with(&close[from..to], &combos, 0.0009, &control).unwrap();
                assert_eq!(got, fresh, "{from}..{to} {tile_bars:?}");
                assert!(cache.hits() >= hits + combos.len(), "{from}..{to}");
            }
        }
    }

    #[test]
    fn the_paper_sweep_is_tiled_by_default_and_long_windows_are_not() {
        let combos = crate::paper::combos();
        let tiling = Tiling::plan(150_000, &combos, 2, None, true).expect("tiled");
        // Its memory: sign bytes and kept lines, within the cap; scratch a few MB per worker.
        assert!(
            tiling.scratch_bytes() < 16 << 20,
            "{}",
            tiling.scratch_bytes()
        );
        assert_eq!(
            memory_bytes(150_000, &combos, 2, 0),
            tiling.held_bytes(150_000, &combos, 0)
                + 2 * tiling.scratch_bytes()
                + 80 * size_of::<ComboResult>()
                + Moves::bytes(150_000)
        );
        let long = [Combo::from_length(20_000).unwrap()];
        assert_eq!(Tiling::plan(150_000, &long, 2, None, true), None);
        // Too few tiles to share out: untiled.
        assert_eq!(Tiling::plan(10_000, &combos, 2, None, true), None);
        assert_eq!(Tiling::plan(150_000, &combos, 2, Some(0), true), None);
    }

    fn distinct_lines(combos: &[Combo]) -> usize {
        let keys: BTreeSet<Line> = combos
            .iter()
            .flat_map(|c| [hma_key(c), hma3_key(c)])
            .collect();
        keys.len()
    }

    #[test]
    fn memory_estimate_bounds_groups() {
        let combos = grid();
        let bars = 10_000;
        let all = memory_bytes(bars, &combos, 2, usize::MAX);
        let least = memory_bytes(bars, &combos, 2, 0);
        assert!(least < all);
        assert_eq!(
            least,
            ARRAYS_PER_COMBO * bars * 8
                + 2 * scratch_bytes(bars, &combos, 2)
                + combos.len() * size_of::<ComboResult>()
                + Moves::bytes(bars)
        );
        let uses = line_uses(&combos);
        assert_eq!(
            group_len(&[0, 1, 2], &combos, 1, &uses, 2),
            1,
            "a group is never empty"
        );
        // Single-use lines (every combo of a random grid) count as one batch, not all of them.
        let random: Vec<Combo> = (0..2_000u32)
            .map(|i| {
                Combo::new([
                    1 + i % 37,
                    2 + i % 41,
                    1 + i % 5,
                    1 + i % 7,
                    1 + i % 11,
                    3 + i % 43,
                ])
                .unwrap()
            })
            .collect();
        let held = memory_bytes(bars, &random, 2, usize::MAX);
        assert!(held < 400 * bars * 8, "{held}");
    }

    #[test]
    fn cancellation_stops_the_sweep() {
        let close = series(1_000);
        let control = SweepControl {
            cancelled: &|| true,
            ..SweepControl::default()
        };
        assert_eq!(
            sweep_with(&close, &grid(), 0.0, &control),
            Err(Error::Cancelled)
        );
    }

    #[test]
    fn bad_fee_is_rejected() {
        for fee in [-0.1, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                sweep(&[1.0], &grid(), fee),
                Err(Error::InvalidFee(_))
            ));
        }
    }

    #[test]
    fn empty_inputs() {
        assert!(sweep(&series(10), &[], 0.0).unwrap().is_empty());
        let r = sweep(&[], &grid(), 0.0).unwrap();
        assert!(r.iter().all(|r| r.trades == 0));
    }
}
