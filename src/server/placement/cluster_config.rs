//! The cluster's record (`metapb.Cluster`: its id and the replica count it was bootstrapped
//! with): GetClusterConfig reads it, PutClusterConfig replaces it, durably, if its id is this
//! cluster's. Written at bootstrap; a cluster bootstrapped before the record existed reads as
//! bootstrap would have written it. Nothing schedules by it, as in PD.

use serde::{Deserialize, Serialize};

use super::answer::persist_now;
use super::state::PlacementState;
use crate::placement::ClusterMeta;
use crate::proto::{ErrorReply, Refusal, Reply, Response};

#[derive(Debug)]
pub enum ClusterConfigOp {
    Get,
    Put(ClusterMeta),
}

pub async fn serve(state: &PlacementState, op: ClusterConfigOp) -> Response {
    let mut meta = state.cluster_meta.lock().await;
    match op {
        ClusterConfigOp::Get => Response::Ok(Reply::ClusterConfig(
            meta.unwrap_or_else(|| state.first_cluster_meta()),
        )),
        ClusterConfigOp::Put(new) => {
            if new.id != state.cluster_id {
                return Response::Err(ErrorReply::Refused(Refusal::ClusterMismatch {
                    asked: new.id,
                    max_peer_count: new.max_peer_count,
                    cluster: state.cluster_id,
                }));
            }
            // Held across the write: puts are durable in the order they are applied.
            let op = (state.keys.cluster_meta(), Some(encode_cluster_meta(&new)));
            if let Err(r) = persist_now(state, vec![op]).await {
                return r;
            }
            *meta = Some(new);
            Response::Ok(Reply::Done)
        }
    }
}

impl PlacementState {
    /// The record bootstrap writes: this cluster's id and the configured replica count.
    pub(super) fn first_cluster_meta(&self) -> ClusterMeta {
        ClusterMeta {
            id: self.cluster_id,
            max_peer_count: u32::try_from(self.cfg.max_replicas).unwrap_or(u32::MAX),
        }
    }
}

/// The record as stored: JSON, `{"id":..,"max_peer_count":..}`.
#[derive(Serialize, Deserialize)]
struct Stored {
    id: u64,
    max_peer_count: u32,
}

pub(super) fn encode_cluster_meta(m: &ClusterMeta) -> Vec<u8> {
    serde_json::to_vec(&Stored {
        id: m.id,
        max_peer_count: m.max_peer_count,
    })
    .unwrap_or_default()
}

pub(super) fn decode_cluster_meta(bytes: &[u8]) -> Result<ClusterMeta, serde_json::Error> {
    let s: Stored = serde_json::from_slice(bytes)?;
    Ok(ClusterMeta {
        id: s.id,
        max_peer_count: s.max_peer_count,
    })
}
