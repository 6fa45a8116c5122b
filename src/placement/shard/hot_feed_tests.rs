//! The shard's feed of its hot cache: what a leader's heartbeats say was written, over PD's
//! report intervals, makes a region hot and counts its flow on its stores. Owns only these
//! tests; the world they use is `tests`'.

use super::tests::{region, view};
use super::*;
use crate::placement::{RegionStats, TimeInterval};

/// A leader's heartbeats carry what was written since its last one; the shard feeds them to
/// its hot cache, which holds the region hot once it has been written above PD's least hot
/// rate for the cache-hits threshold's full intervals (3 of 60 s), and then counts its flow on
/// its stores: as leader on the leader's, as peer on all three. The first report's interval
/// is unknown and counts for nothing; a region written below the least hot rate is never
/// recorded.
#[test]
fn heartbeats_written_above_the_hot_rate_make_the_region_hot() {
    use crate::placement::schedule::{MIN_HOT_WRITE_BYTES_PER_S, REPORT_INTERVAL_S};
    const RATE: u64 = 1 << 20;
    let stores = view(&[(1, 0), (2, 0), (3, 0), (4, 0)]);
    let index = RangeIndex::new();
    let mut shard = Shard::new();
    let mut ids = 900..;
    let hot = region(1, b"", b"m", 1, &[1, 2, 3]);
    let cold = region(2, b"m", b"", 1, &[2, 3, 4]);
    let cold_rate = MIN_HOT_WRITE_BYTES_PER_S as u64 - 1;
    let written = |rate: u64| RegionStats {
        approximate_size: 96 << 20,
        approximate_keys: 960_000,
        written_bytes: rate * REPORT_INTERVAL_S,
        ..RegionStats::default()
    };
    let mut degrees = Vec::new();
    // The first report at 60 s, then one a report interval apart.
    for n in 1..=4u64 {
        let c = stores.at(n * REPORT_INTERVAL_S * 1000);
        for (r, rate) in [(&hot, RATE), (&cold, cold_rate)] {
            shard
                .heartbeat(r, written(rate), &c, &index, &mut || ids.next())
                .unwrap();
        }
        degrees.push(shard.hot.get(&hot).map(|h| h.degree));
    }
    assert_eq!(degrees, vec![None, Some(1), Some(2), Some(3)]);
    let stat = shard.hot.get(&hot).expect("region 1 hot");
    assert_eq!(stat.byte_rate, RATE as f64);
    assert_eq!(
        shard.hot.get(&cold),
        None,
        "written below the least hot rate"
    );
    let c = stores.at(4 * REPORT_INTERVAL_S * 1000);
    let flow = |s: u64, leader: bool| c.store(s).map(|l| l.budget.flow.bytes(leader));
    let rate = Some(RATE as i64);
    assert_eq!(
        (flow(1, true), flow(2, true), flow(1, false), flow(3, false)),
        (rate, Some(0), rate, rate)
    );
    assert_eq!(flow(4, false), Some(0));
}

/// A heartbeat's reported interval (TiKV's start and end, in Unix seconds) is what its written
/// bytes cover, whenever the heartbeat arrives: 10 MiB over a reported 10 s is 1 MiB/s on a
/// region's first report (the shard's arrival times know no interval yet), on one a second
/// after the last and on one 100 s after it. A heartbeat that gives no interval (0/0) is
/// taken over the time since the shard took the region's last one, as before.
#[test]
fn a_reported_interval_sets_the_rate_whatever_the_arrival_gap() {
    const WRITTEN: u64 = 10 << 20;
    // The test clock's 0 in Unix seconds.
    const UNIX_S: u64 = 1_700_000_000;
    let stores = view(&[(1, 0), (2, 0), (3, 0)]);
    let index = RangeIndex::new();
    let mut shard = Shard::new();
    let mut ids = 900..;
    let sized = RegionStats {
        approximate_size: 96 << 20,
        approximate_keys: 960_000,
        ..RegionStats::default()
    };
    // Written over the 10 s before `at_s`, and saying so.
    let given = |at_s: u64| RegionStats {
        written_bytes: WRITTEN,
        interval: TimeInterval {
            start_s: UNIX_S + at_s - 10,
            end_s: UNIX_S + at_s,
        },
        ..sized
    };
    let unsaid = RegionStats {
        written_bytes: WRITTEN,
        ..sized
    };
    let regions = [
        region(1, b"", b"b", 1, &[1, 2, 3]),
        region(2, b"b", b"c", 1, &[1, 2, 3]),
        region(3, b"c", b"d", 1, &[1, 2, 3]),
        region(4, b"d", b"", 1, &[1, 2, 3]),
    ];
    // (region, its reports: when (s), what.)
    let reports: [(usize, Vec<(u64, RegionStats)>); 4] = [
        (0, vec![(100, given(100))]),
        (1, vec![(100, sized), (101, given(101))]),
        (2, vec![(100, sized), (200, given(200))]),
        (3, vec![(100, sized), (160, unsaid)]),
    ];
    for (i, beats) in reports {
        for (at_s, stats) in beats {
            shard
                .heartbeat(
                    &regions[i],
                    stats,
                    &stores.at(at_s * 1000),
                    &index,
                    &mut || ids.next(),
                )
                .unwrap();
        }
    }
    let rate = |id: u64| {
        shard
            .hot
            .get(&regions[id as usize - 1])
            .map(|h| h.byte_rate)
    };
    let per_s = Some((WRITTEN / 10) as f64);
    assert_eq!(
        (rate(1), rate(2), rate(3)),
        (per_s, per_s, per_s),
        "over the reported 10 s"
    );
    assert_eq!(
        rate(4),
        Some(WRITTEN as f64 / 60.0),
        "over the 60 s between arrivals"
    );
}
