//! The etcd behind the proxy: gRPC connections to the `--etcd` endpoints, with the TLS and
//! the etcd user of `--etcd-ca/--etcd-cert/--etcd-key/--etcd-user` (`meta::EtcdAccess`), and
//! the calls made over them.
//!
//! Each endpoint gets `CONNECTIONS_PER_ENDPOINT` plain lazily connected channels, and calls
//! go round-robin over the current endpoint's; a call that finds the endpoint unavailable
//! moves the next calls to the next endpoint. Not tonic's `Channel::balance_list`: its one
//! buffer task and power-of-two-choices balancer sit in front of every call, and all of the
//! proxy's traffic then shares one HTTP/2 connection to etcd.
//!
//! Owns the connections, the etcd auth token (logged in on first use, renewed when etcd says
//! it is no longer valid) and the deadline of unary calls. Must not rewrite keys
//! (`namespace`) or decide who may call (`auth`): it forwards what it is given.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::RwLock;
use std::time::Duration;

use anyhow::Context;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};

use crate::etcdpb::etcdserverpb::auth_client::AuthClient;
use crate::etcdpb::etcdserverpb::AuthenticateRequest;
use crate::meta::EtcdAccess;

/// A unary call that etcd has not answered by then fails, so a lost etcd cannot hold a
/// client's request (and its task) for ever; clients retry on their own deadlines.
const UNARY_TIMEOUT: Duration = Duration::from_secs(10);

/// Connecting to an etcd endpoint gives up after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// HTTP/2 pings on the channel: a watch or keep-alive stream over a connection that died
/// silently ends within interval + timeout instead of hanging.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// HTTP/2 connections the proxy keeps to each etcd endpoint, each with its own tonic buffer
/// task, so that the calls of a busy node are not all serialized through one task and one
/// connection (whose frames etcd's TLS server handles on one goroutine).
const CONNECTIONS_PER_ENDPOINT: usize = 4;

/// Largest message read from etcd: a Range over many keys can be large (etcd's own limit on
/// what it sends is far higher; tonic's default of 4 MiB would refuse what etcdctl accepts).
pub const MAX_RESPONSE: usize = 64 << 20;

/// Where the etcd the node runs on is, and how to get in: `--etcd` and its access flags.
#[derive(Clone, Debug)]
pub struct EtcdUpstream {
    pub endpoints: Vec<String>,
    pub access: EtcdAccess,
}

/// What a client's call carries that etcd acts on: `hasleader` (clientv3's
/// `WithRequireLeader`, which makes etcd refuse rather than serve without a raft leader).
#[derive(Clone, Copy, Debug, Default)]
pub struct Hints {
    require_leader: bool,
}

const REQUIRE_LEADER: &str = "hasleader";
const TOKEN: &str = "token";

impl Hints {
    pub fn of<T>(request: &Request<T>) -> Hints {
        Hints {
            require_leader: request.metadata().get(REQUIRE_LEADER).is_some(),
        }
    }
}

/// etcd's answer to a token it no longer knows (restarted, or the token's TTL passed).
fn invalid_token(status: &Status) -> bool {
    match status.code() {
        Code::Unauthenticated => true,
        Code::Unknown | Code::InvalidArgument => status.message().contains("invalid auth token"),
        _ => false,
    }
}

pub struct Upstream {
    /// Each endpoint's connections, in `--etcd` order.
    endpoints: Vec<Vec<Channel>>,
    /// The endpoint calls go to, until one finds it unavailable.
    current: AtomicUsize,
    /// Turns over the current endpoint's connections.
    next: AtomicUsize,
    login: Option<(String, String)>,
    token: RwLock<Option<AsciiMetadataValue>>,
    /// One login at a time: calls that all found the token stale log in once.
    logging_in: tokio::sync::Mutex<()>,
}

impl Upstream {
    /// Channels to every endpoint, connected lazily: nothing is dialled until the first
    /// call, so a node whose etcd is briefly away still starts (its control side already
    /// checked etcd at start). Must run inside the gRPC front end's runtime, which it spawns
    /// the channels' buffer tasks on.
    pub fn new(etcd: &EtcdUpstream) -> anyhow::Result<Upstream> {
        let tls = etcd.access.grpc_tls();
        let mut endpoints = Vec::with_capacity(etcd.endpoints.len());
        for e in &etcd.endpoints {
            let url = etcd.access.endpoint_url(e);
            let mut endpoint = Endpoint::from_shared(url.clone())
                .with_context(|| format!("--etcd {e}: not a URL"))?
                .connect_timeout(CONNECT_TIMEOUT)
                .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
                .keep_alive_timeout(KEEPALIVE_TIMEOUT)
                .keep_alive_while_idle(true)
                .tcp_nodelay(true);
            if let Some(tls) = &tls {
                endpoint = endpoint
                    .tls_config(tls.clone())
                    .with_context(|| format!("--etcd {e}: TLS"))?;
            }
            endpoints.push(
                (0..CONNECTIONS_PER_ENDPOINT)
                    .map(|_| endpoint.connect_lazy())
                    .collect(),
            );
        }
        anyhow::ensure!(!endpoints.is_empty(), "no etcd endpoint");
        Ok(Upstream {
            endpoints,
            current: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            login: etcd
                .access
                .credentials()
                .map(|(user, password)| (user.to_string(), password.to_string())),
            token: RwLock::new(None),
            logging_in: tokio::sync::Mutex::new(()),
        })
    }

    /// The connection the next call goes over.
    pub fn channel(&self) -> Channel {
        self.pick().1
    }

    /// The current endpoint, and the next of its connections.
    fn pick(&self) -> (usize, Channel) {
        let endpoint = self.current.load(Ordering::Relaxed) % self.endpoints.len();
        let connections = &self.endpoints[endpoint];
        let n = self.next.fetch_add(1, Ordering::Relaxed) % connections.len();
        (endpoint, connections[n].clone())
    }

    /// Moves the calls after one that found `endpoint` unavailable (unreachable, or without a
    /// raft leader) to the next endpoint, as etcd's own client does; once per failure, however
    /// many calls saw it.
    fn unavailable(&self, endpoint: usize, status: &Status) {
        if status.code() == Code::Unavailable && self.endpoints.len() > 1 {
            let after = (endpoint + 1) % self.endpoints.len();
            let _ = self.current.compare_exchange(
                endpoint,
                after,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    fn current_token(&self) -> Option<AsciiMetadataValue> {
        self.token.read().ok().and_then(|t| t.clone())
    }

    /// The token to send, logging in first when there is a user and no token yet.
    async fn token(&self) -> Result<Option<AsciiMetadataValue>, Status> {
        if self.login.is_none() {
            return Ok(None);
        }
        match self.current_token() {
            Some(token) => Ok(Some(token)),
            None => self.log_in(None).await.map(Some),
        }
    }

    /// Logs in again unless another call already replaced `stale`.
    async fn log_in(
        &self,
        stale: Option<AsciiMetadataValue>,
    ) -> Result<AsciiMetadataValue, Status> {
        let _one = self.logging_in.lock().await;
        if let Some(current) = self.current_token() {
            if Some(&current) != stale.as_ref() {
                return Ok(current);
            }
        }
        let Some((name, password)) = self.login.clone() else {
            return Err(Status::internal("no etcd user to log in as"));
        };
        if stale.is_some() {
            tracing::info!(user = %name, "etcd no longer knows the proxy's token; logging in again");
        }
        let mut request = Request::new(AuthenticateRequest { name, password });
        request.set_timeout(UNARY_TIMEOUT);
        let reply = AuthClient::new(self.channel())
            .authenticate(request)
            .await?
            .into_inner();
        let token = AsciiMetadataValue::try_from(reply.token.as_str())
            .map_err(|_| Status::internal("etcd returned an auth token that is not ASCII"))?;
        if let Ok(mut slot) = self.token.write() {
            *slot = Some(token.clone());
        }
        Ok(token)
    }

    /// Forgets the token, so the next call logs in again: for a stream that etcd refused
    /// with an invalid token, which cannot be replayed.
    pub fn forget_token(&self) {
        if let Ok(mut slot) = self.token.write() {
            *slot = None;
        }
    }

    fn wrap<Q>(
        message: Q,
        token: Option<&AsciiMetadataValue>,
        hints: Hints,
        timeout: Option<Duration>,
    ) -> Request<Q> {
        let mut request = Request::new(message);
        if let Some(token) = token {
            request.metadata_mut().insert(TOKEN, token.clone());
        }
        if hints.require_leader {
            request
                .metadata_mut()
                .insert(REQUIRE_LEADER, AsciiMetadataValue::from_static("true"));
        }
        if let Some(timeout) = timeout {
            request.set_timeout(timeout);
        }
        request
    }

    /// One unary call: sent with the token, and sent again once after a new login when etcd
    /// refused the token. etcd's own errors come back as they are (clients match on them).
    pub async fn unary<Q, A, F, Fut>(&self, message: Q, hints: Hints, call: F) -> Result<A, Status>
    where
        Q: Clone,
        F: Fn(Channel, Request<Q>) -> Fut,
        Fut: Future<Output = Result<Response<A>, Status>>,
    {
        let token = self.token().await?;
        // Kept for a second try only where there is a login to renew.
        let again = self.login.as_ref().map(|_| message.clone());
        let request = Self::wrap(message, token.as_ref(), hints, Some(UNARY_TIMEOUT));
        match self.call_once(&call, request).await {
            Err(status) if self.refused_token(&status) => {
                let Some(message) = again else {
                    return Err(status);
                };
                let token = self.log_in(token).await?;
                let request = Self::wrap(message, Some(&token), hints, Some(UNARY_TIMEOUT));
                self.call_once(&call, request).await
            }
            answered => answered,
        }
    }

    /// One unary call over the next connection.
    async fn call_once<Q, A, F, Fut>(&self, call: &F, request: Request<Q>) -> Result<A, Status>
    where
        F: Fn(Channel, Request<Q>) -> Fut,
        Fut: Future<Output = Result<Response<A>, Status>>,
    {
        let (endpoint, channel) = self.pick();
        match call(channel, request).await {
            Ok(answer) => Ok(answer.into_inner()),
            Err(status) => {
                self.unavailable(endpoint, &status);
                Err(status)
            }
        }
    }

    /// The request that opens a stream (no deadline: it lives as long as the client's).
    pub async fn stream_request<Q>(&self, messages: Q, hints: Hints) -> Result<Request<Q>, Status> {
        let token = self.token().await?;
        Ok(Self::wrap(messages, token.as_ref(), hints, None))
    }

    /// Whether etcd refused the token in `status`, when there is a login to renew it with.
    pub fn refused_token(&self, status: &Status) -> bool {
        self.login.is_some() && invalid_token(status)
    }
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("user", &self.login.as_ref().map(|(user, _)| user))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcdpb::etcdserverpb::kv_client::KvClient;
    use crate::etcdpb::etcdserverpb::RangeRequest;

    /// Two endpoints where nothing listens (port 1 refuses at once), never dialled until a call.
    fn two_endpoints() -> Upstream {
        Upstream::new(&EtcdUpstream {
            endpoints: vec!["127.0.0.1:1".into(), "127.0.0.2:1".into()],
            access: EtcdAccess::default(),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn calls_stay_on_one_endpoint_until_it_is_unavailable_then_move_to_the_next() {
        let up = two_endpoints();
        for _ in 0..2 * CONNECTIONS_PER_ENDPOINT {
            assert_eq!(up.pick().0, 0);
        }
        up.unavailable(0, &Status::internal("etcd's own error"));
        assert_eq!(up.pick().0, 0, "only unavailability moves the calls");
        up.unavailable(0, &Status::unavailable("down"));
        assert_eq!(up.pick().0, 1);
        up.unavailable(0, &Status::unavailable("a late failure from the one left"));
        assert_eq!(
            up.pick().0,
            1,
            "a late failure does not move the calls again"
        );
        up.unavailable(1, &Status::unavailable("down too"));
        assert_eq!(up.pick().0, 0);
    }

    #[tokio::test]
    async fn a_call_that_cannot_reach_its_endpoint_fails_unavailable_and_moves_the_next() {
        let up = two_endpoints();
        let refused = up
            .unary(
                RangeRequest::default(),
                Hints::default(),
                |channel, r| async move { KvClient::new(channel).range(r).await },
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::Unavailable, "{refused}");
        assert_eq!(up.pick().0, 1);
    }
}
