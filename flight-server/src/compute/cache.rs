//! The kernel cache: arrays the kernel computed over a stored series (the indicator lines,
//! a formula's function series, each hma_sar combo's sign bytes: [`ArrayKey`]), kept across
//! sweeps so the next sweep on the same dataset version skips them: with its lines (or signs)
//! cached, a repeated grid costs only its signal loops. One LRU (moka) bounded by
//! `--cache-bytes`, shared by every dataset; a version's entries go when the version does.
//!
//! Admission: an input (a series, or a row range of it) is kept from its second sweep on, and
//! never on a call's own time. Keeping a sweep's arrays is not free: the tiled kernel then
//! writes them whole into fresh memory instead of tile-sized scratch (the paper grid's lines:
//! 179 MB of new pages per series, which made a first sweep ten times slower than with no cache
//! at all; its combos' sign bytes, kept instead since, 12 MB); a series swept once (a scan over many datasets) should not pay for it, and neither
//! should the call that sweeps it again. A sweep reads what is cached and keeps nothing
//! ([`KernelCache::view`]); where an input swept before missed arrays, the sweep leaves a fill
//! behind, which computes them again, whole, when the server is idle
//! ([`crate::compute::fill`]). A caller that knows the lines will be asked for again (a
//! walk-forward's folds) keeps them at once ([`KernelCache::view_keeping`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use moka::policy::EvictionPolicy;
use moka::sync::Cache;
use sweepflight_kernel::{ArrayCache, ArrayKey};

use crate::ops::metrics::Metrics;

/// Which input an array was computed over: one series of one dataset version, whole or a row
/// range of it (a range is its own input: its windows start at its first row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InputKey {
    /// The dataset version's process-unique id.
    pub dataset: u64,
    /// The series (0 for an unkeyed dataset).
    pub series: u32,
    /// The row range, if the sweep asked for one.
    pub rows: Option<(u64, u64)>,
}

type Key = (InputKey, ArrayKey);

/// One kept array: a line's values, or bytes ([`ArrayKey::Signs`]).
#[derive(Clone)]
enum Held {
    Values(Arc<[f64]>),
    Bytes(Arc<[u8]>),
}

impl Held {
    fn bytes(&self) -> usize {
        match self {
            Self::Values(v) => size_of_val::<[f64]>(v),
            Self::Bytes(b) => b.len(),
        }
    }
}

/// The server's kernel cache.
pub struct KernelCache {
    arrays: Cache<Key, Held>,
    /// Inputs swept before, by an LRU of their keys only: the admission rule's memory.
    seen: Cache<InputKey, ()>,
    /// Inputs with a fill queued or running (one at a time per input).
    filling: Mutex<HashSet<InputKey>>,
}

/// Inputs the admission rule remembers (a few bytes each).
const SEEN_INPUTS: u64 = 1 << 16;

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("entries", &self.arrays.entry_count())
            .finish()
    }
}

impl KernelCache {
    /// A cache of at most `bytes` (0 keeps nothing).
    pub fn new(bytes: u64) -> Self {
        let arrays = Cache::builder()
            .max_capacity(bytes)
            .weigher(|_k: &Key, v: &Held| u32::try_from(v.bytes()).unwrap_or(u32::MAX))
            .eviction_policy(EvictionPolicy::lru())
            .support_invalidation_closures()
            .build();
        let seen = Cache::builder()
            .max_capacity(SEEN_INPUTS)
            .support_invalidation_closures()
            .build();
        Self {
            arrays,
            seen,
            filling: Mutex::default(),
        }
    }

    /// The view the kernel gets for one input; hits and misses are counted in `metrics`. The
    /// sweep reads what is cached and keeps nothing; afterwards [`CacheView::wants_fill`] says
    /// whether to leave a fill behind: if `offer` (see [`Self::worth_offering`]), this input
    /// was swept before and the sweep missed arrays (the module's admission rule).
    ///
    /// One exception: if a fill of this input is still waiting, the server has had no idle
    /// moment since the sweep that queued it (a caller sweeping the input without pause), and
    /// may not have one soon; this sweep then keeps what it computes itself (the fill still
    /// runs at the next idle moment, for the arrays of the sweep that queued it). A loop of
    /// calls keeps its arrays from its third call on, as the old rule did from the second.
    pub fn view<'a>(&'a self, input: InputKey, metrics: &'a Metrics, offer: bool) -> CacheView<'a> {
        let again = self.seen.contains_key(&input);
        self.seen.insert(input, ());
        let fits = offer && self.capacity() > 0;
        let keep_now = fits && self.lock_filling().contains(&input);
        CacheView {
            cache: self,
            input,
            metrics: Some(metrics),
            offer: keep_now,
            fill: fits && again && !keep_now,
            missed: AtomicBool::new(false),
        }
    }

    /// A view that keeps what the sweep computes (if `offer`), even on its first sweep of the
    /// input: a walk-forward's, or a fill's (`metrics` `None`: its reads are not the calls').
    pub fn view_keeping<'a>(
        &'a self,
        input: InputKey,
        metrics: Option<&'a Metrics>,
        offer: bool,
    ) -> CacheView<'a> {
        self.seen.insert(input, ());
        CacheView {
            cache: self,
            input,
            metrics,
            offer: offer && self.capacity() > 0,
            fill: false,
            missed: AtomicBool::new(false),
        }
    }

    /// Marks a fill of `input` as queued: false if one already is (or runs).
    pub(crate) fn start_fill(&self, input: InputKey) -> bool {
        self.lock_filling().insert(input)
    }

    /// Marks the fill of `input` as over (done or given up).
    pub(crate) fn end_fill(&self, input: InputKey) {
        self.lock_filling().remove(&input);
    }

    /// Whether a fill of `input` is queued or running (not yet done or given up).
    #[cfg(test)]
    pub(crate) fn fill_wanted(&self, input: InputKey) -> bool {
        self.lock_filling().contains(&input)
    }

    /// Whether `input` is still one whose arrays are worth keeping: its dataset version has
    /// not been dropped or replaced since it was swept (see [`Self::forget`]).
    pub(crate) fn still_seen(&self, input: InputKey) -> bool {
        self.seen.contains_key(&input)
    }

    fn lock_filling(&self) -> std::sync::MutexGuard<'_, HashSet<InputKey>> {
        // The set stays consistent even if a holder panicked: each step is one insert or remove.
        self.filling
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most bytes the cache holds (`--cache-bytes`).
    pub fn capacity(&self) -> u64 {
        self.arrays.policy().max_capacity().unwrap_or(0)
    }

    /// Whether a sweep that would compute `bytes` of arrays should offer them: only if they all
    /// fit. A sweep whose arrays overflow the cache (a universe of hundreds of series, say)
    /// would evict its own first arrays, and everything else cached, before a repeat could use
    /// them; keeping them whole would only cost it the writes.
    pub fn worth_offering(&self, bytes: u64) -> bool {
        bytes <= self.capacity()
    }

    /// Bytes held (after pending evictions are applied).
    pub fn bytes(&self) -> u64 {
        self.arrays.run_pending_tasks();
        self.arrays.weighted_size()
    }

    /// Drops every entry of a dataset version.
    pub fn forget(&self, dataset: u64) {
        // Cannot fail: the cache is built with invalidation closures enabled.
        let _ = self
            .arrays
            .invalidate_entries_if(move |k, _| k.0.dataset == dataset);
        let _ = self
            .seen
            .invalidate_entries_if(move |k, _| k.dataset == dataset);
    }
}

/// The cache as the kernel sees it for one input.
pub struct CacheView<'a> {
    cache: &'a KernelCache,
    input: InputKey,
    metrics: Option<&'a Metrics>,
    offer: bool,
    /// A sweep through this view should leave a fill behind if it misses.
    fill: bool,
    missed: AtomicBool,
}

impl CacheView<'_> {
    /// After the sweep: whether its input's arrays should be kept by a fill (the input was
    /// swept before, its arrays fit, and this sweep computed some).
    pub fn wants_fill(&self) -> bool {
        self.fill && self.missed.load(Ordering::Relaxed)
    }

    /// A row range's array cut from the same array over the whole series, where that is exact
    /// ([`ArrayKey::of_range`]: the lines whose values are fresh sums over their own windows,
    /// and the sign bytes comparing two of them). The folds of a walk-forward, or any sweep
    /// with `rows` after one of the whole series, read their arrays this way instead of
    /// computing them.
    fn cut_from_whole(&self, key: ArrayKey) -> Option<Held> {
        let (from, to) = self.input.rows?;
        let whole = InputKey {
            rows: None,
            ..self.input
        };
        let (from, to) = (usize::try_from(from).ok()?, usize::try_from(to).ok()?);
        match self.cache.arrays.get(&(whole, key))? {
            Held::Values(v) => key.of_range(&v, from, to).map(Held::Values),
            Held::Bytes(b) => key.bytes_of_range(&b, from, to).map(Held::Bytes),
        }
    }

    /// The array under `key`, counted as a hit or a miss.
    fn lookup(&self, key: ArrayKey) -> Option<Held> {
        let hit = self
            .cache
            .arrays
            .get(&(self.input, key))
            .or_else(|| self.cut_from_whole(key));
        if hit.is_none() {
            self.missed.store(true, Ordering::Relaxed);
        }
        if let Some(metrics) = self.metrics {
            match hit {
                Some(_) => metrics.cache_hits.inc(),
                None => metrics.cache_misses.inc(),
            };
        }
        hit
    }

    fn keep(&self, key: ArrayKey, array: Held) {
        if !self.offer {
            return;
        }
        self.cache.arrays.insert((self.input, key), array);
        // moka applies evictions in batches; a sweep offers hundreds of megabytes of arrays in
        // a row, which would all stay resident until the next batch. Evicting as we go keeps
        // the cache within --cache-bytes at every moment, not just eventually.
        self.cache.arrays.run_pending_tasks();
    }
}

impl ArrayCache for CacheView<'_> {
    fn get(&self, key: ArrayKey) -> Option<Arc<[f64]>> {
        match self.lookup(key)? {
            Held::Values(v) => Some(v),
            Held::Bytes(_) => None,
        }
    }
    fn insert(&self, key: ArrayKey, array: Arc<[f64]>) {
        self.keep(key, Held::Values(array));
    }
    fn get_bytes(&self, key: ArrayKey) -> Option<Arc<[u8]>> {
        match self.lookup(key)? {
            Held::Bytes(b) => Some(b),
            Held::Values(_) => None,
        }
    }
    fn insert_bytes(&self, key: ArrayKey, bytes: Arc<[u8]>) {
        self.keep(key, Held::Bytes(bytes));
    }
    fn keeps(&self) -> bool {
        self.offer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweepflight_kernel::NodeKey;
    use sweepflight_kernel::lines::Line;
    use sweepflight_kernel::plan::{line_array_key, signs_key};

    fn hma() -> ArrayKey {
        line_array_key(Line::Hma([1, 2, 3]))
    }

    fn sma(n: u32) -> ArrayKey {
        line_array_key(Line::Sma(n))
    }

    #[test]
    fn a_sweep_offers_its_arrays_only_if_they_all_fit() {
        let cache = KernelCache::new(1 << 20);
        let metrics = Metrics::default();
        let input = InputKey {
            dataset: 1,
            series: 0,
            rows: None,
        };
        assert!(cache.worth_offering(1 << 20) && !cache.worth_offering((1 << 20) + 1));
        let line: Arc<[f64]> = vec![1.0; 1000].into();
        // Not offered: read-only, nothing added.
        let view = cache.view_keeping(input, Some(&metrics), false);
        assert!(!view.keeps());
        view.insert(hma(), Arc::clone(&line));
        assert!(view.get(hma()).is_none());
        // Offered: kept, and read back by a view that does not offer.
        let view = cache.view_keeping(input, Some(&metrics), true);
        assert!(view.keeps());
        view.insert(hma(), Arc::clone(&line));
        let reader = cache.view(input, &metrics, false);
        assert_eq!(reader.get(hma()).as_deref(), Some(&line[..]));
        // A cache of 0 bytes keeps nothing whatever the sweep offers, and wants no fill.
        let none = KernelCache::new(0);
        assert!(!none.view_keeping(input, None, true).keeps());
        let again = none.view(input, &metrics, true);
        assert!(again.get(sma(3)).is_none() && !again.wants_fill());
    }

    #[test]
    fn an_input_swept_again_that_misses_wants_a_fill_and_gets_one_at_a_time() {
        let cache = KernelCache::new(1 << 20);
        let metrics = Metrics::default();
        let input = |series| InputKey {
            dataset: 3,
            series,
            rows: None,
        };
        let missing = |view: &CacheView<'_>| {
            assert!(
                !view.keeps(),
                "a call's sweep keeps nothing itself (no fill waits)"
            );
            view.get(sma(9)).is_none()
        };
        // First sweep of series 0: no fill; the second, which misses, wants one.
        let first = cache.view(input(0), &metrics, true);
        assert!(missing(&first) && !first.wants_fill());
        let second = cache.view(input(0), &metrics, true);
        assert!(!second.wants_fill(), "nothing missed yet");
        assert!(missing(&second) && second.wants_fill());
        // Not when the arrays would not fit (`offer` false).
        let big = cache.view(input(0), &metrics, false);
        assert!(missing(&big) && !big.wants_fill());
        // One fill per input at a time.
        assert!(cache.start_fill(input(0)) && !cache.start_fill(input(0)));
        cache.end_fill(input(0));
        assert!(cache.start_fill(input(0)) && cache.fill_wanted(input(0)));
        // A sweep while it still waits keeps what it computes itself; the fill still runs.
        let loop_call = cache.view(input(0), &metrics, true);
        assert!(loop_call.keeps() && cache.fill_wanted(input(0)));
        assert!(loop_call.get(sma(9)).is_none() && !loop_call.wants_fill());
        cache.end_fill(input(0));
        // A sweep that finds everything wants no fill.
        cache
            .view_keeping(input(0), None, true)
            .insert(sma(9), vec![1.0; 10].into());
        let third = cache.view(input(0), &metrics, true);
        assert!(!missing(&third) && !third.wants_fill());
        // Series 1 swept for lines wanted again at once: kept on its first sweep.
        assert!(cache.view_keeping(input(1), Some(&metrics), true).keeps());
        // A new version of the dataset starts over.
        assert!(cache.still_seen(input(0)));
        cache.forget(3);
        assert!(!cache.still_seen(input(0)));
        let after = cache.view(input(0), &metrics, true);
        assert!(missing(&after) && !after.wants_fill());
    }

    #[test]
    fn a_range_reads_lines_and_sign_bytes_cut_from_the_whole_series() {
        let cache = KernelCache::new(1 << 20);
        let metrics = Metrics::default();
        let whole = InputKey {
            dataset: 7,
            series: 2,
            rows: None,
        };
        let line: Arc<[f64]> = (0..100).map(f64::from).collect();
        let keeping = cache.view_keeping(whole, Some(&metrics), true);
        keeping.insert(sma(5), Arc::clone(&line));
        // A node whose values depend on where the series starts (a recurrence: `ema`).
        let ema = ArrayKey::Node(NodeKey::new(5, None));
        keeping.insert(ema, Arc::clone(&line));
        // A combo's sign bytes: undefined for a range's first 6 bars, its HMA3 [1, 2, 4]'s
        // warm-up (3 + 3: the longest WMA, then p), longer than its HMA [2, 4, 2]'s (3 + 1).
        let signs_key = signs_key(Line::Hma([2, 4, 2]), Line::Hma3([1, 2, 4]));
        let signs: Arc<[u8]> = (0..100u8).map(|i| i % 3).collect();
        keeping.insert_bytes(signs_key, Arc::clone(&signs));
        assert_eq!(cache.bytes(), 2 * 800 + 100, "each array by its own bytes");
        let range = cache.view(
            InputKey {
                rows: Some((10, 30)),
                ..whole
            },
            &metrics,
            false,
        );
        let cut = range.get(sma(5)).expect("cut from the whole line");
        assert_eq!(cut.len(), 20);
        assert!(cut[..4].iter().all(|v| v.is_nan()));
        assert_eq!(cut[4..], line[14..30]);
        let bytes = range
            .get_bytes(signs_key)
            .expect("cut from the whole bytes");
        assert_eq!(bytes[..6], [3; 6]);
        assert_eq!(bytes[6..], signs[16..30]);
        // Bytes are not a line, nor a line bytes.
        assert!(range.get(signs_key).is_none() && range.get_bytes(sma(5)).is_none());
        // An EMA starts fresh at the range: never cut; another series or version: no line.
        assert!(range.get(ema).is_none());
        let other = cache.view(
            InputKey {
                series: 3,
                rows: Some((10, 30)),
                ..whole
            },
            &metrics,
            false,
        );
        assert!(other.get(sma(5)).is_none());
    }
}
