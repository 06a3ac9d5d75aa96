//! The dataset store: named price series held in memory, versioned, replaced atomically, and
//! the cache of WMA arrays computed over them.
//!
//! Handlers never touch the map: they [`DatasetStore::get`] an `Arc<Dataset>` (a snapshot that
//! stays valid while a sweep runs, even if the name is replaced or dropped meanwhile) and
//! [`DatasetStore::insert`] / [`DatasetStore::remove`] whole datasets.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use moka::policy::EvictionPolicy;
use moka::sync::Cache;
use sweepflight_kernel::WmaStore;

use crate::{Error, Result};

/// Longest dataset name the contract allows.
pub const MAX_NAME_LEN: usize = 128;

/// Checks a dataset name: 1-128 characters from `A-Z a-z 0-9 . _ -`.
///
/// # Errors
/// [`Error::InvalidArgument`] saying what is wrong.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "dataset name must be 1-{MAX_NAME_LEN} characters, got {}",
            name.chars().count()
        )));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::invalid(format!(
            "dataset name {name:?} has character {c:?}; allowed: A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

/// One stored series: the close column as one contiguous buffer for the kernel, and the
/// uploaded batches (whose `close` column is a slice of that same buffer) for DoGet.
#[derive(Debug)]
pub struct Dataset {
    /// The dataset's name.
    pub name: String,
    /// 1 for the first put of a name, +1 for each replacement.
    pub version: u64,
    /// Process-unique id of this upload; the WMA cache's key.
    pub id: u64,
    /// Schema of the stored batches (`close` widened to float64).
    pub schema: SchemaRef,
    /// The stored batches, in upload order.
    pub batches: Vec<RecordBatch>,
    /// The close column, contiguous.
    pub close: arrow_array::Float64Array,
    /// In-memory size of the batches, in bytes.
    pub bytes: u64,
}

impl Dataset {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.close.len()
    }
    /// The closes as a slice, for the kernel.
    pub fn close_values(&self) -> &[f64] {
        self.close.values()
    }
}

/// What a put produces before the store gives it a version.
#[derive(Debug)]
pub struct NewDataset {
    /// Schema of the batches.
    pub schema: SchemaRef,
    /// The batches.
    pub batches: Vec<RecordBatch>,
    /// The close column, contiguous.
    pub close: arrow_array::Float64Array,
}

type WmaKey = (u64, u32);

/// The named datasets and the WMA cache over them.
pub struct DatasetStore {
    // A std RwLock: critical sections are a map lookup or insert, never an await or a sweep.
    datasets: RwLock<BTreeMap<String, Arc<Dataset>>>,
    next_id: AtomicU64,
    wmas: Cache<WmaKey, Arc<[f64]>>,
}

impl std::fmt::Debug for DatasetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetStore")
            .field("datasets", &self.list().len())
            .field("cached_wmas", &self.wmas.entry_count())
            .finish()
    }
}

impl DatasetStore {
    /// An empty store whose WMA cache holds at most `cache_bytes` (least recently used first out).
    pub fn new(cache_bytes: u64) -> Self {
        let wmas = Cache::builder()
            .max_capacity(cache_bytes)
            .weigher(|_k: &WmaKey, v: &Arc<[f64]>| {
                u32::try_from(size_of_val::<[f64]>(v)).unwrap_or(u32::MAX)
            })
            .eviction_policy(EvictionPolicy::lru())
            .support_invalidation_closures()
            .build();
        Self {
            datasets: RwLock::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            wmas,
        }
    }

    /// The dataset called `name`.
    ///
    /// # Errors
    /// [`Error::DatasetNotFound`].
    pub fn get(&self, name: &str) -> Result<Arc<Dataset>> {
        self.read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::DatasetNotFound(name.to_owned()))
    }

    /// Every dataset, by name.
    pub fn list(&self) -> Vec<Arc<Dataset>> {
        self.read().values().cloned().collect()
    }

    /// Stores `new` under `name`, replacing any dataset of that name in one step; returns it.
    pub fn insert(&self, name: &str, new: NewDataset) -> Arc<Dataset> {
        let bytes = new
            .batches
            .iter()
            .map(|b| b.get_array_memory_size() as u64)
            .sum();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut map = self.write();
        let version = map.get(name).map_or(1, |old| old.version + 1);
        let dataset = Arc::new(Dataset {
            name: name.to_owned(),
            version,
            id,
            schema: new.schema,
            batches: new.batches,
            close: new.close,
            bytes,
        });
        let old = map.insert(name.to_owned(), Arc::clone(&dataset));
        drop(map);
        if let Some(old) = old {
            self.forget_wmas(old.id);
        }
        dataset
    }

    /// Removes `name`. Sweeps already holding it finish on their snapshot.
    ///
    /// # Errors
    /// [`Error::DatasetNotFound`].
    pub fn remove(&self, name: &str) -> Result<Arc<Dataset>> {
        let old = self
            .write()
            .remove(name)
            .ok_or_else(|| Error::DatasetNotFound(name.to_owned()))?;
        self.forget_wmas(old.id);
        Ok(old)
    }

    /// The WMA cache view for one dataset, to hand to the kernel.
    pub fn wma_cache<'a>(&'a self, dataset: &Dataset) -> DatasetWmas<'a> {
        DatasetWmas {
            cache: &self.wmas,
            id: dataset.id,
        }
    }

    /// Bytes currently held by the WMA cache (after pending evictions are applied).
    pub fn cache_bytes(&self) -> u64 {
        self.wmas.run_pending_tasks();
        self.wmas.weighted_size()
    }

    fn forget_wmas(&self, id: u64) {
        // Cannot fail: the cache is built with invalidation closures enabled.
        let _ = self.wmas.invalidate_entries_if(move |k, _| k.0 == id);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Dataset>>> {
        // A panic while holding the lock cannot leave the map half-written (all writes are a
        // single insert or remove), so a poisoned lock is still a consistent map.
        self.datasets.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Dataset>>> {
        self.datasets.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The slice of the WMA cache that belongs to one dataset upload.
pub struct DatasetWmas<'a> {
    cache: &'a Cache<WmaKey, Arc<[f64]>>,
    id: u64,
}

impl WmaStore for DatasetWmas<'_> {
    fn get(&self, n: u32) -> Option<Arc<[f64]>> {
        self.cache.get(&(self.id, n))
    }
    fn insert(&self, n: u32, wma: Arc<[f64]>) {
        self.cache.insert((self.id, n), wma);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["paper", "a", "A.b_c-9", &"x".repeat(128)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", &"x".repeat(129)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }
}
