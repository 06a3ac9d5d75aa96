//! The kernel cache: arrays the kernel computed over a stored series (first-level WMAs and the
//! HMA / HMA3 lines, [`ArrayKey`]), kept across sweeps so the next sweep on the same dataset
//! version skips them: with its lines cached, a repeated grid costs only its signal loops. One
//! LRU (moka) bounded by `--cache-bytes`, shared by every dataset; a version's entries go when
//! the version does.

use std::sync::Arc;

use moka::policy::EvictionPolicy;
use moka::sync::Cache;
use sweepflight_kernel::{ArrayCache, ArrayKey};

use crate::metrics::Metrics;

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

/// The server's kernel cache.
pub struct KernelCache {
    arrays: Cache<Key, Arc<[f64]>>,
}

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
            .weigher(|_k: &Key, v: &Arc<[f64]>| {
                u32::try_from(size_of_val::<[f64]>(v)).unwrap_or(u32::MAX)
            })
            .eviction_policy(EvictionPolicy::lru())
            .support_invalidation_closures()
            .build();
        Self { arrays }
    }

    /// The view the kernel gets for one input; hits and misses are counted in `metrics`.
    pub fn view<'a>(&'a self, input: InputKey, metrics: &'a Metrics) -> CacheView<'a> {
        CacheView {
            cache: self,
            input,
            metrics,
        }
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
    }
}

/// The cache as the kernel sees it for one input.
pub struct CacheView<'a> {
    cache: &'a KernelCache,
    input: InputKey,
    metrics: &'a Metrics,
}

impl ArrayCache for CacheView<'_> {
    fn get(&self, key: ArrayKey) -> Option<Arc<[f64]>> {
        let hit = self.cache.arrays.get(&(self.input, key));
        match hit {
            Some(_) => self.metrics.cache_hits.inc(),
            None => self.metrics.cache_misses.inc(),
        };
        hit
    }
    fn insert(&self, key: ArrayKey, array: Arc<[f64]>) {
        self.cache.arrays.insert((self.input, key), array);
        // moka applies evictions in batches; a sweep offers hundreds of megabytes of arrays in
        // a row, which would all stay resident until the next batch. Evicting as we go keeps
        // the cache within --cache-bytes at every moment, not just eventually.
        self.cache.arrays.run_pending_tasks();
    }
    fn keeps(&self) -> bool {
        self.cache
            .arrays
            .policy()
            .max_capacity()
            .is_some_and(|c| c > 0)
    }
}
