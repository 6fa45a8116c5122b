//! Fuzz targets: one entry point per decoder that reads bytes Meridian did not write itself or
//! that may be damaged on disk, each followed by what the process does with the result before
//! it touches shared state. Owns those entry points, the oracles they assert and the generator
//! of their seed corpus ([`seeds`]); serves nothing and is never called by `meridian serve`.
//!
//! Each target takes any bytes and must return normally: a decoder answers garbage with an
//! error, never a panic. The only panics here are the assertions of invariants (the decoded
//! value re-encodes to itself, the region map covers each key at most once, the shared index
//! agrees with its reference model, ...), so a panic is a bug either way.
//!
//! Run by `fuzz/` (cargo-fuzz with libFuzzer, nightly; `scripts/fuzz`) and replayed over the
//! committed corpus `fuzz/corpus/<target>/` by `tests/fuzz_corpus.rs` on stable.

use std::fmt::Debug;

use prost::Message;
use rkyv::util::AlignedVec;

use crate::auth::{need_of, Call, Grants, Need};
use crate::election::{check_member_urls, decode_member, encode_member, read_member};
use crate::kvproto::{metapb, pdpb};
use crate::meta::local::{next_valid_record, parse_records};
use crate::placement::{
    Epoch, Label, Limits, Peer, PeerRole, RangeIndex, Region, RegionMap, RegionStats, Store,
    StoreMap, StoreState, StoreStats, StoreStatus, MAX_PEERS,
};
use crate::proto::{
    self, FrameDecoder, FrameError, Request, MAX_BATCH_SCAN_REGIONS, MAX_BATCH_SPLIT,
    MAX_SCAN_REGIONS,
};
use crate::server::dispatch::Action;
use crate::server::grpc::convert;
use crate::server::placement::persist::{
    decode_regions, decode_store, encode_regions, encode_store,
};
use crate::tls::cert::Role;
use crate::tso::MAX_COUNT;

/// A fuzz target: takes any bytes, returns normally unless it found a bug.
pub type Target = fn(&[u8]);

/// Every target by name: the name is the `fuzz/fuzz_targets/<name>.rs` binary and the
/// `fuzz/corpus/<name>/` directory.
pub const TARGETS: [(&str, Target); 5] = [
    ("frame_to_request", frame_to_request),
    ("wal_records", wal_records),
    ("region_bucket", region_bucket),
    ("member_record", member_record),
    ("pdpb_request", pdpb_request),
];

// ---------------------------------------------------------------------------------------------
// frame_to_request
// ---------------------------------------------------------------------------------------------

/// QUIC stream bytes, as a core reads them: `data[0]` says how the rest arrives (low 6 bits:
/// chunk length, 0 for all at once; high 2 bits: the test index's segment size - 1, so small
/// maps still cross segment boundaries), the rest is the stream. Every complete request goes
/// through what the core does before it touches shared state (`Action::of`, the authorization
/// of every role set, `[limits]`), then is applied to a small region map and index whose
/// invariants are checked. The same bytes fed at once must give the same requests and errors.
pub fn frame_to_request(data: &[u8]) {
    let Some((&ctl, stream)) = data.split_first() else {
        return;
    };
    let piece = usize::from(ctl & 0x3f);
    let mut model = Model::new(1 + usize::from(ctl >> 6));

    let mut decoder = FrameDecoder::new();
    let mut in_pieces = Vec::new();
    // Outcomes already served: each read serves only the frames it completed.
    let mut served = 0;
    let chunks: Box<dyn Iterator<Item = &[u8]>> = if piece == 0 {
        Box::new(std::iter::once(stream))
    } else {
        Box::new(stream.chunks(piece))
    };
    for chunk in chunks {
        decoder.extend(chunk);
        let fatal = drain(&mut decoder, &mut in_pieces);
        for req in in_pieces[served..].iter().flatten() {
            serve(&mut model, req);
            wire_round_trip(req);
        }
        served = in_pieces.len();
        if fatal {
            // The core resets the stream: nothing after a frame that is too large is read.
            break;
        }
        // Between reads the core gives back what a large frame made the buffers grow to.
        decoder.trim();
    }

    // Framing does not depend on how the stream was cut into reads.
    let mut whole = FrameDecoder::new();
    whole.extend(stream);
    let mut at_once = Vec::new();
    drain(&mut whole, &mut at_once);
    assert_eq!(
        in_pieces, at_once,
        "reads cut differently decode differently"
    );
}

/// What one frame became: the request a core acts on, or the error it answers (or resets with).
type Outcome = Result<Request, Refusal>;

/// Why a frame is not a request. Only the kind: rkyv's messages name buffer addresses, which
/// differ between two decoders of the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Not a valid archive: answered `InvalidArgument`, the stream goes on.
    Frame,
    /// A valid archive that does not deserialise to a request: answered the same way.
    Request,
    /// A header over `MAX_FRAME_LEN`: the stream is reset, with the announced length.
    TooLarge(usize),
}

/// Takes every complete frame out of `decoder`, as a core does after a read. True when the
/// stream hit a fatal error (an oversized frame).
fn drain(decoder: &mut FrameDecoder, out: &mut Vec<Outcome>) -> bool {
    loop {
        match decoder.next_request() {
            Ok(None) => return false,
            Ok(Some(Ok(archived))) => out.push(
                Action::of(archived)
                    .map(|action| {
                        let req = request_of(action);
                        // `Action::call` and `Request::call` classify one request alike.
                        assert_eq!(request_of_call(&req), req.call());
                        req
                    })
                    .map_err(|_| Refusal::Request),
            ),
            Ok(Some(Err(_))) => out.push(Err(Refusal::Frame)),
            Err(e) => {
                let FrameError::TooLarge(len) = e else {
                    panic!("a fatal frame error other than an oversized header: {e}");
                };
                assert!(len > proto::MAX_FRAME_LEN);
                out.push(Err(Refusal::TooLarge(len)));
                return true;
            }
        }
    }
}

/// The request an action carries, whole (the three the core answers without deserialising
/// are rebuilt), so outcomes compare.
fn request_of(action: Action) -> Request {
    match action {
        Action::Ping => Request::Ping,
        Action::Tso(count) => Request::Tso { count },
        Action::GetMembers => Request::GetMembers,
        Action::Placement(req) => *req,
    }
}

/// The call the core authorizes for `req`: `Action::call` of the action it would build.
fn request_of_call(req: &Request) -> Call {
    let action = match req {
        Request::Ping => Action::Ping,
        Request::Tso { count } => Action::Tso(*count),
        Request::GetMembers => Action::GetMembers,
        other => Action::Placement(Box::new(other.clone())),
    };
    action.call()
}

/// A request the server decoded re-encodes (as a client frames it) to a frame that decodes to
/// the same request.
fn wire_round_trip(req: &Request) {
    let (mut scratch, mut framed) = (AlignedVec::new(), Vec::new());
    // Only a request larger than a frame fails to encode; fuzzed ones are far smaller, but
    // the limit is the encoder's to enforce, not an invariant of the input.
    if proto::encode(req, &mut scratch, &mut framed).is_err() {
        return;
    }
    let mut decoder = FrameDecoder::new();
    decoder.extend(&framed);
    let mut back = Vec::new();
    drain(&mut decoder, &mut back);
    assert_eq!(
        back,
        vec![Ok(req.clone())],
        "a request does not survive re-encoding"
    );
}

// ---------------------------------------------------------------------------------------------
// The checks before shared state, and a small model of placement
// ---------------------------------------------------------------------------------------------

/// The heartbeat clock of the model's store map (time is passed in; its value is irrelevant).
const NOW_MS: u64 = 1_000;

/// What the requests of one input are applied to: placement's pure cores, small and fresh.
struct Model {
    limits: Limits,
    /// The reference model and the index the server routes with, fed the same reports.
    map: RegionMap,
    index: RangeIndex,
    stores: StoreMap,
    /// Keys the requests looked up; probed after every change.
    probes: Vec<Vec<u8>>,
}

impl Model {
    fn new(segment: usize) -> Model {
        Model {
            limits: Limits::default(),
            map: RegionMap::new(),
            index: RangeIndex::with_segment_size(segment),
            stores: StoreMap::new(),
            probes: Vec::new(),
        }
    }
}

/// What a core does with one request before it touches shared state, then the request applied
/// to the model (`server::placement::handler` is the shell that does it for real).
fn serve(model: &mut Model, req: &Request) {
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
            model.probes.push(key.clone());
            lookups_agree(model, key);
        }
        Request::GetRegionById { id } => {
            let from_index = model.index.get(*id).map(|r| r.region.clone());
            assert_eq!(from_index.as_ref(), model.map.get(*id), "region {id} by id");
        }
        Request::ScanRegions { start, end, limit } => {
            model.probes.push(start.clone());
            model.probes.push(end.clone());
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
fn authorize_every_role_set(call: Call) {
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
/// choice as `server::placement::handler::check_limits`); afterwards every key it carries
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
                assert_eq!(&change.route.region, region);
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
        model.probes.push(region.start_key.clone());
        model.probes.push(region.end_key.clone());
    }
    covers_each_key_at_most_once(model);
}

/// The map's invariant (P2), through its own lookups: regions in key order never overlap, a
/// key has at most one region holding it and `locate` finds exactly that one; the index holds
/// the same regions in the same order and answers every lookup alike.
fn covers_each_key_at_most_once(model: &Model) {
    let regions: Vec<&Region> = model.map.iter().collect();
    assert_eq!(regions.len(), model.map.len());
    for pair in regions.windows(2) {
        assert!(
            !pair[0].end_key.is_empty() && pair[0].end_key <= pair[1].start_key,
            "overlap: {:?} {:?}",
            pair[0],
            pair[1]
        );
    }
    let snapshot = model.index.snapshot();
    let indexed: Vec<u64> = snapshot.iter().map(|r| r.region.id).collect();
    let mapped: Vec<u64> = regions.iter().map(|r| r.id).collect();
    assert_eq!(indexed, mapped, "index and map hold different regions");
    assert_eq!(snapshot.len(), model.map.len());

    let mut keys: Vec<Vec<u8>> = model.probes.clone();
    for r in &regions {
        // The edges of every range and the keys just inside and outside them.
        for edge in [&r.start_key, &r.end_key] {
            let mut after = edge.clone();
            after.push(0);
            keys.push(after);
            if let Some((&last, init)) = edge.split_last() {
                let mut before = init.to_vec();
                if last > 0 {
                    before.push(last - 1);
                    before.push(0xff);
                }
                keys.push(before);
            }
            keys.push(edge.clone());
        }
    }
    for key in &keys {
        let holders: Vec<u64> = regions
            .iter()
            .filter(|r| r.contains(key))
            .map(|r| r.id)
            .collect();
        assert!(holders.len() <= 1, "key {key:?} covered by {holders:?}");
        let held_by = holders.first().copied();
        assert_eq!(
            model.map.locate(key).map(|r| r.id),
            held_by,
            "map locate {key:?}"
        );
        assert_eq!(
            snapshot.locate(key).map(|r| r.region.id),
            held_by,
            "index locate {key:?}"
        );
    }
    // The batched lookup (`get_regions`) answers as the one-by-one one.
    let mut many = Vec::with_capacity(keys.len());
    snapshot.locate_many(&keys, &mut many);
    for (key, found) in keys.iter().zip(many) {
        assert_eq!(
            found.map(|r| r.region.id),
            model.map.locate(key).map(|r| r.id),
            "locate_many {key:?}"
        );
    }
}

/// GetRegion and GetPrevRegion answered by the index as by the reference map.
fn lookups_agree(model: &Model, key: &[u8]) {
    let snapshot = model.index.snapshot();
    assert_eq!(
        snapshot.locate(key).map(|r| r.region.id),
        model.map.locate(key).map(|r| r.id),
        "locate {key:?}"
    );
    assert_eq!(
        snapshot.prev(key).map(|r| r.region.id),
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
        .map(|r| r.region.id)
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

// ---------------------------------------------------------------------------------------------
// wal_records
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// region_bucket
// ---------------------------------------------------------------------------------------------

/// A persisted value as a new leader's load reads it: a region bucket (then the index is
/// rebuilt from whatever it holds, resolving overlaps and malformed entries by the heartbeat
/// rules) and, from the same bytes, a store record (then the store map is reset to it).
pub fn region_bucket(data: &[u8]) {
    if let Ok(regions) = decode_regions(data) {
        let encoded = encode_regions(&regions)
            .unwrap_or_else(|e| panic!("decoded regions do not encode: {e}"));
        assert_eq!(decode_regions(&encoded).as_ref(), Ok(&regions));

        let index = RangeIndex::with_segment_size(2);
        let refused = index.reset(regions.clone());
        let snapshot = index.snapshot();
        assert!(snapshot.len() + refused <= regions.len());
        let held: Vec<&Region> = snapshot.iter().map(|r| &r.region).collect();
        for pair in held.windows(2) {
            assert!(
                !pair[0].end_key.is_empty() && pair[0].end_key <= pair[1].start_key,
                "loaded overlap: {:?} {:?}",
                pair[0],
                pair[1]
            );
        }
        for r in &held {
            assert!(r.validate().is_ok(), "loaded a malformed region {r:?}");
            assert_eq!(
                snapshot.locate(&r.start_key).map(|x| x.region.id),
                Some(r.id)
            );
            assert_eq!(index.get(r.id).map(|x| x.region.clone()).as_ref(), Some(*r));
        }
    }
    if let Ok(store) = decode_store(data) {
        let encoded =
            encode_store(&store).unwrap_or_else(|e| panic!("a decoded store does not encode: {e}"));
        assert_eq!(decode_store(&encoded).as_ref(), Ok(&store));
        let mut map = StoreMap::new();
        let id = store.id;
        map.reset(
            vec![StoreStatus {
                store,
                stats: StoreStats::default(),
                last_heartbeat_ms: NOW_MS,
            }],
            NOW_MS,
        );
        assert!(map.get(id).is_some());
    }
}

// ---------------------------------------------------------------------------------------------
// member_record
// ---------------------------------------------------------------------------------------------

/// A member record read back from etcd (the leader key, the member registry): it decodes to a
/// member that re-encodes to itself, and `read_member` accepts exactly the decoded members
/// whose addresses parse.
pub fn member_record(data: &[u8]) {
    let decoded = decode_member(data);
    if let Some(m) = &decoded {
        assert_eq!(decode_member(&encode_member(m)).as_ref(), Some(m));
    }
    match read_member(b"/meridian/fuzz/members/m/info", data) {
        Ok(m) => {
            assert_eq!(Some(&m), decoded.as_ref());
            assert_eq!(check_member_urls(&m), Ok(()));
        }
        Err(_) => {
            if let Some(m) = &decoded {
                assert!(check_member_urls(m).is_err(), "{m:?} refused");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// pdpb_request
// ---------------------------------------------------------------------------------------------

/// The pdpb request messages the gRPC front end decodes, by the first byte of a
/// `pdpb_request` input (modulo their number). The names are the seeds'.
pub const PDPB_KINDS: [&str; 23] = [
    "get_members",
    "tso",
    "bootstrap",
    "is_bootstrapped",
    "alloc_id",
    "get_store",
    "put_store",
    "get_all_stores",
    "store_heartbeat",
    "region_heartbeat",
    "get_region",
    "get_prev_region",
    "get_region_by_id",
    "query_region",
    "scan_regions",
    "batch_scan_regions",
    "ask_batch_split",
    "report_batch_split",
    "get_gc_safe_point",
    "update_gc_safe_point",
    "update_service_gc_safe_point",
    "get_gc_state",
    "get_cluster_info",
];

/// A gRPC request body: `data[0]` picks the message ([`PDPB_KINDS`]), the rest is its
/// protobuf encoding. It is decoded as tonic does (prost), converted as `grpc::service` does
/// (`grpc::convert`, header-free argument checks), and every Meridian request it becomes goes
/// through the same checks and model as a QUIC one.
pub fn pdpb_request(data: &[u8]) {
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    let Some((call, requests)) = pdpb_to_requests(usize::from(kind) % PDPB_KINDS.len(), body)
    else {
        return;
    };
    authorize_every_role_set(call);
    let mut model = Model::new(2);
    for req in &requests {
        serve(&mut model, req);
        wire_round_trip(req);
    }
}

/// Decodes a message as tonic does; one that decodes encodes to bytes that decode to it again.
/// Compared as values, not bytes: `StoreStats` holds a map, which prost keeps in a `HashMap`
/// and encodes in no fixed order.
fn decode<M: Message + Default + PartialEq + Debug>(body: &[u8]) -> Option<M> {
    let msg = M::decode(body).ok()?;
    let encoded = msg.encode_to_vec();
    assert_eq!(encoded.len(), msg.encoded_len());
    let again = M::decode(encoded.as_slice())
        .unwrap_or_else(|e| panic!("{msg:?} re-encoded does not decode: {e}"));
    if equals_itself(&msg) {
        assert_eq!(again, msg, "a message changes across a round trip");
    } else {
        // A NaN double (`SlowTrend`) makes a message unequal to itself; its size still holds.
        assert_eq!(again.encoded_len(), encoded.len(), "{msg:?}");
    }
    Some(msg)
}

/// False only for a value holding a NaN.
#[allow(clippy::eq_op)] // Comparing a value with itself is the point: NaN is not equal to NaN.
fn equals_itself<T: PartialEq>(x: &T) -> bool {
    x == x
}

/// A region converted from kvproto converts back to the same kvproto region and again to
/// itself (a leader the report names must be one of its peers to survive, as `leader_to`
/// takes it from the peers).
fn region_from(r: &metapb::Region, leader: Option<&metapb::Peer>) -> Option<Region> {
    let region = convert::region_from(r, leader).ok()?;
    if region.leader.is_none() || region.leader_peer().is_some() {
        let back = convert::region_from(
            &convert::region_to(&region),
            convert::leader_to(&region).as_ref(),
        );
        assert_eq!(back.as_ref(), Ok(&region), "kvproto round trip");
    }
    Some(region)
}

/// A store converted from kvproto survives the way back.
fn store_from(s: &metapb::Store) -> Option<Store> {
    let store = convert::store_from(s).ok()?;
    let status = StoreStatus {
        store: store.clone(),
        stats: StoreStats::default(),
        last_heartbeat_ms: NOW_MS,
    };
    assert_eq!(
        convert::store_from(&convert::store_to(&status)).as_ref(),
        Ok(&store),
        "kvproto round trip"
    );
    Some(store)
}

/// The call a message is authorized as and the Meridian requests the service makes of it, or
/// `None` when it does not decode or the service refuses it before any request (no store, no
/// region, a malformed one, a bad count, ...).
fn pdpb_to_requests(kind: usize, body: &[u8]) -> Option<(Call, Vec<Request>)> {
    Some(match PDPB_KINDS[kind] {
        "get_members" => {
            decode::<pdpb::GetMembersRequest>(body)?;
            (Call::GetMembers, vec![Request::GetMembers])
        }
        "tso" => {
            let r = decode::<pdpb::TsoRequest>(body)?;
            if r.count == 0 || r.count > MAX_COUNT {
                return None;
            }
            (Call::Tso, vec![Request::Tso { count: r.count }])
        }
        "bootstrap" => {
            let r = decode::<pdpb::BootstrapRequest>(body)?;
            let store = store_from(r.store.as_ref()?)?;
            let region_pb = r.region.as_ref()?;
            let region = region_from(region_pb, region_pb.peers.first())?;
            (Call::Bootstrap, vec![Request::Bootstrap { store, region }])
        }
        "is_bootstrapped" => {
            decode::<pdpb::IsBootstrappedRequest>(body)?;
            (Call::IsBootstrapped, vec![Request::IsBootstrapped])
        }
        "alloc_id" => {
            decode::<pdpb::AllocIdRequest>(body)?;
            (Call::AllocId, vec![Request::AllocId])
        }
        "get_store" => {
            let r = decode::<pdpb::GetStoreRequest>(body)?;
            (Call::GetStore, vec![Request::GetStore { id: r.store_id }])
        }
        "put_store" => {
            let r = decode::<pdpb::PutStoreRequest>(body)?;
            let store = store_from(r.store.as_ref()?)?;
            (Call::PutStore, vec![Request::PutStore { store }])
        }
        "get_all_stores" => {
            decode::<pdpb::GetAllStoresRequest>(body)?;
            (
                Call::GetAllStores,
                vec![Request::GetAllStores { after_id: 0 }],
            )
        }
        "store_heartbeat" => {
            let r = decode::<pdpb::StoreHeartbeatRequest>(body)?;
            let stats = r.stats.as_ref()?;
            let converted = convert::store_stats_from(stats);
            assert_eq!(converted.region_count, u64::from(stats.region_count));
            let req = Request::StoreHeartbeat {
                store_id: stats.store_id,
                stats: converted,
            };
            (Call::StoreHeartbeat, vec![req])
        }
        "region_heartbeat" => {
            let r = decode::<pdpb::RegionHeartbeatRequest>(body)?;
            let region = region_from(r.region.as_ref()?, r.leader.as_ref())?;
            let stats: RegionStats = convert::region_stats_from(&r);
            (
                Call::RegionHeartbeat,
                vec![Request::RegionHeartbeat { region, stats }],
            )
        }
        "get_region" => {
            let r = decode::<pdpb::GetRegionRequest>(body)?;
            let req = Request::GetRegion { key: r.region_key };
            (Call::GetRegion, vec![req])
        }
        "get_prev_region" => {
            let r = decode::<pdpb::GetRegionRequest>(body)?;
            let req = Request::GetPrevRegion { key: r.region_key };
            (Call::GetPrevRegion, vec![req])
        }
        "get_region_by_id" => {
            let r = decode::<pdpb::GetRegionByIdRequest>(body)?;
            let req = Request::GetRegionById { id: r.region_id };
            (Call::GetRegionById, vec![req])
        }
        "query_region" => {
            // `query_one`: each key, each previous key, each id but 0, one lookup apiece.
            let r = decode::<pdpb::QueryRegionRequest>(body)?;
            let keys = r.keys.into_iter().map(|key| Request::GetRegion { key });
            let prev = r
                .prev_keys
                .into_iter()
                .map(|key| Request::GetPrevRegion { key });
            let ids = r
                .ids
                .into_iter()
                .filter(|&id| id != 0)
                .map(|id| Request::GetRegionById { id });
            (Call::QueryRegion, keys.chain(prev).chain(ids).collect())
        }
        "scan_regions" => {
            let r = decode::<pdpb::ScanRegionsRequest>(body)?;
            let limit = u32::try_from(r.limit.max(0)).unwrap_or(u32::MAX);
            let req = Request::ScanRegions {
                start: r.start_key,
                end: r.end_key,
                limit,
            };
            (Call::ScanRegions, vec![req])
        }
        "batch_scan_regions" => {
            // `batch_scan_regions`: the ranges checked in order and apart, then the first
            // page of each.
            let r = decode::<pdpb::BatchScanRegionsRequest>(body)?;
            let limit = match u32::try_from(r.limit) {
                Ok(n) if n > 0 => n.min(MAX_BATCH_SCAN_REGIONS),
                _ => MAX_BATCH_SCAN_REGIONS,
            };
            assert!((1..=MAX_BATCH_SCAN_REGIONS).contains(&limit));
            let mut last_end: Option<&Vec<u8>> = None;
            let mut scans = Vec::with_capacity(r.ranges.len());
            for range in &r.ranges {
                if !range.end_key.is_empty() && range.end_key < range.start_key {
                    return None;
                }
                if let Some(prev_end) = last_end {
                    if prev_end.is_empty() || range.start_key < *prev_end {
                        return None;
                    }
                }
                last_end = Some(&range.end_key);
                scans.push(Request::ScanRegions {
                    start: range.start_key.clone(),
                    end: range.end_key.clone(),
                    limit: limit.min(MAX_SCAN_REGIONS),
                });
            }
            (Call::ScanRegions, scans)
        }
        "ask_batch_split" => {
            let r = decode::<pdpb::AskBatchSplitRequest>(body)?;
            let region = region_from(r.region.as_ref()?, None)?;
            let req = Request::AskBatchSplit {
                region,
                count: r.split_count,
            };
            (Call::AskBatchSplit, vec![req])
        }
        "report_batch_split" => {
            let r = decode::<pdpb::ReportBatchSplitRequest>(body)?;
            let regions = r
                .regions
                .iter()
                .map(|region| region_from(region, None))
                .collect::<Option<Vec<_>>>()?;
            (
                Call::ReportBatchSplit,
                vec![Request::ReportBatchSplit { regions }],
            )
        }
        "get_gc_safe_point" => {
            decode::<pdpb::GetGcSafePointRequest>(body)?;
            (Call::GetGcSafePoint, vec![Request::GetGcSafePoint])
        }
        "update_gc_safe_point" => {
            let r = decode::<pdpb::UpdateGcSafePointRequest>(body)?;
            let req = Request::UpdateGcSafePoint {
                safe_point: r.safe_point,
            };
            (Call::UpdateGcSafePoint, vec![req])
        }
        "update_service_gc_safe_point" => {
            let r = decode::<pdpb::UpdateServiceGcSafePointRequest>(body)?;
            // A service id that is not UTF-8 is an invalid argument.
            let service_id = String::from_utf8(r.service_id).ok()?;
            let req = Request::UpdateServiceGcSafePoint {
                service_id,
                ttl_secs: r.ttl,
                safe_point: r.safe_point,
            };
            (Call::UpdateServiceGcSafePoint, vec![req])
        }
        "get_gc_state" => {
            // The keyspace only chooses between the unified state and "not found"; the
            // request path reads the GC safe point either way.
            decode::<pdpb::GetGcStateRequest>(body)?;
            (Call::GetGcState, vec![Request::GetGcSafePoint])
        }
        "get_cluster_info" => {
            decode::<pdpb::GetClusterInfoRequest>(body)?;
            (Call::GetClusterInfo, Vec::new())
        }
        other => unreachable!("PDPB_KINDS names {other} without a decoder"),
    })
}

// ---------------------------------------------------------------------------------------------
// The seed corpus
// ---------------------------------------------------------------------------------------------

/// One committed seed: `fuzz/corpus/<target>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    pub target: &'static str,
    pub name: String,
    pub bytes: Vec<u8>,
}

fn peers(first_id: u64, stores: &[u64]) -> Vec<Peer> {
    stores
        .iter()
        .enumerate()
        .map(|(i, &store_id)| Peer {
            id: first_id + i as u64,
            store_id,
            role: if i < 3 {
                PeerRole::Voter
            } else {
                PeerRole::Learner
            },
        })
        .collect()
}

fn region(id: u64, start: &[u8], end: &[u8], version: u64) -> Region {
    let peers = peers(id * 10, &[1, 2, 3]);
    Region {
        id,
        start_key: start.to_vec(),
        end_key: end.to_vec(),
        epoch: Epoch {
            conf_ver: 1,
            version,
        },
        leader: Some(peers[0].id),
        peers,
    }
}

fn store(id: u64) -> Store {
    Store {
        id,
        address: format!("10.0.0.{id}:20160"),
        labels: vec![Label {
            key: "zone".into(),
            value: format!("z{id}"),
        }],
        state: StoreState::Up,
    }
}

/// Small valid inputs for every target, encoded from real messages: every request kind framed,
/// a request stream that bootstraps, splits and looks up, a log with a few records (whole,
/// torn, damaged), region buckets and a store record, member records, and every pdpb request.
/// `tests/fuzz_corpus.rs` writes them to `fuzz/corpus/` and checks the committed ones match.
pub fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    let mut add = |target: &'static str, name: &str, bytes: Vec<u8>| {
        out.push(Seed {
            target,
            name: name.to_string(),
            bytes,
        })
    };

    // frame_to_request: [ctl] ++ frames.
    let frame = |ctl: u8, reqs: &[Request]| {
        let (mut scratch, mut bytes) = (AlignedVec::new(), vec![ctl]);
        for r in reqs {
            // A seed is a small literal message; it always fits a frame.
            proto::encode(r, &mut scratch, &mut bytes).expect("a seed request encodes");
        }
        bytes
    };
    let everything = region(1, b"", b"", 1);
    let whole_store = Store { id: 1, ..store(1) };
    let first = Region {
        peers: vec![Peer {
            id: 2,
            store_id: 1,
            role: PeerRole::Voter,
        }],
        leader: Some(2),
        ..region(3, b"", b"", 1)
    };
    let each_kind: Vec<(&str, Request)> = vec![
        ("ping", Request::Ping),
        ("tso", Request::Tso { count: 10 }),
        ("get_members", Request::GetMembers),
        (
            "bootstrap",
            Request::Bootstrap {
                store: whole_store,
                region: first,
            },
        ),
        ("is_bootstrapped", Request::IsBootstrapped),
        ("alloc_id", Request::AllocId),
        ("put_store", Request::PutStore { store: store(4) }),
        ("get_store", Request::GetStore { id: 4 }),
        ("get_all_stores", Request::GetAllStores { after_id: 0 }),
        (
            "store_heartbeat",
            Request::StoreHeartbeat {
                store_id: 4,
                stats: StoreStats {
                    capacity: 1 << 40,
                    available: 1 << 39,
                    used_size: 1 << 30,
                    region_count: 3,
                    leader_count: 1,
                },
            },
        ),
        (
            "region_heartbeat",
            Request::RegionHeartbeat {
                region: everything.clone(),
                stats: RegionStats {
                    approximate_size: 96 << 20,
                    approximate_keys: 1_000_000,
                    written_bytes: 4096,
                    written_keys: 16,
                },
            },
        ),
        (
            "get_region",
            Request::GetRegion {
                key: b"k1".to_vec(),
            },
        ),
        (
            "get_prev_region",
            Request::GetPrevRegion { key: b"m".to_vec() },
        ),
        ("get_region_by_id", Request::GetRegionById { id: 1 }),
        (
            "scan_regions",
            Request::ScanRegions {
                start: b"a".to_vec(),
                end: b"z".to_vec(),
                limit: 10,
            },
        ),
        (
            "ask_batch_split",
            Request::AskBatchSplit {
                region: everything.clone(),
                count: 2,
            },
        ),
        (
            "report_batch_split",
            Request::ReportBatchSplit {
                regions: vec![region(2, b"", b"m", 2), region(1, b"m", b"", 2)],
            },
        ),
        ("get_gc_safe_point", Request::GetGcSafePoint),
        (
            "update_gc_safe_point",
            Request::UpdateGcSafePoint { safe_point: 42 },
        ),
        (
            "update_service_gc_safe_point",
            Request::UpdateServiceGcSafePoint {
                service_id: "cdc".into(),
                ttl_secs: 60,
                safe_point: 41,
            },
        ),
    ];
    for (name, req) in &each_kind {
        add(
            "frame_to_request",
            name,
            frame(0, std::slice::from_ref(req)),
        );
    }
    // A leader's life: the first region, splits reported as heartbeats and as a batch, a
    // merge, lookups at the new edges; cut into 7-byte reads over a one-region segment.
    let history = [
        Request::RegionHeartbeat {
            region: everything.clone(),
            stats: RegionStats::default(),
        },
        Request::RegionHeartbeat {
            region: region(2, b"", b"g", 2),
            stats: RegionStats::default(),
        },
        Request::RegionHeartbeat {
            region: region(1, b"g", b"", 2),
            stats: RegionStats::default(),
        },
        Request::ReportBatchSplit {
            regions: vec![region(4, b"g", b"p", 3), region(1, b"p", b"", 3)],
        },
        Request::GetRegion { key: b"h".to_vec() },
        Request::GetPrevRegion { key: b"p".to_vec() },
        Request::ScanRegions {
            start: Vec::new(),
            end: Vec::new(),
            limit: 0,
        },
        // A stale replay, then a merge of [g, p) into [p, ..).
        Request::RegionHeartbeat {
            region: everything.clone(),
            stats: RegionStats::default(),
        },
        Request::RegionHeartbeat {
            region: region(1, b"g", b"", 4),
            stats: RegionStats::default(),
        },
        Request::GetRegionById { id: 4 },
    ];
    add(
        "frame_to_request",
        "history_in_7_byte_reads",
        frame(7, &history),
    );
    add(
        "frame_to_request",
        "history_segment_of_4",
        frame(0xc0, &history),
    );
    // A malformed frame between two good ones, and a header over the limit.
    let mut bad = frame(0, &[Request::Ping]);
    bad.extend_from_slice(&5u32.to_le_bytes());
    bad.extend_from_slice(b"junk!");
    bad.extend_from_slice(&frame(0, &[Request::Tso { count: 1 }])[1..]);
    bad.extend_from_slice(&(proto::MAX_FRAME_LEN as u32 + 1).to_le_bytes());
    add("frame_to_request", "malformed_then_oversized", bad);

    // wal_records: the log `LocalStore` writes.
    let record = |op: u8, key: &[u8], value: &[u8], out: &mut Vec<u8>| {
        let mut body = vec![op];
        body.extend_from_slice(&(key.len() as u32).to_le_bytes());
        body.extend_from_slice(key);
        body.extend_from_slice(value);
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
    };
    let mut wal = Vec::new();
    record(1, b"/meridian/1/tso/limit", b"1735689600000", &mut wal);
    record(1, b"/meridian/1/id/end", b"4096", &mut wal);
    record(2, b"/meridian/1/tso/limit", b"", &mut wal);
    record(1, b"/meridian/1/bootstrapped", b"1", &mut wal);
    // The parser's own encoder agrees with the layout written out above.
    let (parsed, good) = parse_records(&wal);
    assert_eq!((parsed.len(), good), (4, wal.len()));
    add("wal_records", "four_records", wal.clone());
    let mut torn = wal.clone();
    torn.truncate(wal.len() - 3);
    add("wal_records", "torn_tail", torn);
    let mut damaged = wal.clone();
    damaged[12] ^= 0xff;
    add("wal_records", "damaged_first_record", damaged);
    let mut zeros = wal;
    zeros.extend_from_slice(&[0; 64]);
    add("wal_records", "zero_filled_tail", zeros);

    // region_bucket: buckets as the persister writes them, and a store record.
    let bucket = |regions: &[Region]| encode_regions(regions).expect("a seed bucket encodes");
    add(
        "region_bucket",
        "one_region",
        bucket(std::slice::from_ref(&everything)),
    );
    add(
        "region_bucket",
        "three_adjacent",
        bucket(&[
            region(2, b"", b"g", 2),
            region(4, b"g", b"p", 3),
            region(1, b"p", b"", 3),
        ]),
    );
    add(
        "region_bucket",
        "overlapping_and_malformed",
        bucket(&[
            region(1, b"a", b"m", 1),
            region(2, b"f", b"z", 2),
            Region {
                peers: Vec::new(),
                ..region(3, b"x", b"y", 1)
            },
            Region {
                peers: peers(70, &(1..=MAX_PEERS as u64).collect::<Vec<_>>()),
                ..region(7, b"z", b"", 1)
            },
        ]),
    );
    add("region_bucket", "empty_bucket", bucket(&[]));
    add(
        "region_bucket",
        "store_record",
        encode_store(&store(4)).expect("a seed store encodes"),
    );

    // member_record: what a node publishes, one from before the gRPC front end, a bad address.
    let member = |grpc: &str, admin: &str| crate::proto::MemberInfo {
        name: "m0".into(),
        id: 7_131_642_219_453_013_345,
        client_url: "10.0.0.1:2379".into(),
        admin_url: admin.into(),
        grpc_url: grpc.into(),
    };
    add(
        "member_record",
        "with_grpc",
        encode_member(&member("https://10.0.0.1:2379", "https://10.0.0.1:2380")),
    );
    add(
        "member_record",
        "before_grpc",
        br#"{"admin_url":"https://[::1]:2380","client_url":"[::1]:2379","id":1,"name":"m1"}"#
            .to_vec(),
    );
    add(
        "member_record",
        "bad_admin_url",
        encode_member(&member("", "ftp://h:1/x")),
    );

    // pdpb_request: [kind] ++ protobuf body, every kind.
    let header = || {
        Some(pdpb::RequestHeader {
            cluster_id: 7,
            sender_id: 1,
            ..Default::default()
        })
    };
    let meta_region = |r: &Region| convert::region_to(r);
    let meta_store = |s: &Store| {
        convert::store_to(&StoreStatus {
            store: s.clone(),
            stats: StoreStats::default(),
            last_heartbeat_ms: 0,
        })
    };
    let bodies: Vec<Vec<u8>> = vec![
        pdpb::GetMembersRequest { header: header() }.encode_to_vec(),
        pdpb::TsoRequest {
            header: header(),
            count: 10,
            dc_location: String::new(),
        }
        .encode_to_vec(),
        pdpb::BootstrapRequest {
            header: header(),
            store: Some(meta_store(&store(1))),
            region: Some(meta_region(&Region {
                peers: vec![Peer {
                    id: 2,
                    store_id: 1,
                    role: PeerRole::Voter,
                }],
                leader: Some(2),
                ..region(3, b"", b"", 1)
            })),
        }
        .encode_to_vec(),
        pdpb::IsBootstrappedRequest { header: header() }.encode_to_vec(),
        pdpb::AllocIdRequest {
            header: header(),
            count: 1,
        }
        .encode_to_vec(),
        pdpb::GetStoreRequest {
            header: header(),
            store_id: 1,
        }
        .encode_to_vec(),
        pdpb::PutStoreRequest {
            header: header(),
            store: Some(meta_store(&store(4))),
        }
        .encode_to_vec(),
        pdpb::GetAllStoresRequest {
            header: header(),
            exclude_tombstone_stores: true,
        }
        .encode_to_vec(),
        pdpb::StoreHeartbeatRequest {
            header: header(),
            stats: Some(pdpb::StoreStats {
                store_id: 4,
                capacity: 1 << 40,
                available: 1 << 39,
                used_size: 1 << 30,
                region_count: 3,
                ..Default::default()
            }),
        }
        .encode_to_vec(),
        pdpb::RegionHeartbeatRequest {
            header: header(),
            leader: convert::leader_to(&everything),
            region: Some(meta_region(&everything)),
            bytes_written: 4096,
            approximate_size: 96 << 20,
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::GetRegionRequest {
            header: header(),
            region_key: b"k1".to_vec(),
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::GetRegionRequest {
            header: header(),
            region_key: b"m".to_vec(),
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::GetRegionByIdRequest {
            header: header(),
            region_id: 1,
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::QueryRegionRequest {
            header: header(),
            need_buckets: false,
            ids: vec![0, 1, 4],
            keys: vec![b"a".to_vec(), b"q".to_vec()],
            prev_keys: vec![b"g".to_vec()],
        }
        .encode_to_vec(),
        pdpb::ScanRegionsRequest {
            header: header(),
            start_key: b"a".to_vec(),
            limit: 10,
            end_key: b"z".to_vec(),
        }
        .encode_to_vec(),
        pdpb::BatchScanRegionsRequest {
            header: header(),
            ranges: vec![
                pdpb::KeyRange {
                    start_key: b"a".to_vec(),
                    end_key: b"c".to_vec(),
                },
                pdpb::KeyRange {
                    start_key: b"m".to_vec(),
                    end_key: Vec::new(),
                },
            ],
            limit: 0,
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::AskBatchSplitRequest {
            header: header(),
            region: Some(meta_region(&everything)),
            split_count: 2,
            ..Default::default()
        }
        .encode_to_vec(),
        pdpb::ReportBatchSplitRequest {
            header: header(),
            regions: vec![
                meta_region(&region(2, b"", b"m", 2)),
                meta_region(&region(1, b"m", b"", 2)),
            ],
        }
        .encode_to_vec(),
        pdpb::GetGcSafePointRequest { header: header() }.encode_to_vec(),
        pdpb::UpdateGcSafePointRequest {
            header: header(),
            safe_point: 42,
        }
        .encode_to_vec(),
        pdpb::UpdateServiceGcSafePointRequest {
            header: header(),
            service_id: b"cdc".to_vec(),
            ttl: 60,
            safe_point: 41,
        }
        .encode_to_vec(),
        pdpb::GetGcStateRequest {
            header: header(),
            keyspace_scope: Some(pdpb::KeyspaceScope {
                keyspace: Some(pdpb::keyspace_scope::Keyspace::KeyspaceId(0)),
            }),
            exclude_gc_barriers: false,
            include_global_gc_barriers: true,
        }
        .encode_to_vec(),
        pdpb::GetClusterInfoRequest {
            header: Some(pdpb::ResponseHeader {
                cluster_id: 7,
                error: None,
            }),
        }
        .encode_to_vec(),
    ];
    assert_eq!(bodies.len(), PDPB_KINDS.len(), "one seed per pdpb kind");
    for (kind, (name, body)) in PDPB_KINDS.iter().zip(bodies).enumerate() {
        let mut bytes = vec![kind as u8];
        bytes.extend_from_slice(&body);
        add("pdpb_request", name, bytes);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(target: &str, name: &str) -> Vec<u8> {
        seeds()
            .into_iter()
            .find(|s| s.target == target && s.name == name)
            .unwrap_or_else(|| panic!("no seed {target}/{name}"))
            .bytes
    }

    /// The seeds are valid inputs, so fuzzing starts past the decoders' first checks.
    #[test]
    fn seeds_decode_to_what_they_were_made_of() {
        for s in seeds() {
            let input = &s.bytes;
            match s.target {
                "frame_to_request" => {
                    let mut decoder = FrameDecoder::new();
                    decoder.extend(&input[1..]);
                    let mut out = Vec::new();
                    drain(&mut decoder, &mut out);
                    if s.name == "malformed_then_oversized" {
                        assert!(out.contains(&Err(Refusal::Frame)), "{out:?}");
                    } else {
                        assert!(!out.is_empty() && out.iter().all(Result::is_ok), "{s:?}");
                    }
                }
                "wal_records" => {
                    // Whole records, or damage with a whole record after it.
                    let (records, good) = parse_records(input);
                    let found = !records.is_empty() || next_valid_record(input, good).is_some();
                    assert!(found, "{}", s.name);
                }
                "region_bucket" => assert!(
                    decode_regions(input).is_ok() || decode_store(input).is_ok(),
                    "{}",
                    s.name
                ),
                "member_record" => assert!(decode_member(input).is_some(), "{}", s.name),
                "pdpb_request" => {
                    let kind = usize::from(input[0]);
                    assert_eq!(PDPB_KINDS[kind], s.name);
                    let converted = pdpb_to_requests(kind, &input[1..]);
                    assert!(converted.is_some(), "{}", s.name);
                }
                other => panic!("a seed for an unknown target {other}"),
            }
            TARGETS
                .iter()
                .find(|(n, _)| *n == s.target)
                .map(|(_, f)| f(input))
                .expect("a target for every seed");
        }
    }

    /// The history seed reaches the map: splits, a batch split and a merge are applied.
    #[test]
    fn the_history_seed_builds_a_map() {
        let input = seed("frame_to_request", "history_in_7_byte_reads");
        let mut decoder = FrameDecoder::new();
        decoder.extend(&input[1..]);
        let mut out = Vec::new();
        drain(&mut decoder, &mut out);
        let mut model = Model::new(1);
        for req in out.iter().flatten() {
            serve(&mut model, req);
        }
        let ids: Vec<u64> = model.map.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![2, 1]);
        assert_eq!(model.index.len(), 2);
    }
}
