//! `loadgen compare`: the allocator's cost next to the transport's. Alternates rounds of
//! `--op ping` and `--op tso-raw` (one request in flight per stream, no batching) against the
//! same server and reports the median of each and their ratio, so a noisy machine moves both
//! sides of the ratio alike.

use serde::Serialize;

use crate::args::{Op, TsoArgs};
use crate::report::Report;
use crate::run;

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub ping_per_sec: Vec<f64>,
    pub tso_raw_per_sec: Vec<f64>,
    pub median_ping_per_sec: f64,
    pub median_tso_raw_per_sec: f64,
    /// Median TSO requests/s over median pings/s.
    pub ratio: f64,
    pub violations: u64,
    pub errors: u64,
}

/// The median; the mean of the middle two for an even count.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub async fn run(args: &TsoArgs, rounds: usize) -> anyhow::Result<Comparison> {
    let (mut ping, mut tso, mut violations, mut errors) = (Vec::new(), Vec::new(), 0, 0);
    for round in 1..=rounds.max(1) {
        for op in [Op::Ping, Op::TsoRaw] {
            let mut a = args.clone();
            a.op = op;
            let r: Report = run::run(&a).await?;
            println!(
                "round {round}: {:?} {:.0}/s, p99 {:.1} us",
                op, r.ops_per_sec, r.latency_us.p99
            );
            violations += r.violations;
            errors += r.errors;
            match op {
                Op::Ping => ping.push(r.ops_per_sec),
                _ => tso.push(r.ops_per_sec),
            }
        }
    }
    let (mp, mt) = (median(&ping), median(&tso));
    Ok(Comparison {
        ratio: if mp > 0.0 { mt / mp } else { 0.0 },
        ping_per_sec: ping,
        tso_raw_per_sec: tso,
        median_ping_per_sec: mp,
        median_tso_raw_per_sec: mt,
        violations,
        errors,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
