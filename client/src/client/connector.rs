//! The connection: resolved endpoints, one live QUIC connection shared by all streams, and
//! reconnection with exponential backoff across endpoints when it is lost.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;

use super::error::ClientError;
use crate::datagram;
use crate::tls::{self, Trust};

/// How long a handshake may take before the next member is tried.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(500);

#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    server_name: String,
}

pub struct Connector {
    endpoint: quinn::Endpoint,
    /// The given endpoints, plus leaders learnt from `NotLeader` replies.
    targets: std::sync::Mutex<Vec<Target>>,
    current: Mutex<Option<(u64, quinn::Connection)>>,
    generation: AtomicU64,
    /// Index of the target that answered last; reconnection starts there.
    preferred: AtomicU64,
    pub(crate) retry_budget: Duration,
    /// See `ClientOptions::silence_timeout`.
    pub(crate) silence_timeout: Duration,
    /// Members that went silent under a request, until when they are tried last.
    suspects: std::sync::Mutex<Vec<(SocketAddr, tokio::time::Instant)>>,
}

impl Connector {
    pub async fn new(
        endpoints: &[String],
        trust: &Trust,
        retry_budget: Duration,
    ) -> Result<Self, ClientError> {
        if endpoints.is_empty() {
            return Err(ClientError::Config("no endpoints given".into()));
        }
        let mut targets = Vec::new();
        for ep in endpoints {
            targets.push(resolve(ep).await?);
        }
        let bind: SocketAddr = if targets.first().is_some_and(|t| t.addr.is_ipv6()) {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        }
        .parse()
        .map_err(|e| ClientError::Config(format!("{e}")))?;
        let mut endpoint = client_endpoint(bind)?;
        endpoint.set_default_client_config(
            tls::client_config(trust).map_err(|e| ClientError::Config(e.to_string()))?,
        );
        Ok(Connector {
            endpoint,
            targets: std::sync::Mutex::new(targets),
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            preferred: AtomicU64::new(0),
            retry_budget,
            silence_timeout: Duration::from_millis(2500),
            suspects: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Sets the silence timeout (see `ClientOptions::silence_timeout`).
    pub fn with_silence_timeout(mut self, timeout: Duration) -> Self {
        self.silence_timeout = timeout;
        self
    }

    /// Whether `addr` went silent recently.
    fn is_suspect(&self, addr: SocketAddr) -> bool {
        let now = tokio::time::Instant::now();
        self.suspects.lock().is_ok_and(|mut s| {
            s.retain(|(_, until)| *until > now);
            s.iter().any(|(a, _)| *a == addr)
        })
    }

    /// The connection of `generation` went silent under a request: drop it, and try its
    /// member last for a while, so the next attempt asks the others who leads now.
    pub async fn suspect(&self, generation: u64) {
        let mut current = self.current.lock().await;
        if let Some((g, conn)) = current.as_ref() {
            if *g == generation {
                let until = tokio::time::Instant::now() + self.silence_timeout;
                if let Ok(mut s) = self.suspects.lock() {
                    s.retain(|(a, _)| *a != conn.remote_address());
                    s.push((conn.remote_address(), until));
                }
                conn.close(0u32.into(), b"silent");
                *current = None;
            }
        }
    }

    /// The live connection and its generation, connecting (with backoff over every endpoint,
    /// within the retry budget) if there is none.
    pub async fn connection(&self) -> Result<(u64, quinn::Connection), ClientError> {
        let mut current = self.current.lock().await;
        if let Some((generation, conn)) = current.as_ref() {
            if conn.close_reason().is_none() {
                return Ok((*generation, conn.clone()));
            }
        }
        let deadline = tokio::time::Instant::now() + self.retry_budget;
        let mut backoff = Duration::from_millis(10);
        let mut last_error = String::from("no endpoint tried");
        loop {
            let targets = self.targets();
            let start = self.preferred.load(Ordering::Relaxed) as usize;
            // From the preferred target on; members that went silent lately come last.
            let mut order: Vec<usize> = (0..targets.len())
                .map(|i| (start + i) % targets.len())
                .collect();
            order.sort_by_key(|&i| self.is_suspect(targets[i].addr));
            for index in order {
                let target = &targets[index];
                match self.try_connect(target).await {
                    Ok(conn) => {
                        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
                        self.preferred.store(index as u64, Ordering::Relaxed);
                        *current = Some((generation, conn.clone()));
                        return Ok((generation, conn));
                    }
                    Err(e) => last_error = format!("{}: {e}", target.addr),
                }
            }
            if tokio::time::Instant::now() + backoff > deadline {
                return Err(ClientError::Unavailable(last_error));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    async fn try_connect(&self, target: &Target) -> Result<quinn::Connection, ClientError> {
        let connecting = self
            .endpoint
            .connect(target.addr, &target.server_name)
            .map_err(|e| ClientError::Config(e.to_string()))?;
        // Short: a member that is down should cost little before the next one is tried.
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, connecting).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(ClientError::Transport(e.to_string())),
            Err(_) => Err(ClientError::Silent(HANDSHAKE_TIMEOUT)),
        }
    }

    fn targets(&self) -> Vec<Target> {
        self.targets.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Follows a `NotLeader` reply: the next connection goes to `client_url` first, and the
    /// current one is dropped if it is to another member.
    pub async fn redirect(&self, client_url: &str) {
        let Ok(target) = resolve(client_url).await else {
            return;
        };
        self.learn(client_url).await;
        if self.is_suspect(target.addr) {
            // The member named went silent under us just now: it may be paused while its
            // lease runs out. Ask the next member instead of waiting on it again.
            self.preferred.fetch_add(1, Ordering::Relaxed);
            let mut current = self.current.lock().await;
            if let Some((_, conn)) = current.take() {
                conn.close(0u32.into(), b"asking another member");
            }
            return;
        }
        let index = match self.targets.lock() {
            Ok(targets) => match targets.iter().position(|t| t.addr == target.addr) {
                Some(i) => i,
                None => return,
            },
            Err(_) => return,
        };
        self.preferred.store(index as u64, Ordering::Relaxed);
        let mut current = self.current.lock().await;
        if current
            .as_ref()
            .is_some_and(|(_, c)| c.remote_address() != target.addr)
        {
            if let Some((_, conn)) = current.take() {
                conn.close(0u32.into(), b"following the leader");
            }
        }
    }

    /// Adds a member's address to the targets (no effect if known or unresolvable).
    pub async fn learn(&self, client_url: &str) {
        let Ok(target) = resolve(client_url).await else {
            return;
        };
        if let Ok(mut targets) = self.targets.lock() {
            if !targets.iter().any(|t| t.addr == target.addr) {
                targets.push(target);
            }
        }
    }

    /// A member that does not know the leader: try the next one.
    pub async fn skip(&self, generation: u64) {
        self.preferred.fetch_add(1, Ordering::Relaxed);
        self.invalidate(generation).await;
    }

    /// Drops the connection of `generation` after a transport failure, unless another caller
    /// already replaced it.
    pub async fn invalidate(&self, generation: u64) {
        let mut current = self.current.lock().await;
        if matches!(current.as_ref(), Some((g, _)) if *g == generation) {
            if let Some((_, conn)) = current.take() {
                conn.close(0u32.into(), b"reconnecting");
            }
        }
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        self.endpoint.close(0u32.into(), b"client dropped");
    }
}

/// `host:port` to an address and the TLS server name (the host part).
async fn resolve(endpoint: &str) -> Result<Target, ClientError> {
    let host = endpoint
        .rsplit_once(':')
        .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
        .ok_or_else(|| ClientError::Config(format!("endpoint {endpoint} is not host:port")))?;
    let addr = tokio::net::lookup_host(endpoint)
        .await
        .map_err(|e| ClientError::Config(format!("resolving {endpoint}: {e}")))?
        .next()
        .ok_or_else(|| ClientError::Config(format!("{endpoint} resolves to nothing")))?;
    Ok(Target {
        addr,
        server_name: host.to_string(),
    })
}

/// A client endpoint that accepts datagrams as large as QUIC allows, so replies can grow with
/// the path (`quinn::Endpoint::client` would cap them at Ethernet's 1472 bytes).
fn client_endpoint(bind: SocketAddr) -> Result<quinn::Endpoint, ClientError> {
    let socket_error = |e: std::io::Error| ClientError::Config(format!("client socket: {e}"));
    let mut config = quinn::EndpointConfig::default();
    datagram::accept_up_to(&mut config, datagram::MAX_UDP_PAYLOAD)
        .map_err(|e| ClientError::Config(e.to_string()))?;
    let runtime = quinn::default_runtime()
        .ok_or_else(|| ClientError::Config("no async runtime for the client endpoint".into()))?;
    let socket = std::net::UdpSocket::bind(bind).map_err(socket_error)?;
    quinn::Endpoint::new(config, None, socket, runtime).map_err(socket_error)
}
