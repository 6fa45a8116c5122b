//! A PD-style TSO client over the gRPC front end (`--protocol grpc`): concurrent `get_ts()`
//! callers are merged into one `TsoRequest{count}` per stream round trip, and the reply (the
//! last timestamp of the batch, as PD answers) is split back into one timestamp per caller, in
//! order: what PD's Go client and pd-tso-bench do. One batch in flight per connection; on a
//! failed stream the next batch finds the leader again through `GetMembers` (`gather.rs`).

use tokio::sync::{mpsc, oneshot};

use meridian::kvproto::pdpb::{self, pd_client::PdClient};
use meridian::pd_grpc;
use meridian::tls::Trust;
use tonic::transport::Channel;

use crate::gather::{BatchStream, CallError};

type Waiter = oneshot::Sender<Result<u64, CallError>>;

#[derive(Clone)]
pub struct GrpcTso {
    waiters: mpsc::UnboundedSender<Waiter>,
}

impl GrpcTso {
    /// Connects to the leader (found through `GetMembers` on the endpoints) and starts the
    /// dispatcher on the current runtime.
    pub async fn connect(endpoints: Vec<String>, trust: Trust) -> anyhow::Result<GrpcTso> {
        let stream = TsoStream::open(&endpoints, &trust).await?;
        Ok(GrpcTso {
            waiters: crate::gather::start(stream, endpoints, trust),
        })
    }

    pub async fn get_ts(&self) -> Result<u64, CallError> {
        let (tx, rx) = oneshot::channel();
        self.waiters.send(tx).map_err(|_| CallError::Stopped)?;
        rx.await.map_err(|_| CallError::Stopped)?
    }
}

struct TsoStream {
    cluster_id: u64,
    requests: mpsc::Sender<pdpb::TsoRequest>,
    replies: tonic::Streaming<pdpb::TsoResponse>,
}

impl BatchStream for TsoStream {
    type Caller = Waiter;

    async fn open(endpoints: &[String], trust: &Trust) -> anyhow::Result<TsoStream> {
        let mut last_error = anyhow::anyhow!("no endpoints");
        for endpoint in endpoints {
            match Self::open_via(endpoint, trust).await {
                Ok(s) => return Ok(s),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    async fn serve(&mut self, batch: &mut Vec<Waiter>) -> bool {
        match self.batch(batch.len() as u32).await {
            Ok(first) => {
                for (i, w) in batch.drain(..).enumerate() {
                    let _ = w.send(Ok(first + i as u64));
                }
                true
            }
            Err(e) => {
                for w in batch.drain(..) {
                    let _ = w.send(Err(e.clone()));
                }
                false
            }
        }
    }

    fn fail(waiter: Waiter, why: CallError) {
        let _ = waiter.send(Err(why));
    }
}

impl TsoStream {
    async fn open_via(endpoint: &str, trust: &Trust) -> anyhow::Result<TsoStream> {
        let (mut pd, cluster_id) = leader_via(endpoint, trust).await?;
        let (requests, rx) = mpsc::channel(16);
        let replies = pd
            .tso(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok(TsoStream {
            cluster_id,
            requests,
            replies,
        })
    }

    /// One batch: `count` timestamps, returned as the first of them.
    async fn batch(&mut self, count: u32) -> Result<u64, CallError> {
        let req = pdpb::TsoRequest {
            header: Some(pdpb::RequestHeader {
                cluster_id: self.cluster_id,
                ..Default::default()
            }),
            count,
            ..Default::default()
        };
        self.requests
            .send(req)
            .await
            .map_err(|_| CallError::Closed("tso"))?;
        let reply = crate::gather::reply(&mut self.replies, "tso").await?;
        let Some(ts) = reply.timestamp else {
            return Err(CallError::Malformed(format!("no timestamp in {reply:?}")));
        };
        if reply.count != count || ts.logical + 1 < i64::from(count) || ts.physical < 0 {
            return Err(CallError::Malformed(format!("for {count}: {reply:?}")));
        }
        let last = ((ts.physical as u64) << 18) | ts.logical as u64;
        Ok(last + 1 - u64::from(count))
    }
}

/// A PD client on the leader, found through `GetMembers` on the first endpoint that answers,
/// and the cluster id.
pub async fn leader_client(
    endpoints: &[String],
    trust: &Trust,
) -> anyhow::Result<(PdClient<Channel>, u64)> {
    let mut last_error = anyhow::anyhow!("no endpoints");
    for endpoint in endpoints {
        match leader_via(endpoint, trust).await {
            Ok(found) => return Ok(found),
            Err(e) => last_error = e,
        }
    }
    Err(last_error)
}

async fn leader_via(endpoint: &str, trust: &Trust) -> anyhow::Result<(PdClient<Channel>, u64)> {
    let mut pd = pd_grpc::connect(endpoint, trust).await?;
    let members = pd
        .get_members(pdpb::GetMembersRequest::default())
        .await?
        .into_inner();
    let cluster_id = members.header.map(|h| h.cluster_id).unwrap_or(0);
    let leader_url = members
        .leader
        .and_then(|l| l.client_urls.into_iter().next())
        .ok_or_else(|| anyhow::anyhow!("{endpoint} knows no leader"))?;
    let leader = leader_url
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    Ok((pd_grpc::connect(leader, trust).await?, cluster_id))
}
