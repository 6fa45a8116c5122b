//! `meridian ctl`'s everyday verbs, at pd-ctl's level: regions by key, id or range, stores,
//! members, the cluster's counts, and timestamps (taken or decoded). Reads go over the QUIC
//! client; what is shown is built in `view`. `scheduling` holds the verbs that change
//! scheduling (decommission, store limits, evict-leader) and `operator` pd-ctl's operator
//! commands, both sent to PD's HTTP API. Owns no state.

pub mod operator;
pub mod scheduling;
pub mod view;

use serde_json::Value;

use crate::client::Client;
use crate::placement::Region;
use crate::proto::MAX_SCAN_REGIONS;
use crate::tso::Timestamp;

/// What a verb produced: JSON for `--json`, and the readable form.
pub struct Shown {
    pub json: Value,
    pub text: String,
}

/// Parses a key as given on the command line: raw text, or hex with `--hex`.
pub fn parse_key(text: &str, hex: bool) -> anyhow::Result<Vec<u8>> {
    if !hex {
        return Ok(text.as_bytes().to_vec());
    }
    if text.len() % 2 != 0 {
        anyhow::bail!("hex key {text:?} has an odd number of digits");
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .map_err(|_| anyhow::anyhow!("{text:?} is not hex"))
        })
        .collect()
}

fn region_shown(found: Option<Region>, what: &str) -> anyhow::Result<Shown> {
    let region = found.ok_or_else(|| anyhow::anyhow!("no region holds {what}"))?;
    Ok(Shown {
        json: view::region_json(&region),
        text: view::regions_table(std::slice::from_ref(&region)),
    })
}

pub async fn region_by_key(client: &Client, key: &[u8]) -> anyhow::Result<Shown> {
    let found = client.get_region_uncached(key).await?;
    region_shown(found, &format!("key {:?}", view::key(key)))
}

pub async fn region_by_id(client: &Client, id: u64) -> anyhow::Result<Shown> {
    region_shown(client.get_region_by_id(id).await?, &format!("id {id}"))
}

/// Regions overlapping `[start, end)` (empty end: to the end), at most `limit`, paging past
/// the per-request maximum.
pub async fn regions_in(
    client: &Client,
    start: &[u8],
    end: &[u8],
    limit: usize,
) -> anyhow::Result<Vec<Region>> {
    let mut out: Vec<Region> = Vec::new();
    let mut from = start.to_vec();
    while out.len() < limit {
        let want = (limit - out.len()).min(MAX_SCAN_REGIONS as usize) as u32;
        let page = client.scan_regions(&from, end, want).await?;
        // A page may be short because of its size (replies are paged to fit a frame), not only
        // because the range ran out: go on from its last end until the range or the keys end.
        let next = page.last().map(|r| r.end_key.clone());
        for r in page {
            if out.last().is_none_or(|p| p.id != r.id) {
                out.push(r);
            }
        }
        match next {
            Some(next) if !next.is_empty() && (end.is_empty() || next.as_slice() < end) => {
                from = next
            }
            _ => break,
        }
    }
    out.truncate(limit);
    Ok(out)
}

pub async fn region_scan(
    client: &Client,
    start: &[u8],
    end: &[u8],
    limit: usize,
) -> anyhow::Result<Shown> {
    let regions = regions_in(client, start, end, limit).await?;
    Ok(Shown {
        json: serde_json::json!({
            "count": regions.len(),
            "regions": regions.iter().map(view::region_json).collect::<Vec<_>>(),
        }),
        text: view::regions_table(&regions),
    })
}

pub async fn store(client: &Client, id: u64) -> anyhow::Result<Shown> {
    let store = client
        .get_store(id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("store {id} is not known"))?;
    Ok(Shown {
        json: view::store_json(&store),
        text: view::stores_table(std::slice::from_ref(&store)),
    })
}

pub async fn stores(client: &Client) -> anyhow::Result<Shown> {
    let stores = client.get_all_stores().await?;
    Ok(Shown {
        json: serde_json::json!({
            "count": stores.len(),
            "stores": stores.iter().map(view::store_json).collect::<Vec<_>>(),
        }),
        text: view::stores_table(&stores),
    })
}

pub async fn members(client: &Client) -> anyhow::Result<Shown> {
    let m = client.members().await?;
    Ok(Shown {
        json: view::members_json(&m),
        text: view::members_table(&m),
    })
}

pub async fn leader(client: &Client) -> anyhow::Result<Shown> {
    let m = client.members().await?;
    let leader = m
        .leader
        .ok_or_else(|| anyhow::anyhow!("no member leads right now"))?;
    Ok(Shown {
        json: view::member_json(&leader, Some(&leader)),
        text: format!(
            "{} (id {}) client {} grpc {} admin {}",
            leader.name, leader.id, leader.client_url, leader.grpc_url, leader.admin_url
        ),
    })
}

/// The cluster: id, bootstrapped, and the counts of members, stores and regions (the regions
/// are counted by scanning, one request per 1024).
pub async fn cluster(client: &Client) -> anyhow::Result<Shown> {
    let m = client.members().await?;
    let bootstrapped = client.is_bootstrapped().await?;
    let (stores, regions) = if bootstrapped {
        let stores = client.get_all_stores().await?.len();
        let regions = regions_in(client, b"", b"", usize::MAX).await?.len();
        (stores, regions)
    } else {
        (0, 0)
    };
    Ok(Shown {
        json: serde_json::json!({
            "cluster_id": m.cluster_id,
            "bootstrapped": bootstrapped,
            "members": m.members.len(),
            "leader": m.leader.as_ref().map(|l| l.name.clone()),
            "stores": stores,
            "regions": regions,
        }),
        text: view::table(
            &[
                "CLUSTER_ID",
                "BOOTSTRAPPED",
                "MEMBERS",
                "LEADER",
                "STORES",
                "REGIONS",
            ],
            &[vec![
                m.cluster_id.to_string(),
                bootstrapped.to_string(),
                m.members.len().to_string(),
                m.leader.map(|l| l.name).unwrap_or_else(|| "-".into()),
                stores.to_string(),
                regions.to_string(),
            ]],
        ),
    })
}

pub async fn tso(client: &Client) -> anyhow::Result<Shown> {
    Ok(tso_decode(client.get_ts().await?))
}

pub fn tso_decode(ts: Timestamp) -> Shown {
    Shown {
        text: format!(
            "{}\nsystem:  {}\nlogical: {}",
            ts.as_u64(),
            view::utc(ts.physical_ms()),
            ts.logical()
        ),
        json: view::tso_json(ts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_text_or_hex() {
        assert_eq!(parse_key("abc", false).unwrap(), b"abc");
        assert_eq!(parse_key("74800a", true).unwrap(), vec![0x74, 0x80, 0x0a]);
        assert!(parse_key("748", true).is_err());
        assert!(parse_key("zz", true).is_err());
    }
}
