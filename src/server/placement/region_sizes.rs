//! The sizes and pending peers regions last reported, for PD's HTTP API's region JSON: the
//! ids asked for are grouped by owning shard (`placement::owner`), each shard is asked once
//! for its own, and the answers are gathered. The reports live only in the shards (a
//! heartbeat's, kept beside the route); nothing here keeps or changes them.

use std::collections::{BTreeMap, HashMap};

use tokio::sync::oneshot;

use super::messages::ShardMsg;
use super::state::PlacementState;
use crate::placement::RegionReport;
use crate::proto::ErrorReply;

fn shut() -> ErrorReply {
    ErrorReply::Unavailable("shutting down".into())
}

/// The reports of those of `ids` a shard holds; a region no shard holds (never reported by its
/// leader this term) is left out.
pub async fn sizes(
    state: &PlacementState,
    ids: impl IntoIterator<Item = u64>,
) -> Result<HashMap<u64, RegionReport>, ErrorReply> {
    let n = state.shards.len();
    let mut by_shard: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for id in ids {
        by_shard
            .entry(crate::placement::owner(id, n))
            .or_default()
            .push(id);
    }
    // Every shard is asked before any answer is awaited, so the shards work at once.
    let mut waiting = Vec::with_capacity(by_shard.len());
    for (shard, ids) in by_shard {
        let (reply, rx) = oneshot::channel();
        state.shards[shard]
            .send(ShardMsg::Sizes { ids, reply })
            .await
            .map_err(|_| shut())?;
        waiting.push(rx);
    }
    let mut found = HashMap::new();
    for rx in waiting {
        found.extend(rx.await.map_err(|_| shut())?);
    }
    Ok(found)
}
