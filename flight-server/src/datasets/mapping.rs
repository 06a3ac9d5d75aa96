//! The memory of a large upload's close column: an anonymous mapping reserved for the largest
//! dataset the server accepts and filled front to back (so the column grows in place, with no
//! doubling copies), and a small pool of the mappings of datasets that are gone.
//!
//! A fresh page is the most expensive thing a large put touches on a VM: the guest and the host
//! both clear it, and a profile of an 800 MB put had two thirds of the server's time there
//! (docs/perf-notes.md, "Ingest"). A put that replaces a dataset frees the column of the
//! version before; the pool keeps such columns mapped (up to [`POOL_SLOTS`] of them, within
//! [`pool_cap`]) and the next large upload writes over one instead of faulting in fresh pages,
//! as a general-purpose allocator reuses freed memory. A pooled column is resident memory that
//! no dataset uses: the idle trim ([`crate::compute::trim`]) hands the pool back to the operating system
//! once the server is quiet, with the allocator's free memory.

use std::ptr::NonNull;
use std::sync::Mutex;

use arrow_array::Float64Array;
use arrow_buffer::ToByteSlice;

use crate::{Error, Result};

/// Released columns kept at most: a replaced OHLCV dataset's five columns, and a spare.
pub(crate) const POOL_SLOTS: usize = 6;

/// Bytes of released columns kept at most: an eighth of the machine's memory.
pub(crate) fn pool_cap() -> usize {
    usize::try_from(physical_memory() / 8).unwrap_or(usize::MAX)
}

/// Columns of datasets that are gone, still mapped: `(start, bytes)`.
static POOL: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// Bytes held by the pool now.
#[cfg(test)]
fn pooled_bytes() -> usize {
    lock_pool().iter().map(|&(_, bytes)| bytes).sum()
}

/// Unmaps every pooled column (the idle trim calls this).
pub(crate) fn release_pool() {
    let pooled = std::mem::take(&mut *lock_pool());
    for (ptr, bytes) in pooled {
        // SAFETY: a pooled column is a mapping nothing references (see `Unmap::drop`).
        unsafe { libc::munmap(ptr as *mut libc::c_void, bytes) };
    }
}

fn lock_pool() -> std::sync::MutexGuard<'static, Vec<(usize, usize)>> {
    // The pool's list stays consistent even if a holder panicked: each step is one push or pop.
    POOL.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The largest pooled column, taken out of the pool.
fn take_pooled() -> Option<(usize, usize)> {
    let mut pool = lock_pool();
    let largest = (0..pool.len()).max_by_key(|&i| pool[i].1)?;
    Some(pool.swap_remove(largest))
}

/// An anonymous private mapping reserved (not committed: `MAP_NORESERVE`) for up to `capacity`
/// f64 values; unmapped when dropped.
pub(crate) struct Mapping {
    ptr: std::ptr::NonNull<f64>,
    capacity: usize,
}

// SAFETY: the mapping is owned memory like a Vec's; nothing else points into it until `finish`
// hands it to an Arrow buffer that owns it.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// A reservation for up to `max_bytes` (at least 1 GiB, at most the machine's memory): a
    /// pooled column grown to that size if there is one, else a fresh mapping.
    pub(crate) fn reserve(max_bytes: u64) -> Result<Self> {
        // Never more than the machine could hold, nor more than the dataset limit.
        let bytes = max_bytes.min(physical_memory()).max(1 << 30);
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX) & !(page_size() - 1);
        if let Some((old, old_bytes)) = take_pooled() {
            // Page tables move, data does not: the column's pages stay resident, the rest of
            // the reservation is untouched address space, and the mapping keeps its flags
            // (no reserve, large pages).
            // SAFETY: `old` is a pooled mapping of `old_bytes` that nothing references.
            let ptr = unsafe {
                libc::mremap(
                    old as *mut libc::c_void,
                    old_bytes,
                    bytes,
                    libc::MREMAP_MAYMOVE,
                )
            };
            if ptr != libc::MAP_FAILED {
                return Ok(Self {
                    ptr: NonNull::new(ptr.cast()).expect("mremap does not return null"),
                    capacity: bytes / size_of::<f64>(),
                });
            }
            // SAFETY: as above; it could not be grown, so it goes.
            unsafe { libc::munmap(old as *mut libc::c_void, old_bytes) };
        }
        // SAFETY: a fresh anonymous mapping; the arguments are valid for mmap(2).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::ResourceExhausted(format!(
                "cannot reserve memory for the upload's close column: {}",
                std::io::Error::last_os_error()
            )));
        }
        // Large pages where the kernel offers them: a 2 MiB fault instead of 512 small ones for
        // a column written front to back. Advice only; ignored where unsupported.
        // SAFETY: advice on this fresh mapping.
        let _ = unsafe { libc::madvise(ptr, bytes, libc::MADV_HUGEPAGE) };
        Ok(Self {
            ptr: std::ptr::NonNull::new(ptr.cast()).expect("mmap does not return null"),
            capacity: bytes / size_of::<f64>(),
        })
    }

    /// The first `len` values.
    pub(crate) fn values(&self, len: usize) -> &[f64] {
        // SAFETY: the first `len` values were written by `append`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    /// Appends little-endian f64 `bytes` after the first `len` values; the new length.
    pub(crate) fn append_bytes(&mut self, len: usize, bytes: &[u8]) -> Result<usize> {
        let n = bytes.len() / size_of::<f64>();
        let end = len + n;
        if end > self.capacity {
            return Err(Error::ResourceExhausted(format!(
                "the upload's close column outgrew its reservation of {} values",
                self.capacity
            )));
        }
        // SAFETY: len..end is inside the mapping, which nothing else references yet; a byte
        // copy needs no alignment of the source.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.as_ptr().add(len).cast::<u8>(),
                n * size_of::<f64>(),
            );
        }
        Ok(end)
    }

    /// Appends `values` after the first `len`; the new length.
    /// Appends `n` values that `fill` writes as little-endian bytes after the first `len`
    /// (a compressed message decompresses straight into the column); the new length.
    pub(crate) fn append_with(
        &mut self,
        len: usize,
        n: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<usize> {
        let end = len + n;
        if end > self.capacity {
            return Err(Error::ResourceExhausted(format!(
                "the upload's close column outgrew its reservation of {} values",
                self.capacity
            )));
        }
        // SAFETY: len..end is inside the mapping, which nothing else references yet; its pages
        // read as zeros until written, so the slice is initialised memory.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.as_ptr().add(len).cast::<u8>(),
                n * size_of::<f64>(),
            )
        };
        fill(dst)?;
        Ok(end)
    }

    pub(crate) fn append(&mut self, len: usize, values: &[f64]) -> Result<usize> {
        self.append_bytes(len, values.to_byte_slice())
    }

    /// The first `len` values as an Arrow array that owns the mapping; the unused tail is
    /// unmapped.
    pub(crate) fn finish(self, len: usize) -> Float64Array {
        let page = page_size();
        let used = (len * size_of::<f64>()).div_ceil(page).max(1) * page;
        let reserved = self.capacity * size_of::<f64>();
        if used < reserved {
            // SAFETY: the tail [used, reserved) is part of this mapping and unused.
            unsafe {
                libc::munmap(
                    self.ptr.as_ptr().cast::<u8>().add(used).cast(),
                    reserved - used,
                )
            };
        }
        let owner = std::sync::Arc::new(Unmap {
            ptr: self.ptr,
            bytes: used,
        });
        std::mem::forget(self);
        // SAFETY: ptr is valid for `len` written f64 values for as long as `owner` lives, and
        // the buffer keeps `owner` alive; f64 needs 8-byte alignment and mappings are
        // page-aligned.
        let buffer = unsafe {
            arrow_buffer::Buffer::from_custom_allocation(
                owner.ptr.cast(),
                len * size_of::<f64>(),
                owner,
            )
        };
        Float64Array::new(arrow_buffer::ScalarBuffer::new(buffer, 0, len), None)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: this value owns the whole mapping.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.capacity * size_of::<f64>()) };
    }
}

/// Releases a finished close column when its last Arrow buffer goes: into the pool if there is
/// room, else back to the operating system.
struct Unmap {
    ptr: std::ptr::NonNull<f64>,
    bytes: usize,
}

// SAFETY: read-only after `finish`; the Arrow buffer shares it between threads like any buffer.
unsafe impl Send for Unmap {}
// SAFETY: as above.
unsafe impl Sync for Unmap {}

impl std::panic::RefUnwindSafe for Unmap {}

impl Drop for Unmap {
    fn drop(&mut self) {
        let mut pool = lock_pool();
        let held: usize = pool.iter().map(|&(_, bytes)| bytes).sum();
        if pool.len() < POOL_SLOTS && held + self.bytes <= pool_cap() {
            pool.push((self.ptr.as_ptr() as usize, self.bytes));
            return;
        }
        drop(pool);
        // SAFETY: the mapping's used part, owned by this value.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.bytes) };
    }
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

pub(crate) fn physical_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    u64::try_from(pages).unwrap_or(1 << 20) * page_size() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool is process-wide: these tests take turns, each from an empty pool.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn turn() -> std::sync::MutexGuard<'static, ()> {
        let turn = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        release_pool();
        turn
    }

    fn column(values: usize, fill: f64) -> Float64Array {
        let mut m = Mapping::reserve(1 << 30).unwrap();
        let chunk = vec![fill; 1 << 16];
        let mut len = 0;
        while len < values {
            let n = chunk.len().min(values - len);
            len = m.append(len, &chunk[..n]).unwrap();
        }
        m.finish(len)
    }

    #[test]
    fn a_released_column_is_reused_by_the_next_upload_then_handed_back() {
        let _turn = turn();
        // Other tests of this binary may use the pool too: look only for this column.
        let first = column(3 << 20, 1.5);
        let at = first.values().as_ptr() as usize;
        let bytes = (3 << 20) * size_of::<f64>();
        drop(first);
        assert!(
            lock_pool().iter().any(|&(p, b)| p == at && b >= bytes),
            "pooled"
        );
        // The next large column is written over it: same pages, new values only.
        let second = column((3 << 20) - 7, 2.5);
        assert!(
            !lock_pool().iter().any(|&(p, _)| p == at),
            "taken from the pool"
        );
        assert_eq!(second.len(), (3 << 20) - 7);
        assert!(second.values().iter().all(|&v| v == 2.5));
        drop(second);
        release_pool();
        assert!(!lock_pool().iter().any(|&(p, _)| p == at), "handed back");
    }

    #[test]
    fn the_pool_is_bounded() {
        let _turn = turn();
        let columns: Vec<Float64Array> = (0..POOL_SLOTS + 2)
            .map(|i| column(1 << 18, i as f64))
            .collect();
        drop(columns);
        assert!(lock_pool().len() <= POOL_SLOTS);
        assert!(pooled_bytes() <= pool_cap());
    }
}
