//! Giving freed heap memory back to the operating system after connections close.
//!
//! Each connection allocates buffers on whichever tokio worker thread serves it, so after
//! thousands of connections have come and gone glibc's per-thread arenas hold many
//! megabytes of free but fragmented pages: measured here, 1,000 connections opened and
//! closed 16 times left RSS at 59 MB, and one `malloc_trim(0)` brought it to 7.5 MB. It
//! is retention, not a leak, but a broker's memory should follow its load. So the
//! connection count of closures is watched, and after closures the free pages are
//! released once per check interval — a few milliseconds of work, never while idle.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How often the closures since the last trim are checked.
pub const TRIM_CHECK_INTERVAL_MS: u64 = 2_000;

/// Counts connection closures since the last trim.
#[derive(Debug, Default)]
pub struct MemoryTrimmer {
    closed_since_trim: AtomicUsize,
}

impl MemoryTrimmer {
    /// Called when a connection ends.
    pub fn connection_closed(&self) {
        self.closed_since_trim.fetch_add(1, Ordering::Relaxed);
    }

    /// Releases free heap pages if any connection closed since the last call.
    pub fn trim_if_connections_closed(&self) {
        if self.closed_since_trim.swap(0, Ordering::Relaxed) > 0 {
            release_free_heap();
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_heap() {
    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no
    // preconditions and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_heap() {}
