//! The sweep memory budget (`--sweep-memory-bytes`) and its queue (`--max-queued-sweeps`).
//!
//! Every sweep reserves the memory it will use (its kernel working set, scratch and results)
//! before it runs, and gives it back when it ends. A sweep that does not fit waits in a fair
//! (first come, first served) queue; a sweep larger than the whole budget reserves all of it and
//! the kernel runs in groups that fit. Past `--max-queued-sweeps` waiting, a sweep is refused at
//! once with RESOURCE_EXHAUSTED. A waiting sweep whose caller goes away or whose deadline passes
//! leaves the queue at once: its future is dropped, and dropping tokio's `acquire` future takes
//! it out of the semaphore's wait list.
//!
//! The budget is a `tokio::sync::Semaphore` in units of [`UNIT`] bytes: tokio's semaphore is fair
//! (a large request at the head of the queue is not overtaken by small ones), and acquiring
//! several permits at once is atomic.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ops::metrics::Metrics;
use crate::{Error, Result};

/// Granularity of reservations: 64 KiB.
pub(crate) const UNIT: u64 = 64 << 10;

/// The budget shared by every sweep of one server.
#[derive(Debug)]
pub(crate) struct SweepBudget {
    semaphore: Arc<Semaphore>,
    total: u64,
    max_queued: usize,
    queued: AtomicUsize,
    reserved: Arc<AtomicU64>,
    /// Bytes a cache fill holds (not counted in `reserved`: a fill is not a sweep, and gives
    /// its memory back as soon as a sweep waits for it).
    fill_reserved: Arc<AtomicU64>,
    metrics: Arc<Metrics>,
}

impl SweepBudget {
    /// A budget of `bytes` (rounded down to whole units, at least one) with at most
    /// `max_queued` sweeps waiting.
    pub(crate) fn new(bytes: u64, max_queued: usize, metrics: Arc<Metrics>) -> Self {
        let units = (bytes / UNIT).clamp(1, u64::from(u32::MAX));
        Self {
            semaphore: Arc::new(Semaphore::new(units as usize)),
            total: units * UNIT,
            max_queued,
            queued: AtomicUsize::new(0),
            reserved: Arc::default(),
            fill_reserved: Arc::default(),
            metrics,
        }
    }

    /// The whole budget in bytes; the most one sweep can reserve.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Sweeps waiting now.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// Bytes reserved by sweeps now.
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::SeqCst)
    }

    /// Bytes a cache fill holds now.
    pub(crate) fn fill_reserved(&self) -> u64 {
        self.fill_reserved.load(Ordering::SeqCst)
    }

    /// Reserves `bytes` (at most [`SweepBudget::total`]), waiting in line if they are taken.
    ///
    /// Cancel-safe: dropping the future leaves the queue.
    ///
    /// # Errors
    /// [`Error::ResourceExhausted`] if the sweep would have to wait and the queue is full.
    pub(crate) async fn reserve(&self, bytes: u64) -> Result<Reservation> {
        // Nobody waiting and room now: no queue to join. (With others waiting, joining the
        // line keeps the order fair.)
        if let Some(permit) = self.try_permit(bytes) {
            return Ok(self.granted(permit, &self.reserved));
        }
        let units = Self::units(bytes, self.total);
        if self.queued.fetch_add(1, Ordering::SeqCst) >= self.max_queued {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            self.metrics.sweeps_refused.inc();
            return Err(Error::ResourceExhausted(format!(
                "server busy: {} sweeps are already waiting for sweep memory \
                 (--max-queued-sweeps {}, --sweep-memory-bytes {}); retry later",
                self.max_queued, self.max_queued, self.total
            )));
        }
        let _in_line = Queued(&self.queued);
        let permit = Arc::clone(&self.semaphore)
            .acquire_many_owned(units)
            .await
            .map_err(|_| Error::Internal("the sweep budget is closed".into()))?;
        Ok(self.granted(permit, &self.reserved))
    }

    /// Reserves `bytes` for a cache fill now if nobody is waiting and they are free, else
    /// `None`: a fill never makes a sweep wait. Counted apart ([`Self::fill_reserved`]).
    pub(crate) fn try_reserve_fill(&self, bytes: u64) -> Option<Reservation> {
        let permit = self.try_permit(bytes)?;
        Some(self.granted(permit, &self.fill_reserved))
    }

    /// The units of `bytes` now, if nobody is waiting and they are free.
    fn try_permit(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        if self.queued() > 0 {
            return None;
        }
        Arc::clone(&self.semaphore)
            .try_acquire_many_owned(Self::units(bytes, self.total))
            .ok()
    }

    /// The semaphore's units for `bytes` (at least one, at most the whole budget).
    fn units(bytes: u64, total: u64) -> u32 {
        bytes.clamp(1, total).div_ceil(UNIT) as u32
    }

    fn granted(&self, permit: OwnedSemaphorePermit, counter: &Arc<AtomicU64>) -> Reservation {
        let bytes = u64::from(permit.num_permits() as u32) * UNIT;
        counter.fetch_add(bytes, Ordering::SeqCst);
        Reservation {
            _permit: permit,
            bytes,
            reserved: Arc::clone(counter),
        }
    }
}

/// Counts a sweep out of the queue when it leaves it, granted or dropped.
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Memory held by one running sweep; returned to the budget when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    _permit: OwnedSemaphorePermit,
    bytes: u64,
    reserved: Arc<AtomicU64>,
}

impl Reservation {
    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.reserved.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn budget(units: u64, max_queued: usize) -> Arc<SweepBudget> {
        Arc::new(SweepBudget::new(units * UNIT, max_queued, Arc::default()))
    }

    #[tokio::test]
    async fn waits_in_order_refuses_past_the_queue_and_leaves_when_dropped() {
        let b = budget(4, 2);
        let first = b.reserve(3 * UNIT).await.unwrap();
        assert_eq!(b.reserved(), 3 * UNIT);
        // Two wait (a big one first, then a small one that would fit now): order is kept.
        let big = tokio::spawn({
            let b = Arc::clone(&b);
            async move { b.reserve(4 * UNIT).await.map(|r| r.bytes()) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let small = tokio::spawn({
            let b = Arc::clone(&b);
            async move { b.reserve(UNIT).await.map(|r| r.bytes()) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(b.queued(), 2);
        // The third waiter is refused.
        let e = b.reserve(UNIT).await.unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted(_)), "{e}");
        assert!(e.to_string().contains("busy"));
        assert!(
            !small.is_finished(),
            "the small one must not overtake the big one"
        );
        drop(first);
        assert_eq!(big.await.unwrap().unwrap(), 4 * UNIT);
        assert_eq!(small.await.unwrap().unwrap(), UNIT);
        assert_eq!((b.queued(), b.reserved()), (0, 0));
    }

    #[tokio::test]
    async fn a_dropped_waiter_leaves_the_queue_and_oversize_takes_the_whole_budget() {
        let b = budget(2, 4);
        let held = b.reserve(100 * UNIT).await.unwrap();
        assert_eq!(held.bytes(), 2 * UNIT, "clamped to the budget");
        let waiting = b.reserve(UNIT);
        let timed_out = tokio::time::timeout(Duration::from_millis(20), waiting).await;
        assert!(timed_out.is_err());
        assert_eq!(b.queued(), 0, "the timed-out waiter left");
        drop(held);
        assert_eq!(b.reserve(2 * UNIT).await.unwrap().bytes(), 2 * UNIT);
    }
}
