//! The embedded store against its promises: what was acknowledged survives reopen,
//! compaction and failures at every step (which poison it); a torn tail is cut, damage in the
//! middle refused; large values are read back from the files wherever they live.

use std::fs::{self, OpenOptions};

use super::compact::COMPACT_AFTER;
use super::slot::{Source, INLINE_MAX};
use super::*;
#[cfg(feature = "failpoints")]
use crate::failpoint::points;

/// Arms `point` to fail with `errno` until the scenario ends. `fail`'s registry is one per
/// process: the scenario's lock keeps the tests that arm failpoints from overlapping.
#[cfg(feature = "failpoints")]
fn fail(point: &str, errno: &str) {
    crate::failpoint::arm(point, &format!("return({errno})")).unwrap();
}

#[cfg(feature = "failpoints")]
fn heal(point: &str) {
    crate::failpoint::arm(point, "").unwrap();
}

#[cfg(feature = "failpoints")]
#[test]
fn a_failed_write_or_fsync_poisons_the_store_and_loses_nothing_acknowledged() {
    let _scenario = fail::FailScenario::setup();
    for (point, errno) in [(points::WAL_WRITE, "enospc"), (points::WAL_FSYNC, "eio")] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        store.put_blocking(b"limit", b"100").unwrap();
        fail(point, errno);
        let err = store.put_blocking(b"limit", b"200").unwrap_err();
        assert!(
            err.to_string().contains("log append failed"),
            "{point}: {err}"
        );
        heal(point);
        // The step works again, but the store stays poisoned: no write after a failure.
        let err = store.put_blocking(b"other", b"1").unwrap_err();
        assert!(err.to_string().contains("poisoned"), "{err}");
        // What was acknowledged is what a reader sees, and what a restart finds.
        assert_eq!(store.get_blocking(b"limit").unwrap(), Some(b"100".to_vec()));
        drop(store);
        // After a restart: the acknowledged value, or the refused one if its bytes did
        // reach the disk (a failed fsync promises nothing either way), never anything else.
        let store = LocalStore::open(dir.path()).unwrap();
        let found = store.get_blocking(b"limit").unwrap().unwrap();
        assert!(found == b"100" || found == b"200", "{point}: {found:?}");
        store.put_blocking(b"limit", b"300").unwrap();
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.get_blocking(b"limit").unwrap(), Some(b"300".to_vec()));
    }
}

/// The bytes of the record a put of `key` = `value` appends.
fn record_bytes(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::new();
    Record {
        op: OP_PUT,
        key: key.to_vec(),
        value: value.to_vec(),
    }
    .encode(&mut bytes);
    bytes
}

/// Cuts the log at `len` bytes, as a crash leaves it when only that much reached the disk.
fn crash_at(dir: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(dir.join(WAL))
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Where to tear a record of `len` bytes: every byte of its header and key, then steps
/// through its value, and its last bytes.
fn cuts(len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = (0..len.min(32)).collect();
    cuts.extend((32..len).step_by(97));
    cuts.extend(len.saturating_sub(3)..len);
    cuts
}

/// A crash in the middle of an append leaves any prefix of the record in flight (the rest
/// never left the page cache): wherever a small or a large (out-of-line) record is torn,
/// reopening keeps every acknowledged write, has none of the torn one, and takes new writes
/// that survive the next reopen.
#[test]
fn a_crash_tearing_the_write_in_flight_anywhere_keeps_every_acknowledged_one() {
    let big = value(INLINE_MAX * 4, 3);
    for torn_value in [b"200".to_vec(), value(INLINE_MAX * 3, 9)] {
        let torn = record_bytes(b"limit", &torn_value);
        for cut in cuts(torn.len()) {
            let dir = tempfile::tempdir().unwrap();
            let store = LocalStore::open(dir.path()).unwrap();
            store.put_blocking(b"limit", b"100").unwrap();
            store.put_blocking(b"bucket", &big).unwrap();
            drop(store);
            let acknowledged = fs::metadata(dir.path().join(WAL)).unwrap().len();
            let mut wal = OpenOptions::new()
                .append(true)
                .open(dir.path().join(WAL))
                .unwrap();
            std::io::Write::write_all(&mut wal, &torn).unwrap();
            drop(wal);
            crash_at(dir.path(), acknowledged + cut as u64);
            let store = LocalStore::open(dir.path()).unwrap();
            assert_eq!(
                store.get_blocking(b"limit").unwrap(),
                Some(b"100".to_vec()),
                "torn at {cut} of {}",
                torn.len()
            );
            assert_eq!(store.get_blocking(b"bucket").unwrap(), Some(big.clone()));
            assert_eq!(
                fs::metadata(dir.path().join(WAL)).unwrap().len(),
                acknowledged,
                "the torn bytes are cut"
            );
            store.put_blocking(b"limit", b"300").unwrap();
            store.put_blocking(b"after", &big).unwrap();
            drop(store);
            let store = LocalStore::open(dir.path()).unwrap();
            assert_eq!(store.get_blocking(b"limit").unwrap(), Some(b"300".to_vec()));
            assert_eq!(store.get_blocking(b"after").unwrap(), Some(big.clone()));
            assert_eq!(store.get_blocking(b"bucket").unwrap(), Some(big.clone()));
        }
    }
}

/// An fsync fails once and would succeed the next time: the write is refused and the store
/// refuses every later one (fail-stop, no retry), though the disk works again. A crash then
/// leaves any prefix of the refused record; the restart finds the acknowledged value, or the
/// refused one only if all of it reached the disk, and takes writes again.
#[cfg(feature = "failpoints")]
#[test]
fn an_fsync_failing_once_then_a_crash_loses_nothing_acknowledged() {
    let _scenario = fail::FailScenario::setup();
    let refused = record_bytes(b"limit", b"200");
    for cut in cuts(refused.len()).into_iter().chain([refused.len()]) {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        store.put_blocking(b"limit", b"100").unwrap();
        let acknowledged = fs::metadata(dir.path().join(WAL)).unwrap().len();
        crate::failpoint::arm(points::WAL_FSYNC, "1*return(eio)").unwrap();
        let err = store.put_blocking(b"limit", b"200").unwrap_err();
        assert!(err.to_string().contains("log append failed"), "{err}");
        // The failpoint has spent its one failure: an fsync would succeed now.
        let err = store.put_blocking(b"limit", b"300").unwrap_err();
        assert!(err.to_string().contains("poisoned"), "{err}");
        assert_eq!(store.get_blocking(b"limit").unwrap(), Some(b"100".to_vec()));
        heal(points::WAL_FSYNC);
        drop(store);
        crash_at(dir.path(), acknowledged + cut as u64);
        let store = LocalStore::open(dir.path()).unwrap();
        let expect: &[u8] = if cut == refused.len() { b"200" } else { b"100" };
        assert_eq!(
            store.get_blocking(b"limit").unwrap(),
            Some(expect.to_vec()),
            "refused record cut at {cut} of {}",
            refused.len()
        );
        store.put_blocking(b"limit", b"400").unwrap();
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(store.get_blocking(b"limit").unwrap(), Some(b"400".to_vec()));
    }
}

#[cfg(feature = "failpoints")]
#[test]
fn a_failure_at_any_compaction_step_poisons_and_reopen_keeps_every_write() {
    let _scenario = fail::FailScenario::setup();
    for point in [
        points::SNAPSHOT_WRITE,
        points::SNAPSHOT_RENAME,
        points::WAL_TRUNCATE,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        for i in 0..COMPACT_AFTER - 1 {
            store
                .put_blocking(format!("k{i}").as_bytes(), b"v")
                .unwrap();
        }
        fail(point, "eio");
        // This write is in the log (fsynced) but the compaction it triggers fails.
        let err = store.put_blocking(b"last", b"v").unwrap_err();
        assert!(err.to_string().contains("compaction"), "{point}: {err}");
        heal(point);
        assert!(
            store.put_blocking(b"after", b"v").is_err(),
            "{point}: not poisoned"
        );
        drop(store);
        let store = LocalStore::open(dir.path()).unwrap();
        assert_eq!(
            store.get_blocking(b"last").unwrap(),
            Some(b"v".to_vec()),
            "{point}"
        );
        let last = format!("k{}", COMPACT_AFTER - 2);
        assert_eq!(
            store.get_blocking(last.as_bytes()).unwrap(),
            Some(b"v".to_vec())
        );
        assert_eq!(store.get_blocking(b"after").unwrap(), None);
    }
}

#[test]
fn damage_in_the_middle_of_the_log_is_an_error_naming_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    store.put_blocking(b"a", b"1").unwrap();
    let first_end = fs::metadata(dir.path().join(WAL)).unwrap().len();
    store.put_blocking(b"b", b"2").unwrap();
    store.put_blocking(b"c", b"3").unwrap();
    drop(store);
    let wal = dir.path().join(WAL);
    let mut bytes = fs::read(&wal).unwrap();
    // Flip a byte inside the second record's body: the third stays valid after it.
    bytes[first_end as usize + 10] ^= 0xff;
    fs::write(&wal, &bytes).unwrap();
    match LocalStore::open(dir.path()) {
        Err(MetaError::Corrupt(why)) => {
            assert!(
                why.contains(&format!("damaged at byte {first_end}")),
                "{why}"
            )
        }
        other => panic!("opened a log damaged in the middle: {:?}", other.err()),
    }
    // Nothing was cut: the bytes are as they were.
    assert_eq!(fs::read(&wal).unwrap(), bytes);
}

#[test]
fn a_zero_filled_tail_is_torn_not_damage() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    store.put_blocking(b"a", b"1").unwrap();
    drop(store);
    let wal = dir.path().join(WAL);
    let mut bytes = fs::read(&wal).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(&wal, &bytes).unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(store.get_blocking(b"a").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn survives_reopen_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    for i in 0..(COMPACT_AFTER + 10) {
        store
            .put_blocking(format!("k{}", i % 100).as_bytes(), &i.to_le_bytes())
            .unwrap();
    }
    store.delete_blocking(b"k50").unwrap();
    drop(store);
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(store.get_blocking(b"k50").unwrap(), None);
    let last = COMPACT_AFTER + 9;
    assert_eq!(
        store
            .get_blocking(format!("k{}", last % 100).as_bytes())
            .unwrap(),
        Some(last.to_le_bytes().to_vec())
    );
}

#[test]
fn torn_tail_is_cut_and_earlier_records_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    store.put_blocking(b"a", b"1").unwrap();
    store.put_blocking(b"b", b"2").unwrap();
    drop(store);
    let wal = dir.path().join(WAL);
    let len = fs::metadata(&wal).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(store.get_blocking(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(store.get_blocking(b"b").unwrap(), None);
    store.put_blocking(b"c", b"3").unwrap();
    drop(store);
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(store.get_blocking(b"c").unwrap(), Some(b"3".to_vec()));
}

#[tokio::test]
async fn create_keeps_the_first_value_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(store.create(b"id", b"1").await.unwrap(), b"1");
    assert_eq!(store.create(b"id", b"2").await.unwrap(), b"1");
    drop(store);
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(store.create(b"id", b"3").await.unwrap(), b"1");
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, usize, u8),
    Delete(u8),
    Reopen,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0u8..12, prop_oneof![0usize..INLINE_MAX + 2, 0usize..3000], any::<u8>())
            .prop_map(|(k, len, b)| Op::Put(k, len, b)),
        2 => (0u8..12).prop_map(Op::Delete),
        1 => Just(Op::Reopen),
    ]
}

fn value(len: usize, b: u8) -> Vec<u8> {
    (0..len).map(|i| b.wrapping_add(i as u8)).collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Against a plain map: every read, after every write, compaction and reopen, whether
    /// the value is held in memory or read back from the log or a snapshot.
    #[test]
    fn reads_what_was_written_wherever_the_value_lives(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let store = LocalStore::open(dir.path()).unwrap();
            // Compacts often, so values move from the log to snapshots and between them.
            store.inner.lock().unwrap().compact_after = 5;
            store
        };
        let mut store = open();
        let mut model = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, len, b) => {
                    store.put_blocking(&[b'k', k], &value(len, b)).unwrap();
                    model.insert(vec![b'k', k], value(len, b));
                }
                Op::Delete(k) => {
                    store.delete_blocking(&[b'k', k]).unwrap();
                    model.remove(&vec![b'k', k]);
                }
                Op::Reopen => {
                    drop(store);
                    store = open();
                }
            }
            for k in 0..12u8 {
                proptest::prop_assert_eq!(store.get_blocking(&[b'k', k]).unwrap(), model.get(&vec![b'k', k]).cloned());
            }
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let scanned = rt.block_on(store.scan(b"k", 0)).unwrap();
            let expected: Vec<KeyValue> = model.clone().into_iter().collect();
            proptest::prop_assert_eq!(scanned, expected);
        }
    }
}

#[test]
fn large_values_are_read_back_from_the_files_not_held() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::open(dir.path()).unwrap();
    let big = value(10_000, 7);
    store.put_blocking(b"bucket", &big).unwrap();
    store.put_blocking(b"small", b"1").unwrap();
    {
        let inner = store.inner.lock().unwrap();
        assert!(matches!(
            inner.map[&b"bucket"[..]],
            Slot::At {
                source: Source::Wal,
                ..
            }
        ));
        assert!(matches!(inner.map[&b"small"[..]], Slot::Inline(_)));
    }
    store.inner.lock().unwrap().compact().unwrap();
    assert!(matches!(
        store.inner.lock().unwrap().map[&b"bucket"[..]],
        Slot::At {
            source: Source::Snap,
            ..
        }
    ));
    assert_eq!(store.get_blocking(b"bucket").unwrap(), Some(big.clone()));
    drop(store);
    let store = LocalStore::open(dir.path()).unwrap();
    assert_eq!(store.get_blocking(b"bucket").unwrap(), Some(big));
}

#[test]
fn damaged_snapshot_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(SNAP), b"garbage!garbage!").unwrap();
    assert!(matches!(
        LocalStore::open(dir.path()),
        Err(MetaError::Corrupt(_))
    ));
}
