//! Counters and histograms, one padded block per core so the request path only ever writes to
//! its own cache lines; `/metrics` sums them when scraped.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Ping = 0,
    Tso = 1,
    GetMembers = 2,
    Malformed = 3,
    RegionHeartbeat = 4,
    /// Every other placement request.
    Placement = 5,
}

const KINDS: [(&str, RequestKind); 6] = [
    ("ping", RequestKind::Ping),
    ("tso", RequestKind::Tso),
    ("get_members", RequestKind::GetMembers),
    ("malformed", RequestKind::Malformed),
    ("region_heartbeat", RequestKind::RegionHeartbeat),
    ("placement", RequestKind::Placement),
];
/// Kinds of error replies, as labelled in `meridian_request_errors_total{kind}`.
const ERROR_KINDS: [&str; 9] = [
    "not_leader",
    "invalid_argument",
    "stale_epoch",
    "not_bootstrapped",
    "unavailable",
    "internal",
    "permission_denied",
    "limit_exceeded",
    "refused",
];

/// The label of an error reply.
pub fn error_kind(e: &crate::proto::ErrorReply) -> usize {
    use crate::proto::ErrorReply::*;
    match e {
        NotLeader { .. } => 0,
        InvalidArgument(_) => 1,
        StaleEpoch(_) => 2,
        NotBootstrapped => 3,
        Unavailable(_) => 4,
        Internal(_) => 5,
        PermissionDenied(_) => 6,
        LimitExceeded(_) => 7,
        Refused(_) => 8,
    }
}

/// Upper bounds of the region syncer's lag buckets, in milliseconds; a last bucket holds the rest.
const SYNC_LAG_BOUNDS_MS: [u64; 16] = [
    1, 2, 5, 10, 20, 30, 40, 50, 75, 100, 200, 500, 1_000, 2_000, 5_000, 10_000,
];

/// Batch size buckets: `count <= 2^i` for i in 0..=18.
const BATCH_BUCKETS: usize = 19;
/// Latency buckets: `<= 2^i` microseconds for i in 0..24 (up to ~8 s).
const LATENCY_BUCKETS: usize = 24;

#[repr(align(128))]
#[derive(Default)]
pub struct CoreMetrics {
    requests: [AtomicU64; KINDS.len()],
    errors: [AtomicU64; ERROR_KINDS.len()],
    timestamps: AtomicU64,
    batch: [AtomicU64; BATCH_BUCKETS],
    latency: [AtomicU64; LATENCY_BUCKETS],
    latency_sum_us: AtomicU64,
    connections: AtomicU64,
    connections_refused: AtomicU64,
    handshakes_limited: AtomicU64,
    retries: AtomicU64,
    patrolled: AtomicU64,
    patrol_ns: AtomicU64,
}

impl CoreMetrics {
    #[inline]
    pub fn request(&self, kind: RequestKind) {
        self.requests[kind as usize].fetch_add(1, Relaxed);
    }

    #[inline]
    /// Counts an error reply by its kind.
    pub fn error(&self, e: &crate::proto::ErrorReply) {
        self.errors[error_kind(e)].fetch_add(1, Relaxed);
    }

    pub fn tso_batch(&self, count: u32) {
        self.timestamps.fetch_add(u64::from(count), Relaxed);
        let bucket =
            (count.max(1).next_power_of_two().trailing_zeros() as usize).min(BATCH_BUCKETS - 1);
        self.batch[bucket].fetch_add(1, Relaxed);
    }

    /// Records `n` requests that were answered `elapsed` after their bytes arrived.
    #[inline]
    pub fn latency(&self, elapsed: Duration, n: u64) {
        let us = elapsed.as_micros().min(u128::from(u64::MAX)) as u64;
        let bucket =
            (us.max(1).next_power_of_two().trailing_zeros() as usize).min(LATENCY_BUCKETS - 1);
        self.latency[bucket].fetch_add(n, Relaxed);
        self.latency_sum_us.fetch_add(us * n, Relaxed);
    }

    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Relaxed);
    }

    /// A connection attempt refused because the core holds its limit.
    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Relaxed);
    }

    /// A connection attempt refused because the core started its handshakes for this second.
    pub fn handshake_limited(&self) {
        self.handshakes_limited.fetch_add(1, Relaxed);
    }

    /// A handshake answered with a Retry (address validation under load).
    pub fn retry_sent(&self) {
        self.retries.fetch_add(1, Relaxed);
    }

    /// One patrol tick on this core's shard: `regions` checked in `elapsed` (on the core's own
    /// thread, so its wall time is the tick's CPU time but for preemption).
    pub fn patrol_tick(&self, regions: u64, elapsed: Duration) {
        self.patrolled.fetch_add(regions, Relaxed);
        let ns = elapsed.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.patrol_ns.fetch_add(ns, Relaxed);
    }
}

/// One store's counts for the per-store series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreCounts {
    pub id: u64,
    pub regions: u64,
    pub leaders: u64,
}

/// What the placement side publishes once a second (the persister's tick).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlacementGauges {
    pub regions: u64,
    pub stores: u64,
    /// Changes queued and not yet persisted.
    pub persist_backlog: u64,
    pub per_store: Vec<StoreCounts>,
}

#[derive(Default)]
pub struct Metrics {
    cores: Vec<CoreMetrics>,
    pub window_renewals: AtomicU64,
    pub window_renewal_failures: AtomicU64,
    /// Snapshots this member's syncer applied whole, and copies it loaded from its disk.
    pub sync_snapshots: AtomicU64,
    pub sync_copies_loaded: AtomicU64,
    placement: std::sync::Mutex<PlacementGauges>,
    /// Region records this member's syncer applied, by lag bucket (`SYNC_LAG_BOUNDS_MS`).
    sync_lag: [AtomicU64; SYNC_LAG_BOUNDS_MS.len() + 1],
    sync_lag_sum_ms: AtomicU64,
}

impl Metrics {
    pub fn new(cores: usize) -> Self {
        Metrics {
            cores: (0..cores).map(|_| CoreMetrics::default()).collect(),
            ..Default::default()
        }
    }

    pub fn set_placement(&self, gauges: PlacementGauges) {
        if let Ok(mut g) = self.placement.lock() {
            *g = gauges;
        }
    }

    /// `records` region records this follower applied at most `lag_ms` after the leader
    /// published them.
    pub fn sync_lag(&self, lag_ms: u64, records: u64) {
        let bucket = SYNC_LAG_BOUNDS_MS
            .iter()
            .position(|b| lag_ms <= *b)
            .unwrap_or(SYNC_LAG_BOUNDS_MS.len());
        self.sync_lag[bucket].fetch_add(records, Relaxed);
        self.sync_lag_sum_ms
            .fetch_add(lag_ms.saturating_mul(records), Relaxed);
    }

    /// How many slots there are (cores, then the gRPC front end's).
    pub fn cores(&self) -> usize {
        self.cores.len()
    }

    pub fn core(&self, i: usize) -> &CoreMetrics {
        &self.cores[i % self.cores.len()]
    }

    fn sum(&self, f: impl Fn(&CoreMetrics) -> &AtomicU64) -> u64 {
        self.cores.iter().map(|c| f(c).load(Relaxed)).sum()
    }

    /// Prometheus text exposition format, version 0.0.4.
    pub fn render(&self, serving: bool, is_leader: bool) -> String {
        let mut out = String::with_capacity(4096);
        let _ = writeln!(
            out,
            "# HELP meridian_requests_total Requests handled, by kind."
        );
        let _ = writeln!(out, "# TYPE meridian_requests_total counter");
        for (name, kind) in KINDS {
            let _ = writeln!(
                out,
                "meridian_requests_total{{kind=\"{name}\"}} {}",
                self.sum(|c| &c.requests[kind as usize])
            );
        }
        let _ = writeln!(
            out,
            "# HELP meridian_request_errors_total Requests answered with an error, by kind."
        );
        let _ = writeln!(out, "# TYPE meridian_request_errors_total counter");
        for (i, kind) in ERROR_KINDS.iter().enumerate() {
            let _ = writeln!(
                out,
                "meridian_request_errors_total{{kind=\"{kind}\"}} {}",
                self.sum(|c| &c.errors[i])
            );
        }
        counter(
            &mut out,
            "meridian_tso_timestamps_total",
            "Timestamps handed out.",
            self.sum(|c| &c.timestamps),
        );
        counter(
            &mut out,
            "meridian_connections_total",
            "Client connections accepted.",
            self.sum(|c| &c.connections),
        );
        let _ = writeln!(
            out,
            "# HELP meridian_core_connections_total Client connections accepted, by the core serving them (the last slot is the gRPC front end)."
        );
        let _ = writeln!(out, "# TYPE meridian_core_connections_total counter");
        for (i, c) in self.cores.iter().enumerate() {
            let _ = writeln!(
                out,
                "meridian_core_connections_total{{core=\"{i}\"}} {}",
                c.connections.load(Relaxed)
            );
        }
        counter(
            &mut out,
            "meridian_quic_connections_refused_total",
            "QUIC connection attempts refused at server.max_connections_per_core.",
            self.sum(|c| &c.connections_refused),
        );
        counter(
            &mut out,
            "meridian_quic_handshakes_limited_total",
            "QUIC connection attempts refused at server.handshakes_per_sec.",
            self.sum(|c| &c.handshakes_limited),
        );
        counter(
            &mut out,
            "meridian_quic_retries_total",
            "QUIC handshakes asked to prove their address (server.retry_above_handshakes).",
            self.sum(|c| &c.retries),
        );
        counter(
            &mut out,
            "meridian_patrol_regions_total",
            "Regions the scheduling patrol checked.",
            self.sum(|c| &c.patrolled),
        );
        let _ = writeln!(
            out,
            "# HELP meridian_patrol_seconds_total Time the scheduling patrol's ticks took, every core's summed."
        );
        let _ = writeln!(out, "# TYPE meridian_patrol_seconds_total counter");
        let _ = writeln!(
            out,
            "meridian_patrol_seconds_total {:.6}",
            self.sum(|c| &c.patrol_ns) as f64 / 1e9
        );
        counter(
            &mut out,
            "meridian_tso_window_renewals_total",
            "Window limits persisted.",
            self.window_renewals.load(Relaxed),
        );
        counter(
            &mut out,
            "meridian_tso_window_renewal_failures_total",
            "Window renewals that failed to persist.",
            self.window_renewal_failures.load(Relaxed),
        );
        counter(
            &mut out,
            "meridian_region_sync_snapshots_total",
            "Snapshots of the leader's region index this follower's syncer applied whole.",
            self.sync_snapshots.load(Relaxed),
        );
        counter(
            &mut out,
            "meridian_region_sync_copies_loaded_total",
            "Copies of the region index this member loaded from its own disk at start.",
            self.sync_copies_loaded.load(Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP meridian_tso_serving Whether this node hands out timestamps."
        );
        let _ = writeln!(out, "# TYPE meridian_tso_serving gauge");
        let _ = writeln!(out, "meridian_tso_serving {}", u8::from(serving));
        gauge(
            &mut out,
            "meridian_is_leader",
            "Whether this node holds the leader lease.",
            u64::from(is_leader),
        );
        let placement = self.placement.lock().map(|g| g.clone()).unwrap_or_default();
        gauge(
            &mut out,
            "meridian_regions",
            "Regions in this leader's map (0 on a follower).",
            placement.regions,
        );
        gauge(
            &mut out,
            "meridian_stores",
            "Stores known to this leader (0 on a follower).",
            placement.stores,
        );
        gauge(
            &mut out,
            "meridian_persist_backlog",
            "Placement changes queued and not yet persisted.",
            placement.persist_backlog,
        );
        let _ = writeln!(
            out,
            "# HELP meridian_store_regions Regions each store reported in its last heartbeat."
        );
        let _ = writeln!(out, "# TYPE meridian_store_regions gauge");
        for s in &placement.per_store {
            let _ = writeln!(
                out,
                "meridian_store_regions{{store=\"{}\"}} {}",
                s.id, s.regions
            );
        }
        let _ = writeln!(
            out,
            "# HELP meridian_store_leaders Region leaders each store reported in its last heartbeat."
        );
        let _ = writeln!(out, "# TYPE meridian_store_leaders gauge");
        for s in &placement.per_store {
            let _ = writeln!(
                out,
                "meridian_store_leaders{{store=\"{}\"}} {}",
                s.id, s.leaders
            );
        }

        let batch: Vec<u64> = (0..BATCH_BUCKETS)
            .map(|i| self.sum(|c| &c.batch[i]))
            .collect();
        histogram(
            &mut out,
            "meridian_tso_batch_size",
            "Timestamps asked for per TSO request.",
            (0..BATCH_BUCKETS).map(|i| (1u64 << i) as f64),
            &batch,
            self.sum(|c| &c.timestamps) as f64,
        );
        let latency: Vec<u64> = (0..LATENCY_BUCKETS)
            .map(|i| self.sum(|c| &c.latency[i]))
            .collect();
        histogram(
            &mut out,
            "meridian_request_duration_seconds",
            "Time from a request's bytes arriving to its reply being written.",
            (0..LATENCY_BUCKETS).map(|i| (1u64 << i) as f64 / 1e6),
            &latency,
            self.sum(|c| &c.latency_sum_us) as f64 / 1e6,
        );
        let lag: Vec<u64> = self.sync_lag.iter().map(|b| b.load(Relaxed)).collect();
        histogram(
            &mut out,
            "meridian_region_sync_lag_seconds",
            "Region records this follower's syncer applied, by how long after the leader \
             published them (at most: from when the leader last read its log without them).",
            SYNC_LAG_BOUNDS_MS.iter().map(|ms| *ms as f64 / 1e3),
            &lag,
            self.sync_lag_sum_ms.load(Relaxed) as f64 / 1e3,
        );
        if let Some(cpu) = process_cpu_seconds() {
            // Prometheus' standard name: what a run cost the node, user and system time,
            // whatever the machine's speed.
            let name = "process_cpu_seconds_total";
            let _ = writeln!(
                out,
                "# HELP {name} CPU time this process used, user and system."
            );
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {cpu:.6}");
        }
        out
    }
}

/// User plus system CPU time of this process, from getrusage(2).
fn process_cpu_seconds() -> Option<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: the call succeeded, so the struct is initialised.
    let usage = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    let _ = writeln!(out, "{name} {value}");
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} counter");
    let _ = writeln!(out, "{name} {value}");
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    bounds: impl Iterator<Item = f64>,
    buckets: &[u64],
    sum: f64,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    let mut cumulative = 0;
    for (bound, n) in bounds.zip(buckets) {
        cumulative += n;
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
    }
    // `buckets` may hold one more than `bounds`: what lies past the last bound.
    let total: u64 = buckets.iter().sum();
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
    let _ = writeln!(out, "{name}_sum {sum}");
    let _ = writeln!(out, "{name}_count {total}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_sums_cores_and_accumulates_buckets() {
        let m = Metrics::new(2);
        m.core(0).request(RequestKind::Tso);
        m.core(1).request(RequestKind::Tso);
        m.core(0).tso_batch(1);
        m.core(1).tso_batch(3);
        m.core(1).latency(Duration::from_micros(3), 2);
        m.core(0).patrol_tick(64, Duration::from_millis(2));
        m.core(1).patrol_tick(36, Duration::from_millis(1));
        let text = m.render(true, true);
        assert!(text.contains("meridian_patrol_regions_total 100"), "{text}");
        assert!(
            text.contains("meridian_patrol_seconds_total 0.003000"),
            "{text}"
        );
        assert!(text.contains("meridian_requests_total{kind=\"tso\"} 2"));
        assert!(text.contains("meridian_tso_timestamps_total 4"));
        assert!(text.contains("meridian_tso_batch_size_bucket{le=\"1\"} 1"));
        assert!(text.contains("meridian_tso_batch_size_bucket{le=\"4\"} 2"));
        assert!(text.contains("meridian_request_duration_seconds_bucket{le=\"0.000004\"} 2"));
        assert!(text.contains("meridian_request_duration_seconds_count 2"));
        let cpu: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
            .expect("process CPU time is exported")
            .parse()
            .unwrap();
        assert!(cpu > 0.0, "a running test has used CPU: {cpu}");
    }

    /// Each record counts in the first bucket whose bound holds its lag; past the last bound
    /// it counts only in `+Inf`.
    #[test]
    fn sync_lag_counts_records_by_bucket() {
        let m = Metrics::new(1);
        m.sync_lag(0, 3);
        m.sync_lag(50, 2);
        m.sync_lag(51, 1);
        m.sync_lag(60_000, 4);
        let text = m.render(true, false);
        let name = "meridian_region_sync_lag_seconds";
        assert!(
            text.contains(&format!("{name}_bucket{{le=\"0.001\"}} 3")),
            "{text}"
        );
        assert!(text.contains(&format!("{name}_bucket{{le=\"0.05\"}} 5")));
        assert!(text.contains(&format!("{name}_bucket{{le=\"0.075\"}} 6")));
        assert!(text.contains(&format!("{name}_bucket{{le=\"10\"}} 6")));
        assert!(text.contains(&format!("{name}_bucket{{le=\"+Inf\"}} 10")));
        assert!(text.contains(&format!("{name}_count 10")));
        assert!(text.contains(&format!("{name}_sum 240.151")));
    }
}
