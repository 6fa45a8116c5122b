//! The drawing's own checks: the run's buckets, ticks and labels as the panels use them, and
//! an SVG drawn from a small run. Must not touch: anything beyond `plot`'s functions.

use super::*;
use crate::latency::second_histogram;

const SECOND: u64 = 1_000_000_000;

fn total(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60 * SECOND, 3).unwrap();
    for v in values {
        h.record(v).unwrap();
    }
    h
}

/// `n` seconds at about 1000 ops each, latencies 100-300 µs, nothing in second 3.
fn seconds(n: usize) -> Vec<Histogram<u32>> {
    (0..n)
        .map(|s| {
            let mut h = second_histogram();
            if s != 3 {
                for i in 0..1000u64 {
                    h.record(100_000 + i * 200).unwrap();
                }
            }
            h
        })
        .collect()
}

fn run<'a>(h: &'a Histogram<u64>, buckets: Vec<Bucket>, duration_s: f64) -> Run<'a> {
    Run {
        title: "loadgen tso: synthetic".into(),
        unit: "timestamps",
        latency: "latency",
        duration_s,
        buckets,
        stalls: vec![(3.0, 4.0)],
        failovers: vec![(3.5, "leader n2".into())],
        histogram: h,
    }
}

/// The text of every `<text>` element.
pub(crate) fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

fn stroke(c: RGBColor) -> String {
    format!("stroke=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2)
}

#[test]
fn buckets_are_seconds_and_a_short_tail_joins_the_last() {
    let b = buckets(&seconds(6), 5.1);
    assert_eq!(b.len(), 5);
    assert_eq!((b[0].from_s, b[0].to_s, b[0].ops), (0.0, 1.0, 1000));
    assert_eq!((b[3].ops, b[3].p50_us), (0, 0.0));
    // Second 5 (0.1 s long) is folded into second 4.
    assert_eq!((b[4].from_s, b[4].to_s, b[4].ops), (4.0, 5.1, 2000));
    assert!((b[0].p50_us - 200.0).abs() < 5.0, "{:?}", b[0]);
    assert!(b[0].p99_us > b[0].p50_us && b[0].p999_us >= b[0].p99_us);
    // A run shorter than a second has one bucket of its own length.
    let short = buckets(&seconds(1), 0.4);
    assert_eq!((short[0].to_s, short[0].per_sec()), (0.4, 2500.0));
    assert!(buckets(&[], 0.0).is_empty());
}

#[test]
fn svg_has_every_series_and_axis_title() {
    let h = total((0..10_000u64).map(|i| 100_000 + i * 20));
    let svg = svg(&run(&h, buckets(&seconds(8), 8.0), 8.0)).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // The throughput line and the three percentile lines are paths of their own colours.
    for colour in [
        THROUGHPUT,
        PERCENTILES[0].1,
        PERCENTILES[1].1,
        PERCENTILES[2].1,
    ] {
        assert!(
            svg.lines()
                .any(|l| l.contains("<polyline") && l.contains(&stroke(colour))),
            "no line of {colour:?}"
        );
    }
    assert!(svg.contains(&stroke(DISTRIBUTION)));
    let texts = texts(&svg);
    for text in [
        "loadgen tso: synthetic",
        "Throughput per second",
        "time (s)",
        "timestamps/s",
        "Latency per second",
        "latency (log scale)",
        "p50",
        "p99",
        "p99.9",
        "Latency by percentile, whole run (10k timestamps)",
        "p99.9 300 µs",
        "max 300 µs",
        "percentile (log scale of 1 / (1 - p))",
        "50%",
        "99%",
        "99.9%",
        "99.99%",
        "unavailable: 1 s",
        "new leader seen",
        "leader n2",
    ] {
        assert!(
            texts.iter().any(|t| t == text || t.starts_with(text)),
            "no {text:?} in {texts:?}"
        );
    }
    // The percentile lines break over the empty second rather than dropping to zero: two
    // stretches, and the key's sample.
    let p50 = stroke(PERCENTILES[0].1);
    let lines = svg
        .lines()
        .filter(|l| l.contains("<polyline") && l.contains(&p50));
    assert_eq!(lines.count(), 3);
}

#[test]
fn empty_and_one_second_runs_draw() {
    let empty = total([]);
    let svg0 = svg(&Run {
        stalls: vec![],
        failovers: vec![],
        ..run(&empty, vec![], 0.0)
    })
    .unwrap();
    assert!(svg0.contains("nothing completed") && svg0.contains("time (s)"));
    let h = total([SECOND / 1000, SECOND / 500]);
    let one = buckets(&seconds(1), 1.0);
    let svg1 = svg(&run(&h, one, 1.0)).unwrap();
    assert!(svg1.contains(&stroke(THROUGHPUT)) && svg1.contains(&stroke(DISTRIBUTION)));
    // A run that ended before its first second, with every second empty.
    let quiet = buckets(&[second_histogram()], 0.2);
    assert!(svg(&run(&empty, quiet, 0.2)).is_ok());
}

#[test]
fn labels() {
    assert_eq!(
        [1.0, 2.0, 10.0, 100.0, 1e3, 1e4, 1e5].map(percentile_label),
        ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
    );
    assert_eq!(percentile_ticks(1e4), vec![1.0, 2.0, 10.0, 100.0, 1e3, 1e4]);
    assert_eq!(log_ticks(30.0, 600.0), vec![50.0, 100.0, 200.0, 500.0]);
    assert_eq!(si(3_989_615.0), "3.99M");
    assert_eq!(si(12_500.0), "12.5k");
    assert_eq!(si(950.0), "950");
    assert_eq!(duration_us(233.9), "234 µs");
    assert_eq!(duration_us(1118.2), "1.12 ms");
    assert_eq!(duration_us(2.5e6), "2.5 s");
}
