//! The parameter sweep: many combos over one close series, fast, in input order, and identical
//! for any thread count.
//!
//! Where the time goes and what is done about it:
//! - The five WMAs of the raw series per combo repeat across combos (`half == p` always, and
//!   neighbouring lengths share sub-windows), so each distinct `WMA(close, n)` is computed once
//!   per sweep, or fetched from a caller's [`WmaStore`] that outlives the sweep.
//! - The two WMAs of derived series are per combo; they reuse per-worker scratch buffers.
//! - Combos run in parallel on rayon, largest first so the long tail does not land last.
//! - Memory is bounded: combos are taken in groups whose shared WMAs fit the working-set budget.
//!
//! None of this changes the arithmetic of any output (see [`crate::wma`]), so the results are
//! the same whatever the grouping, the cache state or the number of threads.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rayon::prelude::*;

use crate::wma::wma_into_with;
use crate::{Combo, ComboResult, Error, Result, signal};

/// A cache of `WMA(close, n)` arrays for one close series, shared by sweeps over it.
///
/// The sweep asks for each window it needs and offers back each one it computed; the store
/// decides what to keep. Implementations must be thread-safe: the sweep calls them from rayon.
pub trait WmaStore: Sync {
    /// `WMA(close, n)` if the store holds it.
    fn get(&self, n: u32) -> Option<Arc<[f64]>>;
    /// Offers a freshly computed `WMA(close, n)`; the store may keep or drop it.
    fn insert(&self, n: u32, wma: Arc<[f64]>);
}

/// A store that keeps nothing: every sweep computes its own shared WMAs.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoStore;

impl WmaStore for NoStore {
    fn get(&self, _n: u32) -> Option<Arc<[f64]>> {
        None
    }
    fn insert(&self, _n: u32, _wma: Arc<[f64]>) {}
}

/// Below this many multiply-adds (about a millisecond of one core) a sweep runs on the calling
/// thread: handing work to the pool and back would cost more than it saves.
pub const PARALLEL_MIN_WORK: u64 = 4 << 20;

/// Multiply-adds a sweep of `combos` over `bars` bars costs, an upper bound that ignores
/// sharing: it decides between running inline and running on the pool.
pub fn work(bars: usize, combos: &[Combo]) -> u64 {
    let per_bar: u64 = combos.iter().map(Combo::cost).sum();
    per_bar.saturating_mul(bars as u64)
}

/// Bytes a sweep allocates besides its input series, at most: the shared `WMA(close, n)` arrays
/// (all distinct windows, but never more than `shared_cap` bytes of them, and never fewer than
/// one combo's five), `workers` sets of per-worker scratch arrays, and the results.
pub fn memory_bytes(bars: usize, combos: &[Combo], workers: usize, shared_cap: usize) -> usize {
    let array = bars.max(1) * size_of::<f64>();
    let distinct: HashSet<u32> = combos.iter().flat_map(Combo::close_windows).collect();
    let shared = (distinct.len().min(5 * combos.len()) * array).min(shared_cap.max(5 * array));
    shared + workers * SCRATCH_ARRAYS * array + combos.len() * size_of::<ComboResult>()
}

/// Arrays of scratch each worker holds (see [`Scratch`]).
pub const SCRATCH_ARRAYS: usize = 3;

/// How a sweep is run: where shared WMAs come from, when to stop, how much memory to use.
pub struct SweepControl<'a> {
    /// Cache of `WMA(close, n)` for this series.
    pub store: &'a dyn WmaStore,
    /// Polled before each combo; once it answers true the sweep ends with
    /// [`Error::Cancelled`].
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
    /// Upper bound on the bytes of shared WMA arrays held at once by the sweep itself.
    pub working_set_bytes: usize,
    /// Use rayon (`Some(true)`), stay on the calling thread (`Some(false)`), or decide by
    /// [`work`] against [`PARALLEL_MIN_WORK`] (`None`). The results are the same either way.
    pub parallel: Option<bool>,
}

impl Default for SweepControl<'_> {
    fn default() -> Self {
        Self {
            store: &NoStore,
            cancelled: &|| false,
            working_set_bytes: 512 << 20,
            parallel: None,
        }
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

/// [`sweep`] with a WMA cache, a cancellation check and a memory budget.
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
    if !fee.is_finite() || fee < 0.0 {
        return Err(Error::InvalidFee(fee));
    }
    let mut order: Vec<usize> = (0..combos.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(combos[i].cost()));

    let array_bytes = size_of_val(close).max(1);
    // Five arrays is what one combo can need; a group always admits its first combo.
    let max_arrays = (control.working_set_bytes / array_bytes).max(5);

    let parallel = control
        .parallel
        .unwrap_or_else(|| work(close.len(), combos) >= PARALLEL_MIN_WORK);
    let mut results = vec![ComboResult::default(); combos.len()];
    let mut rest = &order[..];
    while !rest.is_empty() {
        let (group, windows) = next_group(rest, combos, max_arrays);
        rest = &rest[group.len()..];
        let shared = shared_wmas(close, &windows, control, parallel)?;
        let job = |scratch: &mut Scratch, &i: &usize| {
            if (control.cancelled)() {
                return Err(Error::Cancelled);
            }
            Ok((
                i,
                run_combo(close, &combos[i], fee, &shared, scratch, parallel),
            ))
        };
        let done: Vec<(usize, ComboResult)> = if parallel {
            group
                .par_iter()
                .map_init(|| Scratch::new(close.len()), job)
                .collect::<Result<_>>()?
        } else {
            let mut scratch = Scratch::new(close.len());
            group
                .iter()
                .map(|i| job(&mut scratch, i))
                .collect::<Result<_>>()?
        };
        for (i, r) in done {
            results[i] = r;
        }
    }
    Ok(results)
}

/// The longest prefix of `order` whose distinct close windows number at most `max_arrays`
/// (never empty), and those windows.
fn next_group<'o>(
    order: &'o [usize],
    combos: &[Combo],
    max_arrays: usize,
) -> (&'o [usize], Vec<u32>) {
    let mut windows: HashSet<u32> = HashSet::new();
    let mut taken = 0;
    for &i in order {
        let new: HashSet<u32> = combos[i]
            .close_windows()
            .into_iter()
            .filter(|w| !windows.contains(w))
            .collect();
        if taken > 0 && windows.len() + new.len() > max_arrays {
            break;
        }
        windows.extend(new);
        taken += 1;
    }
    (&order[..taken], windows.into_iter().collect())
}

type Shared = HashMap<u32, Arc<[f64]>>;

/// Fetches or computes `WMA(close, n)` for each window, computing the missing ones in parallel
/// and offering them to the store.
fn shared_wmas(
    close: &[f64],
    windows: &[u32],
    control: &SweepControl<'_>,
    parallel: bool,
) -> Result<Shared> {
    let mut shared = Shared::with_capacity(windows.len());
    let mut missing = Vec::new();
    for &n in windows {
        match control.store.get(n) {
            Some(w) if w.len() == close.len() => {
                shared.insert(n, w);
            }
            _ => missing.push(n),
        }
    }
    // Longest windows first: they are the most work.
    missing.sort_unstable_by(|a, b| b.cmp(a));
    let compute = |&n: &u32| {
        if (control.cancelled)() {
            return Err(Error::Cancelled);
        }
        let mut out = vec![0.0; close.len()];
        wma_into_with(close, n as usize, &mut out, parallel);
        Ok((n, Arc::from(out)))
    };
    let computed: Vec<(u32, Arc<[f64]>)> = if parallel {
        missing.par_iter().map(compute).collect::<Result<_>>()?
    } else {
        missing.iter().map(compute).collect::<Result<_>>()?
    };
    for (n, w) in computed {
        control.store.insert(n, Arc::clone(&w));
        shared.insert(n, w);
    }
    Ok(shared)
}

/// Per-worker buffers for the two derived series and the two indicator lines.
struct Scratch {
    diff: Vec<f64>,
    a: Vec<f64>,
    b: Vec<f64>,
}

impl Scratch {
    fn new(len: usize) -> Self {
        Self {
            diff: vec![0.0; len],
            a: vec![0.0; len],
            b: vec![0.0; len],
        }
    }
}

fn run_combo(
    close: &[f64],
    combo: &Combo,
    fee: f64,
    shared: &Shared,
    s: &mut Scratch,
    parallel: bool,
) -> ComboResult {
    let get = |n: u32| -> &[f64] { &shared[&n] };
    let (half, full) = (get(combo.half()), get(combo.full()));
    for ((d, h), f) in s.diff.iter_mut().zip(half).zip(full) {
        *d = 2.0 * h - f;
    }
    wma_into_with(&s.diff, combo.sqrt() as usize, &mut s.a, parallel);

    let (w3, w2, w1) = (get(combo.p3()), get(combo.p2()), get(combo.p()));
    for (i, d) in s.diff.iter_mut().enumerate() {
        *d = 3.0 * w3[i] - w2[i] - w1[i];
    }
    wma_into_with(&s.diff, combo.p() as usize, &mut s.b, parallel);
    signal::run(close, &s.a, &s.b, fee)
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
    fn equals_oracle() {
        let close = series(3_000);
        let combos = grid();
        assert_eq!(
            sweep(&close, &combos, 0.0009).unwrap(),
            oracle::sweep(&close, &combos, 0.0009)
        );
    }

    #[test]
    fn tiny_working_set_and_store_give_the_same_answer() {
        #[derive(Default)]
        struct Counting(Mutex<HashMap<u32, Arc<[f64]>>>, AtomicUsize);
        impl WmaStore for Counting {
            fn get(&self, n: u32) -> Option<Arc<[f64]>> {
                let hit = self.0.lock().unwrap().get(&n).cloned();
                self.1
                    .fetch_add(usize::from(hit.is_some()), Ordering::Relaxed);
                hit
            }
            fn insert(&self, n: u32, wma: Arc<[f64]>) {
                self.0.lock().unwrap().insert(n, wma);
            }
        }
        let close = series(2_000);
        let combos = grid();
        let want = sweep(&close, &combos, 0.0009).unwrap();
        let store = Counting::default();
        let control = SweepControl {
            store: &store,
            working_set_bytes: 1,
            ..SweepControl::default()
        };
        assert_eq!(sweep_with(&close, &combos, 0.0009, &control).unwrap(), want);
        let hits_first = store.1.load(Ordering::Relaxed);
        assert_eq!(sweep_with(&close, &combos, 0.0009, &control).unwrap(), want);
        assert!(
            store.1.load(Ordering::Relaxed) > hits_first,
            "second sweep used the store"
        );
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
