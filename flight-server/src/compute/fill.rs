//! Keeping an input's arrays off the calls' time: the cache's fills.
//!
//! A call's sweep never writes its lines whole for the cache (see [`crate::compute::cache`]):
//! on this kind of machine the fresh memory that takes made an input's second sweep seven
//! times slower than its first (docs/perf-notes.md, "The kernel cache"). Instead a sweep of an
//! input swept before that missed arrays leaves a [`Fill`] behind: the same combos on the same
//! input, run again on a thread of its own that keeps every array it computes. The thread
//! runs a fill only while no sweep is running or waiting for memory, at the lowest scheduling
//! priority, within the sweep memory budget (it takes memory only if nobody waits for it), and
//! stops as soon as a sweep arrives; the arrays it kept stay kept, and it tries again at the
//! next idle moment. So a call never waits for a fill, and a repeated call finds the arrays as
//! soon as the server has had an idle moment as long as the fill. A caller that sweeps the
//! input again before any such moment (a loop of calls) gets the old rule instead: from then
//! on each call keeps its own arrays ([`KernelCache::view`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use sweepflight_kernel::{CertifiedBars, Execution, SweepControl, sweep_combos};

use super::budget::SweepBudget;
use super::cache::{InputKey, KernelCache};
use super::{Job, Keep, Plan};
use crate::ops::metrics::Metrics;
use crate::{Error, Result};

/// Fills waiting at most; past it the oldest is given up (its input is asked for less).
const MAX_WAITING: usize = 64;

/// Times a fill is started again after a sweep interrupted it: each start keeps what it
/// computed, so a few are enough; an input swept without pause is kept by its own later calls'
/// fills.
const MAX_STARTS: u32 = 8;

/// How often the thread looks whether the server has become idle.
const IDLE_POLL: Duration = Duration::from_millis(2);

/// One input's combos to run again, keeping their arrays.
#[derive(Debug)]
pub(crate) struct Fill {
    /// The combos on the one input (keeping nothing but the arrays).
    job: Job,
    key: InputKey,
    starts: u32,
}

impl Fill {
    /// A fill of input `input` of `job`, or `None` if the input is not a stored one.
    fn of(job: &Job, input: usize) -> Option<Self> {
        let one = job.inputs.get(input)?.clone();
        let key = one.cache?;
        Some(Self {
            job: Job {
                inputs: vec![one],
                names: None,
                strategy: job.strategy.clone(),
                combos: job.combos.clone(),
                positions: None,
                exec: job.exec,
                periods_per_year: vec![job.periods_per_year.first().copied().unwrap_or(1.0)],
                keep: Keep::NOTHING,
                progress: None,
                keep_lines: true,
            },
            key,
            starts: 0,
        })
    }
}

/// What the fill thread reads of the server.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub cache: Arc<KernelCache>,
    pub metrics: Arc<Metrics>,
    pub budget: Arc<SweepBudget>,
    /// Sweeps running now.
    pub running: Arc<AtomicUsize>,
}

impl Server {
    /// A sweep runs or waits for memory.
    fn busy(&self) -> bool {
        self.running.load(Ordering::SeqCst) > 0 || self.budget.queued() > 0
    }
}

#[derive(Debug, Default)]
struct Queue {
    fills: Mutex<VecDeque<Fill>>,
    wake: Condvar,
    stop: AtomicBool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Fill>> {
        // Each step on the queue is one push or pop: it stays consistent after a panic.
        self.fills.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The fill thread and its queue. Dropping it stops the thread (a running fill stops at its
/// next check) and waits for it.
#[derive(Debug)]
pub(crate) struct Filler {
    queue: Arc<Queue>,
    server: Server,
    thread: Option<JoinHandle<()>>,
}

impl Filler {
    /// Starts the fill thread.
    ///
    /// # Errors
    /// [`Error::Internal`] if the thread cannot be started.
    pub(crate) fn start(server: Server) -> Result<Self> {
        let queue = Arc::new(Queue::default());
        let thread = std::thread::Builder::new()
            .name("cache-fill".into())
            .spawn({
                let (queue, server) = (Arc::clone(&queue), server.clone());
                move || work(&queue, &server)
            })
            .map_err(|e| Error::internal("start the cache fill thread", e))?;
        Ok(Self {
            queue,
            server,
            thread: Some(thread),
        })
    }

    /// Queues a fill of input `input` of `job` unless one of that input is already queued or
    /// running.
    pub(crate) fn queue(&self, job: &Job, input: usize) {
        let Some(key) = job.inputs.get(input).and_then(|i| i.cache) else {
            return;
        };
        if !self.server.cache.start_fill(key) {
            return;
        }
        let Some(fill) = Fill::of(job, input) else {
            self.server.cache.end_fill(key);
            return;
        };
        let mut fills = self.queue.lock();
        if fills.len() >= MAX_WAITING
            && let Some(old) = fills.pop_front()
        {
            self.server.cache.end_fill(old.key);
        }
        fills.push_back(fill);
        self.queue.wake.notify_one();
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.queue.stop.store(true, Ordering::SeqCst);
        self.queue.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // A panic there has been reported by the panic hook already.
            let _ = thread.join();
        }
    }
}

/// The thread: each fill in turn, at the server's idle moments.
fn work(queue: &Queue, server: &Server) {
    lower_priority();
    let stopped = || queue.stop.load(Ordering::SeqCst);
    loop {
        let mut fill = {
            let mut fills = queue.lock();
            loop {
                if stopped() {
                    return;
                }
                if let Some(fill) = fills.pop_front() {
                    break fill;
                }
                fills = queue
                    .wake
                    .wait(fills)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        while server.busy() {
            if stopped() {
                return;
            }
            std::thread::sleep(IDLE_POLL);
        }
        // A dataset dropped or replaced since: its arrays are no longer wanted.
        if !server.cache.still_seen(fill.key) {
            server.cache.end_fill(fill.key);
            continue;
        }
        fill.starts += 1;
        let cancelled = || stopped() || server.busy();
        match run(&fill, server, &cancelled) {
            Ok(()) => {
                server.metrics.cache_fills.inc();
                server.cache.end_fill(fill.key);
            }
            Err(Error::Kernel(sweepflight_kernel::Error::Cancelled))
                if fill.starts < MAX_STARTS && !stopped() =>
            {
                queue.lock().push_back(fill);
            }
            Err(e) => {
                tracing::debug!(error = %e, "cache fill given up");
                server.cache.end_fill(fill.key);
            }
        }
    }
}

/// Runs `fill`'s sweep on this thread, keeping its arrays; [`Error::Kernel`] `Cancelled` if a
/// sweep arrived (or holds the memory it needs).
fn run(fill: &Fill, server: &Server, cancelled: &(dyn Fn() -> bool + Sync)) -> Result<()> {
    let job = &fill.job;
    let plan = Plan::new(job, 1, server.budget.total())?;
    let Some(reservation) = server.budget.try_reserve_fill(plan.need) else {
        return Err(Error::Kernel(sweepflight_kernel::Error::Cancelled));
    };
    let input = &job.inputs[0];
    let view = server.cache.view_keeping(fill.key, None, true);
    let certified = CertifiedBars::default();
    let control = SweepControl {
        cache: &view,
        cancelled,
        working_set_bytes: plan.shared_cap(input.closes().len(), &job.combos, reservation.bytes()),
        parallel: Some(false),
        tile_bars: None,
        bar_metrics: true,
        records: None,
        exact_lines: false,
        certified: Some(&certified),
        progress: None,
    };
    let exec = Execution {
        start: input.start,
        ..job.exec
    };
    sweep_combos(&input.bars(), &job.combos, &exec, &control)?;
    Ok(())
}

/// The calling thread at the lowest scheduling priority (Linux: a thread has its own nice
/// value): a fill that has not yet seen a sweep arrive takes little from it.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls on this thread's id; a failure leaves the priority as is.
        unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use arrow_array::{Float64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema};
    use sweepflight_protocol::SweepRequest;

    use crate::ServerConfig;
    use crate::compute::Running;
    use crate::sweep::engine::Engine;

    /// An engine holding dataset `s` (2,000 bars), and the paper-grid-like request on it.
    async fn engine() -> (Engine, SweepRequest) {
        engine_of(2_000, br#"{"dataset": "s", "lengths": [6, 30, 80]}"#).await
    }

    /// An engine holding dataset `s` of `bars` bars, and `request` on it.
    async fn engine_of(bars: i32, request: &[u8]) -> (Engine, SweepRequest) {
        let close: Float64Array = (0..bars)
            .map(|i| 100.0 + (f64::from(i) * 0.05).sin() * 3.0 + f64::from(i) * 0.01)
            .collect();
        let schema = std::sync::Arc::new(Schema::new(vec![Field::new(
            "close",
            DataType::Float64,
            false,
        )]));
        let batch = RecordBatch::try_new(schema.clone(), vec![std::sync::Arc::new(close)]).unwrap();
        let engine = Engine::in_memory(ServerConfig::default()).unwrap();
        engine.put("s", &schema, vec![batch], None).await.unwrap();
        let request = SweepRequest::decode(request).unwrap();
        (engine, request)
    }

    /// The cache's key of dataset `s`'s whole series.
    fn input_of(engine: &Engine) -> super::InputKey {
        super::InputKey {
            dataset: engine.store.get("s").unwrap().id,
            series: 0,
            rows: None,
        }
    }

    /// Waits (a hang guard, not a timing bound) until `done` holds.
    async fn until(done: impl Fn() -> bool) {
        // Every millisecond: a fill is caught while it runs.
        for _ in 0..30_000 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("not done in 30 s");
    }

    #[tokio::test]
    async fn a_fill_waits_for_an_idle_moment_then_keeps_the_arrays() {
        let (engine, request) = engine().await;
        let want = engine.sweep(&request).await.unwrap();
        // The second sweep leaves a fill behind; a sweep "running" holds it back.
        let busy = Running::start(&engine.compute.running);
        assert_eq!(engine.sweep(&request).await.unwrap(), want);
        let cache = std::sync::Arc::clone(engine.store.cache());
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            engine.metrics.cache_fills.get(),
            0,
            "a fill ran while a sweep ran"
        );
        assert_eq!(cache.bytes(), 0);
        drop(busy);
        until(|| engine.metrics.cache_fills.get() == 1).await;
        assert!(cache.bytes() > 0);
        // Its memory came from the budget and went back, apart from the sweeps'.
        let budget = engine.compute.budget();
        assert_eq!((budget.reserved(), budget.fill_reserved()), (0, 0));
        // The next sweep reads them and gives the same answer.
        let hits = engine.metrics.cache_hits.get();
        assert_eq!(engine.sweep(&request).await.unwrap(), want);
        assert!(engine.metrics.cache_hits.get() > hits);
    }

    #[tokio::test]
    async fn a_fill_a_sweep_interrupts_starts_again_at_the_next_idle_moment() {
        // A fill long enough (a few hundred milliseconds on one thread) to be caught running.
        let (engine, request) = engine_of(
            300_000,
            br#"{"dataset": "s", "lengths": [6, 30, 80, 200, 400]}"#,
        )
        .await;
        let want = engine.sweep(&request).await.unwrap();
        let busy = Running::start(&engine.compute.running);
        engine.sweep(&request).await.unwrap();
        let budget = engine.compute.budget();
        let cache = std::sync::Arc::clone(engine.store.cache());
        // Idle: the fill starts (it holds its memory while it runs); a sweep "arrives".
        drop(busy);
        until(|| budget.fill_reserved() > 0).await;
        let busy = Running::start(&engine.compute.running);
        // It stops at its next check and gives its memory back, unfinished and still wanted.
        until(|| budget.fill_reserved() == 0).await;
        assert_eq!(
            engine.metrics.cache_fills.get(),
            0,
            "the fill was not interrupted"
        );
        let key = input_of(&engine);
        assert!(cache.fill_wanted(key));
        // At the next idle moment it runs again, to the end.
        drop(busy);
        until(|| engine.metrics.cache_fills.get() == 1).await;
        assert!(!cache.fill_wanted(key));
        assert!(cache.bytes() > 0);
        let hits = engine.metrics.cache_hits.get();
        assert_eq!(engine.sweep(&request).await.unwrap(), want);
        assert!(engine.metrics.cache_hits.get() > hits);
    }

    #[tokio::test]
    async fn a_fill_of_a_dropped_dataset_is_given_up() {
        let (engine, request) = engine().await;
        let busy = Running::start(&engine.compute.running);
        engine.sweep(&request).await.unwrap();
        engine.sweep(&request).await.unwrap();
        let cache = std::sync::Arc::clone(engine.store.cache());
        let key = input_of(&engine);
        assert!(cache.fill_wanted(key));
        engine.store.remove("s").await.unwrap();
        drop(busy);
        until(|| !cache.fill_wanted(key)).await;
        assert_eq!(engine.metrics.cache_fills.get(), 0);
        assert_eq!(cache.bytes(), 0);
    }
}
