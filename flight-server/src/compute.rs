//! Running sweeps: within the memory budget, on the server's own thread pool, cancellable, with
//! the kernel cache.
//!
//! The kernel is CPU-bound for up to seconds, so a real sweep never runs on a tokio worker (it
//! would stall every other connection on that worker). It runs on a rayon pool owned by the
//! server (`--threads` workers), which the kernel also uses for its inner parallelism; the async
//! handler awaits a oneshot. If the handler's future is dropped (client cancelled, deadline
//! passed, connection lost), the `CancelOnDrop` guard raises a flag that the kernel polls
//! between combos, and a sweep still waiting for memory simply leaves the queue.
//!
//! A sweep below [`PARALLEL_MIN_WORK`] (under a millisecond of one core) runs inline instead:
//! for the params-only calls that dominate interactive use, two cross-thread hand-offs would
//! cost more than the computation.
//!
//! A sweep over several series (a universe) runs them one after another, each with the whole
//! pool: every series' work is balanced over the workers the same way a single series' is.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use arrow_array::Float64Array;
use sweepflight_kernel::{
    ArrayCache, Combo, ComboResult, NoCache, PARALLEL_MIN_WORK, SweepControl, line_bytes,
    memory_bytes, scratch_bytes, sweep_with, work,
};
use sweepflight_protocol::{Grid, RowRange};
use tokio::sync::oneshot;

use crate::budget::{Reservation, SweepBudget};
use crate::cache::{InputKey, KernelCache};
use crate::dataset::Dataset;
use crate::metrics::Metrics;
use crate::{Error, Result};

/// The kernel's combos for a request grid (whose windows were range-checked when the body was
/// decoded).
///
/// # Errors
/// [`Error::Kernel`] for a window below 1 (not reachable from a decoded body).
pub fn combos(grid: &Grid) -> Result<Vec<Combo>> {
    Ok(match grid {
        Grid::Lengths(l) => l
            .iter()
            .map(|&l| Combo::from_length(l))
            .collect::<Result<_, _>>()?,
        Grid::Params(p) => p.iter().map(|&w| Combo::new(w)).collect::<Result<_, _>>()?,
    })
}

/// The closes one input is read from.
#[derive(Debug, Clone)]
enum Closes {
    /// Series `.1` of a stored dataset.
    Stored(Arc<Dataset>, usize),
    /// A series that exists only for this call (DoExchange): no cache.
    Transient(Arc<Float64Array>),
}

/// One series to run the combos on: its closes, the rows to use, and its cache key.
#[derive(Debug, Clone)]
pub struct Input {
    closes: Closes,
    rows: Range<usize>,
    cache: Option<InputKey>,
}

impl Input {
    /// Series `series` of a stored dataset, all rows or `rows` (its end clipped to the series).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `rows` starts at or past the series' end.
    pub fn stored(dataset: Arc<Dataset>, series: usize, rows: Option<RowRange>) -> Result<Self> {
        let len = dataset.closes(series).len();
        let name = dataset.universe().map(|u| u.names[series].as_str());
        let rows = clip(rows, len, name)?;
        let cache = Some(InputKey {
            dataset: dataset.id,
            series: series as u32,
            rows: (rows != (0..len)).then_some((rows.start as u64, rows.end as u64)),
        });
        Ok(Self {
            closes: Closes::Stored(dataset, series),
            rows,
            cache,
        })
    }

    /// A series uploaded for this call only.
    ///
    /// # Errors
    /// As [`Input::stored`].
    pub fn transient(
        close: Arc<Float64Array>,
        range: Range<usize>,
        name: Option<&str>,
        rows: Option<RowRange>,
    ) -> Result<Self> {
        let within = clip(rows, range.len(), name)?;
        Ok(Self {
            closes: Closes::Transient(close),
            rows: range.start + within.start..range.start + within.end,
            cache: None,
        })
    }

    fn closes(&self) -> &[f64] {
        let all = match &self.closes {
            Closes::Stored(d, series) => d.closes(*series),
            Closes::Transient(c) => c.values(),
        };
        &all[self.rows.clone()]
    }
}

/// The rows of a series of `len` that `rows` asks for.
fn clip(rows: Option<RowRange>, len: usize, series: Option<&str>) -> Result<Range<usize>> {
    let Some(r) = rows else { return Ok(0..len) };
    let start = usize::try_from(r.start).unwrap_or(usize::MAX);
    if start >= len {
        let which = series.map_or_else(|| "the series".to_owned(), |s| format!("series {s:?}"));
        return Err(Error::invalid(format!(
            "`rows` starts at {start}, but {which} has {len} rows"
        )));
    }
    let end = usize::try_from(r.end).unwrap_or(usize::MAX).min(len);
    Ok(start..end)
}

/// What to run: the combos on every input, with one fee.
#[derive(Debug, Clone)]
pub struct Job {
    /// The series, in result order.
    pub inputs: Vec<Input>,
    /// The combos, in request order.
    pub combos: Vec<Combo>,
    /// Round-trip fee as a fraction.
    pub fee: f64,
}

/// The server's sweep runner.
#[derive(Debug)]
pub struct Compute {
    pool: rayon::ThreadPool,
    budget: SweepBudget,
    cache: Arc<KernelCache>,
    metrics: Arc<Metrics>,
    running: Arc<AtomicUsize>,
}

impl Compute {
    /// A runner with `threads` workers (one per CPU when `None`), a budget of `memory_bytes`
    /// for all running sweeps with up to `max_queued` waiting, over `cache`.
    ///
    /// # Errors
    /// [`Error::Internal`] if the thread pool cannot be started.
    pub fn new(
        threads: Option<usize>,
        memory_bytes: u64,
        max_queued: usize,
        cache: Arc<KernelCache>,
        metrics: Arc<Metrics>,
    ) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.unwrap_or(0))
            .thread_name(|i| format!("sweep-{i}"))
            .build()
            .map_err(|e| Error::internal("start the sweep workers", e))?;
        Ok(Self {
            pool,
            budget: SweepBudget::new(memory_bytes, max_queued, Arc::clone(&metrics)),
            cache,
            metrics,
            running: Arc::default(),
        })
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// The memory budget.
    pub fn budget(&self) -> &SweepBudget {
        &self.budget
    }

    /// Sweeps running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Hands every worker's empty pages back to the allocator and purges its free memory
    /// ([`crate::trim`]), and unmaps the pooled columns ([`crate::mapping`]). Blocks until each
    /// worker has done it: call it off the async runtime.
    pub fn release_free_memory(&self) {
        self.pool.broadcast(|_| crate::trim::collect_here());
        crate::trim::collect_here();
        // Columns kept for the next large upload go too (see `crate::mapping`).
        crate::mapping::release_pool();
    }

    /// Runs `job`: reserves its memory (waiting in line if need be), then runs every input in
    /// order; one result list per input.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] if the queue is full or one series needs more memory than
    /// the whole budget; kernel errors; [`Error::Internal`] if a worker panicked.
    pub async fn run(self: &Arc<Self>, job: Job) -> Result<Vec<Vec<ComboResult>>> {
        let total_work: u64 = job
            .inputs
            .iter()
            .map(|i| work(i.closes().len(), &job.combos))
            .fold(0, u64::saturating_add);
        let parallel = total_work >= PARALLEL_MIN_WORK;
        let workers = if parallel { self.threads() } else { 1 };
        let plan = Plan::new(&job, workers, self.budget.total())?;
        let reservation = self.budget.reserve(plan.need).await?;
        let running = Running::start(&self.running);
        if !parallel {
            let outcome = self.sweep(&job, &plan, &reservation, false, &|| false);
            self.count(&outcome);
            return outcome;
        }
        let cancelled = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(Arc::clone(&cancelled));
        let (tx, rx) = oneshot::channel();
        let span = tracing::Span::current();
        let this = Arc::clone(self);
        self.pool.spawn(move || {
            let _enter = span.enter();
            // rayon aborts the process on a panic in a spawned job; turn one into an error.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                this.sweep(&job, &plan, &reservation, true, &|| {
                    cancelled.load(Ordering::Relaxed)
                })
            }))
            .unwrap_or_else(|_| Err(Error::Internal("sweep worker panicked".into())));
            this.count(&outcome);
            // Memory and the running count are returned before the caller hears back.
            drop((reservation, running));
            // The receiver is gone if the call was cancelled; nothing left to tell.
            let _ = tx.send(outcome);
        });
        rx.await
            .map_err(|_| Error::Internal("sweep worker vanished".into()))?
    }

    /// Runs every input of `job` on the calling thread (fanning out on the pool if `parallel`).
    fn sweep(
        &self,
        job: &Job,
        plan: &Plan,
        reservation: &Reservation,
        parallel: bool,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<Vec<ComboResult>>> {
        let started = Instant::now();
        // The lines every input's sweep computes, if the cache should have them all.
        let lines: u64 = job
            .inputs
            .iter()
            .map(|i| line_bytes(i.closes().len(), &job.combos) as u64)
            .fold(0, u64::saturating_add);
        let offer = self.cache.worth_offering(lines);
        let out = job
            .inputs
            .iter()
            .map(|input| {
                let close = input.closes();
                let cap = plan.shared_cap(close.len(), &job.combos, reservation.bytes());
                let run = |cache: &dyn ArrayCache| {
                    let control = SweepControl {
                        cache,
                        cancelled,
                        working_set_bytes: cap,
                        parallel: Some(parallel),
                        tile_bars: None,
                    };
                    sweep_with(close, &job.combos, job.fee, &control)
                };
                let results = match input.cache {
                    Some(key) => run(&self.cache.view(key, &self.metrics, offer)),
                    None => run(&NoCache),
                }?;
                Ok(results)
            })
            .collect::<Result<Vec<_>>>();
        let elapsed = started.elapsed();
        self.metrics.sweep_seconds.observe(elapsed.as_secs_f64());
        tracing::debug!(
            series = job.inputs.len(),
            combos = job.combos.len(),
            elapsed_us = elapsed.as_micros() as u64,
            ok = out.is_ok(),
            "kernel done"
        );
        out
    }

    fn count<T>(&self, outcome: &Result<T>) {
        match outcome {
            Ok(_) => self.metrics.sweeps_completed.inc(),
            Err(Error::Kernel(sweepflight_kernel::Error::Cancelled)) => {
                self.metrics.sweeps_cancelled.inc()
            }
            Err(_) => 0,
        };
    }
}

/// A sweep's memory: what it needs at most, and how its reservation is split.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Bytes to reserve: the largest input's working set plus every input's results.
    need: u64,
    workers: usize,
    results: usize,
}

impl Plan {
    fn new(job: &Job, workers: usize, budget: u64) -> Result<Self> {
        let results = job.inputs.len() * job.combos.len() * size_of::<ComboResult>();
        let longest = job
            .inputs
            .iter()
            .map(|i| i.closes().len())
            .max()
            .unwrap_or(0);
        // Inputs run one after another, so only the longest one's arrays count.
        let most = memory_bytes(longest, &job.combos, workers, usize::MAX);
        let least = memory_bytes(longest, &job.combos, workers, 0);
        let combo_results = job.combos.len() * size_of::<ComboResult>();
        let (most, least) = (
            most - combo_results + results,
            least - combo_results + results,
        );
        if least as u64 > budget {
            return Err(Error::ResourceExhausted(format!(
                "this sweep needs at least {least} bytes of sweep memory ({longest} bars, {} \
                 combos on {} series, {workers} workers); the server allows {budget} \
                 (--sweep-memory-bytes)",
                job.combos.len(),
                job.inputs.len(),
            )));
        }
        Ok(Self {
            need: most as u64,
            workers,
            results,
        })
    }

    /// The kernel's cap on shared arrays for an input of `bars` within `reserved` bytes.
    fn shared_cap(&self, bars: usize, combos: &[Combo], reserved: u64) -> usize {
        let scratch = self.workers * scratch_bytes(bars, combos, self.workers);
        usize::try_from(reserved)
            .unwrap_or(usize::MAX)
            .saturating_sub(scratch + self.results)
    }
}

/// Raises the flag when dropped: dropping the awaiting future cancels the sweep.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Counts a sweep as running until dropped (by the worker, so a cancelled sweep counts until
/// its kernel has stopped).
struct Running(Arc<AtomicUsize>);

impl Running {
    fn start(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(counter))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ranges_clip_the_end_and_refuse_a_late_start() {
        let r = |s, e| Some(RowRange::new(s, e).unwrap());
        assert_eq!(clip(None, 10, None).unwrap(), 0..10);
        assert_eq!(clip(r(2, 5), 10, None).unwrap(), 2..5);
        assert_eq!(clip(r(2, 50), 10, None).unwrap(), 2..10);
        let e = clip(r(10, 50), 10, Some("AAPL")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`rows` starts at 10, but series \"AAPL\" has 10 rows"
        );
    }
}
