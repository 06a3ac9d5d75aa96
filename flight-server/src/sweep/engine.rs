//! [`Engine`]: the server without its network. It owns the datasets, the sweep runner and the
//! background jobs; the use cases in [`crate::sweep`] run on it, whichever verb asked (an
//! action, a `session` message, an exchange, a job), and so do the benchmarks and tools
//! in-process. [`crate::service`] puts the Flight wire around it (auth, connections, shutdown).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use sweepflight_protocol::{PutSummary, SweepRequest, WalkForwardRequest};

use crate::compute::Compute;
use crate::datasets::store::DatasetStore;
use crate::ops::metrics::{Levels, Metrics};
use crate::sweep::Detail;
use crate::sweep::jobs::Jobs;
use crate::{Result, ServerConfig};

/// The datasets, the sweep runner and the jobs of one server.
#[derive(Debug)]
pub struct Engine {
    pub(crate) config: ServerConfig,
    pub(crate) store: Arc<DatasetStore>,
    pub(crate) compute: Arc<Compute>,
    pub(crate) jobs: Arc<Jobs>,
    pub(crate) metrics: Arc<Metrics>,
}

impl Engine {
    /// The engine of `config` over `store` (the compute pool, its memory budget and the job
    /// registry are built here, in one place), counting into `metrics`.
    ///
    /// # Errors
    /// [`crate::Error::Internal`] if the sweep workers cannot be started.
    pub(crate) fn new(
        config: ServerConfig,
        store: Arc<DatasetStore>,
        metrics: Arc<Metrics>,
    ) -> Result<Self> {
        let compute = Arc::new(Compute::new(
            config.threads,
            config.sweep_memory_bytes,
            config.max_queued_sweeps,
            Arc::clone(store.cache()),
            Arc::clone(&metrics),
        )?);
        let jobs = Arc::new(Jobs::new(config.max_jobs, config.job_ttl));
        Ok(Self {
            config,
            store,
            compute,
            jobs,
            metrics,
        })
    }

    /// An engine with no data directory (datasets in memory only), for benchmarks and tools
    /// that run the server's work in-process: `config`'s threads, budget, cache and limits.
    ///
    /// # Errors
    /// As `Engine::new`.
    pub fn in_memory(config: ServerConfig) -> Result<Self> {
        let config = ServerConfig {
            data_dir: None,
            ..config
        };
        let store = Arc::new(DatasetStore::new(config.cache_bytes));
        Self::new(config, store, Arc::default())
    }

    /// Stores `batches` (of `schema`, with a `close` column) as dataset `name`, keyed by
    /// column `key` if given, with the same checks as a DoPut.
    ///
    /// # Errors
    /// As DoPut: INVALID_ARGUMENT for data that breaks the dataset rules.
    pub async fn put(
        &self,
        name: &str,
        schema: &SchemaRef,
        batches: Vec<RecordBatch>,
        key: Option<&str>,
    ) -> Result<PutSummary> {
        sweepflight_protocol::validate_name(name)?;
        let new = crate::datasets::ingest::assemble(schema, batches, key)?;
        let d = self.store.put(name, new, None).await?;
        Ok(d.summary())
    }

    /// The `sweep` action's table for `request`.
    ///
    /// # Errors
    /// As the `sweep` action.
    pub async fn sweep(&self, request: &SweepRequest) -> Result<RecordBatch> {
        crate::sweep::run(self, request, None, None).await
    }

    /// The `trades` action's table for `request`.
    ///
    /// # Errors
    /// As the `trades` action.
    pub async fn trades(&self, request: &SweepRequest) -> Result<RecordBatch> {
        crate::sweep::detail(self, request, None, Detail::Trades, None).await
    }

    /// The `equity` action's table for `request`.
    ///
    /// # Errors
    /// As the `equity` action.
    pub async fn equity(&self, request: &SweepRequest) -> Result<RecordBatch> {
        crate::sweep::detail(self, request, None, Detail::Equity, None).await
    }

    /// The `walk_forward` action's table for `request`.
    ///
    /// # Errors
    /// As the `walk_forward` action.
    pub async fn walk_forward(&self, request: &WalkForwardRequest) -> Result<RecordBatch> {
        crate::sweep::walk_forward::run(self, request, None, None).await
    }

    /// The levels `stats` and /metrics report (connections aside: the wire's).
    pub(crate) fn levels(&self) -> Levels {
        let budget = self.compute.budget();
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let jobs = self.jobs.counts();
        Levels {
            datasets: self.store.list().len() as i64,
            dataset_bytes: int(self.store.total_bytes()),
            cache_bytes: int(self.store.cache().bytes()),
            sweeps_running: self.compute.running() as i64,
            sweeps_queued: budget.queued() as i64,
            sweep_reserved_bytes: int(budget.reserved()),
            cache_fill_reserved_bytes: int(budget.fill_reserved()),
            connections: 0,
            jobs_queued: jobs.queued as i64,
            jobs_running: jobs.running as i64,
            jobs_done: jobs.done as i64,
            job_result_bytes: jobs.result_bytes as i64,
        }
    }
}
