//! PD's JSON shapes for what the HTTP API returns, field for field as PD's Go structs encode
//! them (tikv/pd `pkg/response`, `client/http/types.go`, kvproto's gogo-generated structs with
//! their `omitempty`): keys hex-encoded in upper case, peers with `role_name`, stores with
//! `state_name` and sizes as Go's `ByteSize` strings, times as RFC 3339 and durations as Go
//! writes them. Built from the kvproto forms the gRPC front end sends (`grpc::convert`), so the
//! two front ends cannot disagree on a field. Pure: no I/O, no state.

use std::collections::HashMap;

use serde::Serialize;

use crate::kvproto::metapb;
use crate::placement::{Region, RegionReport, StoreState, StoreStatus, StoreTotal};
use crate::proto::MemberInfo;
use crate::server::grpc::convert;

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// PD's `HexRegionKeyStr`: upper-case hex.
pub fn hex_key(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02X}")).collect()
}

/// kvproto's `metapb.Peer` under PD's `MetaPeer`: the peer's fields (each left out when
/// zero), its role's name, and `is_learner` when it is one.
#[derive(Debug, Serialize, PartialEq)]
pub struct PeerJson {
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub id: u64,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub store_id: u64,
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub role: i32,
    #[serde(skip_serializing_if = "is_false")]
    pub is_witness: bool,
    pub role_name: &'static str,
    #[serde(skip_serializing_if = "is_false")]
    pub is_learner: bool,
}

fn role_name(role: i32) -> &'static str {
    match metapb::PeerRole::try_from(role) {
        Ok(metapb::PeerRole::Voter) | Err(_) => "Voter",
        Ok(metapb::PeerRole::Learner) => "Learner",
        Ok(metapb::PeerRole::IncomingVoter) => "IncomingVoter",
        Ok(metapb::PeerRole::DemotingVoter) => "DemotingVoter",
    }
}

fn peer(p: Option<&metapb::Peer>) -> PeerJson {
    let Some(p) = p else {
        // PD's MetaPeer of no peer: the role name of the zero role, nothing else.
        return PeerJson {
            id: 0,
            store_id: 0,
            role: 0,
            is_witness: false,
            role_name: "Voter",
            is_learner: false,
        };
    };
    PeerJson {
        id: p.id,
        store_id: p.store_id,
        role: p.role,
        is_witness: p.is_witness,
        role_name: role_name(p.role),
        is_learner: p.role == metapb::PeerRole::Learner as i32,
    }
}

#[derive(Debug, Serialize, PartialEq)]
pub struct EpochJson {
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub conf_ver: u64,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub version: u64,
}

/// PD's `response.RegionInfo`. The sizes and the peers still catching up (`pending_peers`,
/// rendered as `peers` renders them) are those the region's leader last reported (read from
/// the shard that owns it; 0 and none for a region no leader has reported this term, as PD
/// shows a region loaded from storage before its first heartbeat). Meridian keeps no per-peer
/// down state, no read traffic and no CPU usage, so those are PD's values for none
/// (`down_peers` left out, as PD leaves out an empty list, and so `pending_peers` when empty).
#[derive(Debug, Serialize, PartialEq)]
pub struct RegionJson {
    pub id: u64,
    pub start_key: String,
    pub end_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<EpochJson>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerJson>,
    pub leader: PeerJson,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_peers: Vec<PeerJson>,
    pub cpu_usage: u64,
    pub written_bytes: u64,
    pub read_bytes: u64,
    pub written_keys: u64,
    pub read_keys: u64,
    pub approximate_size: i64,
    pub approximate_keys: i64,
    pub approximate_kv_size: i64,
    pub approximate_columnar_kv_size: i64,
}

pub fn region(r: &Region, report: Option<&RegionReport>) -> RegionJson {
    let sizes = report.map(|r| r.sizes).unwrap_or_default();
    let pending: &[u64] = report.map_or(&[], |r| &r.pending_peers);
    let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let meta = convert::region_to(r);
    let leader = convert::leader_to(r);
    RegionJson {
        id: meta.id,
        start_key: hex_key(&meta.start_key),
        end_key: hex_key(&meta.end_key),
        epoch: meta.region_epoch.map(|e| EpochJson {
            conf_ver: e.conf_ver,
            version: e.version,
        }),
        peers: meta.peers.iter().map(|p| peer(Some(p))).collect(),
        leader: peer(leader.as_ref()),
        // In the order the region lists its peers, as the leader's report marks them.
        pending_peers: meta
            .peers
            .iter()
            .filter(|p| pending.contains(&p.id))
            .map(|p| peer(Some(p)))
            .collect(),
        cpu_usage: 0,
        written_bytes: sizes.written_bytes,
        read_bytes: 0,
        written_keys: sizes.written_keys,
        read_keys: 0,
        approximate_size: signed(sizes.approximate_size_mib),
        approximate_keys: signed(sizes.approximate_keys),
        approximate_kv_size: 0,
        approximate_columnar_kv_size: 0,
    }
}

/// PD's `RegionsInfo`.
#[derive(Debug, Serialize, PartialEq)]
pub struct RegionsJson {
    pub count: usize,
    pub regions: Vec<RegionJson>,
}

pub fn regions(rs: &[Region], reports: &HashMap<u64, RegionReport>) -> RegionsJson {
    RegionsJson {
        count: rs.len(),
        regions: rs.iter().map(|r| region(r, reports.get(&r.id))).collect(),
    }
}

#[derive(Debug, Serialize, PartialEq)]
pub struct LabelJson {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// kvproto's `metapb.Store` under PD's `MetaStore`, with `state_name`.
#[derive(Debug, Serialize, PartialEq)]
pub struct MetaStoreJson {
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub id: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub state: i32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<LabelJson>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub peer_address: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status_address: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub git_hash: String,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub start_timestamp: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub deploy_path: String,
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub last_heartbeat: i64,
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub node_state: i32,
    pub state_name: &'static str,
}

/// PD's `response.StoreStatus`, with what Meridian knows of a store: its reported space, the
/// regions and leaders it holds with their sizes (counted from the regions, as PD counts them
/// from its region tree, not from the store's own report), times.
#[derive(Debug, Serialize, PartialEq)]
pub struct StoreStatusJson {
    pub capacity: String,
    pub available: String,
    pub used_size: String,
    pub leader_count: u64,
    pub leader_weight: f64,
    pub leader_score: f64,
    pub leader_size: i64,
    pub region_count: u64,
    pub region_weight: f64,
    pub region_score: f64,
    pub region_size: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_ts: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_ts: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime: Option<String>,
}

/// PD's `StoreInfo`.
#[derive(Debug, Serialize, PartialEq)]
pub struct StoreJson {
    pub store: MetaStoreJson,
    pub status: StoreStatusJson,
}

/// PD's `StoresInfo`.
#[derive(Debug, Serialize, PartialEq)]
pub struct StoresJson {
    pub count: usize,
    pub stores: Vec<StoreJson>,
}

/// `s` in PD's `StoreInfo`, with `held`, what the regions put on it.
pub fn store(s: &StoreStatus, held: StoreTotal) -> StoreJson {
    let meta = convert::store_to(s);
    let state_name = match s.store.state {
        StoreState::Up => "Up",
        StoreState::Offline => "Offline",
        // PD's name for an Up store silent past `max-store-down-time`.
        StoreState::Down => "Down",
        StoreState::Tombstone => "Tombstone",
    };
    let started = (s.store.details.start_timestamp > 0).then_some(s.store.details.start_timestamp);
    let beat_ms = (s.last_heartbeat_ms > 0).then_some(s.last_heartbeat_ms as i64);
    let uptime = match (started, beat_ms) {
        (Some(start), Some(beat)) if beat > start * 1000 => {
            Some(go_duration_ms((beat - start * 1000) as u64))
        }
        _ => None,
    };
    StoreJson {
        store: MetaStoreJson {
            id: meta.id,
            address: meta.address,
            state: meta.state,
            labels: meta
                .labels
                .into_iter()
                .map(|l| LabelJson {
                    key: l.key,
                    value: l.value,
                })
                .collect(),
            version: meta.version,
            peer_address: meta.peer_address,
            status_address: meta.status_address,
            git_hash: meta.git_hash,
            start_timestamp: meta.start_timestamp,
            deploy_path: meta.deploy_path,
            last_heartbeat: meta.last_heartbeat,
            node_state: meta.node_state,
            state_name,
        },
        status: StoreStatusJson {
            capacity: byte_size(s.stats.capacity),
            available: byte_size(s.stats.available),
            used_size: byte_size(s.stats.used_size),
            leader_count: held.leaders,
            leader_weight: 1.0,
            // PD's default `count` leader policy: the leader count over the weight (1).
            leader_score: held.leaders as f64,
            leader_size: i64::try_from(held.leader_size_mib).unwrap_or(i64::MAX),
            region_count: held.regions,
            region_weight: 1.0,
            // PD scores regions by their sizes and a moving average of the store's free
            // space, which Meridian does not keep, so no score is made up.
            region_score: 0.0,
            region_size: i64::try_from(held.region_size_mib).unwrap_or(i64::MAX),
            start_ts: started.and_then(|secs| rfc3339_ms(secs.saturating_mul(1000))),
            last_heartbeat_ts: beat_ms.and_then(rfc3339_ms),
            uptime,
        },
    }
}

/// kvproto's `pdpb.Member`, as the gRPC front end fills it: the admin address as the peer URL,
/// the client address (when the PD front end is on) as the client URL.
#[derive(Debug, Serialize, PartialEq, Clone)]
pub struct MemberJson {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub member_id: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peer_urls: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub client_urls: Vec<String>,
}

pub fn member(m: &MemberInfo) -> MemberJson {
    MemberJson {
        name: m.name.clone(),
        member_id: m.id,
        peer_urls: vec![m.admin_url.clone()],
        client_urls: if m.grpc_url.is_empty() {
            Vec::new()
        } else {
            vec![m.grpc_url.clone()]
        },
    }
}

/// docker/go-units' `BytesSize`, which PD's `typeutil.ByteSize` writes: binary units, four
/// significant digits (`"1.5GiB"`, `"0B"`).
pub fn byte_size(bytes: u64) -> String {
    const UNITS: [&str; 9] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];
    let mut size = bytes as f64;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{}{}", significant4(size), UNITS[unit])
}

/// `%.4g` for 0 <= v < 1024: four significant digits, trailing zeros dropped.
fn significant4(v: f64) -> String {
    let decimals = match v {
        v if v >= 1000.0 => 0,
        v if v >= 100.0 => 1,
        v if v >= 10.0 => 2,
        _ => 3,
    };
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Go's `time.Duration.String` for a whole number of milliseconds (`"1h2m3.5s"`, `"250ms"`,
/// `"0s"`).
pub fn go_duration_ms(ms: u64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, frac) = (rest / 1000, rest % 1000);
    let seconds = if frac == 0 {
        format!("{s}s")
    } else {
        let f = format!("{frac:03}");
        format!("{s}.{}s", f.trim_end_matches('0'))
    };
    if h > 0 {
        format!("{h}h{m}m{seconds}")
    } else if m > 0 {
        format!("{m}m{seconds}")
    } else {
        seconds
    }
}

/// A Unix time in milliseconds as RFC 3339 in UTC, as Go writes a `time.Time`.
pub fn rfc3339_ms(ms: i64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Peer, PeerRole};
    use proptest::prelude::*;

    #[test]
    fn sizes_and_durations_read_as_go_writes_them() {
        assert_eq!(byte_size(0), "0B");
        assert_eq!(byte_size(1023), "1023B");
        assert_eq!(byte_size(1024), "1KiB");
        assert_eq!(byte_size(1536), "1.5KiB");
        assert_eq!(byte_size(500 << 30), "500GiB");
        assert_eq!(byte_size(3 << 40), "3TiB");
        assert_eq!(go_duration_ms(0), "0s");
        assert_eq!(go_duration_ms(250), "250ms");
        assert_eq!(go_duration_ms(1000), "1s");
        assert_eq!(go_duration_ms(1500), "1.5s");
        assert_eq!(go_duration_ms(30 * 60_000), "30m0s");
        assert_eq!(go_duration_ms(3_723_040), "1h2m3.04s");
        assert_eq!(hex_key(b"t\x80\x00"), "748000");
    }

    #[test]
    fn a_region_reads_as_pd_writes_it() {
        let r = Region {
            id: 4,
            start_key: b"a".to_vec(),
            end_key: vec![],
            epoch: Epoch {
                conf_ver: 2,
                version: 0,
            },
            peers: vec![
                Peer {
                    id: 5,
                    store_id: 1,
                    role: PeerRole::Voter,
                },
                Peer {
                    id: 6,
                    store_id: 2,
                    role: PeerRole::Learner,
                },
            ],
            leader: Some(5),
        };
        let v = serde_json::to_value(region(&r, None)).unwrap();
        assert_eq!(v["start_key"], "61");
        assert_eq!(v["end_key"], "");
        assert_eq!(v["epoch"], serde_json::json!({"conf_ver": 2}));
        assert_eq!(
            v["peers"],
            serde_json::json!([
                {"id": 5, "store_id": 1, "role_name": "Voter"},
                {"id": 6, "store_id": 2, "role": 1, "role_name": "Learner", "is_learner": true},
            ])
        );
        assert_eq!(
            v["leader"],
            serde_json::json!({"id": 5, "store_id": 1, "role_name": "Voter"})
        );
        let leaderless = Region { leader: None, ..r };
        let v = serde_json::to_value(region(&leaderless, None)).unwrap();
        assert_eq!(v["leader"], serde_json::json!({"role_name": "Voter"}));
    }

    proptest! {
        /// Go's `BytesSize` never writes more than four significant digits nor a trailing
        /// zero after the point, and the unit is the largest that leaves a number below 1024.
        #[test]
        fn byte_sizes_are_short_and_in_the_largest_unit(bytes in any::<u64>()) {
            let text = byte_size(bytes);
            let digits: String = text.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            let value: f64 = digits.parse().unwrap();
            prop_assert!(value < 1024.5, "{}", text);
            prop_assert!(digits.chars().filter(char::is_ascii_digit).count() <= 4, "{}", text);
            prop_assert!(!(digits.contains('.') && digits.ends_with('0')), "{}", text);
        }

        /// Hex keys are upper case, two digits a byte, and read back to the key.
        #[test]
        fn hex_keys_round_trip(key in proptest::collection::vec(any::<u8>(), 0..64)) {
            let text = hex_key(&key);
            prop_assert_eq!(text.len(), 2 * key.len());
            prop_assert!(!text.chars().any(|c| c.is_ascii_lowercase()));
            let back: Vec<u8> = (0..key.len())
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            prop_assert_eq!(back, key);
        }
    }
}
