//! Giving freed memory back to the operating system once the server goes quiet.
//!
//! The binary's allocator (mimalloc, see `main.rs`) returns freed memory lazily: a freed range
//! is purged after a delay, but only when some thread next calls into the allocator, and a
//! thread's emptied pages wait in that thread's heap. After a burst of sweeps the workers fall
//! idle with nothing to call the allocator, so the burst's working sets would stay resident for
//! as long as the server is quiet. [`trim_when_idle`] watches for that: once no call has
//! arrived for [`QUIET`] and no sweep is running or queued, it asks every sweep worker to hand
//! back its empty pages and the allocator to purge what is free. A busy server is never
//! trimmed (it will reuse that memory), and a quiet one is trimmed once per quiet spell.
//!
//! With another global allocator (a library user's), the calls below are harmless no-ops on
//! mimalloc's own, empty heaps.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::compute::Compute;
use crate::ops::metrics::Metrics;

/// How long the server must be quiet before its free memory is handed back.
pub(crate) const QUIET: Duration = Duration::from_secs(2);

/// How often quietness is checked.
const TICK: Duration = Duration::from_millis(500);

/// Runs until `stop` resolves: trims once after each busy spell (see the module docs).
pub(crate) async fn trim_when_idle(
    compute: Arc<Compute>,
    metrics: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()>,
) {
    let watch = async {
        let mut interval = tokio::time::interval(TICK);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_calls = metrics.calls.load(Ordering::Relaxed);
        let mut quiet_since = tokio::time::Instant::now();
        let mut trimmed = true;
        loop {
            interval.tick().await;
            let calls = metrics.calls.load(Ordering::Relaxed);
            let busy = compute.running() > 0 || compute.budget().queued() > 0;
            if calls != last_calls || busy {
                last_calls = calls;
                quiet_since = tokio::time::Instant::now();
                trimmed = false;
            } else if !trimmed && quiet_since.elapsed() >= QUIET {
                trimmed = true;
                let compute = Arc::clone(&compute);
                // Collecting visits every worker (rayon broadcast blocks until each has run it):
                // never on a tokio worker.
                let _ = tokio::task::spawn_blocking(move || compute.release_free_memory()).await;
                tracing::debug!("quiet: free memory handed back to the OS");
            }
        }
    };
    tokio::select! {
        () = watch => {}
        () = stop => {}
    }
}

/// Hands the calling thread's empty pages back to the allocator and purges the allocator's
/// free memory (process-wide), without waiting for its purge delay.
pub(crate) fn collect_here() {
    // SAFETY: mi_collect has no preconditions; it only frees memory no block lives in.
    unsafe { libmimalloc_sys::mi_collect(true) };
}
