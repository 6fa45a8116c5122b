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
/// Batch size buckets: `count <= 2^i` for i in 0..=18.
const BATCH_BUCKETS: usize = 19;
/// Latency buckets: `<= 2^i` microseconds for i in 0..24 (up to ~8 s).
const LATENCY_BUCKETS: usize = 24;

#[repr(align(128))]
#[derive(Default)]
pub struct CoreMetrics {
    requests: [AtomicU64; KINDS.len()],
    errors: AtomicU64,
    timestamps: AtomicU64,
    batch: [AtomicU64; BATCH_BUCKETS],
    latency: [AtomicU64; LATENCY_BUCKETS],
    latency_sum_us: AtomicU64,
    connections: AtomicU64,
}

impl CoreMetrics {
    #[inline]
    pub fn request(&self, kind: RequestKind) {
        self.requests[kind as usize].fetch_add(1, Relaxed);
    }

    #[inline]
    pub fn error(&self) {
        self.errors.fetch_add(1, Relaxed);
    }

    #[inline]
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
}

#[derive(Default)]
pub struct Metrics {
    cores: Vec<CoreMetrics>,
    pub window_renewals: AtomicU64,
    pub window_renewal_failures: AtomicU64,
}

impl Metrics {
    pub fn new(cores: usize) -> Self {
        Metrics {
            cores: (0..cores).map(|_| CoreMetrics::default()).collect(),
            ..Default::default()
        }
    }

    pub fn core(&self, i: usize) -> &CoreMetrics {
        &self.cores[i % self.cores.len()]
    }

    fn sum(&self, f: impl Fn(&CoreMetrics) -> &AtomicU64) -> u64 {
        self.cores.iter().map(|c| f(c).load(Relaxed)).sum()
    }

    /// Prometheus text exposition format, version 0.0.4.
    pub fn render(&self, serving: bool) -> String {
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
        counter(
            &mut out,
            "meridian_request_errors_total",
            "Requests answered with an error.",
            self.sum(|c| &c.errors),
        );
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
        let _ = writeln!(
            out,
            "# HELP meridian_tso_serving Whether this node hands out timestamps."
        );
        let _ = writeln!(out, "# TYPE meridian_tso_serving gauge");
        let _ = writeln!(out, "meridian_tso_serving {}", u8::from(serving));

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
        out
    }
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
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(out, "{name}_sum {sum}");
    let _ = writeln!(out, "{name}_count {cumulative}");
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
        let text = m.render(true);
        assert!(text.contains("meridian_requests_total{kind=\"tso\"} 2"));
        assert!(text.contains("meridian_tso_timestamps_total 4"));
        assert!(text.contains("meridian_tso_batch_size_bucket{le=\"1\"} 1"));
        assert!(text.contains("meridian_tso_batch_size_bucket{le=\"4\"} 2"));
        assert!(text.contains("meridian_request_duration_seconds_bucket{le=\"0.000004\"} 2"));
        assert!(text.contains("meridian_request_duration_seconds_count 2"));
    }
}
