//! Running a sweep off the async runtime: on rayon's pool, cancellable, with the WMA cache.
//!
//! The kernel is CPU-bound for up to seconds, so it never runs on a tokio worker (it would
//! stall every other connection on that worker). It runs on rayon's global pool, which the
//! kernel also uses for its inner parallelism; the async handler awaits a oneshot. If the
//! handler's future is dropped (client cancelled, deadline passed, connection lost), the
//! [`CancelOnDrop`] guard raises a flag that the kernel polls between combos.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use sweepflight_kernel::{ComboResult, NoStore, SweepControl, WmaStore, sweep_with};
use tokio::sync::oneshot;

use crate::request::SweepSpec;
use crate::store::{Dataset, DatasetStore};
use crate::{Error, Result};

/// Where a sweep's shared WMAs come from.
pub enum Series {
    /// A stored dataset: WMAs go through the store's cache.
    Stored(Arc<DatasetStore>, Arc<Dataset>),
    /// A series that exists only for this call (DoExchange): no cache.
    Transient(Arc<arrow_array::Float64Array>),
}

/// Raises the flag when dropped, unless disarmed: dropping the awaiting future cancels the sweep.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `spec` over `series` on the rayon pool.
///
/// # Errors
/// Kernel errors, or [`Error::Internal`] if the worker panicked.
pub async fn run(series: Series, spec: &SweepSpec) -> Result<Vec<ComboResult>> {
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
            let is_cancelled = || cancelled.load(Ordering::Relaxed);
            let run = |close: &[f64], store: &dyn WmaStore| {
                let control = SweepControl {
                    store,
                    cancelled: &is_cancelled,
                    ..SweepControl::default()
                };
                sweep_with(close, &combos, fee, &control)
            };
            match &series {
                Series::Stored(store, d) => run(d.close_values(), &store.wma_cache(d)),
                Series::Transient(close) => run(close.values(), &NoStore),
            }
        }));
        let outcome = match outcome {
            Ok(r) => r.map_err(Error::from),
            Err(_) => Err(Error::Internal("sweep worker panicked".into())),
        };
        tracing::debug!(
            combos = combos.len(),
            elapsed_us = started.elapsed().as_micros() as u64,
            ok = outcome.is_ok(),
            "kernel done"
        );
        // The receiver is gone if the call was cancelled; nothing left to tell.
        let _ = tx.send(outcome);
    });
    rx.await
        .map_err(|_| Error::Internal("sweep worker vanished".into()))?
}
