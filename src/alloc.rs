//! The process allocator: jemalloc, with transparent huge pages asked for on its memory.
//!
//! A placement lookup at 1M regions touches a block and a route that are almost never in the
//! TLB: with 4 KiB pages the index and routes span ~50k pages, and every such step added a page
//! walk to the cache miss. jemalloc marks its extents `MADV_HUGEPAGE`, which this machine's
//! kernel (THP in `madvise` mode, the common default) honours, and its small size classes carry
//! no per-chunk header: a region's two 9-byte keys take 16 B each, 32 B each under glibc.
//! Huge pages cost resident memory (340 B per region without them, 408-481 B with them, at 1M
//! regions on one embedded node); tuning.md has the measurements. `_RJEM_MALLOC_CONF` still
//! overrides these defaults at start (`thp:default,metadata_thp:disabled` turns them off).
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

/// jemalloc's defaults for Meridian: huge pages for data and for jemalloc's own metadata, and
/// freed pages returned at once, because the index's copy-on-write edits keep freeing
/// replaced copies. The resident set moves too much between runs to show what this setting
/// saves (tuning.md), and the lookup bench saw no cost.
pub const MALLOC_CONF: MallocConf =
    MallocConf(c"thp:always,metadata_thp:always,dirty_decay_ms:0".as_ptr());

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
