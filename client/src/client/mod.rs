//! The Rust client: one QUIC connection to the cluster (re-established with backoff over the
//! given endpoints), a TSO dispatcher that merges concurrent `get_ts` calls into one request per
//! stream in flight, placement calls with a region cache, and raw request streams. Errors reach
//! the caller typed ([`ClientError`]). It owns the client's connections and retries; what a
//! frame holds is `proto`'s and `placement`'s, and it must not grow decisions the server makes.

mod connector;
mod error;
mod follower_reads;
mod placement;
mod region_cache;
mod rpc;
mod tso;

use std::sync::Arc;
use std::time::Duration;

pub use connector::Connector;
pub use error::ClientError;
use follower_reads::FollowerReads;
pub use rpc::RpcStream;
pub use tso::BatchHook;

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
    /// A member that sends nothing for this long while a request waits is taken for paused
    /// or cut off: the request goes to another member, and that member is tried last for as
    /// long again. A paused leader would otherwise hold its clients for the whole pause, past
    /// the election of its successor (the lease, 3 s by default). Longer than the server's
    /// own waits (2 s for a TSO window), so a leader that is slow but alive answers first.
    pub silence_timeout: Duration,
    /// Sees each batch of timestamps once, as it arrives and before its callers wake
    /// (`tso/batch_hook.rs`); `None` for ordinary clients.
    pub tso_batch_hook: Option<BatchHook>,
    /// Spreads routing reads (`get_region_uncached`, `get_prev_region`, `get_region_by_id`,
    /// `scan_regions`) over every member in turn, as PD's clients do with
    /// `pd-allow-follower-handle`: a follower in sync answers from its copy of the leader's
    /// index, which may be a little older than the leader's (never a region the leader did
    /// not have); a follower out of sync refuses and the leader answers. Off by default.
    pub follower_reads: bool,
}

impl ClientOptions {
    pub fn new(endpoints: Vec<String>, trust: Trust) -> Self {
        ClientOptions {
            endpoints,
            trust,
            tso_streams: 1,
            retry_budget: Duration::from_secs(10),
            silence_timeout: Duration::from_millis(2500),
            tso_batch_hook: None,
            follower_reads: false,
        }
    }
}

/// How often a client asks for the member list again (PD's clients refresh theirs too).
const MEMBER_REFRESH: Duration = Duration::from_secs(5);

/// Adds every member the cluster lists to the connector's targets (and to the members routing
/// reads are spread over, with follower reads on).
async fn learn_members(connector: &Arc<Connector>, followers: Option<&FollowerReads>) {
    let Ok(mut stream) = RpcStream::open(connector.clone()).await else {
        return;
    };
    if let Ok(Reply::Members(members)) = stream.call_with_retry(&Request::GetMembers).await {
        for m in members.members.iter().chain(members.leader.as_ref()) {
            connector.learn(&m.client_url).await;
            if let Some(followers) = followers {
                followers.learn(&m.client_url).await;
            }
        }
    }
}

/// `learn_members` every [`MEMBER_REFRESH`] while the client lives.
async fn refresh_members(
    connector: std::sync::Weak<Connector>,
    followers: Option<std::sync::Weak<FollowerReads>>,
) {
    loop {
        tokio::time::sleep(MEMBER_REFRESH).await;
        let Some(connector) = connector.upgrade() else {
            return;
        };
        let followers = followers.as_ref().and_then(|f| f.upgrade());
        learn_members(&connector, followers.as_deref()).await;
    }
}

/// Placement calls one client runs at once; more wait for a free stream.
pub const MAX_CALL_STREAMS: usize = 256;

#[derive(Clone)]
pub struct Client {
    connector: Arc<Connector>,
    tso: tso::Dispatcher,
    /// Idle request streams for placement calls.
    streams: Arc<tokio::sync::Mutex<Vec<RpcStream>>>,
    /// Placement calls in flight, each on its own stream: at most [`MAX_CALL_STREAMS`], well
    /// under the server's streams per connection, so the pool never waits on a stream the
    /// server will not grant.
    calls: Arc<tokio::sync::Semaphore>,
    regions: Arc<region_cache::RegionCache>,
    /// With `ClientOptions::follower_reads`: the members routing reads are spread over.
    followers: Option<Arc<FollowerReads>>,
}

impl Client {
    /// Connects to the first reachable endpoint and starts the TSO dispatcher.
    pub async fn connect(opts: ClientOptions) -> Result<Client, ClientError> {
        let connector = Arc::new(
            Connector::new(&opts.endpoints, &opts.trust, opts.retry_budget)
                .await?
                .with_silence_timeout(opts.silence_timeout),
        );
        connector.connection().await?;
        let tso = tso::Dispatcher::start(
            connector.clone(),
            opts.tso_streams.max(1),
            opts.tso_batch_hook.clone(),
        );
        let client = Client {
            connector,
            tso,
            streams: Default::default(),
            calls: Arc::new(tokio::sync::Semaphore::new(MAX_CALL_STREAMS)),
            regions: Default::default(),
            followers: opts
                .follower_reads
                .then(|| Arc::new(FollowerReads::new(opts.trust.clone(), opts.silence_timeout))),
        };
        // Learn every member, so the client survives the loss of the ones it was given, and
        // keep learning: a member that joined after this call is a place to go too.
        learn_members(&client.connector, client.followers.as_deref()).await;
        tokio::spawn(refresh_members(
            Arc::downgrade(&client.connector),
            client.followers.as_ref().map(Arc::downgrade),
        ));
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
