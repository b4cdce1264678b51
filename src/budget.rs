//! The process's memory budget. A server that sends without end (an `INFO` line with no end,
//! a reply declaring gigabytes) would otherwise grow the probe until the deadline, at loopback
//! speed, and a probe shares its container's memory limit with the application: the kernel's
//! OOM killer may pick the application. The binary's allocator counts live heap bytes; past
//! the command's budget the run ends as "could not evaluate" (the deadline's mechanism: a
//! prepared line, `_exit`), never a crash, never an OOM kill.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `check` and `diagnose`: their largest legitimate need is a page of the server's
/// connection list (about 300 KB); 32 MiB is two orders above it.
pub const CHECK: usize = 32 << 20;
/// `guard`, before any durable: the pages in flight (16 streams' pages at once, each answer
/// at most `observe::listing::MAX_ANSWER`, 8 MiB, and what decoding it takes) and the
/// advisories' counts.
pub const GUARD: usize = 48 << 20;
/// `guard`, for each durable it keeps (its first look, then its row): a few hundred bytes are
/// used; 2 KiB is ample and still bounds a server that invents durables without end.
pub const GUARD_PER_DURABLE: usize = 2 << 10;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Sets the budget for the rest of the run.
pub fn set_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::SeqCst);
}

/// Raises the budget by `bytes`: what the run keeps grows with what it legitimately found
/// (the guard's durables), so a large account is not mistaken for a hostile server.
pub fn allow(bytes: usize) {
    let _ = LIMIT.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| {
        Some(l.saturating_add(bytes))
    });
}

/// The allocator: the system's, counted.
pub struct Budget;

impl Budget {
    fn take(&self, bytes: usize) {
        let before = LIVE.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > LIMIT.load(Ordering::Relaxed) {
            crate::deadline::over_budget();
        }
    }

    fn give(&self, bytes: usize) {
        LIVE.fetch_sub(bytes, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counting around it
// touches only atomics, and the over-budget path never returns.
unsafe impl GlobalAlloc for Budget {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.take(layout.size());
        let p = System.alloc(layout);
        if p.is_null() {
            self.give(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.take(layout.size());
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            self.give(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        self.give(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            self.take(new_size - layout.size());
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if new_size > layout.size() {
                self.give(new_size - layout.size());
            }
        } else if new_size < layout.size() {
            self.give(layout.size() - new_size);
        }
        p
    }
}
