//! What a core does with a request before it touches shared state (the authorization of
//! every role set, `[limits]`), and a small model of placement (region map, range index,
//! store map) the requests are applied to, with its invariants checked after every change.
//! Shared by the `frame_to_request` and `pdpb_request` targets; owns no I/O.

use std::collections::BTreeSet;

use crate::auth::{need_of, Call, Grants, Need, RequestCall};
use crate::placement::{
    check_split, Limits, RangeIndex, Region, RegionMap, RegionShape, Store, StoreMap, StoreState,
};
use crate::proto::{Request, MAX_BATCH_SPLIT, MAX_SCAN_REGIONS};
use crate::tls::cert::Role;

/// The heartbeat clock of the model's store map (time is passed in; its value is irrelevant).
pub(super) const NOW_MS: u64 = 1_000;

/// What the requests of one input are applied to: placement's pure cores, small and fresh.
pub(super) struct Model {
    pub(super) limits: Limits,
    /// The reference model and the index the server routes with, fed the same reports.
    pub(super) map: RegionMap,
    pub(super) index: RangeIndex,
    pub(super) stores: StoreMap,
    /// Keys the requests looked up; probed after every change. A set: an input that reports
    /// one region a thousand times must not probe its edges a thousand times over.
    pub(super) probes: BTreeSet<Vec<u8>>,
}

impl Model {
    pub(super) fn new(segment: usize) -> Model {
        Model {
            limits: Limits::default(),
            map: RegionMap::new(),
            index: RangeIndex::with_segment_size(segment),
            stores: StoreMap::new(),
            probes: BTreeSet::new(),
        }
    }
}

/// What a core does with one request before it touches shared state, then the request applied
/// to the model (`server::placement`'s handler files are the shell that do it for real).
pub(super) fn serve(model: &mut Model, req: &Request) {
    authorize_every_role_set(req.call());
    // A request over a limit is answered `LimitExceeded` and changes nothing.
    if check_limits(&model.limits, req).is_err() {
        return;
    }
    match req {
        Request::Bootstrap { store, region } => {
            put_store(model, store);
            apply(model, std::slice::from_ref(region));
        }
        Request::PutStore { store } => put_store(model, store),
        Request::StoreHeartbeat { store_id, stats } => {
            // Unknown and tombstone stores are refused; a known one is Up afterwards.
            let beat = model.stores.heartbeat(*store_id, *stats, NOW_MS);
            let after = model.stores.get(*store_id);
            assert!(
                beat.is_err()
                    || after
                        .is_some_and(|s| s.store.state != StoreState::Down && s.stats == *stats)
            );
        }
        Request::RegionHeartbeat { region, .. } => apply(model, std::slice::from_ref(region)),
        // As the handler: a batch of a bad size or with one malformed report changes nothing.
        Request::ReportBatchSplit { regions }
            if !regions.is_empty()
                && regions.len() <= MAX_BATCH_SPLIT as usize + 1
                && check_split(regions).is_ok()
                && regions.iter().all(|r| r.validate().is_ok()) =>
        {
            apply(model, regions)
        }
        Request::AskBatchSplit { region, .. } => {
            // Ids only; the region is compared with the known one, never applied.
            let _ = region.validate();
            let _ = model.index.get(region.id);
        }
        Request::GetRegion { key } | Request::GetPrevRegion { key } => {
            model.probes.insert(key.clone());
            lookups_agree(model, key);
        }
        Request::GetRegionById { id } => {
            let from_index = model.index.get(*id).map(|r| r.region());
            assert_eq!(from_index.as_ref(), model.map.get(*id), "region {id} by id");
        }
        Request::ScanRegions { start, end, limit } => {
            model.probes.insert(start.clone());
            model.probes.insert(end.clone());
            scan_agrees(model, start, end, *limit);
        }
        _ => {}
    }
}

/// The role sets: every subset of the four roles, by bit mask over `Role::ALL`.
fn grants_of(mask: usize) -> Grants {
    let roles: Vec<Role> = Role::ALL
        .iter()
        .enumerate()
        .filter(|(i, _)| mask >> i & 1 == 1)
        .map(|(_, r)| *r)
        .collect();
    Grants::of_roles(&roles)
}

/// `call().permitted(..)` for every role set: nothing passes without a role, everything with
/// all of them, a larger set never loses a call a smaller one had, and a refusal names what is
/// missing (SECURITY.md).
pub(super) fn authorize_every_role_set(call: Call) {
    // A pure function of the call's kind: checked once per kind and process, not once per
    // request, as it cost more than the rest of the target (16 role sets, a refusal message
    // formatted for each).
    thread_local! {
        static CHECKED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    let bit = 1u64.checked_shl(call as u32).unwrap_or(0);
    if bit != 0 && CHECKED.get() & bit != 0 {
        return;
    }
    CHECKED.set(CHECKED.get() | bit);
    const SETS: usize = 1 << Role::ALL.len();
    let mut allowed = [false; SETS];
    for (mask, slot) in allowed.iter_mut().enumerate() {
        match call.permitted(grants_of(mask)) {
            Ok(()) => *slot = true,
            Err(denied) => {
                let why = denied.to_string();
                if let Need::Role(role) = need_of(call) {
                    assert!(why.contains(role.name()), "{call:?} refused with {why:?}");
                }
            }
        }
    }
    assert!(!allowed[0], "{call:?} permitted without a role");
    assert!(allowed[SETS - 1], "{call:?} refused with every role");
    for small in 0..SETS {
        for large in 0..SETS {
            if small & large == small && allowed[small] {
                assert!(
                    allowed[large],
                    "{call:?}: roles {large:#b} lose what {small:#b} had"
                );
            }
        }
    }
}

/// The `[limits]` each request is checked against where it enters placement (the same
/// choice as each `server::placement` handler where a request enters); afterwards every key it carries
/// is within `max_key_len`.
fn check_limits(limits: &Limits, req: &Request) -> Result<(), crate::placement::LimitError> {
    let checked = match req {
        Request::Bootstrap { store, region } => limits
            .check_store(store)
            .and_then(|()| limits.check_region(region)),
        Request::PutStore { store } => limits.check_store(store),
        Request::RegionHeartbeat { region, .. } | Request::AskBatchSplit { region, .. } => {
            limits.check_region(region)
        }
        Request::ReportBatchSplit { regions } => {
            regions.iter().try_for_each(|r| limits.check_region(r))
        }
        Request::GetRegion { key } | Request::GetPrevRegion { key } => limits.check_key("key", key),
        Request::ScanRegions { start, end, .. } => limits
            .check_key("scan start", start)
            .and_then(|()| limits.check_key("scan end", end)),
        Request::ReportBuckets { buckets } => limits.check_buckets(buckets),
        _ => Ok(()),
    };
    if checked.is_ok() {
        let max = limits.max_key_len;
        let region_ok = |r: &Region| r.start_key.len() <= max && r.end_key.len() <= max;
        let store_ok = |s: &Store| {
            s.address.len() <= limits.max_address_len
                && s.labels.len() <= limits.max_labels
                && s.labels.iter().all(|l| {
                    l.key.len() <= limits.max_label_len && l.value.len() <= limits.max_label_len
                })
        };
        let within = match req {
            Request::Bootstrap { store, region } => store_ok(store) && region_ok(region),
            Request::PutStore { store } => store_ok(store),
            Request::RegionHeartbeat { region, .. } | Request::AskBatchSplit { region, .. } => {
                region_ok(region)
            }
            Request::ReportBatchSplit { regions } => regions.iter().all(region_ok),
            Request::GetRegion { key } | Request::GetPrevRegion { key } => key.len() <= max,
            Request::ScanRegions { start, end, .. } => start.len() <= max && end.len() <= max,
            Request::ReportBuckets { buckets } => {
                buckets.keys.len() <= limits.max_region_buckets
                    && buckets.keys.iter().all(|k| k.len() <= max)
            }
            _ => true,
        };
        assert!(within, "a request over [limits] passed: {req:?}");
    }
    checked
}

/// A store registration as `put_store` makes it: admitted under `max_stores`, then the store
/// rules; a registered store is never a tombstone.
fn put_store(model: &mut Model, store: &Store) {
    let live = model
        .stores
        .iter()
        .filter(|s| s.store.state != StoreState::Tombstone)
        .count();
    let known = model.stores.get(store.id).is_some();
    if model.limits.admit_store(store.id, known, live).is_err() {
        return;
    }
    if let Ok(status) = model.stores.put(store.clone(), NOW_MS) {
        assert_eq!(status.store.id, store.id);
        assert!(matches!(
            status.store.state,
            StoreState::Up | StoreState::Offline
        ));
    }
}

/// Valid reports applied to the reference map one by one and to the index as one batch (as
/// a read's heartbeats or a split report are): both must accept and refuse the same reports
/// and displace the same regions, and then cover each key at most once.
fn apply(model: &mut Model, regions: &[Region]) {
    let valid: Vec<Region> = regions
        .iter()
        .filter(|r| r.validate().is_ok())
        .cloned()
        .collect();
    if valid.is_empty() {
        return;
    }
    let from_index = model.index.apply_batch(valid.clone());
    assert_eq!(from_index.len(), valid.len());
    for (region, indexed) in valid.iter().zip(from_index) {
        let mapped = model.map.apply(region.clone());
        match (&indexed, &mapped) {
            (Ok(change), Ok(applied)) => {
                assert_eq!(change.removed, applied.removed, "{region:?} displaced");
                assert_eq!(change.epoch_changed, applied.epoch_changed, "{region:?}");
                assert_eq!(&change.route.region(), region);
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "{region:?} refused differently"),
            _ => panic!("index {indexed:?} and map {mapped:?} disagree on {region:?}"),
        }
        if mapped.is_ok() {
            // A report accepted is what the map holds for its id, at its start key.
            assert_eq!(model.map.get(region.id), Some(region));
            assert_eq!(
                model.map.locate(&region.start_key).map(|r| r.id),
                Some(region.id)
            );
        }
        model.probes.insert(region.start_key.clone());
        model.probes.insert(region.end_key.clone());
    }
    covers_each_key_at_most_once(model);
}

/// The map's invariant (P2), through its own lookups: regions in key order never overlap, a
/// key has at most one region holding it and `locate` finds exactly that one; the index holds
/// the same regions in the same order and answers every lookup alike.
fn covers_each_key_at_most_once(model: &Model) {
    let regions: Vec<&Region> = model.map.iter().collect();
    assert_eq!(regions.len(), model.map.len());
    for r in &regions {
        assert!(
            r.end_key.is_empty() || r.start_key < r.end_key,
            "an empty or inverted range held: {r:?}"
        );
    }
    for pair in regions.windows(2) {
        assert!(
            !pair[0].end_key.is_empty() && pair[0].end_key <= pair[1].start_key,
            "overlap: {:?} {:?}",
            pair[0],
            pair[1]
        );
    }
    let snapshot = model.index.snapshot();
    let indexed: Vec<u64> = snapshot.iter().map(|r| r.id()).collect();
    let mapped: Vec<u64> = regions.iter().map(|r| r.id).collect();
    assert_eq!(indexed, mapped, "index and map hold different regions");
    assert_eq!(snapshot.len(), model.map.len());

    let mut keys: BTreeSet<Vec<u8>> = model.probes.clone();
    for r in &regions {
        // The edges of every range and the keys just inside and outside them.
        for edge in [&r.start_key, &r.end_key] {
            let mut after = edge.clone();
            after.push(0);
            keys.insert(after);
            if let Some((&last, init)) = edge.split_last() {
                let mut before = init.to_vec();
                if last > 0 {
                    before.push(last - 1);
                    before.push(0xff);
                }
                keys.insert(before);
            }
            keys.insert(edge.clone());
        }
    }
    let keys: Vec<Vec<u8>> = keys.into_iter().collect();
    for key in &keys {
        // Ranges that are each non-empty and follow one another without overlap (checked
        // above) are in key order, so the one region that can hold a key is the last one
        // starting at or before it: a binary search over the regions, independent of the
        // map's and the index's own lookups.
        let at_or_before = regions.partition_point(|r| r.start_key.as_slice() <= key.as_slice());
        let held_by = at_or_before
            .checked_sub(1)
            .map(|i| regions[i])
            .filter(|r| r.contains(key))
            .map(|r| r.id);
        assert_eq!(
            model.map.locate(key).map(|r| r.id),
            held_by,
            "map locate {key:?}"
        );
        assert_eq!(
            snapshot.locate(key).map(|r| r.id()),
            held_by,
            "index locate {key:?}"
        );
    }
    // The batched lookup (`get_regions`) answers as the one-by-one one.
    let mut many = Vec::with_capacity(keys.len());
    snapshot.locate_many(&keys, &mut many);
    for (key, found) in keys.iter().zip(many) {
        assert_eq!(
            found.map(|r| r.id()),
            model.map.locate(key).map(|r| r.id),
            "locate_many {key:?}"
        );
    }
}

/// GetRegion and GetPrevRegion answered by the index as by the reference map.
fn lookups_agree(model: &Model, key: &[u8]) {
    let snapshot = model.index.snapshot();
    assert_eq!(
        snapshot.locate(key).map(|r| r.id()),
        model.map.locate(key).map(|r| r.id),
        "locate {key:?}"
    );
    assert_eq!(
        snapshot.prev(key).map(|r| r.id()),
        model.map.prev(key).map(|r| r.id),
        "prev {key:?}"
    );
}

/// ScanRegions as the handler answers it (an inverted range is refused; the limit clamped to
/// `MAX_SCAN_REGIONS`), by the index as by the reference map.
fn scan_agrees(model: &Model, start: &[u8], end: &[u8], limit: u32) {
    if !end.is_empty() && end <= start {
        return;
    }
    let limit = if limit == 0 {
        MAX_SCAN_REGIONS
    } else {
        limit.min(MAX_SCAN_REGIONS)
    } as usize;
    let got: Vec<u64> = model
        .index
        .snapshot()
        .scan(start, end, limit)
        .iter()
        .map(|r| r.id())
        .collect();
    let want: Vec<u64> = model
        .map
        .scan(start, end, limit)
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(got, want, "scan {start:?}..{end:?} limit {limit}");
    assert!(got.len() <= limit);
}
