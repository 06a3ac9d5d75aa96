//! The tiled sweep: the same three phases as the untiled one, run tile by tile along the bars.
//!
//! Untiled, a sweep writes every first-level WMA and every line out whole (for the paper sweep
//! 158 MB of WMAs and 179 MB of lines over 150k bars) and reads them back from memory in the
//! next phase. Tiled, a tile of bars computes its first-level WMAs, then its lines, then each
//! combo's sign bytes while the tile's arrays are still in cache; only the sign bytes (one per
//! bar per combo) stay for the last phase, each combo's crosses and trades.
//!
//! A tile of outputs `a..b` needs its lines' difference series from `a - (m - 1)` (the longest
//! second-level window `m`), and those need first-level WMAs from there, which read the closes
//! from `N - 1` bars earlier still (the longest first-level window `N`). So tiles overlap
//! their neighbours by `m + N` bars of input, a few percent of the first level's work when a
//! tile is several windows long, and none of the second level's. Every output is still summed
//! by the reference's arithmetic from the same inputs, so the results do not depend on the
//! tiling, and tiles are independent: they are what the threads share out.
//!
//! Tiles pay where windows are short next to a tile and there are enough tiles for every
//! thread; elsewhere (long windows, short series) the untiled path runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::{Run, hma_key, hma3_key, line_bytes, signs_key};
use crate::lines::Line;
use crate::lines::vector;
use crate::lines::wma::{RangeScratch, wma_range};
use crate::{Combo, ComboResult, Result, signal};

/// Bars per tile, at least: 16 KiB per array, so a tile's first-level WMAs and lines for the
/// paper sweep (~280 arrays) fit a server CPU's last-level cache twice over per core.
const TILE: usize = 2048;

/// A tile is at least this many times as long as the windows' overlap, so the overlap's extra
/// first-level work stays a few percent.
const TILE_PER_OVERLAP: usize = 4;

/// Longest tile chosen automatically: longer windows run untiled.
const MAX_TILE: usize = 16_384;

/// Bytes of one worker's tile of lines (when no cache keeps them whole): bounds how many lines
/// one group computes, like the untiled path's batches.
const TILE_LINE_BYTES: usize = 4 << 20;

/// Bytes of one worker's tile of first-level WMAs, at most, for tiling to be chosen.
const TILE_FIRST_BYTES: usize = 16 << 20;

/// Bytes of one worker's scratch of a tiled sweep, at most: a tile of its first-level WMAs
/// (chosen only within [`TILE_FIRST_BYTES`]), a tile of lines and one difference series.
pub(super) const SCRATCH_BOUND: usize =
    TILE_FIRST_BYTES + TILE_LINE_BYTES + 2 * MAX_TILE * size_of::<f64>();

/// How a sweep is tiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tiling {
    /// Bars per tile.
    tile: usize,
    /// Distinct first-level windows of the whole sweep (bounds a worker's scratch).
    windows: usize,
    /// The longest first-level and second-level windows, at most the bars.
    longest: usize,
    longest_line: usize,
}

impl Tiling {
    /// The tiling of a sweep of `combos` over `bars` bars on `workers` threads: `forced` bars
    /// per tile if given (0: untiled), else automatic, or `None` for the untiled path.
    ///
    /// With `certify`, a sweep some of whose first-level windows take the certified path
    /// ([`crate::certified::certified_from`]) is not tiled: those lines then cost a few
    /// operations a bar whatever the window, where tiles would sum every window afresh.
    pub(crate) fn plan(
        bars: usize,
        combos: &[Combo],
        workers: usize,
        forced: Option<usize>,
        certify: bool,
    ) -> Option<Self> {
        let clamp = |w: u32| (w as usize).min(bars);
        let longest = combos
            .iter()
            .flat_map(Combo::close_windows)
            .map(clamp)
            .max()?;
        let longest_line = combos.iter().map(|c| clamp(c.sqrt().max(c.p()))).max()?;
        let distinct = combos
            .iter()
            .flat_map(Combo::close_windows)
            .collect::<BTreeSet<u32>>();
        let windows = distinct.len();
        let plan = |tile: usize| Self {
            tile,
            windows,
            longest,
            longest_line,
        };
        match forced {
            Some(0) => None,
            Some(tile) => Some(plan(tile)),
            None if certify
                && crate::certified::certified_from(distinct.iter().map(|&n| n as usize), bars)
                    .is_some() =>
            {
                None
            }
            None => {
                let tile = TILE
                    .max(TILE_PER_OVERLAP * (longest + longest_line))
                    .next_multiple_of(64);
                let tiled = plan(tile);
                (tile <= MAX_TILE
                    && bars >= 4 * workers.max(1) * tile
                    && tiled.first_bytes() <= TILE_FIRST_BYTES)
                    .then_some(tiled)
            }
        }
    }

    /// Values of each first-level WMA a tile holds: its bars and the second level's lead.
    fn span(&self) -> usize {
        self.tile + self.longest_line.saturating_sub(1)
    }

    fn first_bytes(&self) -> usize {
        self.windows * self.span() * size_of::<f64>()
    }

    /// Lines one group computes at most when they are not kept whole.
    fn max_lines(&self) -> usize {
        (TILE_LINE_BYTES / (self.tile * size_of::<f64>())).max(2)
    }

    /// Bytes of one worker's scratch, at most: a tile of every first-level WMA, a tile of a
    /// group's lines and one difference series.
    pub(crate) fn scratch_bytes(&self) -> usize {
        self.first_bytes() + (self.max_lines() * self.tile + self.span()) * size_of::<f64>()
    }

    /// Bytes a sweep's groups hold besides scratch, at most, within `cap` (never less than one
    /// combo's): every combo's sign bytes and, if a cache keeps them, every line whole.
    pub(crate) fn held_bytes(&self, bars: usize, combos: &[Combo], cap: usize) -> usize {
        let all = line_bytes(bars, combos) + combos.len() * bars;
        let least = 2 * bars * size_of::<f64>() + bars;
        all.min(cap.max(least))
    }

    /// The length of the longest prefix of `order` that one group runs: its sign bytes (and,
    /// if `keep`, its lines whole) within `budget` bytes, and no more lines than a worker's
    /// tile of lines holds. Never empty.
    fn group_len(
        &self,
        order: &[usize],
        combos: &[Combo],
        bars: usize,
        budget: usize,
        keep: bool,
    ) -> usize {
        let mut lines: BTreeSet<Line> = BTreeSet::new();
        for (taken, &i) in order.iter().enumerate() {
            let c = &combos[i];
            let new = [hma_key(c), hma3_key(c)]
                .iter()
                .filter(|k| !lines.contains(k))
                .count();
            let held = lines.len() + new;
            let bytes = (taken + 1) * bars
                + if keep {
                    held * bars * size_of::<f64>()
                } else {
                    0
                };
            if taken > 0 && (bytes > budget || (!keep && held > self.max_lines())) {
                return taken;
            }
            lines.extend([hma_key(c), hma3_key(c)]);
        }
        order.len()
    }
}

/// What a combo's trades read.
enum Inputs {
    /// Its sign bytes, which the cache had whole: no line to compute.
    Kept(Arc<[u8]>),
    /// Its HMA and HMA3 line.
    Lines([Source; 2]),
}

/// Where a combo's line comes from.
enum Source {
    /// The cache had it, whole.
    Cached(Arc<[f64]>),
    /// Computed by this group: line number `n` (see [`Group::lines`]).
    Computed(usize),
}

/// A second-level task: the lines over one difference series.
struct Task {
    input: Difference,
    /// The smoothing windows, ascending, and the line each one makes (numbered alongside).
    windows: Vec<usize>,
    lines: Vec<usize>,
}

/// The difference series a task smooths, by first-level slot.
enum Difference {
    /// `2*WMA(half) - WMA(full)`.
    Hma { half: usize, full: usize },
    /// `3*WMA(p3) - WMA(p2) - WMA(p)`.
    Hma3 { legs: [usize; 3] },
}

impl Task {
    /// Its longest window (the lead its difference series needs).
    fn longest(&self) -> usize {
        self.windows.last().copied().unwrap_or(1)
    }
}

/// One group's plan: which first-level WMAs and lines its tiles compute, and where each combo's
/// two lines come from.
struct Group {
    /// First-level windows, ascending; a window's slot is its index here.
    windows: Vec<usize>,
    tasks: Vec<Task>,
    /// The computed lines' keys, in line number order.
    lines: Vec<Line>,
    /// What each combo's trades read.
    sources: Vec<Inputs>,
    /// The longest second-level window of the tasks (1 without tasks).
    lead: usize,
}

impl Group {
    fn new(run: &Run<'_>, group: &[usize]) -> Self {
        let mut found: HashMap<Line, Source> = HashMap::new();
        let mut lines: Vec<Line> = Vec::new();
        let mut hma: BTreeMap<(u32, u32), BTreeSet<(u32, usize)>> = BTreeMap::new();
        let mut hma3: Vec<([u32; 3], usize)> = Vec::new();
        let mut sources = Vec::with_capacity(group.len());
        for &i in group {
            let c = &run.combos[i];
            if let Some(signs) = run.cached_signs(c) {
                sources.push(Inputs::Kept(signs));
                continue;
            }
            let mut source = |key: Line| -> Source {
                let entry = found.entry(key).or_insert_with(|| {
                    if let Some(line) = run.cached(key) {
                        return Source::Cached(line);
                    }
                    let n = lines.len();
                    lines.push(key);
                    match key {
                        Line::Hma([h, f, q]) => {
                            hma.entry((h, f)).or_default().insert((q, n));
                        }
                        Line::Hma3(t) => hma3.push((t, n)),
                        _ => unreachable!("HMA and HMA3 lines only"),
                    }
                    Source::Computed(n)
                });
                match entry {
                    Source::Cached(line) => Source::Cached(Arc::clone(line)),
                    Source::Computed(n) => Source::Computed(*n),
                }
            };
            sources.push(Inputs::Lines([source(hma_key(c)), source(hma3_key(c))]));
        }
        let windows: Vec<usize> = hma
            .keys()
            .flat_map(|&(h, f)| [h, f])
            .chain(hma3.iter().flat_map(|(t, _)| *t))
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .map(|w| w as usize)
            .collect();
        let slot = |w: u32| {
            windows
                .binary_search(&(w as usize))
                .expect("a listed window")
        };
        let mut tasks: Vec<Task> = hma
            .into_iter()
            .map(|((h, f), qs)| Task {
                input: Difference::Hma {
                    half: slot(h),
                    full: slot(f),
                },
                windows: qs.iter().map(|&(q, _)| q as usize).collect(),
                lines: qs.iter().map(|&(_, n)| n).collect(),
            })
            .collect();
        tasks.extend(hma3.into_iter().map(|([p3, p2, p], line)| Task {
            input: Difference::Hma3 {
                legs: [slot(p3), slot(p2), slot(p)],
            },
            windows: vec![p as usize],
            lines: vec![line],
        }));
        let lead = tasks.iter().map(Task::longest).max().unwrap_or(1);
        Self {
            windows,
            tasks,
            lines,
            sources,
            lead,
        }
    }
}

/// One worker's buffers, reused by every tile it runs.
#[derive(Default)]
struct Scratch {
    /// A tile of each first-level WMA (`span` values each, from the tile's lead on).
    first: Vec<f64>,
    /// A tile of each computed line, when they are not kept whole.
    lines: Vec<f64>,
    diff: Vec<f64>,
    range: RangeScratch,
}

/// Where the tiles write: the computed lines kept whole for the cache, and each combo's sign
/// bytes (written tile by tile by the workers).
struct Outs {
    /// Each computed line, whole (empty when lines are not kept).
    lines: Vec<*mut f64>,
    /// Where each combo of the group writes its sign bytes.
    signs: Vec<SignsOut>,
    /// The group's tile-major buffer of sign bytes: tile `t` holds each buffered combo's bars
    /// of that tile in turn (see [`SignsOut::Buffered`]).
    buffer: *mut u8,
    buffered: usize,
}

/// Where one combo's sign bytes go.
#[derive(Clone, Copy)]
enum SignsOut {
    /// Nowhere: the cache had them ([`Inputs::Kept`]).
    Cached,
    /// Into its own array, whole, kept for the cache.
    Whole(*mut u8),
    /// Into slot `k` of each tile of the group's buffer.
    Buffered(usize),
}

// SAFETY: each tile writes only its own bars `a..b` of each line and of each combo's sign bytes
// (a whole array's, or its slot of the tile's part of the buffer), so no two tasks write the same
// element, and the arrays outlive the tiles (see `Run::tiled_group`).
unsafe impl Send for Outs {}
// SAFETY: as above.
unsafe impl Sync for Outs {}

impl Outs {
    /// Combo `j`'s sign bytes at bars `a..b` (of a tile), or `None` if the cache had them.
    ///
    /// # Safety
    /// Only the task running the tile `a..b` may call it, once per combo.
    #[allow(clippy::mut_from_ref)]
    unsafe fn signs(&self, j: usize, a: usize, b: usize) -> Option<&mut [u8]> {
        let at = match self.signs[j] {
            SignsOut::Cached => return None,
            // SAFETY: the array is the series' length and a..b lies in it.
            SignsOut::Whole(p) => unsafe { p.add(a) },
            // SAFETY: the buffer holds `buffered` bytes a bar; the tile's part starts at
            // a * buffered and slot k of it at k * (b - a) from there.
            SignsOut::Buffered(k) => unsafe { self.buffer.add(a * self.buffered + k * (b - a)) },
        };
        // SAFETY: see above: b - a bytes that only this tile writes.
        Some(unsafe { std::slice::from_raw_parts_mut(at, b - a) })
    }
}

impl Run<'_> {
    /// The sweep, tiled: groups of combos in `order` within the working-set budget.
    pub(super) fn tiled(&self, order: &[usize], tiling: &Tiling) -> Result<Vec<ComboResult>> {
        let len = self.close.len();
        let keep = self.control.cache.keeps();
        let mut results = vec![ComboResult::default(); self.combos.len()];
        let mut rest = order;
        while !rest.is_empty() {
            let taken = tiling.group_len(
                rest,
                self.combos,
                len,
                self.control.working_set_bytes,
                keep && !self.signs,
            );
            let (group, tail) = rest.split_at(taken);
            rest = tail;
            for (&i, r) in group.iter().zip(self.tiled_group(group, tiling, keep)?) {
                results[i] = r;
            }
        }
        Ok(results)
    }

    /// One group: every tile (in parallel), then each combo's trades (in parallel).
    fn tiled_group(
        &self,
        group: &[usize],
        tiling: &Tiling,
        keep: bool,
    ) -> Result<Vec<ComboResult>> {
        self.check()?;
        let len = self.close.len();
        let plan = Group::new(self, group);
        let tile = tiling.tile;
        // A sink takes every combo's bytes whole.
        let (keep_lines, keep_signs) = (
            keep && !self.signs,
            (keep && self.signs) || self.sink.is_some(),
        );
        // Lines and sign bytes kept whole for the cache, allocated as the `Arc`s they are
        // offered in.
        let mut lines: Vec<Arc<[MaybeUninit<f64>]>> = if keep_lines {
            plan.lines
                .iter()
                .map(|_| Arc::new_uninit_slice(len))
                .collect()
        } else {
            Vec::new()
        };
        let mut kept: Vec<Option<Arc<[MaybeUninit<u8>]>>> = plan
            .sources
            .iter()
            .map(|s| {
                (keep_signs && matches!(s, Inputs::Lines(_))).then(|| Arc::new_uninit_slice(len))
            })
            .collect();
        let mut buffered = 0;
        let signs: Vec<SignsOut> = plan
            .sources
            .iter()
            .zip(&mut kept)
            .map(|(source, kept)| match (source, kept) {
                (Inputs::Kept(_), _) => SignsOut::Cached,
                (_, Some(whole)) => SignsOut::Whole(
                    Arc::get_mut(whole)
                        .expect("just allocated")
                        .as_mut_ptr()
                        .cast(),
                ),
                (_, None) => {
                    buffered += 1;
                    SignsOut::Buffered(buffered - 1)
                }
            })
            .collect();
        let mut buffer = vec![0u8; len * buffered];
        let outs = Outs {
            lines: lines
                .iter_mut()
                .map(|a| {
                    Arc::get_mut(a)
                        .expect("just allocated")
                        .as_mut_ptr()
                        .cast::<f64>()
                })
                .collect(),
            signs,
            buffer: buffer.as_mut_ptr(),
            buffered,
        };
        let weights: Vec<f64> = (1..=plan.windows.last().copied().unwrap_or(1).max(plan.lead))
            .map(|k| k as f64)
            .collect();
        let tiles = TileRun {
            run: self,
            plan: &plan,
            tile,
            outs: &outs,
            weights: &weights,
        };
        let count = len.div_ceil(tile);
        if self.parallel {
            let workers: Vec<Mutex<Scratch>> = (0..rayon::current_num_threads())
                .map(|_| Mutex::default())
                .collect();
            (0..count).into_par_iter().try_for_each(|t| {
                let worker = rayon::current_thread_index().unwrap_or(0) % workers.len();
                // Only this worker's tasks lock it, one at a time: never contended.
                let mut scratch = workers[worker].lock().unwrap_or_else(|e| e.into_inner());
                tiles.run(t, &mut scratch)
            })?;
        } else {
            let mut scratch = Scratch::default();
            for t in 0..count {
                tiles.run(t, &mut scratch)?;
            }
        }
        let slots: Vec<Option<usize>> = outs
            .signs
            .iter()
            .map(|o| match *o {
                SignsOut::Buffered(k) => Some(k),
                SignsOut::Cached | SignsOut::Whole(_) => None,
            })
            .collect();
        drop(outs);
        let kept: Vec<Option<Arc<[u8]>>> = kept
            .into_iter()
            // SAFETY: every tile wrote its bars of every kept combo's bytes, and the tiles
            // cover every bar.
            .map(|k| k.map(|k| unsafe { k.assume_init() }))
            .collect();
        let combos: Vec<usize> = (0..group.len()).collect();
        let results = self.map(&combos, |_, &j| {
            self.check()?;
            let (books, i, exec) = (self.books(), group[j], &self.exec);
            Ok(match (&plan.sources[j], &kept[j], slots[j]) {
                (Inputs::Kept(signs), _, _) | (_, Some(signs), _) if self.sink(i, signs) => {
                    ComboResult::default()
                }
                (Inputs::Kept(signs), _, _) | (_, Some(signs), _) => {
                    signal::crosses(books, i, [&signs[..]], exec)
                }
                (_, None, Some(k)) => {
                    let per_tile = (0..count).map(|t| {
                        let (a, b) = (t * tile, ((t + 1) * tile).min(len));
                        let at = a * buffered + k * (b - a);
                        &buffer[at..at + (b - a)]
                    });
                    signal::crosses(books, i, per_tile, exec)
                }
                (_, None, None) => unreachable!("a combo's bytes are cached, kept or buffered"),
            })
        })?;
        for (key, line) in plan.lines.iter().zip(lines) {
            // SAFETY: every tile wrote its bars of every computed line, and the tiles cover
            // every bar.
            let line = unsafe { line.assume_init() };
            self.control
                .cache
                .insert(crate::plan::line_array_key(*key), line);
        }
        for (&i, signs) in group.iter().zip(kept) {
            if let Some(signs) = signs {
                self.control
                    .cache
                    .insert_bytes(signs_key(&self.combos[i]), signs);
            }
        }
        Ok(results)
    }
}

/// What every tile of one group shares.
struct TileRun<'a> {
    run: &'a Run<'a>,
    plan: &'a Group,
    tile: usize,
    outs: &'a Outs,
    weights: &'a [f64],
}

impl TileRun<'_> {
    /// Tile `t`: its first-level WMAs, its lines and each combo's sign bytes.
    fn run<'a>(&'a self, t: usize, s: &'a mut Scratch) -> Result<()> {
        self.run.check()?;
        let (plan, close) = (self.plan, self.run.close);
        let len = close.len();
        let a = t * self.tile;
        let b = (a + self.tile).min(len);
        let bars = b - a;
        // First level: each window at lo..b, where the longest line's difference series starts.
        let lo = a.saturating_sub(plan.lead - 1);
        let span = b - lo;
        s.first.resize(plan.windows.len() * span, 0.0);
        if let Some(&longest) = plan.windows.last() {
            let base = (lo + 1).saturating_sub(longest);
            // Values past b let the pass's last blocks run vectorised.
            let end = (b + longest + 64).min(len);
            let outs: Vec<*mut f64> = s
                .first
                .chunks_exact_mut(span)
                .map(<[f64]>::as_mut_ptr)
                .collect();
            // SAFETY: each pointer is a distinct chunk of `span` = b - lo values of `first`.
            unsafe {
                wma_range(
                    &close[base..end],
                    base,
                    lo,
                    b,
                    &plan.windows,
                    &outs,
                    self.weights,
                    &mut s.range,
                )
            };
        }
        let first =
            |slot: usize, from: usize| &s.first[slot * span + (from - lo)..(slot + 1) * span];
        // Second level: each task's lines at a..b.
        if self.outs.lines.is_empty() {
            s.lines.resize(plan.lines.len() * self.tile, 0.0);
        }
        for task in &plan.tasks {
            let from = a.saturating_sub(task.longest() - 1);
            match task.input {
                Difference::Hma { half, full } => {
                    vector::hma_difference(first(half, from), first(full, from), &mut s.diff);
                }
                Difference::Hma3 { legs: [p3, p2, p] } => vector::hma3_difference(
                    first(p3, from),
                    first(p2, from),
                    first(p, from),
                    &mut s.diff,
                ),
            }
            let outs: Vec<*mut f64> = task
                .lines
                .iter()
                .map(|&n| match self.outs.lines.get(n) {
                    // SAFETY: line n is `len` long and a..b lies in it.
                    Some(line) => unsafe { line.add(a) },
                    None => s.lines[n * self.tile..].as_mut_ptr(),
                })
                .collect();
            // SAFETY: each output is bars a..b of a distinct line: this tile's part of a whole
            // line (no other tile writes it) or its own row of `lines`.
            unsafe {
                wma_range(
                    &s.diff,
                    from,
                    a,
                    b,
                    &task.windows,
                    &outs,
                    self.weights,
                    &mut s.range,
                )
            };
        }
        // Signs: each combo's bars of the tile.
        let lines = &s.lines;
        let line = |source: &'a Source| -> &'a [f64] {
            match source {
                Source::Cached(l) => &l[a..b],
                Source::Computed(n) => match self.outs.lines.get(*n) {
                    // SAFETY: this tile has just written bars a..b of line n, and no one else
                    // writes them.
                    Some(l) => unsafe { std::slice::from_raw_parts(l.add(a), bars) },
                    None => &lines[n * self.tile..n * self.tile + bars],
                },
            }
        };
        for (j, source) in plan.sources.iter().enumerate() {
            if let Inputs::Lines([hma, hma3]) = source {
                // SAFETY: this task runs tile a..b, and asks once per combo.
                let out = unsafe { self.outs.signs(j, a, b) }.expect("a combo of lines");
                vector::signs(line(hma), line(hma3), out);
            }
        }
        self.run.control.report(plan.sources.len(), bars);
        Ok(())
    }
}
