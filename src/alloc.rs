//! The process allocator: jemalloc, with transparent huge pages refused on its memory.
//!
//! jemalloc's small size classes carry no per-chunk header (a region's two 9-byte keys take
//! 16 B each, 32 B each under glibc), and it returns freed pages within a second. Huge pages are off
//! because of the memory goal (<= 300 B per region at 1M regions): they save a lookup part of
//! its page walks (heartbeats 1.08x, network GetRegion 1.12x at 1M regions, medians of 6
//! alternated rounds) but cost ~130 B per region, resident in 2 MB units that copy-on-write
//! edits leave partly used, and that cost swings by +-40 B from run to run (282 B per region
//! without them, 399-485 with them). Every rate stays over its goal without them, and TiDB's
//! own deployment guide turns THP off for the same memory and latency reasons. `thp:never` also keeps them off where the kernel's THP mode is
//! `always`. `_RJEM_MALLOC_CONF=thp:always,metadata_thp:always` at start turns them back on.
//!
//! Owns: the allocator statics a binary installs with [`install_allocator!`]. Must not be
//! installed by the library itself: which allocator a process runs is its binary's choice.

/// The allocator [`install_allocator!`] installs.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
pub use tikv_jemallocator::Jemalloc;

/// A C string pointer jemalloc reads as its compiled-in `malloc_conf`.
#[repr(transparent)]
pub struct MallocConf(pub *const std::ffi::c_char);

// SAFETY: the pointer is to a `'static` C string literal, never written.
unsafe impl Sync for MallocConf {}

/// jemalloc's defaults for Meridian: no huge pages (see the module doc), and freed pages
/// returned to the kernel within a second, because the index's copy-on-write edits keep
/// freeing replaced copies. Not at once: heartbeats forwarded between cores free on one core
/// what another allocated, which empties slabs read after read, and returning each at once
/// cost a `madvise` and a TLB flush on every core each time (heartbeats 0.85x against a
/// second's grace, with 1M regions).
pub const MALLOC_CONF: MallocConf =
    MallocConf(c"thp:never,metadata_thp:disabled,dirty_decay_ms:1000".as_ptr());

/// Installs jemalloc with [`MALLOC_CONF`] as the process allocator; once, in a binary's root.
#[macro_export]
macro_rules! install_allocator {
    () => {
        #[cfg(all(target_os = "linux", not(target_env = "musl")))]
        #[global_allocator]
        static GLOBAL: $crate::alloc::Jemalloc = $crate::alloc::Jemalloc;

        /// Read by jemalloc at its first allocation (tikv-jemalloc-sys prefixes its symbols).
        #[cfg(all(target_os = "linux", not(target_env = "musl")))]
        #[export_name = "_rjem_malloc_conf"]
        static MALLOC_CONF: $crate::alloc::MallocConf = $crate::alloc::MALLOC_CONF;
    };
}
