//! The allocator under the node, and what it can say and give back.
//!
//! The static build (the container image and the release artifacts, `+crt-static`) allocates
//! with jemalloc. Under a Zipf load over 39,990 tags, glibc held 44 to 53 MB more than the live
//! heap after each idle sweep, `malloc_trim` or not: freed chunks between chunks that lived on.
//! jemalloc keeps small allocations of one size together and gives back what it freed, by a
//! background thread, within its decay time (10 s): 18 to 30 MB above the live heap, and a
//! loaded tag at the peak cost 795 bytes of RSS instead of 2,017 (BENCHMARKS.md, "jemalloc in
//! the static build"). What stays above the idle node after a sweep is now mostly live heap.
//! Other builds (a dynamic `cargo run`, the tests) use the system's allocator: the same code,
//! and no C library to compile for the tests. The jemalloc half is compiled only by the static
//! build, so no `cargo test` runs it: `.ci/static-allocator` starts CI's static binary and
//! checks that it runs under jemalloc and that [`heap`] reads its counters. [`trim`] there is
//! not exercised (a refused purge is logged); its effect is measured, not tested.
//!
//! Each allocator offers the same three things: its [`NAME`], [`trim`] (give the free memory
//! back now) and [`heap`] (what it holds).

/// What the allocator holds: bytes in use by the program, and bytes it keeps free (freed
/// memory not returned to the OS: what [`trim`] can release, and the holes between live
/// chunks that it cannot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    pub in_use: u64,
    pub free: u64,
}

#[cfg(all(target_os = "linux", target_env = "gnu", target_feature = "crt-static"))]
mod imp {
    use super::Heap;

    #[global_allocator]
    static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

    pub const NAME: &str = "jemalloc";

    /// Purges every arena's unused dirty pages now, rather than at the end of their decay time.
    pub fn trim() {
        // `arena.<MALLCTL_ARENAS_ALL>.purge` neither reads nor writes a value.
        // SAFETY: the name is a NUL-terminated string, and this control takes no pointer.
        let err = unsafe {
            tikv_jemalloc_sys::mallctl(
                c"arena.4096.purge".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
        if err != 0 {
            tracing::warn!(errno = err, "jemalloc refused to purge its arenas");
        }
    }

    /// jemalloc's own counters (refreshed by an epoch): what is allocated, and what is resident
    /// beyond it. Cheap: no walk of free lists.
    pub fn heap() -> Option<Heap> {
        use tikv_jemalloc_ctl::{epoch, stats};
        epoch::advance().ok()?;
        let (allocated, resident) = (stats::allocated::read().ok()?, stats::resident::read().ok()?);
        Some(Heap { in_use: allocated as u64, free: resident.saturating_sub(allocated) as u64 })
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu", not(target_feature = "crt-static")))]
mod imp {
    use super::Heap;

    pub const NAME: &str = "glibc";

    /// Returns the free memory of every arena (`malloc_trim(0)` releases whole free pages
    /// anywhere in an arena, not only at its top).
    pub fn trim() {
        // SAFETY: malloc_trim only reads and updates the allocator's own state; it is thread-safe.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    /// glibc's `mallinfo2`: every arena, and the chunks it mapped apart. It walks the arenas'
    /// free lists under their locks: for a scrape, not a request path.
    pub fn heap() -> Option<Heap> {
        // SAFETY: mallinfo2 reads the allocator's own state under its arena locks.
        let m = unsafe { libc::mallinfo2() };
        Some(Heap { in_use: (m.uordblks + m.hblkhd) as u64, free: m.fordblks as u64 })
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    use super::Heap;

    pub const NAME: &str = "system";

    pub fn trim() {}

    pub fn heap() -> Option<Heap> {
        None
    }
}

/// The allocator of this build: `jemalloc` (the static build), `glibc` or `system`.
pub const NAME: &str = imp::NAME;

/// Returns the allocator's free memory to the OS now. Called after many connections closed,
/// and by the tags' idle sweeper once many tags were unloaded or their actors went to sleep.
pub fn trim() {
    imp::trim()
}

/// The allocator's figures; `None` where it does not say.
pub fn heap() -> Option<Heap> {
    imp::heap()
}
