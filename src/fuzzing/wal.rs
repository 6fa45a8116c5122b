//! The `wal_records` target: the embedded store's log as `LocalStore::open` parses it.

use crate::meta::local::{next_valid_record, parse_records};

/// The embedded store's log (or snapshot) file as `LocalStore::open` reads it: the parser
/// returns the records of the good prefix; re-encoding them gives back exactly that prefix,
/// which parses whole to the same records. The search for a valid record after the damage
/// (which tells a torn tail from damage in the middle) finds only a real record.
pub fn wal_records(data: &[u8]) {
    let (records, good) = parse_records(data);
    assert!(good <= data.len());
    let mut encoded = Vec::with_capacity(good);
    for r in &records {
        r.encode(&mut encoded);
    }
    assert!(
        encoded == data[..good],
        "{} records re-encode to other bytes than the {good} they came from",
        records.len()
    );
    let (again, whole) = parse_records(&encoded);
    assert_eq!(
        whole,
        encoded.len(),
        "re-encoded records do not parse whole"
    );
    assert_eq!(again.len(), records.len());
    let mut reencoded = Vec::with_capacity(encoded.len());
    for r in &again {
        r.encode(&mut reencoded);
    }
    assert!(
        reencoded == encoded,
        "records change across a second round trip"
    );

    if good < data.len() {
        if let Some(at) = next_valid_record(data, good) {
            assert!(
                at > good && at < data.len(),
                "valid record at {at}, damage at {good}"
            );
            let (found, _) = parse_records(&data[at..]);
            assert!(!found.is_empty(), "no record where one was found, at {at}");
        }
    }
}
