//! The process's memory budget. A server that sends without end (an `INFO` line with no end,
//! a reply declaring gigabytes) would otherwise grow the probe until the deadline, at loopback
//! speed, and a probe shares its container's memory limit with the application: the kernel's
//! OOM killer may pick the application. The binary's allocator counts live heap bytes; past
//! the command's budget the run ends (the deadline's mechanism: a prepared line, `_exit`),
//! never a crash, never an OOM kill: a check waiting on NATS as not judged (what NATS sent
//! took it), else as "could not evaluate".
//!
//! The first allocations come from an arena in the binary's zeroed data (`Arena`): a check
//! allocates a few tens of KiB in all, and musl's allocator maps and unmaps a fresh group of
//! pages for many of them (20 mmap/munmap pairs in one socket check, each a system call and
//! a page fault). Past the arena, the system's allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `check` and `diagnose`: their largest legitimate need is a page of the server's
/// connection list (about 300 KB); 32 MiB is two orders above it.
pub const CHECK: usize = 32 << 20;
/// `serve`: what its looks left (a check's answer, at most `observe::look::MOST_OUTPUT`, and
/// the buffers it is read into) and its connections at their largest
/// (`commands::serve::MOST_CONNECTIONS`, each a whole request and the largest answer): about
/// 9 MiB at worst, 16 MiB with room. Flat: nothing it keeps grows with time.
pub const SERVE: usize = 16 << 20;
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

/// The arena's size: a socket check uses under a tenth of it; a run that needs more (a look at
/// the consumers, the guard) goes on with the system's allocator.
const ARENA_SIZE: usize = 256 << 10;

/// Bytes handed out by an atomic bump of `TOP`, never twice while in use; a freed block is
/// taken back only when it is the last one handed out (a temporary, a growing Vec), else left.
/// In zeroed data: a page costs nothing until it is first touched.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; ARENA_SIZE]>);

// SAFETY: the arena's bytes are only reached through the blocks `TOP` hands out, each to one
// owner at a time (a compare-and-swap of `TOP` moves every block's boundary).
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena(UnsafeCell::new([0; ARENA_SIZE]));
/// The offset of the arena's first free byte.
static TOP: AtomicUsize = AtomicUsize::new(0);

impl Arena {
    fn base() -> usize {
        ARENA.0.get() as usize
    }

    fn holds(ptr: *mut u8) -> bool {
        (Self::base()..Self::base() + ARENA_SIZE).contains(&(ptr as usize))
    }

    /// A block past the last one, or null when the arena has no room for it.
    fn alloc(layout: Layout) -> *mut u8 {
        let base = Self::base();
        let mut top = TOP.load(Ordering::Acquire);
        loop {
            let start = (base + top).next_multiple_of(layout.align()) - base;
            let end = match start.checked_add(layout.size()) {
                Some(end) if end <= ARENA_SIZE => end,
                _ => return std::ptr::null_mut(),
            };
            match TOP.compare_exchange_weak(top, end, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return (base + start) as *mut u8,
                Err(now) => top = now,
            }
        }
    }

    /// Takes the block back when it is the last one handed out; any other is left in place.
    fn free(ptr: *mut u8, size: usize) {
        let start = ptr as usize - Self::base();
        let _ = TOP.compare_exchange(start + size, start, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Grows or shrinks the last block in place; false for any other (or no room).
    fn resize(ptr: *mut u8, size: usize, new_size: usize) -> bool {
        let start = ptr as usize - Self::base();
        new_size <= ARENA_SIZE - start
            && TOP
                .compare_exchange(
                    start + size,
                    start + new_size,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

/// A block from the arena, else from the system.
///
/// # Safety
/// As `GlobalAlloc::alloc`.
unsafe fn allocate(layout: Layout) -> *mut u8 {
    match Arena::alloc(layout) {
        p if p.is_null() => System.alloc(layout),
        p => p,
    }
}

/// # Safety
/// As `GlobalAlloc::realloc`.
unsafe fn reallocate(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    if !Arena::holds(ptr) {
        return System.realloc(ptr, layout, new_size);
    }
    if Arena::resize(ptr, layout.size(), new_size) || new_size <= layout.size() {
        return ptr;
    }
    // SAFETY: the caller guarantees the new size, rounded to the alignment, does not overflow.
    let grown = allocate(Layout::from_size_align_unchecked(new_size, layout.align()));
    if !grown.is_null() {
        std::ptr::copy_nonoverlapping(ptr, grown, layout.size());
        Arena::free(ptr, layout.size());
    }
    grown
}

/// The allocator: the arena, then the system's; counted.
pub struct Budget;

impl Budget {
    /// `alloc`'s block, with `bytes` more counted; given back when it failed.
    fn counted(&self, bytes: usize, alloc: impl FnOnce() -> *mut u8) -> *mut u8 {
        let before = LIVE.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > LIMIT.load(Ordering::Relaxed) {
            crate::deadline::over_budget();
        }
        let p = alloc();
        if p.is_null() {
            self.give(bytes);
        }
        p
    }

    fn give(&self, bytes: usize) {
        LIVE.fetch_sub(bytes, Ordering::Relaxed);
    }
}

// SAFETY: every call is served by the arena (blocks that never overlap, aligned as asked, each
// freed or resized only by its owner) or forwarded to the system allocator unchanged; the
// counting around it touches only atomics, and the over-budget path never returns.
unsafe impl GlobalAlloc for Budget {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.counted(layout.size(), || allocate(layout))
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.counted(layout.size(), || match Arena::alloc(layout) {
            // A block taken back may have been written.
            p if !p.is_null() => {
                std::ptr::write_bytes(p, 0, layout.size());
                p
            }
            _ => System.alloc_zeroed(layout),
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match Arena::holds(ptr) {
            true => Arena::free(ptr, layout.size()),
            false => System.dealloc(ptr, layout),
        }
        self.give(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let resized = || reallocate(ptr, layout, new_size);
        if new_size > layout.size() {
            return self.counted(new_size - layout.size(), resized);
        }
        let p = resized();
        if !p.is_null() && new_size < layout.size() {
            self.give(layout.size() - new_size);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The arena is one for the process: these tests are its only users (the test binary's own
    // allocator is the system's), and run one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    /// Blocks are aligned, apart and writable; the last one freed is handed out again, grows
    /// in place, and comes back zeroed when asked; a block that is not the last moves when it
    /// grows, with its bytes.
    #[test]
    fn the_arena_hands_out_blocks_and_takes_back_the_last() {
        let _serial = SERIAL.lock().unwrap();
        let b = Budget;
        // SAFETY: every layout has a non-zero size and a power-of-two alignment; every pointer
        // read, written, resized or freed is a block the allocator handed out (checked
        // non-null), used within the size it was last given and freed once, with that size.
        unsafe {
            let a = b.alloc(layout(24, 8));
            let c = b.alloc(layout(100, 64));
            assert!(Arena::holds(a) && Arena::holds(c));
            assert_eq!(c as usize % 64, 0);
            assert!(c as usize >= a as usize + 24);
            std::ptr::write_bytes(a, 0xaa, 24);
            std::ptr::write_bytes(c, 0xcc, 100);
            // The last block, freed, is the next one.
            b.dealloc(c, layout(100, 64));
            let again = b.alloc_zeroed(layout(100, 64));
            assert_eq!(again, c);
            assert!(std::slice::from_raw_parts(again, 100)
                .iter()
                .all(|&x| x == 0));
            // The last block grows and shrinks in place.
            let grown = b.realloc(again, layout(100, 64), 4000);
            assert_eq!(grown, again);
            let shrunk = b.realloc(grown, layout(4000, 64), 10);
            assert_eq!(shrunk, grown);
            // One that is not the last moves, with its bytes; the old place is left.
            let moved = b.realloc(a, layout(24, 8), 48);
            assert!(!moved.is_null() && moved != a);
            assert!(std::slice::from_raw_parts(moved, 24)
                .iter()
                .all(|&x| x == 0xaa));
            b.dealloc(moved, layout(48, 8));
            b.dealloc(shrunk, layout(10, 64));
        }
    }

    /// Past the arena, the system's allocator; its blocks are freed and resized by it.
    #[test]
    fn past_the_arena_the_system_allocates() {
        let _serial = SERIAL.lock().unwrap();
        let b = Budget;
        // SAFETY: as in the test above: valid layouts; every block used (checked non-null)
        // within the size it was last given, and freed once with that size.
        unsafe {
            let big = b.alloc(layout(ARENA_SIZE + 1, 8));
            assert!(!big.is_null() && !Arena::holds(big));
            std::ptr::write_bytes(big, 1, ARENA_SIZE + 1);
            let bigger = b.realloc(big, layout(ARENA_SIZE + 1, 8), ARENA_SIZE * 2);
            assert!(!bigger.is_null() && !Arena::holds(bigger));
            assert_eq!(*bigger.add(ARENA_SIZE), 1);
            b.dealloc(bigger, layout(ARENA_SIZE * 2, 8));
            // An arena block that outgrows the arena moves out of it.
            let small = b.alloc(layout(16, 8));
            assert!(Arena::holds(small));
            *small = 7;
            let out = b.realloc(small, layout(16, 8), ARENA_SIZE + 1);
            assert!(!out.is_null() && !Arena::holds(out));
            assert_eq!(*out, 7);
            b.dealloc(out, layout(ARENA_SIZE + 1, 8));
        }
    }

    /// Threads allocating at once never share a byte.
    #[test]
    fn threads_never_share_a_block() {
        let _serial = SERIAL.lock().unwrap();
        let threads: Vec<_> = (1..=4u8)
            .map(|id| {
                // SAFETY: each thread writes, reads and frees only the blocks it was handed
                // (checked non-null), within their layouts' sizes, each freed once with its
                // layout; the test is that no other thread's block overlaps them.
                std::thread::spawn(move || unsafe {
                    let b = Budget;
                    let mut held = Vec::new();
                    for i in 0..200usize {
                        let l = layout(8 + i % 50, 8);
                        let p = b.alloc(l);
                        assert!(!p.is_null());
                        std::ptr::write_bytes(p, id, l.size());
                        held.push((p as usize, l));
                        if i % 3 == 0 {
                            let (p, l) = held.pop().unwrap();
                            b.dealloc(p as *mut u8, l);
                        }
                    }
                    for &(p, l) in &held {
                        let bytes = std::slice::from_raw_parts(p as *const u8, l.size());
                        assert!(bytes.iter().all(|&x| x == id), "a block was shared");
                    }
                    for (p, l) in held {
                        b.dealloc(p as *mut u8, l);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
