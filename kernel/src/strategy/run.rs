//! The sweep of the indicator strategies (`sma_cross`, `ema_cross`, `donchian`, `rsi_revert`)
//! and what any sweep of [`Params`] costs (work, memory), hma_sar's share included.
//!
//! Two phases per group of combos, both on the pool: each distinct indicator array of the
//! group once (from the cache if it holds the line; else all SMA windows in one shared pass, the
//! recurrences one task per window, their lines offered to the cache), then
//! each combo's signals and trades from those arrays with per-worker scratch (one byte per
//! bar). Combos are sorted by their arrays and taken in groups whose arrays fit the working
//! set, so a grid too large for memory runs in pieces; the results do not depend on the
//! grouping, the order or the thread count.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rayon::prelude::*;

use crate::builtins::Params;
use crate::certified::{self, Bounded, Certified, Side};
use crate::execution::{Execution, run_signals};
use crate::ledger::{Books, Moves};
use crate::lines::Bars;
use crate::lines::indicators::{donchian_channels, ema_multi, rsi, rsi_signals, sma_multi};
use crate::sweep::{ArrayCache, ArrayKey, PARALLEL_MIN_WORK, SweepControl};
use crate::{Combo, ComboResult, Error, Result, signal};

enum Array {
    /// A line, shared with the cache.
    Line(Arc<[f64]>),
    /// A certified line and its bounds ([`crate::certified`]): never offered to the cache.
    Certified(Certified),
    Signals(Vec<i8>),
}

fn keys(p: &Params) -> [Option<ArrayKey>; 2] {
    match *p {
        Params::SmaCross { fast, slow } => [Some(ArrayKey::Sma(fast)), Some(ArrayKey::Sma(slow))],
        Params::EmaCross { fast, slow } => [Some(ArrayKey::Ema(fast)), Some(ArrayKey::Ema(slow))],
        Params::Donchian { n } => [Some(ArrayKey::Donchian(n)), None],
        Params::RsiRevert { n, .. } => [Some(ArrayKey::Rsi(n)), None],
        Params::HmaSar(_) => [None, None],
    }
}

/// The longest window of a combo (0 for hma_sar, which the paper kernel runs).
fn longest_window(p: &Params) -> usize {
    match *p {
        Params::SmaCross { fast, slow } | Params::EmaCross { fast, slow } => {
            fast.max(slow) as usize
        }
        Params::Donchian { n } | Params::RsiRevert { n, .. } => n as usize,
        Params::HmaSar(_) => 0,
    }
}

fn hma_combos(params: &[Params]) -> Vec<Combo> {
    params
        .iter()
        .filter_map(|p| match p {
            Params::HmaSar(c) => Some(*c),
            _ => None,
        })
        .collect()
}

/// Operations per bar a sweep of `params` over `bars` bars costs, an upper bound that ignores
/// sharing (it decides between running inline and on the pool, as [`crate::sweep::work`]).
pub fn work(bars: usize, params: &[Params]) -> u64 {
    let per_bar: u64 = params
        .iter()
        .map(|p| match *p {
            Params::HmaSar(c) => c.windows().iter().map(|&w| u64::from(w)).sum(),
            Params::SmaCross { fast, slow } => u64::from(fast.max(slow)) + 4,
            _ => 8,
        })
        .sum();
    per_bar.saturating_mul(bars as u64)
}

/// Per-worker scratch bytes of a sweep of `params` over `bars` bars on `workers` threads.
pub fn scratch_bytes(bars: usize, params: &[Params], workers: usize) -> usize {
    let hma = hma_combos(params);
    let own = if hma.len() < params.len() {
        bars * 2
    } else {
        0
    };
    own.max(if hma.is_empty() {
        0
    } else {
        crate::sweep::scratch_bytes(bars, &hma, workers)
    })
}

/// Bytes a sweep of `params` allocates besides its input, at most (as
/// [`crate::memory_bytes`]): hma_sar's share and the indicator sweep's run one after the other,
/// so the larger of the two, plus the results.
pub fn memory_bytes(bars: usize, params: &[Params], workers: usize, shared_cap: usize) -> usize {
    let hma = hma_combos(params);
    let results = params.len() * size_of::<ComboResult>();
    // hma_sar's share counts the moves (the per-bar metrics' sums) with its results.
    let hma_bytes = if hma.is_empty() {
        0
    } else {
        crate::sweep::memory_bytes(bars, &hma, workers, shared_cap)
            - hma.len() * size_of::<ComboResult>()
            - Moves::bytes(bars)
    };
    let distinct: BTreeSet<ArrayKey> = params.iter().flat_map(keys).flatten().collect();
    let array = bars.max(1) * size_of::<f64>();
    let arrays = if distinct.is_empty() {
        0
    } else {
        (distinct.len() * array).min(shared_cap.max(2 * array))
    };
    let own = arrays + workers * scratch_bytes(bars, params, workers);
    hma_bytes.max(own) + results + Moves::bytes(bars)
}

/// Bytes of lines a sweep of `params` offers a cache: hma_sar's, and each distinct SMA, EMA and
/// RSI line (a donchian signal is recomputed: O(bars) with no line to keep).
pub fn line_bytes(bars: usize, params: &[Params]) -> usize {
    let lines: BTreeSet<ArrayKey> = params
        .iter()
        .filter(|p| longest_window(p) <= bars)
        .flat_map(keys)
        .flatten()
        .filter(|k| k.is_line())
        .collect();
    crate::sweep::line_bytes(bars, &hma_combos(params)) + lines.len() * bars * size_of::<f64>()
}

/// The indicator strategies' sweep (no `hma_sar` combo in `params`).
pub(super) fn sweep(
    bars: &Bars<'_>,
    params: &[Params],
    exec: &Execution,
    control: &SweepControl<'_>,
) -> Result<Vec<ComboResult>> {
    let close = bars.close;
    let parallel = control
        .parallel
        .unwrap_or_else(|| work(close.len(), params) >= PARALLEL_MIN_WORK);
    let check = || {
        if (control.cancelled)() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    };
    let moves = control
        .bar_metrics
        .then(|| Moves::cached(close, control.cache));
    let certify = !control.exact_lines && certified::certifiable(close);
    let shared = crate::execution::SharedStops::of(bars, exec, params.len(), false);
    let books = Books {
        bars: *bars,
        stops: &shared,
        moves: moves.as_ref(),
        records: control.records,
    };
    let mut results = vec![ComboResult::default(); params.len()];
    // A combo with a window longer than the range gives no signal (strategies.md): it books
    // nothing and needs no arrays (a grid's long windows would otherwise be arrays of NaN).
    let (idle, mut order): (Vec<usize>, Vec<usize>) =
        (0..params.len()).partition(|&i| longest_window(&params[i]) > close.len());
    for &i in &idle {
        results[i] = books.ledger(exec, i).done();
    }
    control.report(idle.len(), close.len());
    order.sort_by_key(|&i| keys(&params[i]));
    let array = size_of_val(close).max(1);
    let max_arrays = (control.working_set_bytes / array).max(2);
    let mut rest = &order[..];
    while !rest.is_empty() {
        // The longest prefix whose distinct arrays fit (never empty).
        let mut held: BTreeSet<ArrayKey> = BTreeSet::new();
        let mut taken = 0;
        for &i in rest {
            let new: Vec<ArrayKey> = keys(&params[i])
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
        let arrays = compute(close, &held, (parallel, certify), control.cache);
        let run = |scratch: &mut Scratch, &i: &usize| -> Result<(usize, ComboResult)> {
            check()?;
            let result = run_one((books, i), &params[i], &arrays, exec, scratch, control);
            control.report(1, close.len());
            Ok((i, result))
        };
        for (i, r) in crate::par::map(parallel, group, run)? {
            results[i] = r;
        }
    }
    Ok(results)
}

/// Every array of `keys` over `close`: the lines `cache` holds from it, the rest computed (the
/// SMA windows in one shared pass, the others one task each) and their lines offered to it, so
/// the next call (or the next step of a ranked grid) on this series reuses them.
fn compute(
    close: &[f64],
    keys: &BTreeSet<ArrayKey>,
    (parallel, certify): (bool, bool),
    cache: &dyn ArrayCache,
) -> BTreeMap<ArrayKey, Array> {
    let mut held: BTreeMap<ArrayKey, Array> = keys
        .iter()
        .filter(|k| k.is_line())
        .filter_map(|&k| {
            let line = cache.get(k).filter(|l| l.len() == close.len())?;
            Some((k, Array::Line(line)))
        })
        .collect();
    let missing: BTreeSet<ArrayKey> = keys
        .iter()
        .filter(|k| !held.contains_key(k))
        .copied()
        .collect();
    let computed = compute_all(close, &missing, parallel, certify);
    if cache.keeps() {
        for (k, a) in &computed {
            if let Array::Line(line) = a {
                cache.insert(*k, Arc::clone(line));
            }
        }
    }
    held.extend(computed);
    held
}

/// Every array of `keys` over `close`: the SMA windows in one shared pass (long ones
/// certified, one task each, if `certify`), the rest one task each.
fn compute_all(
    close: &[f64],
    keys: &BTreeSet<ArrayKey>,
    parallel: bool,
    certify: bool,
) -> BTreeMap<ArrayKey, Array> {
    // The long SMA windows worth certifying, against the shared pass's cost for all of them.
    let from = certify
        .then(|| {
            let smas = keys.iter().filter_map(|k| match k {
                ArrayKey::Sma(n) => Some(*n as usize),
                _ => None,
            });
            certified::certified_from(smas, close.len())
        })
        .flatten();
    let long = |n: usize| from.is_some_and(|f| n >= f) && certified::pays(n, close.len());
    let windows: Vec<usize> = keys
        .iter()
        .filter_map(|k| match k {
            ArrayKey::Sma(n) if !long(*n as usize) => Some(*n as usize),
            _ => None,
        })
        .collect();
    let mut out: BTreeMap<ArrayKey, Array> = windows
        .iter()
        .zip(sma_multi(close, &windows, parallel))
        .map(|(&n, line)| (ArrayKey::Sma(n as u32), Array::Line(line)))
        .collect();
    // EMAs: a pass runs several windows' recurrences side by side.
    let emas: Vec<usize> = keys
        .iter()
        .filter_map(|k| match k {
            ArrayKey::Ema(n) => Some(*n as usize),
            _ => None,
        })
        .collect();
    out.extend(
        emas.iter()
            .zip(ema_multi(close, &emas, parallel))
            .map(|(&n, line)| (ArrayKey::Ema(n as u32), Array::Line(line))),
    );
    // Channels: by the cheaper of one shared pass and a queue per channel.
    let channels: Vec<usize> = keys
        .iter()
        .filter_map(|k| match k {
            ArrayKey::Donchian(n) => Some(*n as usize),
            _ => None,
        })
        .collect();
    out.extend(
        channels
            .iter()
            .zip(donchian_channels(close, &channels, parallel))
            .map(|(&n, s)| (ArrayKey::Donchian(n as u32), Array::Signals(s))),
    );
    let one = |k: &ArrayKey| -> Option<(ArrayKey, Array)> {
        let array = match *k {
            ArrayKey::Sma(n) if long(n as usize) => {
                Array::Certified(certified::sma(close, n as usize))
            }
            ArrayKey::Sma(_) | ArrayKey::Ema(_) | ArrayKey::Donchian(_) => return None,
            ArrayKey::Rsi(n) => Array::Line(rsi(close, n as usize).into()),
            ArrayKey::Wma(_)
            | ArrayKey::Hma(_)
            | ArrayKey::Hma3(_)
            | ArrayKey::Moves
            | ArrayKey::Node(_)
            | ArrayKey::Signs(_) => {
                unreachable!("not an array of the indicator sweep")
            }
        };
        Some((*k, array))
    };
    // The rest one task each (`one` skips what the shared passes computed).
    let rest: Vec<ArrayKey> = keys.iter().copied().collect();
    if parallel {
        out.extend(rest.par_iter().filter_map(one).collect::<Vec<_>>());
    } else {
        out.extend(rest.iter().filter_map(one));
    }
    out
}

/// Per-worker buffers: state bytes of two lines, or signal bytes.
#[derive(Default)]
struct Scratch {
    states: Vec<u8>,
    signals: Vec<i8>,
}

/// Combo `combo` (`p`) from its arrays.
fn run_one(
    (books, combo): (Books<'_>, usize),
    p: &Params,
    arrays: &BTreeMap<ArrayKey, Array>,
    exec: &Execution,
    scratch: &mut Scratch,
    control: &SweepControl<'_>,
) -> ComboResult {
    let line = |k: ArrayKey| {
        let line = match &arrays[&k] {
            Array::Line(l) => Bounded::exact(l),
            Array::Certified(c) => c.view(),
            Array::Signals(_) => unreachable!("{k:?} is a line"),
        };
        debug_assert!(k.is_line());
        let key = k;
        Side { line, key }
    };
    let crosses = |a: Side<'_>, b: Side<'_>, scratch: &mut Scratch| {
        signal::run_fast(
            books,
            combo,
            (a, b),
            exec,
            &mut scratch.states,
            control.certified,
        )
    };
    match *p {
        Params::SmaCross { fast, slow } => crosses(
            line(ArrayKey::Sma(slow)),
            line(ArrayKey::Sma(fast)),
            scratch,
        ),
        // An EMA is never NaN: a window longer than the range never gets here.
        Params::EmaCross { fast, slow } => crosses(
            line(ArrayKey::Ema(slow)),
            line(ArrayKey::Ema(fast)),
            scratch,
        ),
        Params::Donchian { n } => match &arrays[&ArrayKey::Donchian(n)] {
            Array::Signals(s) => {
                run_signals(&books.bars, books.stops, s, exec, books.ledger(exec, combo)).done()
            }
            Array::Line(_) | Array::Certified(_) => unreachable!("donchian arrays are signals"),
        },
        Params::RsiRevert { n, lower, upper } => {
            rsi_signals(
                line(ArrayKey::Rsi(n)).line.values,
                lower,
                upper,
                &mut scratch.signals,
            );
            run_signals(
                &books.bars,
                books.stops,
                &scratch.signals,
                exec,
                books.ledger(exec, combo),
            )
            .done()
        }
        Params::HmaSar(_) => unreachable!("hma_sar runs on the paper kernel"),
    }
}
