//! The dataset store: named price series held in memory, versioned, replaced atomically,
//! written through to the data directory when there is one, and the cache of WMA arrays
//! computed over them.
//!
//! Handlers never touch the map: they [`DatasetStore::get`] an `Arc<Dataset>` (a snapshot that
//! stays valid while a sweep runs, even if the name is replaced or dropped meanwhile) and
//! [`DatasetStore::put`] / [`DatasetStore::remove`] whole datasets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use moka::policy::EvictionPolicy;
use moka::sync::Cache;
use sweepflight_kernel::WmaStore;

use crate::persist::{DataDir, Staged};
use crate::{Error, Result, ServerConfig};

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
    /// Bytes of Arrow data in the batches.
    pub bytes: u64,
    /// Its committed file in the data directory, when there is one.
    pub file: Option<PathBuf>,
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
    /// Bytes of Arrow data in the batches.
    pub bytes: u64,
}

type WmaKey = (u64, u32);

/// The named datasets and the WMA cache over them.
pub struct DatasetStore {
    // A std RwLock: critical sections are a map lookup or insert, never an await or a sweep.
    datasets: RwLock<BTreeMap<String, Arc<Dataset>>>,
    next_id: AtomicU64,
    wmas: Cache<WmaKey, Arc<[f64]>>,
    disk: Option<DataDir>,
    max_total_bytes: u64,
    // Held while a put or drop changes the files and the map, so the two always agree and
    // versions are handed out in commit order. Never held during a big write.
    commits: Mutex<()>,
}

impl std::fmt::Debug for DatasetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetStore")
            .field("datasets", &self.list().len())
            .field("cached_wmas", &self.wmas.entry_count())
            .field("persistent", &self.disk.is_some())
            .finish()
    }
}

impl DatasetStore {
    /// An empty in-memory store whose WMA cache holds at most `cache_bytes` (least recently
    /// used first out).
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
            disk: None,
            max_total_bytes: u64::MAX,
            commits: Mutex::new(()),
        }
    }

    /// The store `config` asks for: in memory, or backed by its data directory with every
    /// dataset found there loaded (blocking; call it before serving).
    ///
    /// # Errors
    /// [`Error::Io`] if the data directory cannot be opened or is in use.
    pub fn open(config: &ServerConfig) -> Result<Self> {
        let mut store = Self::new(config.cache_bytes);
        store.max_total_bytes = config.max_total_bytes;
        let Some(root) = &config.data_dir else {
            return Ok(store);
        };
        let (disk, recovered) = DataDir::open(root)?;
        {
            let mut map = store.write();
            for r in recovered {
                let d = store.make_dataset(&r.name, r.version, r.dataset, Some(r.file));
                map.insert(r.name, Arc::new(d));
            }
        }
        store.disk = Some(disk);
        Ok(store)
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

    /// Bytes of Arrow data held by all datasets.
    pub fn total_bytes(&self) -> u64 {
        self.read().values().map(|d| d.bytes).sum()
    }

    /// Stores `new` under `name`, replacing any dataset of that name in one step; returns it.
    /// With a data directory the dataset is on disk (fsynced) before this returns.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] past `--max-total-bytes`, [`Error::Io`] if it cannot be
    /// written; either way nothing is stored and the old version stays.
    pub async fn put(self: &Arc<Self>, name: &str, new: NewDataset) -> Result<Arc<Dataset>> {
        // Fail fast, before writing gigabytes that could not be kept anyway.
        self.check_total(name, new.bytes)?;
        if self.disk.is_none() {
            return self.commit(name, new, None);
        }
        let this = Arc::clone(self);
        let name = name.to_owned();
        blocking(move || {
            let staged = this.disk.as_ref().map(|d| d.stage(&new)).transpose()?;
            this.commit(&name, new, staged)
        })
        .await
    }

    /// Removes `name` (and its file, durably). Sweeps already holding it finish on their
    /// snapshot.
    ///
    /// # Errors
    /// [`Error::DatasetNotFound`], or [`Error::Io`] if the file cannot be deleted (the
    /// dataset then stays).
    pub async fn remove(self: &Arc<Self>, name: &str) -> Result<Arc<Dataset>> {
        let this = Arc::clone(self);
        let name = name.to_owned();
        let remove = move || {
            let _commit = this.commit_lock();
            let old = this.get(&name)?;
            if let (Some(disk), Some(file)) = (&this.disk, &old.file) {
                disk.delete(file)?;
            }
            this.write().remove(&name);
            this.forget_wmas(old.id);
            Ok(old)
        };
        if self.disk.is_none() {
            return remove();
        }
        blocking(remove).await
    }

    fn commit(&self, name: &str, new: NewDataset, staged: Option<Staged>) -> Result<Arc<Dataset>> {
        let _commit = self.commit_lock();
        // Again under the lock: other puts may have committed while this one was writing.
        self.check_total(name, new.bytes)?;
        let version = self.read().get(name).map_or(1, |old| old.version + 1);
        let file = match (&self.disk, staged) {
            (Some(disk), Some(staged)) => Some(disk.commit(staged, name, version)?),
            _ => None,
        };
        let dataset = Arc::new(self.make_dataset(name, version, new, file));
        let old = self.write().insert(name.to_owned(), Arc::clone(&dataset));
        if let Some(old) = old {
            self.forget_wmas(old.id);
            if let (Some(disk), Some(file)) = (&self.disk, &old.file)
                && let Err(e) = disk.delete(file)
            {
                // Harmless: the next start keeps the newest version and removes this one.
                tracing::warn!(error = %e, "cannot remove a replaced version");
            }
        }
        Ok(dataset)
    }

    fn make_dataset(
        &self,
        name: &str,
        version: u64,
        new: NewDataset,
        file: Option<PathBuf>,
    ) -> Dataset {
        Dataset {
            name: name.to_owned(),
            version,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            schema: new.schema,
            batches: new.batches,
            close: new.close,
            bytes: new.bytes,
            file,
        }
    }

    fn check_total(&self, name: &str, bytes: u64) -> Result<()> {
        let map = self.read();
        let others: u64 = map
            .iter()
            .filter(|(n, _)| n.as_str() != name)
            .map(|(_, d)| d.bytes)
            .sum();
        if others.saturating_add(bytes) > self.max_total_bytes {
            return Err(Error::ResourceExhausted(format!(
                "storing `{name}` ({bytes} bytes) next to the other datasets ({others} bytes) \
                 would pass the server's limit of {} bytes (--max-total-bytes); drop a dataset \
                 or raise the limit",
                self.max_total_bytes
            )));
        }
        Ok(())
    }

    fn commit_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        // The guarded state lives in the map and on disk; a poisoned lock guards nothing.
        self.commits.lock().unwrap_or_else(|e| e.into_inner())
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

/// Runs blocking file work on tokio's blocking pool (never on a runtime worker).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("storage task failed: {e}")))?
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
