//! Jobs (protocol v1.2, "Jobs"): work a caller does not wait for. Each job is a record here
//! (its ID, its [`Progress`], and once it ends, its result table or its error) and a tokio task
//! that runs the action's use case, exactly as the action would, under the same memory budget
//! and queue.
//!
//! Life cycle: queued (its first kernel run waits for sweep memory) -> running -> done | failed
//! | cancelled. A done job's result is kept until it is fetched, then for `--job-ttl`; a failed
//! or cancelled job's status for `--job-ttl` after it ended; then the job is forgotten
//! (NOT_FOUND). Expired records are dropped whenever the registry is touched, so no timer task
//! is needed. At most `--max-jobs` jobs hold work or a result at once.
//!
//! Cancelling raises the progress' flag: a run waiting for memory leaves the queue, a running
//! kernel stops at its next check (between tasks of a few milliseconds), and the task ends with
//! the reservation already returned; `cancel` waits for that before it answers, so its reply
//! means the memory is free.
//!
//! Concurrency: one `std::sync::Mutex` over the map and one per record, each held only to read
//! or swap a few fields, never across an await.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use futures::FutureExt;
use sweepflight_protocol::{Compression, JobBody, JobState, JobStatus};
use tokio::sync::watch;

use crate::compute::Progress;
use crate::sweep::Detail;
use crate::sweep::engine::Engine;
use crate::{Error, Result};

/// How a job ended.
#[derive(Debug, Clone)]
enum Phase {
    /// Queued or running (the progress tells which).
    Pending,
    /// Finished; `result` is dropped once cancelled or expired.
    Done {
        result: Arc<RecordBatch>,
        compression: Option<Compression>,
        fetched: Option<Instant>,
    },
    /// Ended with an error.
    Failed {
        code: tonic::Code,
        message: String,
        at: Instant,
    },
    /// Cancelled.
    Cancelled { at: Instant },
}

/// One job.
#[derive(Debug)]
pub(crate) struct Job {
    /// Its opaque ID.
    pub id: String,
    /// The action it runs.
    pub action: &'static str,
    /// Its progress and cancel flag (shared with its kernel runs).
    pub progress: Arc<Progress>,
    phase: Mutex<Phase>,
    /// Turns true when the job's task has ended (its memory returned).
    ended: watch::Sender<bool>,
    /// The largest progress shown so far (f64 bits): a later step that adds work (the chosen
    /// combos of a `trades` job) never makes it fall.
    shown: AtomicU64,
}

/// A job's result, as DoGet sends it.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// The table.
    pub result: Arc<RecordBatch>,
    /// The compression the job's body asked for.
    pub compression: Option<Compression>,
}

impl Job {
    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        // A panic while holding the lock cannot leave a phase half-written (each is one
        // assignment), so a poisoned lock is still a valid one.
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job's status.
    pub(crate) fn status(&self) -> JobStatus {
        let (done, total) = self.progress.combos();
        let mut status = JobStatus {
            job: self.id.clone(),
            action: self.action.to_owned(),
            state: JobState::Queued,
            progress: f64::from_bits(
                self.shown
                    .fetch_max(self.progress.fraction().to_bits(), Ordering::Relaxed)
                    .max(self.progress.fraction().to_bits()),
            ),
            combos_done: done,
            combos_total: total,
            error: None,
            code: None,
        };
        match &*self.phase() {
            Phase::Pending if self.progress.started() => status.state = JobState::Running,
            Phase::Pending => {}
            Phase::Done { .. } => {
                status.state = JobState::Done;
                status.progress = 1.0;
                status.combos_done = total;
            }
            Phase::Failed { code, message, .. } => {
                status.state = JobState::Failed;
                status.error = Some(message.clone());
                status.code = Some(code_name(*code).to_owned());
            }
            Phase::Cancelled { .. } => status.state = JobState::Cancelled,
        }
        status
    }

    /// Records how the job's task ended (unless it was cancelled meanwhile: a cancelled job
    /// keeps nothing).
    pub(crate) fn finish(&self, outcome: Result<RecordBatch>, compression: Option<Compression>) {
        let mut phase = self.phase();
        if matches!(*phase, Phase::Pending) {
            *phase = match outcome {
                _ if self.progress.is_cancelled() => Phase::Cancelled { at: Instant::now() },
                Ok(result) => Phase::Done {
                    result: Arc::new(result),
                    compression,
                    fetched: None,
                },
                Err(e) => Phase::Failed {
                    code: e.code(),
                    message: e.to_string(),
                    at: Instant::now(),
                },
            };
        }
        drop(phase);
        self.ended.send_replace(true);
    }

    /// Cancels the job (dropping its result if it has one) and waits up to `wait` for its
    /// task to end; its status after.
    pub(crate) async fn cancel(&self, wait: Duration) -> JobStatus {
        self.progress.cancel();
        {
            let mut phase = self.phase();
            if matches!(*phase, Phase::Done { .. }) {
                *phase = Phase::Cancelled { at: Instant::now() };
            }
        }
        let mut ended = self.ended.subscribe();
        let _ = tokio::time::timeout(wait, ended.wait_for(|&e| e)).await;
        let mut phase = self.phase();
        if matches!(*phase, Phase::Pending) && *ended.borrow() {
            *phase = Phase::Cancelled { at: Instant::now() };
        }
        drop(phase);
        self.status()
    }

    /// The result, if the job is done (marked fetched: its time to live starts now).
    ///
    /// # Errors
    /// [`Error::FailedPrecondition`] while it is queued or running, or if it was cancelled;
    /// the job's own error if it failed.
    pub(crate) fn fetch(&self) -> Result<Reply> {
        let mut phase = self.phase();
        match &mut *phase {
            Phase::Done {
                result,
                compression,
                fetched,
            } => {
                *fetched = Some(Instant::now());
                Ok(Reply {
                    result: Arc::clone(result),
                    compression: *compression,
                })
            }
            Phase::Pending => Err(Error::FailedPrecondition(format!(
                "job {} is {}: fetch it once `status` says done",
                self.id,
                if self.progress.started() {
                    "running"
                } else {
                    "queued"
                }
            ))),
            Phase::Cancelled { .. } => Err(Error::FailedPrecondition(format!(
                "job {} was cancelled: it has no result",
                self.id
            ))),
            Phase::Failed { code, message, .. } => Err(Error::Job(*code, message.clone())),
        }
    }

    /// The result of a done job, without marking it fetched (for its FlightInfo).
    ///
    /// # Errors
    /// As [`Job::fetch`].
    pub(crate) fn peek(&self) -> Result<Arc<RecordBatch>> {
        match &*self.phase() {
            Phase::Done { result, .. } => Ok(Arc::clone(result)),
            _ => Err(Error::FailedPrecondition(format!(
                "job {} has no result",
                self.id
            ))),
        }
    }

    /// When the job's record may be dropped, if it has ended.
    fn expires(&self, ttl: Duration) -> Option<Instant> {
        match &*self.phase() {
            Phase::Pending | Phase::Done { fetched: None, .. } => None,
            Phase::Done {
                fetched: Some(at), ..
            }
            | Phase::Failed { at, .. }
            | Phase::Cancelled { at } => Some(*at + ttl),
        }
    }

    /// When the job's record may be dropped at the earliest: now plus the time to live while
    /// it runs or waits to be fetched (it is kept until fetched), its expiry once set.
    pub(crate) fn expiration(&self, ttl: Duration) -> Instant {
        self.expires(ttl).unwrap_or_else(|| Instant::now() + ttl)
    }

    /// True while the job holds work or a result (it counts against `--max-jobs`).
    fn holds(&self) -> bool {
        matches!(*self.phase(), Phase::Pending | Phase::Done { .. })
    }

    /// Bytes of its result, if it holds one.
    fn result_bytes(&self) -> usize {
        match &*self.phase() {
            Phase::Done { result, .. } => result.get_array_memory_size(),
            _ => 0,
        }
    }
}

/// Jobs by state, and the bytes their results hold (for `stats` and /metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct JobCounts {
    /// Waiting for sweep memory.
    pub queued: usize,
    /// Running.
    pub running: usize,
    /// Done, their results kept.
    pub done: usize,
    /// Failed, their status kept.
    pub failed: usize,
    /// Cancelled, their status kept.
    pub cancelled: usize,
    /// Bytes of the kept results.
    pub result_bytes: usize,
}

/// Every job of the server.
#[derive(Debug)]
pub(crate) struct Jobs {
    jobs: Mutex<HashMap<String, Arc<Job>>>,
    max_jobs: usize,
    ttl: Duration,
    next: AtomicU64,
    /// IDs are a counter under a per-server random key: unique, and not guessable from
    /// another client's.
    key: std::collections::hash_map::RandomState,
}

impl Jobs {
    /// A registry holding at most `max_jobs` live jobs, forgetting ended ones `ttl` after they
    /// end (done ones after they are fetched).
    pub(crate) fn new(max_jobs: usize, ttl: Duration) -> Self {
        Self {
            jobs: Mutex::default(),
            max_jobs,
            ttl,
            next: AtomicU64::new(0),
            key: std::collections::hash_map::RandomState::new(),
        }
    }

    /// How long ended jobs are kept.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Job>>> {
        let mut map = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        map.retain(|_, j| j.expires(self.ttl).is_none_or(|at| at > now));
        map
    }

    /// A new queued job for `action`.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] if `--max-jobs` jobs already hold work or results.
    pub(crate) fn create(&self, action: &'static str) -> Result<Arc<Job>> {
        let mut map = self.map();
        let live = map.values().filter(|j| j.holds()).count();
        if live >= self.max_jobs {
            return Err(Error::ResourceExhausted(format!(
                "{live} jobs are queued, running or waiting to be fetched; this server keeps at most {} (--max-jobs): fetch or cancel some",
                self.max_jobs
            )));
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut h = self.key.build_hasher();
        h.write_u64(n);
        let id = format!("{:016x}{n:08x}", h.finish());
        let job = Arc::new(Job {
            id: id.clone(),
            action,
            progress: Arc::default(),
            phase: Mutex::new(Phase::Pending),
            ended: watch::Sender::new(false),
            shown: AtomicU64::new(0),
        });
        map.insert(id, Arc::clone(&job));
        Ok(job)
    }

    /// The job `id`.
    ///
    /// # Errors
    /// [`Error::JobNotFound`] for an unknown or expired ID.
    pub(crate) fn get(&self, id: &str) -> Result<Arc<Job>> {
        self.map()
            .get(id)
            .cloned()
            .ok_or_else(|| Error::JobNotFound(id.to_owned()))
    }

    /// Every job, in no particular order.
    pub(crate) fn list(&self) -> Vec<Arc<Job>> {
        self.map().values().cloned().collect()
    }

    /// Jobs by state and their results' bytes.
    pub(crate) fn counts(&self) -> JobCounts {
        let mut c = JobCounts::default();
        for job in self.list() {
            match job.status().state {
                JobState::Queued => c.queued += 1,
                JobState::Running => c.running += 1,
                JobState::Done => c.done += 1,
                JobState::Failed => c.failed += 1,
                JobState::Cancelled => c.cancelled += 1,
            }
            c.result_bytes += job.result_bytes();
        }
        c
    }

    /// Asks every job to stop (the server is shutting down).
    pub(crate) fn cancel_all(&self) {
        for job in self.list() {
            job.progress.cancel();
        }
    }
}

/// The gRPC code of a canonical name ([`code_name`]'s inverse).
pub(crate) fn code_of_name(name: &str) -> Option<tonic::Code> {
    (0..=16)
        .map(tonic::Code::from_i32)
        .find(|&c| code_name(c) == name)
}

/// Starts the job `body` describes on `engine`; the job (queued). The body is checked first as
/// its action would check it (unknown dataset, bad series or rows, limits), so a bad one is
/// refused here rather than becoming a failed job. The job runs on a task of its own, exactly
/// the use case its action runs.
///
/// # Errors
/// What the action would answer for the body; [`Error::ResourceExhausted`] past `--max-jobs`.
pub(crate) fn submit(engine: &Arc<Engine>, body: JobBody) -> Result<Arc<Job>> {
    match &body {
        JobBody::Sweep(r) | JobBody::Trades(r) | JobBody::Equity(r) => {
            crate::sweep::check(engine, r, None)?;
        }
        JobBody::WalkForward(w) => {
            crate::sweep::walk_forward::check(engine, w)?;
        }
    }
    let job = engine.jobs.create(body.action())?;
    tracing::info!(job = %job.id, action = body.action(), dataset = body.dataset(), "job submitted");
    let (task_engine, task_job) = (Arc::clone(engine), Arc::clone(&job));
    tokio::spawn(async move {
        let progress = Arc::clone(&task_job.progress);
        // A panic in the use case must still end the job (as INTERNAL), not leave it running.
        let outcome = std::panic::AssertUnwindSafe(run(&task_engine, &body, &progress))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(Error::Internal("job task panicked".into())));
        if let Err(e) = &outcome {
            tracing::info!(job = %task_job.id, error = %e, "job ended without a result");
        }
        task_job.finish(outcome, body.compression());
    });
    Ok(job)
}

/// What a job runs: exactly its action's use case.
async fn run(engine: &Engine, body: &JobBody, progress: &Arc<Progress>) -> Result<RecordBatch> {
    let p = Some(progress);
    match body {
        JobBody::Sweep(r) => crate::sweep::run(engine, r, None, p).await,
        JobBody::Trades(r) => crate::sweep::detail(engine, r, None, Detail::Trades, p).await,
        JobBody::Equity(r) => crate::sweep::detail(engine, r, None, Detail::Equity, p).await,
        JobBody::WalkForward(w) => crate::sweep::walk_forward::run(engine, w, None, p).await,
    }
}

/// The canonical name of a gRPC code (`INVALID_ARGUMENT`), as a job's status reports it.
pub(crate) fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;

    fn table() -> RecordBatch {
        RecordBatch::try_from_iter([(
            "combo",
            Arc::new(Int64Array::from(vec![0, 1])) as arrow_array::ArrayRef,
        )])
        .unwrap()
    }

    #[tokio::test]
    async fn a_job_runs_is_fetched_and_expires() {
        let jobs = Jobs::new(2, Duration::from_millis(50));
        let job = jobs.create("sweep").unwrap();
        assert_eq!(job.status().state, JobState::Queued);
        job.progress.add_total(4);
        job.progress.mark_started();
        assert_eq!(job.status().state, JobState::Running);
        assert!(matches!(job.fetch(), Err(Error::FailedPrecondition(_))));
        job.finish(Ok(table()), None);
        let s = job.status();
        assert_eq!(
            (s.state, s.progress, s.combos_done, s.combos_total),
            (JobState::Done, 1.0, 4, 4)
        );
        // Kept until fetched, however long that takes.
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(
            jobs.get(&job.id)
                .unwrap()
                .fetch()
                .unwrap()
                .result
                .num_rows(),
            2
        );
        assert_eq!(jobs.counts().done, 1);
        // Then for the time to live.
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(matches!(jobs.get(&job.id), Err(Error::JobNotFound(_))));
    }

    #[tokio::test]
    async fn max_jobs_counts_jobs_holding_work_or_results() {
        let jobs = Jobs::new(2, Duration::from_secs(60));
        let a = jobs.create("sweep").unwrap();
        let _b = jobs.create("sweep").unwrap();
        let e = jobs.create("sweep").unwrap_err();
        assert!(e.to_string().contains("--max-jobs"), "{e}");
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        // A failed job holds nothing: room for one more.
        a.finish(Err(Error::invalid("bad")), None);
        let s = a.status();
        assert_eq!(s.state, JobState::Failed);
        assert_eq!(s.code.as_deref(), Some("INVALID_ARGUMENT"));
        assert!(matches!(
            a.fetch(),
            Err(Error::Job(tonic::Code::InvalidArgument, _))
        ));
        jobs.create("trades").unwrap();
        assert_ne!(jobs.list()[0].id, jobs.list()[1].id);
    }

    #[tokio::test]
    async fn cancel_drops_results_and_waits_for_the_task() {
        let jobs = Jobs::new(4, Duration::from_secs(60));
        let done = jobs.create("sweep").unwrap();
        done.finish(Ok(table()), None);
        assert_eq!(
            done.cancel(Duration::from_secs(1)).await.state,
            JobState::Cancelled
        );
        assert!(matches!(done.fetch(), Err(Error::FailedPrecondition(_))));
        assert_eq!(jobs.counts().result_bytes, 0);
        // A running job: cancel waits until its task reports the end.
        let running = jobs.create("sweep").unwrap();
        let task = Arc::clone(&running);
        tokio::spawn(async move {
            while !task.progress.is_cancelled() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            task.finish(
                Err(Error::Kernel(sweepflight_kernel::Error::Cancelled)),
                None,
            );
        });
        let s = running.cancel(Duration::from_secs(5)).await;
        assert_eq!(s.state, JobState::Cancelled);
        assert!(*running.ended.borrow());
    }
}
