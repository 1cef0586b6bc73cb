//! The process allocator: the system allocator, except that allocations of more than
//! [`HUGE`] bytes are reserved with `mmap(MAP_NORESERVE)`.
//!
//! Why: the `kafka-protocol` crate sizes a `Vec` for the element count an array field
//! *claims* before decoding any element (kafka-protocol-rs PRs #152/#161/#200 are open).
//! A 30-byte request claiming two billion topics asks for hundreds of GB; the system
//! allocator refuses, and a refused allocation aborts the process. Reserved without
//! backing, such a buffer costs only address space: the decoder then runs out of frame
//! bytes after touching a few pages, returns an error, and the connection is closed.
//!
//! Nothing strom allocates on purpose comes near [`HUGE`] (frames are bounded by
//! `socket.request.max.bytes`, fetches by `fetch.max.bytes`), so the normal path is one
//! comparison per allocation.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations above this size are mapped, not malloc'ed.
const HUGE: usize = 1 << 32;
const PAGE: usize = 4096;

pub struct StromAllocator;

fn is_huge(layout: Layout) -> bool {
    layout.size() > HUGE && layout.align() <= PAGE
}

unsafe fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping with no address hint has no preconditions.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr.cast()
    }
}

// SAFETY: huge blocks come from `map` and go back through `munmap` with the same size
// (GlobalAlloc hands `dealloc` the layout they were allocated with, and `is_huge` decides
// both ways alike); everything else is delegated to `System` unchanged.
unsafe impl GlobalAlloc for StromAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            // SAFETY: see `map`.
            unsafe { map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(layout) {
            // SAFETY: fresh anonymous mappings are zero-filled.
            unsafe { map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(layout) {
            // SAFETY: `ptr` came from `map` with this size.
            unsafe { libc::munmap(ptr.cast(), layout.size()) };
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_huge(layout) && !is_huge(new_layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: allocate, copy the common prefix, free: the generic realloc.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_claimed_huge_capacity_costs_only_address_space() {
        let mut v: Vec<u64> = Vec::with_capacity(50_000_000_000);
        v.push(7);
        assert_eq!(v[0], 7);
        let small: Vec<u8> = vec![1; 1024];
        assert_eq!(small.len(), 1024);
    }
}
