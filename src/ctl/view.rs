//! How `meridian ctl` shows what it read: JSON for scripts (`--json`) and a readable table
//! otherwise, with the same fields in both. Pure: values in, text out.

use serde_json::{json, Value};

use crate::placement::{PeerRole, Region, StoreState, StoreStatus};
use crate::proto::{MemberInfo, MembersReply};
use crate::tso::Timestamp;

/// A key as pd-ctl shows it: the text when it is printable ASCII, else hex.
pub fn key(k: &[u8]) -> String {
    if k.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        String::from_utf8_lossy(k).into_owned()
    } else {
        k.iter().map(|b| format!("{b:02x}")).collect::<String>()
    }
}

pub fn region_json(r: &Region) -> Value {
    json!({
        "id": r.id,
        "start_key": key(&r.start_key),
        "end_key": key(&r.end_key),
        "epoch": { "conf_ver": r.epoch.conf_ver, "version": r.epoch.version },
        "peers": r.peers.iter().map(|p| json!({
            "id": p.id,
            "store_id": p.store_id,
            "role": match p.role {
                PeerRole::Voter => "voter",
                PeerRole::Learner => "learner",
                PeerRole::IncomingVoter => "incoming-voter",
                PeerRole::DemotingVoter => "demoting-voter",
            },
        })).collect::<Vec<_>>(),
        "leader": r.leader_peer().map(|p| json!({"id": p.id, "store_id": p.store_id})),
    })
}

pub fn store_json(s: &StoreStatus) -> Value {
    json!({
        "id": s.store.id,
        "address": s.store.address,
        "state": state_name(s.store.state),
        "labels": s.store.labels.iter().map(|l| json!({"key": l.key, "value": l.value})).collect::<Vec<_>>(),
        "capacity": s.stats.capacity,
        "available": s.stats.available,
        "region_count": s.stats.region_count,
        "leader_count": s.stats.leader_count,
        "last_heartbeat_ms": s.last_heartbeat_ms,
    })
}

fn state_name(s: StoreState) -> &'static str {
    match s {
        StoreState::Up => "Up",
        StoreState::Offline => "Offline",
        StoreState::Down => "Down",
        StoreState::Tombstone => "Tombstone",
    }
}

pub fn member_json(m: &MemberInfo, leader: Option<&MemberInfo>) -> Value {
    json!({
        "name": m.name,
        "id": m.id,
        "client_url": m.client_url,
        "grpc_url": m.grpc_url,
        "admin_url": m.admin_url,
        "is_leader": leader.is_some_and(|l| l.id == m.id),
    })
}

pub fn members_json(m: &MembersReply) -> Value {
    json!({
        "cluster_id": m.cluster_id,
        "leader": m.leader.as_ref().map(|l| member_json(l, Some(l))),
        "members": m.members.iter().map(|x| member_json(x, m.leader.as_ref())).collect::<Vec<_>>(),
    })
}

/// `tso decode`: the physical part as UTC wall time and the logical counter, as pd-ctl shows.
pub fn tso_json(ts: Timestamp) -> Value {
    json!({
        "timestamp": ts.as_u64(),
        "physical_ms": ts.physical_ms(),
        "logical": ts.logical(),
        "system": utc(ts.physical_ms()),
    })
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil, for the proleptic Gregorian calendar.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:03} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// A table: a header row and rows of cells, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

pub fn regions_table(regions: &[Region]) -> String {
    let rows: Vec<Vec<String>> = regions
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                key(&r.start_key),
                key(&r.end_key),
                format!("{}/{}", r.epoch.conf_ver, r.epoch.version),
                r.peers
                    .iter()
                    .map(|p| format!("{}@{}", p.id, p.store_id))
                    .collect::<Vec<_>>()
                    .join(","),
                r.leader_peer()
                    .map(|p| format!("{}@{}", p.id, p.store_id))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "START",
            "END",
            "CONF_VER/VERSION",
            "PEERS(id@store)",
            "LEADER",
        ],
        &rows,
    )
}

pub fn stores_table(stores: &[StoreStatus]) -> String {
    let rows: Vec<Vec<String>> = stores
        .iter()
        .map(|s| {
            vec![
                s.store.id.to_string(),
                s.store.address.clone(),
                state_name(s.store.state).to_string(),
                s.stats.region_count.to_string(),
                s.stats.leader_count.to_string(),
                format!("{}/{}", s.stats.available, s.stats.capacity),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "ADDRESS",
            "STATE",
            "REGIONS",
            "LEADERS",
            "AVAILABLE/CAPACITY",
        ],
        &rows,
    )
}

pub fn members_table(m: &MembersReply) -> String {
    let rows: Vec<Vec<String>> = m
        .members
        .iter()
        .map(|x| {
            let leads = m.leader.as_ref().is_some_and(|l| l.id == x.id);
            vec![
                x.name.clone(),
                x.id.to_string(),
                x.client_url.clone(),
                x.grpc_url.clone(),
                if leads { "leader".into() } else { "".into() },
            ]
        })
        .collect();
    format!(
        "cluster {}\n{}",
        m.cluster_id,
        table(&["NAME", "ID", "CLIENT", "GRPC", "ROLE"], &rows)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_time_of_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.000 UTC");
        // 2000-02-29 (a leap day in a century leap year) 12:34:56.789.
        assert_eq!(utc(951_827_696_789), "2000-02-29 12:34:56.789 UTC");
        assert_eq!(utc(1_798_761_599_999), "2026-12-31 23:59:59.999 UTC");
    }

    #[test]
    fn tso_decode_splits_physical_and_logical() {
        let v = tso_json(Timestamp::new(951_827_696_789, 42));
        assert_eq!(v["physical_ms"], 951_827_696_789u64);
        assert_eq!(v["logical"], 42);
        assert_eq!(v["timestamp"], (951_827_696_789u64 << 18) | 42);
        assert_eq!(v["system"], "2000-02-29 12:34:56.789 UTC");
    }

    #[test]
    fn keys_print_as_text_or_hex() {
        assert_eq!(key(b"user_1"), "user_1");
        assert_eq!(key(&[0x74, 0x80, 0x00]), "748000");
        assert_eq!(key(b""), "");
    }

    #[test]
    fn tables_pad_columns_to_the_widest_cell() {
        let t = table(&["A", "LONG"], &[vec!["wide".into(), "x".into()]]);
        assert_eq!(t, "A     LONG\nwide  x");
    }
}
