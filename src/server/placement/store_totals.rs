//! What the regions put on each store, for PD's store status (`/stores`): every shard is asked
//! for its running totals (`placement::StoreTotals`) at once, and their answers are summed.
//! The totals live only in the shards, moved by the heartbeats they handle; nothing here keeps
//! or changes them.

use std::collections::HashMap;

use tokio::sync::oneshot;

use super::messages::ShardMsg;
use super::state::PlacementState;
use crate::placement::StoreTotal;
use crate::proto::ErrorReply;

fn shut() -> ErrorReply {
    ErrorReply::Unavailable("shutting down".into())
}

/// Per store, the regions with a peer there and those it leads, with their sizes; a store no
/// region counts on is left out.
pub async fn totals(state: &PlacementState) -> Result<HashMap<u64, StoreTotal>, ErrorReply> {
    // Every shard is asked before any answer is awaited, so the shards work at once.
    let mut waiting = Vec::with_capacity(state.shards.len());
    for shard in &state.shards {
        let (reply, rx) = oneshot::channel();
        shard
            .send(ShardMsg::StoreTotals { reply })
            .await
            .map_err(|_| shut())?;
        waiting.push(rx);
    }
    let mut sum: HashMap<u64, StoreTotal> = HashMap::new();
    for rx in waiting {
        for (store, t) in rx.await.map_err(|_| shut())? {
            sum.entry(store).or_default().merge(&t);
        }
    }
    Ok(sum)
}
