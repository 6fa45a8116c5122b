//! The Rust client: one QUIC connection to the cluster (re-established with backoff over the
//! given endpoints), a TSO dispatcher that merges concurrent `get_ts` calls into one request per
//! stream in flight, and raw request streams. Errors reach the caller typed.

mod connector;
mod error;
/// kvproto's PD client over a verified TLS channel.
pub mod pd_grpc;
mod placement;
mod region_cache;
mod rpc;
mod tso;

use std::sync::Arc;
use std::time::Duration;

pub use connector::Connector;
pub use error::ClientError;
pub use rpc::RpcStream;

use crate::proto::{MembersReply, Reply, Request};
use crate::tls::Trust;
use crate::tso::Timestamp;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `host:port` of one or more members.
    pub endpoints: Vec<String>,
    pub trust: Trust,
    /// TSO requests in flight at once (one stream each). 1 is Percolator's rule exactly.
    pub tso_streams: usize,
    /// How long a call keeps retrying transport failures and retryable errors before it fails.
    pub retry_budget: Duration,
}

impl ClientOptions {
    pub fn new(endpoints: Vec<String>, trust: Trust) -> Self {
        ClientOptions {
            endpoints,
            trust,
            tso_streams: 1,
            retry_budget: Duration::from_secs(10),
        }
    }
}

#[derive(Clone)]
pub struct Client {
    connector: Arc<Connector>,
    tso: tso::Dispatcher,
    /// Idle request streams for placement calls.
    streams: Arc<tokio::sync::Mutex<Vec<RpcStream>>>,
    regions: Arc<region_cache::RegionCache>,
}

impl Client {
    /// Connects to the first reachable endpoint and starts the TSO dispatcher.
    pub async fn connect(opts: ClientOptions) -> Result<Client, ClientError> {
        let connector =
            Arc::new(Connector::new(&opts.endpoints, &opts.trust, opts.retry_budget).await?);
        connector.connection().await?;
        let tso = tso::Dispatcher::start(connector.clone(), opts.tso_streams.max(1));
        let client = Client {
            connector,
            tso,
            streams: Default::default(),
            regions: Default::default(),
        };
        // Learn every member, so the client survives the loss of the ones it was given.
        if let Ok(members) = client.members().await {
            for m in members.members.iter().chain(members.leader.as_ref()) {
                client.connector.learn(&m.client_url).await;
            }
        }
        Ok(client)
    }

    /// One timestamp, strictly greater than any returned before this call was made.
    pub async fn get_ts(&self) -> Result<Timestamp, ClientError> {
        self.tso.get_ts().await
    }

    /// A dedicated request stream (one request in flight at a time), for raw calls.
    pub async fn open_stream(&self) -> Result<RpcStream, ClientError> {
        RpcStream::open(self.connector.clone()).await
    }

    pub async fn members(&self) -> Result<MembersReply, ClientError> {
        let mut stream = self.open_stream().await?;
        match stream.call_with_retry(&Request::GetMembers).await? {
            Reply::Members(m) => Ok(m),
            other => Err(ClientError::Protocol(format!(
                "unexpected reply to GetMembers: {other:?}"
            ))),
        }
    }

    pub fn connector(&self) -> &Arc<Connector> {
        &self.connector
    }
}
