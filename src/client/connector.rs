//! The connection: resolved endpoints, one live QUIC connection shared by all streams, and
//! reconnection with exponential backoff across endpoints when it is lost.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;

use super::error::ClientError;
use crate::tls::{self, Trust};

struct Target {
    addr: SocketAddr,
    server_name: String,
}

pub struct Connector {
    endpoint: quinn::Endpoint,
    targets: Vec<Target>,
    current: Mutex<Option<(u64, quinn::Connection)>>,
    generation: AtomicU64,
    /// Index of the target that answered last; reconnection starts there.
    preferred: AtomicU64,
    pub(crate) retry_budget: Duration,
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
            let host = ep
                .rsplit_once(':')
                .map(|(h, _)| h.trim_start_matches('[').trim_end_matches(']'))
                .ok_or_else(|| ClientError::Config(format!("endpoint {ep} is not host:port")))?;
            let addr = tokio::net::lookup_host(ep.as_str())
                .await
                .map_err(|e| ClientError::Config(format!("resolving {ep}: {e}")))?
                .next()
                .ok_or_else(|| ClientError::Config(format!("{ep} resolves to nothing")))?;
            targets.push(Target {
                addr,
                server_name: host.to_string(),
            });
        }
        let bind: SocketAddr = if targets[0].addr.is_ipv6() {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        }
        .parse()
        .map_err(|e| ClientError::Config(format!("{e}")))?;
        let mut endpoint = quinn::Endpoint::client(bind)
            .map_err(|e| ClientError::Config(format!("client socket: {e}")))?;
        endpoint.set_default_client_config(
            tls::client_config(trust).map_err(|e| ClientError::Config(e.to_string()))?,
        );
        Ok(Connector {
            endpoint,
            targets,
            current: Mutex::new(None),
            generation: AtomicU64::new(0),
            preferred: AtomicU64::new(0),
            retry_budget,
        })
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
        let start = self.preferred.load(Ordering::Relaxed) as usize;
        loop {
            for i in 0..self.targets.len() {
                let index = (start + i) % self.targets.len();
                let target = &self.targets[index];
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

    async fn try_connect(&self, target: &Target) -> Result<quinn::Connection, String> {
        let connecting = self
            .endpoint
            .connect(target.addr, &target.server_name)
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(Duration::from_secs(2), connecting).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("handshake timed out".into()),
        }
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

    /// The QUIC endpoint, for tests that need to speak raw bytes over a verified connection.
    pub fn endpoint(&self) -> &quinn::Endpoint {
        &self.endpoint
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        self.endpoint.close(0u32.into(), b"client dropped");
    }
}
