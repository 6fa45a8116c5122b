//! The run report: printed for people, written as JSON for scripts (the shape DESIGN.md fixes).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::args::{Op, TsoArgs};

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// Percentiles of a histogram of nanoseconds, in microseconds.
    pub fn of(h: &Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1e3;
        Latency {
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: h.mean() / 1e3,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub op: Op,
    pub duration_s: f64,
    pub concurrency: usize,
    pub connections: usize,
    pub offered_rate: Option<u64>,
    pub ops: u64,
    pub ops_per_sec: f64,
    /// Timestamps per second (0 for `ping`).
    pub tso_per_sec: f64,
    pub latency_us: Latency,
    /// Order violations plus duplicates.
    pub violations: u64,
    pub order_violations: u64,
    pub duplicates: u64,
    /// Timestamps kept for the duplicate check.
    pub checked: u64,
    pub errors: u64,
    /// Time during which no worker completed a request (stretches of at least 10 ms).
    pub unavailable_ms: f64,
    pub longest_stall_ms: f64,
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        args: &TsoArgs,
        elapsed: Duration,
        ops: u64,
        errors: u64,
        h: &Histogram<u64>,
        order_violations: u64,
        duplicates: u64,
        checked: u64,
        (unavailable_ms, longest_stall_ms): (f64, f64),
    ) -> Report {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let ops_per_sec = ops as f64 / secs;
        Report {
            op: args.op,
            duration_s: secs,
            concurrency: args.concurrency,
            connections: args.connections,
            offered_rate: args.rate,
            ops,
            ops_per_sec,
            tso_per_sec: if args.op == Op::Ping {
                0.0
            } else {
                ops_per_sec
            },
            latency_us: Latency::of(h),
            violations: order_violations + duplicates,
            order_violations,
            duplicates,
            checked,
            errors,
            unavailable_ms,
            longest_stall_ms,
        }
    }

    pub fn print(&self) {
        let what = if self.op == Op::Ping {
            "pings"
        } else {
            "timestamps"
        };
        println!(
            "{:?}: {} {what} in {:.2} s = {:.0} {what}/s ({} connections, concurrency {}{})",
            self.op,
            self.ops,
            self.duration_s,
            self.ops_per_sec,
            self.connections,
            self.concurrency,
            self.offered_rate
                .map(|r| format!(", offered {r}/s"))
                .unwrap_or_default(),
        );
        let l = &self.latency_us;
        println!(
            "latency us: p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}  mean {:.1}",
            l.p50, l.p90, l.p99, l.p999, l.max, l.mean
        );
        println!(
            "checker: {} violations ({} out of order, {} duplicates among {} timestamps kept); {} errors",
            self.violations, self.order_violations, self.duplicates, self.checked, self.errors
        );
        println!(
            "unavailable: {:.1} ms in total (no request completed for >= 10 ms), longest {:.1} ms",
            self.unavailable_ms, self.longest_stall_ms
        );
    }
}
