//! Failpoints: named steps that a test makes fail, hang or kill the process, through TiKV's
//! `fail` crate. They are compiled in only with the `failpoints` feature (the test command turns
//! it on; a release build never has it): without it, `io` and `step` are `Ok(())` and nothing is
//! ever looked up. This module owns the names and what a configured action means at a step; it
//! must not decide anything else.
//!
//! A step is armed with `fail`'s action syntax, at start through `FAILPOINTS=name=actions;...`
//! or at run time through the admin API (`PUT /api/v1/debug/failpoints/{name}`, role `admin`).
//! Besides `fail`'s own actions, `return(ARG)` means here:
//! - `return(enospc)`, `return(eio)`: the step fails with that errno;
//! - `return(kill)`: the process sends itself SIGKILL at that step, as a power cut would stop it;
//! - `return(hang)`: the step waits, without blocking its thread, until the failpoint is changed;
//!   `return(hang:MS)` waits MS milliseconds. (`fail`'s `sleep` and `pause` block the thread,
//!   which on a thread-per-core server stalls the whole core, not the one step.)

use std::time::Duration;

/// Every failpoint, so tests and the admin API name them one way.
pub mod points {
    /// An append to the embedded store's log, before the bytes are written.
    pub const WAL_WRITE: &str = "meta::wal::write";
    /// The log's fsync after an append.
    pub const WAL_FSYNC: &str = "meta::wal::fsync";
    /// Compaction: the new snapshot written to its temporary file.
    pub const SNAPSHOT_WRITE: &str = "meta::snapshot::write";
    /// Compaction: the snapshot renamed over the old one.
    pub const SNAPSHOT_RENAME: &str = "meta::snapshot::rename";
    /// Compaction: the log truncated after the snapshot is in place.
    pub const WAL_TRUNCATE: &str = "meta::wal::truncate";
    /// A single-key write to etcd (the TSO limit, an id block's end).
    pub const ETCD_PUT: &str = "etcd::put";
    /// Every write transaction sent to etcd (puts, deletes, batches, creates).
    pub const ETCD_TXN: &str = "etcd::txn";
    /// Each keepalive of the leader's lease, before it is sent.
    pub const LEASE_KEEPALIVE: &str = "election::keepalive";
    /// A TSO window renewal, before its limit is persisted.
    pub const WINDOW_RENEW: &str = "tso::window::renew";
    /// A flush of placement's dirty regions and stores, before the batch is written.
    pub const PERSIST_FLUSH: &str = "placement::flush";
    /// A new term's load of placement from the meta store, before the first read.
    pub const PLACEMENT_LOAD: &str = "placement::load";
    /// The region syncer's leader end, before the message that says a snapshot is whole: a
    /// failure here cuts the stream mid-snapshot.
    pub const SYNC_SNAPSHOT_END: &str = "region_sync::snapshot_end";
    /// A term that took over its syncer's copy, before it reads the store's regions to
    /// reconcile the copy with them.
    pub const RECONCILE: &str = "placement::reconcile";
    /// An admin merge with its source's half started and held, before the target's half is
    /// placed: a hang holds open the window in which nothing of the merge may reach TiKV; a
    /// failure stands for the target's half refused.
    pub const MERGE_HELD: &str = "placement::merge_held";

    pub const ALL: [&str; 14] = [
        WAL_WRITE,
        WAL_FSYNC,
        SNAPSHOT_WRITE,
        SNAPSHOT_RENAME,
        WAL_TRUNCATE,
        ETCD_PUT,
        ETCD_TXN,
        LEASE_KEEPALIVE,
        WINDOW_RENEW,
        PERSIST_FLUSH,
        PLACEMENT_LOAD,
        SYNC_SNAPSHOT_END,
        RECONCILE,
        MERGE_HELD,
    ];
}

/// What an armed step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    Errno(i32),
    Kill,
    /// Wait this long, or until the failpoint changes when `None`.
    Hang(Option<Duration>),
}

impl Injected {
    /// The meaning of `return(ARG)`; `None` for an argument this module does not know.
    pub fn parse(arg: &str) -> Option<Injected> {
        match arg.trim() {
            "enospc" => Some(Injected::Errno(libc::ENOSPC)),
            "eio" => Some(Injected::Errno(libc::EIO)),
            "kill" => Some(Injected::Kill),
            "hang" => Some(Injected::Hang(None)),
            other => other
                .strip_prefix("hang:")
                .and_then(|ms| ms.parse::<u64>().ok())
                .map(|ms| Injected::Hang(Some(Duration::from_millis(ms)))),
        }
    }
}

/// Whether this build has failpoints at all.
pub const fn compiled_in() -> bool {
    cfg!(feature = "failpoints")
}

/// What the step `name` is armed with now, if anything.
fn injected(name: &str) -> Option<Injected> {
    if !compiled_in() {
        return None;
    }
    fail::eval(name, |arg| {
        let parsed = arg.as_deref().and_then(Injected::parse);
        if parsed.is_none() {
            tracing::error!(
                failpoint = name,
                ?arg,
                "unknown failpoint return value; ignored"
            );
        }
        parsed
    })
    .flatten()
}

fn hit(name: &str, what: Injected) {
    tracing::warn!(failpoint = name, ?what, "failpoint hit");
}

fn kill(name: &str) -> ! {
    hit(name, Injected::Kill);
    // SAFETY: kill(2) on our own pid; SIGKILL cannot be caught, so nothing runs after it.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL is delivered before kill(2) returns to a single-threaded caller, and within a
    // scheduling tick to a multi-threaded one; nothing here may run meanwhile.
    loop {
        std::thread::park();
    }
}

/// A blocking step (the embedded store's file operations): fails, kills or sleeps the thread.
#[inline]
pub fn io(name: &str) -> std::io::Result<()> {
    match injected(name) {
        None => Ok(()),
        Some(what @ Injected::Errno(errno)) => {
            hit(name, what);
            Err(std::io::Error::from_raw_os_error(errno))
        }
        Some(Injected::Kill) => kill(name),
        Some(what @ Injected::Hang(Some(d))) => {
            hit(name, what);
            std::thread::sleep(d);
            Ok(())
        }
        Some(what @ Injected::Hang(None)) => {
            hit(name, what);
            while injected(name) == Some(Injected::Hang(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(())
        }
    }
}

/// An async step (etcd calls, the lease keepalive, renewals, flushes): a hang waits on the
/// runtime's timer, so the rest of the core keeps serving.
#[inline]
pub async fn step(name: &str) -> std::io::Result<()> {
    match injected(name) {
        None => Ok(()),
        Some(what @ Injected::Errno(errno)) => {
            hit(name, what);
            Err(std::io::Error::from_raw_os_error(errno))
        }
        Some(Injected::Kill) => kill(name),
        Some(what @ Injected::Hang(Some(d))) => {
            hit(name, what);
            tokio::time::sleep(d).await;
            Ok(())
        }
        Some(what @ Injected::Hang(None)) => {
            hit(name, what);
            while injected(name) == Some(Injected::Hang(None)) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(())
        }
    }
}

/// Why a failpoint was not armed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArmError {
    /// This build has no failpoints: arming one would silently do nothing.
    #[error("failpoints are not compiled in (build with --features failpoints)")]
    NotCompiledIn,
    /// No failpoint has this name.
    #[error("no failpoint {0:?}; there are: {all}", all = points::ALL.join(", "))]
    Unknown(String),
    /// An entry of a `FAILPOINTS` list that is not `name=actions`.
    #[error("failpoint {0:?}: expected name=actions")]
    NotAnEntry(String),
    /// `fail` refused the actions (its message says why).
    #[error("failpoint {name}: {why}")]
    BadActions { name: String, why: String },
}

/// Arms the failpoints in `FAILPOINTS` (`name=actions;...`), as a process starts.
pub fn arm_from_env() -> Result<(), ArmError> {
    match std::env::var("FAILPOINTS") {
        Ok(spec) if !spec.trim().is_empty() => arm_all(&spec),
        _ => Ok(()),
    }
}

/// Arms each `name=actions` of `spec`, separated by `;`.
pub fn arm_all(spec: &str) -> Result<(), ArmError> {
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, actions) = entry
            .split_once('=')
            .ok_or_else(|| ArmError::NotAnEntry(entry.to_string()))?;
        arm(name.trim(), actions.trim())?;
    }
    Ok(())
}

/// Arms one failpoint; an empty `actions` disarms it.
pub fn arm(name: &str, actions: &str) -> Result<(), ArmError> {
    if !compiled_in() {
        return Err(ArmError::NotCompiledIn);
    }
    if !points::ALL.contains(&name) {
        return Err(ArmError::Unknown(name.to_string()));
    }
    if actions.is_empty() {
        fail::remove(name);
        return Ok(());
    }
    fail::cfg(name, actions).map_err(|why| ArmError::BadActions {
        name: name.to_string(),
        why,
    })?;
    tracing::warn!(failpoint = name, actions, "failpoint armed");
    Ok(())
}

/// Each armed failpoint and its actions.
pub fn armed() -> Vec<(String, String)> {
    if compiled_in() {
        fail::list()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_arguments_parse_to_their_meaning_and_garbage_to_none() {
        assert_eq!(
            Injected::parse("enospc"),
            Some(Injected::Errno(libc::ENOSPC))
        );
        assert_eq!(Injected::parse(" eio "), Some(Injected::Errno(libc::EIO)));
        assert_eq!(Injected::parse("kill"), Some(Injected::Kill));
        assert_eq!(Injected::parse("hang"), Some(Injected::Hang(None)));
        assert_eq!(
            Injected::parse("hang:250"),
            Some(Injected::Hang(Some(Duration::from_millis(250))))
        );
        for garbage in ["", "hang:", "hang:x", "ENOSPC", "kill9", "hang:-1"] {
            assert_eq!(Injected::parse(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn arming_checks_the_name_and_the_syntax() {
        if !compiled_in() {
            assert_eq!(
                arm(points::WAL_WRITE, "return(eio)"),
                Err(ArmError::NotCompiledIn)
            );
            return;
        }
        let err = arm("no::such::point", "return(eio)").unwrap_err();
        assert_eq!(err, ArmError::Unknown("no::such::point".into()));
        assert!(err.to_string().contains(points::WAL_FSYNC), "{err}");
        assert_eq!(
            arm_all("meta::wal::write"),
            Err(ArmError::NotAnEntry("meta::wal::write".into()))
        );
        assert!(matches!(
            arm(points::PERSIST_FLUSH, "bogus("),
            Err(ArmError::BadActions { .. })
        ));
    }
}
