//! The dataset store: named price series held in memory, versioned, replaced atomically,
//! written through to the data directory when there is one. It owns the kernel cache over
//! them ([`KernelCache`]) only to forget a version's entries when the version goes.
//!
//! Handlers never touch the map: they [`DatasetStore::get`] an `Arc<Dataset>` (a snapshot that
//! stays valid while a sweep runs, even if the name is replaced or dropped meanwhile) and
//! [`DatasetStore::put`] / [`DatasetStore::remove`] whole datasets.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use futures::future::BoxFuture;

use crate::compute::cache::KernelCache;
use crate::datasets::persist::{DataDir, FileSink, Staged, upload_file_schema};
use crate::datasets::{Dataset, NewDataset, UploadSink};
use crate::{Error, Result, ServerConfig};

/// The named datasets and the kernel cache over them.
pub struct DatasetStore {
    // A std RwLock: critical sections are a map lookup or insert, never an await or a sweep.
    datasets: RwLock<BTreeMap<String, Arc<Dataset>>>,
    next_id: AtomicU64,
    cache: Arc<KernelCache>,
    disk: Option<Arc<DataDir>>,
    max_total_bytes: u64,
    // Held while a put or drop changes the files and the map, so the two always agree and
    // versions are handed out in commit order. Never held during a big write.
    commits: Mutex<()>,
}

impl std::fmt::Debug for DatasetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatasetStore")
            .field("datasets", &self.list().len())
            .field("cache", &self.cache)
            .field("persistent", &self.disk.is_some())
            .finish()
    }
}

impl DatasetStore {
    /// An empty in-memory store whose kernel cache holds at most `cache_bytes` (least
    /// recently used first out).
    pub fn new(cache_bytes: u64) -> Self {
        Self {
            datasets: RwLock::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            cache: Arc::new(KernelCache::new(cache_bytes)),
            disk: None,
            max_total_bytes: u64::MAX,
            commits: Mutex::new(()),
        }
    }

    /// The store `config` asks for: in memory, or backed by its data directory with every
    /// dataset found there loaded (blocking; call it before serving).
    ///
    /// # Errors
    /// [`Error::Storage`] if the data directory cannot be opened or is in use.
    pub fn open(config: &ServerConfig) -> Result<Self> {
        let mut store = Self::new(config.cache_bytes);
        store.max_total_bytes = config.max_total_bytes;
        let Some(root) = &config.data_dir else {
            return Ok(store);
        };
        // Files are validated as uploads are (a file that fails is quarantined).
        let (disk, recovered) = DataDir::open(root, &crate::datasets::ingest::assemble)?;
        {
            let mut map = store.write();
            for r in recovered {
                let d = store.make_dataset(&r.name, r.version, r.dataset, Some(r.file));
                map.insert(r.name, Arc::new(d));
            }
        }
        store.disk = Some(Arc::new(disk));
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
        self.read().values().map(|d| d.bytes()).sum()
    }

    /// Begins a put of dataset `name`: the sink its upload's validated batches go to as they
    /// arrive (on a durable store, a staged file written while the network delivers; nothing
    /// otherwise), which [`PutSink::commit`]s the dataset or [`PutSink::abort`]s, leaving no
    /// trace. The store owns the whole of a put: the caller only reads the stream into it.
    pub(crate) fn begin_put(self: &Arc<Self>, name: &str) -> PutSink {
        PutSink {
            store: Arc::clone(self),
            name: name.to_owned(),
            file: None,
        }
    }

    /// Stores `new` under `name`, replacing any dataset of that name in one step; returns it.
    /// With a data directory the dataset is on disk (fsynced) before this returns: `staged`
    /// is its file if the upload wrote one as it arrived ([`DatasetStore::begin_put`]), else the
    /// file is written here.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] past `--max-total-bytes`, [`Error::Storage`] if it cannot
    /// be written; either way nothing is stored and the old version stays.
    pub async fn put(
        self: &Arc<Self>,
        name: &str,
        new: NewDataset,
        staged: Option<Staged>,
    ) -> Result<Arc<Dataset>> {
        // Fail fast, before writing gigabytes that could not be kept anyway.
        self.check_total(name, new.bytes)?;
        if self.disk.is_none() {
            return self.commit(name, new, None);
        }
        let this = Arc::clone(self);
        let name = name.to_owned();
        blocking(move || {
            let staged = match staged {
                Some(s) => Some(s),
                None => this.disk.as_ref().map(|d| d.stage(&new)).transpose()?,
            };
            this.commit(&name, new, staged)
        })
        .await
    }

    /// Removes `name` (and its file, durably). Sweeps already holding it finish on their
    /// snapshot.
    ///
    /// # Errors
    /// [`Error::DatasetNotFound`], or [`Error::Storage`] if the file cannot be deleted (the
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
            this.cache.forget(old.id);
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
            self.cache.forget(old.id);
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
            file,
            data: new,
        }
    }

    fn check_total(&self, name: &str, bytes: u64) -> Result<()> {
        let map = self.read();
        let others: u64 = map
            .iter()
            .filter(|(n, _)| n.as_str() != name)
            .map(|(_, d)| d.bytes())
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

    /// The kernel cache over every dataset.
    pub fn cache(&self) -> &Arc<KernelCache> {
        &self.cache
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

/// A put in progress ([`DatasetStore::begin_put`]): where its upload's batches go, and what
/// commits or abandons it.
pub(crate) struct PutSink {
    store: Arc<DatasetStore>,
    name: String,
    /// The staged file of a durable store, once the schema is known.
    file: Option<FileSink>,
}

impl UploadSink for PutSink {
    fn open(&mut self, schema: &Schema, key: Option<&str>) -> Result<()> {
        if let Some(disk) = &self.store.disk {
            let schema = upload_file_schema(schema, key);
            self.file = Some(FileSink::start(disk.create(&schema)?));
        }
        Ok(())
    }

    fn wants_batches(&self) -> bool {
        self.file.is_some()
    }

    fn write(&mut self, batch: RecordBatch) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            match &mut self.file {
                Some(file) => file.send(batch).await,
                None => Ok(()),
            }
        })
    }
}

impl PutSink {
    /// Stores the upload read into this sink ([`DatasetStore::put`], its staged file finished
    /// and committed); on a failure the staged file is deleted and the old version stays.
    ///
    /// # Errors
    /// As [`DatasetStore::put`], or the staged file's own error.
    pub(crate) async fn commit(self, new: NewDataset) -> Result<Arc<Dataset>> {
        let staged = match self.file {
            Some(file) => Some(file.finish().await?),
            None => None,
        };
        self.store.put(&self.name, new, staged).await
    }

    /// Abandons the put: its staged file, if any, is deleted before this returns.
    pub(crate) async fn abort(self) {
        if let Some(file) = self.file {
            file.abort().await;
        }
    }
}
