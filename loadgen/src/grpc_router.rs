//! A PD-style region router over the gRPC front end (`loadgen route --rpc query-region`):
//! concurrent `get_region(key)` calls are merged into one `QueryRegionRequest` per stream round
//! trip and each caller gets the region its key maps to in the reply. This is how PD's own Go
//! client sends `GetRegion` since its router client became the default (tikv/pd#10105,
//! client/clients/router): one dispatcher per client, one batch of up to 10,000 lookups in
//! flight, the next batch collected meanwhile (`gather.rs`). On a failed, silent or refusing
//! stream the next batch finds the leader again through `GetMembers`.
//!
//! With follower reads, one router per member asks that member alone, marked as PD's clients
//! mark a read a follower may answer (`pd-allow-follower-handle`).
//!
//! Every answer is checked, not trusted: the reply must map each key to an id, and the region
//! under that id must hold the key; anything else is an error for that caller.

use std::collections::HashMap;

use tokio::sync::{mpsc, oneshot};

use meridian::kvproto::{metapb, pdpb};
use meridian::tls::Trust;

use crate::gather::{BatchStream, CallError};

/// A lookup's answer: the region holding the key, `None` when no region does.
pub type Found = Result<Option<metapb::Region>, CallError>;

struct Lookup {
    key: Vec<u8>,
    reply: oneshot::Sender<Found>,
}

#[derive(Clone)]
pub struct GrpcRouter {
    lookups: mpsc::UnboundedSender<Lookup>,
}

impl GrpcRouter {
    /// Connects to the leader (found through `GetMembers` on the endpoints) and starts the
    /// dispatcher on the current runtime.
    pub async fn connect(endpoints: Vec<String>, trust: Trust) -> anyhow::Result<GrpcRouter> {
        let stream = QueryStream::open(&endpoints, &trust).await?;
        Ok(GrpcRouter {
            lookups: crate::gather::start(stream, endpoints, trust),
        })
    }

    /// A router on one member, which it asks to answer from its own copy (PD's
    /// `pd-allow-follower-handle`): a follower in sync answers, one that is not refuses
    /// (REGION_NOT_FOUND, counted as errors).
    pub async fn connect_to_member(endpoint: String, trust: Trust) -> anyhow::Result<GrpcRouter> {
        let endpoints = vec![endpoint];
        let stream = MemberStream::open(&endpoints, &trust).await?;
        Ok(GrpcRouter {
            lookups: crate::gather::start(stream, endpoints, trust),
        })
    }

    pub async fn get_region(&self, key: Vec<u8>) -> Found {
        let (reply, rx) = oneshot::channel();
        self.lookups
            .send(Lookup { key, reply })
            .map_err(|_| CallError::Stopped)?;
        rx.await.map_err(|_| CallError::Stopped)?
    }
}

struct QueryStream {
    cluster_id: u64,
    requests: mpsc::Sender<pdpb::QueryRegionRequest>,
    replies: tonic::Streaming<pdpb::QueryRegionResponse>,
}

impl BatchStream for QueryStream {
    type Caller = Lookup;

    async fn open(endpoints: &[String], trust: &Trust) -> anyhow::Result<QueryStream> {
        let (mut pd, cluster_id) = crate::grpc_tso::leader_client(endpoints, trust).await?;
        let (requests, rx) = mpsc::channel(16);
        let replies = pd
            .query_region(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(QueryStream {
            cluster_id,
            requests,
            replies,
        })
    }

    async fn serve(&mut self, batch: &mut Vec<Lookup>) -> bool {
        let keys: Vec<Vec<u8>> = batch
            .iter_mut()
            .map(|l| std::mem::take(&mut l.key))
            .collect();
        match self.batch(keys.clone()).await {
            Ok(reply) => {
                for (l, found) in batch.drain(..).zip(answers(&keys, &reply)) {
                    let _ = l.reply.send(found);
                }
                // A refusal (a leader that stepped down keeps its streams open and refuses
                // on them): find the leader again for the next batch.
                reply.header.as_ref().is_none_or(|h| h.error.is_none())
            }
            Err(e) => {
                for l in batch.drain(..) {
                    let _ = l.reply.send(Err(e.clone()));
                }
                false
            }
        }
    }

    fn fail(lookup: Lookup, why: CallError) {
        let _ = lookup.reply.send(Err(why));
    }
}

/// A `QueryRegion` stream on the one member named, which may answer as a follower.
struct MemberStream(QueryStream);

impl BatchStream for MemberStream {
    type Caller = Lookup;

    async fn open(endpoints: &[String], trust: &Trust) -> anyhow::Result<MemberStream> {
        let endpoint = endpoints
            .first()
            .ok_or_else(|| anyhow::anyhow!("no member"))?;
        let mut pd = meridian::pd_grpc::connect(endpoint, trust).await?;
        let cluster_id = meridian::pd_grpc::cluster_id(&mut pd).await?;
        let (requests, rx) = mpsc::channel(16);
        let replies = pd
            .query_region(allowing_follower(tonic::Request::new(
                tokio_stream::wrappers::ReceiverStream::new(rx),
            )))
            .await?
            .into_inner();
        Ok(MemberStream(QueryStream {
            cluster_id,
            requests,
            replies,
        }))
    }

    async fn serve(&mut self, batch: &mut Vec<Lookup>) -> bool {
        self.0.serve(batch).await
    }

    fn fail(lookup: Lookup, why: CallError) {
        QueryStream::fail(lookup, why)
    }
}

/// `request` with PD's follower-handle key: a follower in sync may answer it.
pub fn allowing_follower<T>(mut request: tonic::Request<T>) -> tonic::Request<T> {
    request.metadata_mut().insert(
        "pd-allow-follower-handle",
        tonic::metadata::MetadataValue::from_static("true"),
    );
    request
}

impl QueryStream {
    /// One batch: the reply to a `QueryRegionRequest` for `keys`.
    async fn batch(&mut self, keys: Vec<Vec<u8>>) -> Result<pdpb::QueryRegionResponse, CallError> {
        let req = pdpb::QueryRegionRequest {
            header: Some(pdpb::RequestHeader {
                cluster_id: self.cluster_id,
                ..Default::default()
            }),
            keys,
            ..Default::default()
        };
        self.requests
            .send(req)
            .await
            .map_err(|_| CallError::Closed("query"))?;
        crate::gather::reply(&mut self.replies, "query").await
    }
}

/// Each key's answer from one reply, in request order: the checks PD's router client leaves to
/// its callers' region caches, made here so a wrong route is counted, never passed on.
pub fn answers(keys: &[Vec<u8>], reply: &pdpb::QueryRegionResponse) -> Vec<Found> {
    if let Some(e) = reply.header.as_ref().and_then(|h| h.error.as_ref()) {
        let e = CallError::Refused {
            kind: e.r#type(),
            message: e.message.clone(),
        };
        return keys.iter().map(|_| Err(e.clone())).collect();
    }
    if reply.key_id_map.len() != keys.len() {
        let e = CallError::Malformed(format!(
            "{} ids for {} keys",
            reply.key_id_map.len(),
            keys.len()
        ));
        return keys.iter().map(|_| Err(e.clone())).collect();
    }
    let regions: &HashMap<u64, pdpb::RegionResponse> = &reply.regions_by_id;
    keys.iter()
        .zip(&reply.key_id_map)
        .map(|(key, &id)| {
            if id == 0 {
                return Ok(None);
            }
            let region = regions
                .get(&id)
                .and_then(|r| r.region.as_ref())
                .ok_or_else(|| CallError::Malformed(format!("id {id} mapped with no region")))?;
            let holds = region.start_key.as_slice() <= key.as_slice()
                && (region.end_key.is_empty() || key.as_slice() < region.end_key.as_slice());
            if region.id != id || !holds {
                return Err(CallError::Misrouted {
                    key: key.clone(),
                    id,
                    region: Box::new(region.clone()),
                });
            }
            Ok(Some(region.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(id: u64, start: &[u8], end: &[u8]) -> pdpb::RegionResponse {
        pdpb::RegionResponse {
            region: Some(metapb::Region {
                id,
                start_key: start.to_vec(),
                end_key: end.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn reply(ids: &[u64], regions: Vec<pdpb::RegionResponse>) -> pdpb::QueryRegionResponse {
        pdpb::QueryRegionResponse {
            header: Some(pdpb::ResponseHeader::default()),
            key_id_map: ids.to_vec(),
            regions_by_id: regions
                .into_iter()
                .map(|r| (r.region.as_ref().map_or(0, |r| r.id), r))
                .collect(),
            ..Default::default()
        }
    }

    fn keys(ks: &[&[u8]]) -> Vec<Vec<u8>> {
        ks.iter().map(|k| k.to_vec()).collect()
    }

    #[test]
    fn each_key_gets_the_region_holding_it_and_a_gap_is_none() {
        let ks = keys(&[b"a", b"z", b"m"]);
        let r = reply(&[1, 2, 0], vec![region(1, b"", b"m"), region(2, b"n", b"")]);
        let got = answers(&ks, &r);
        assert_eq!(got[0].as_ref().unwrap().as_ref().unwrap().id, 1);
        assert_eq!(got[1].as_ref().unwrap().as_ref().unwrap().id, 2);
        assert!(matches!(got[2], Ok(None)), "{:?}", got[2]);
    }

    #[test]
    fn a_region_not_holding_its_key_is_an_error_for_that_key_only() {
        let ks = keys(&[b"a", b"z"]);
        // "z" is mapped to the region ["", "m").
        let r = reply(&[1, 1], vec![region(1, b"", b"m")]);
        let got = answers(&ks, &r);
        assert!(got[0].is_ok());
        assert!(
            matches!(got[1], Err(CallError::Misrouted { id: 1, .. })),
            "{:?}",
            got[1]
        );
    }

    #[test]
    fn a_missing_region_a_short_map_and_a_header_error_fail_every_caller_they_concern() {
        let ks = keys(&[b"a", b"b"]);
        let r = reply(&[1, 7], vec![region(1, b"", b"")]);
        let got = answers(&ks, &r);
        assert!(got[0].is_ok());
        assert!(
            matches!(&got[1], Err(CallError::Malformed(why)) if why.contains("no region")),
            "{:?}",
            got[1]
        );

        let short = reply(&[1], vec![region(1, b"", b"")]);
        assert!(answers(&ks, &short)
            .iter()
            .all(|f| matches!(f, Err(CallError::Malformed(_)))));

        let mut refused = reply(&[], vec![]);
        refused.header = Some(pdpb::ResponseHeader {
            error: Some(pdpb::Error {
                r#type: pdpb::ErrorType::NotBootstrapped as i32,
                message: "not bootstrapped".into(),
            }),
            ..Default::default()
        });
        let got = answers(&ks, &refused);
        assert!(got.iter().all(|f| matches!(
            f,
            Err(CallError::Refused {
                kind: pdpb::ErrorType::NotBootstrapped,
                ..
            })
        )));
    }
}
