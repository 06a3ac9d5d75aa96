//! Running a sweep off the async runtime: on rayon's pool, cancellable, with the WMA cache.
//!
//! The kernel is CPU-bound for up to seconds, so a real sweep never runs on a tokio worker (it
//! would stall every other connection on that worker). It runs on rayon's global pool, which
//! the kernel also uses for its inner parallelism; the async handler awaits a oneshot. If the
//! handler's future is dropped (client cancelled, deadline passed, connection lost), the
//! [`CancelOnDrop`] guard raises a flag that the kernel polls between combos.
//!
//! A sweep below [`PARALLEL_MIN_WORK`] (under a millisecond of one core) runs inline instead:
//! for the params-only calls that dominate interactive use, two cross-thread hand-offs would
//! cost more than the computation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use arrow_array::Float64Array;
use sweepflight_kernel::{
    Combo, ComboResult, NoStore, PARALLEL_MIN_WORK, SweepControl, WmaStore, sweep_with, work,
};
use tokio::sync::oneshot;

use crate::request::SweepSpec;
use crate::store::{Dataset, DatasetStore};
use crate::{Error, Result};

/// Where a sweep's shared WMAs come from.
pub enum Series {
    /// A stored dataset: WMAs go through the store's cache.
    Stored(Arc<DatasetStore>, Arc<Dataset>),
    /// A series that exists only for this call (DoExchange): no cache.
    Transient(Arc<Float64Array>),
}

impl Series {
    fn close(&self) -> &[f64] {
        match self {
            Self::Stored(_, d) => d.close_values(),
            Self::Transient(close) => close.values(),
        }
    }

    /// Runs the kernel on the calling thread (which may then fan out on rayon).
    fn sweep(
        &self,
        combos: &[Combo],
        fee: f64,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<Vec<ComboResult>> {
        let run = |store: &dyn WmaStore| {
            let control = SweepControl {
                store,
                cancelled,
                ..SweepControl::default()
            };
            sweep_with(self.close(), combos, fee, &control)
        };
        Ok(match self {
            Self::Stored(store, d) => run(&store.wma_cache(d)),
            Self::Transient(_) => run(&NoStore),
        }?)
    }
}

/// Raises the flag when dropped: dropping the awaiting future cancels the sweep.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Counts of sweeps, for the `stats` action and for tests that assert on server state.
#[derive(Debug, Default)]
pub struct SweepCounters {
    running: AtomicUsize,
    completed: AtomicU64,
    cancelled: AtomicU64,
}

impl SweepCounters {
    /// Sweeps whose kernel is running now (on the pool or inline).
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }
    /// Sweeps that finished with a result.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }
    /// Sweeps stopped because their caller went away.
    pub fn cancelled(&self) -> u64 {
        self.cancelled.load(Ordering::SeqCst)
    }

    fn track(self: &Arc<Self>) -> Running {
        self.running.fetch_add(1, Ordering::SeqCst);
        Running(Arc::clone(self))
    }
}

/// One running kernel; counted out when dropped, after `finish` has counted its outcome.
struct Running(Arc<SweepCounters>);

impl Running {
    fn finish<T>(self, outcome: &Result<T>) {
        let counter = match outcome {
            Ok(_) => &self.0.completed,
            Err(Error::Kernel(sweepflight_kernel::Error::Cancelled)) => &self.0.cancelled,
            Err(_) => return,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `spec` over `series`: inline if tiny, else on the rayon pool.
///
/// # Errors
/// Kernel errors, or [`Error::Internal`] if the worker panicked.
pub async fn run(
    counters: &Arc<SweepCounters>,
    series: Series,
    spec: &SweepSpec,
) -> Result<Vec<ComboResult>> {
    let running = counters.track();
    if work(series.close().len(), &spec.combos) < PARALLEL_MIN_WORK {
        let outcome = series.sweep(&spec.combos, spec.fee, &|| false);
        running.finish(&outcome);
        return outcome;
    }
    let cancelled = Arc::new(AtomicBool::new(false));
    let _guard = CancelOnDrop(Arc::clone(&cancelled));
    let (tx, rx) = oneshot::channel();
    let combos = spec.combos.clone();
    let fee = spec.fee;
    let span = tracing::Span::current();
    rayon::spawn(move || {
        let _enter = span.enter();
        let started = Instant::now();
        // rayon aborts the process on a panic in a spawned job; turn one into an error instead.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            series.sweep(&combos, fee, &|| cancelled.load(Ordering::Relaxed))
        }))
        .unwrap_or_else(|_| Err(Error::Internal("sweep worker panicked".into())));
        tracing::debug!(
            combos = combos.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            ok = outcome.is_ok(),
            "kernel done"
        );
        running.finish(&outcome);
        // The receiver is gone if the call was cancelled; nothing left to tell.
        let _ = tx.send(outcome);
    });
    rx.await
        .map_err(|_| Error::Internal("sweep worker vanished".into()))?
}
