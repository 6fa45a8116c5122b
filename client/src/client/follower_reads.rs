//! Routing reads spread over every member (`ClientOptions::follower_reads`): each read goes to
//! the next member in turn, on a stream marked with `AllowFollowerHandle` (PD's
//! `pd-allow-follower-handle`), so a follower in sync answers it from its copy of the leader's
//! index. Anything but an answer (a follower out of sync refuses with `NotLeader`, a member
//! that is down or silent) sends the read to the leader instead, and that member is left out
//! for a while. It owns one connection per member and its marked streams; it does not retry
//! (the leader path does) and never writes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::connector::Connector;
use super::rpc::RpcStream;
use crate::proto::{Reply, Request, Response};
use crate::tls::Trust;

/// How long a member that failed a read is left out.
const BENCHED: Duration = Duration::from_secs(5);

struct Member {
    client_url: String,
    connector: Arc<Connector>,
    /// Idle streams already marked.
    idle: Mutex<Vec<RpcStream>>,
    benched_until: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Member {
    fn is_benched(&self) -> bool {
        let now = tokio::time::Instant::now();
        self.benched_until
            .lock()
            .is_ok_and(|until| until.is_some_and(|t| t > now))
    }

    fn bench(&self) {
        if let Ok(mut until) = self.benched_until.lock() {
            *until = Some(tokio::time::Instant::now() + BENCHED);
        }
    }

    /// An idle marked stream, or a new one marked now.
    async fn stream(&self) -> Option<RpcStream> {
        if let Some(s) = self.idle.lock().await.pop() {
            return Some(s);
        }
        let mut stream = RpcStream::open(self.connector.clone()).await.ok()?;
        match stream.call(&Request::AllowFollowerHandle).await {
            Ok(Response::Ok(Reply::Done)) => Some(stream),
            _ => None,
        }
    }
}

pub(super) struct FollowerReads {
    trust: Trust,
    silence_timeout: Duration,
    members: std::sync::RwLock<Vec<Arc<Member>>>,
    next: AtomicUsize,
}

impl FollowerReads {
    pub(super) fn new(trust: Trust, silence_timeout: Duration) -> Self {
        FollowerReads {
            trust,
            silence_timeout,
            members: Default::default(),
            next: AtomicUsize::new(0),
        }
    }

    /// Adds a member to read from (no effect if known, or if it cannot be resolved).
    pub(super) async fn learn(&self, client_url: &str) {
        let known = self
            .members
            .read()
            .is_ok_and(|m| m.iter().any(|m| m.client_url == client_url));
        if known {
            return;
        }
        // One try per read, no backoff: a member that is down costs one handshake timeout,
        // then it is benched and the leader answers.
        let Ok(connector) =
            Connector::new(&[client_url.to_string()], &self.trust, Duration::ZERO).await
        else {
            return;
        };
        let member = Arc::new(Member {
            client_url: client_url.to_string(),
            connector: Arc::new(connector.with_silence_timeout(self.silence_timeout)),
            idle: Default::default(),
            benched_until: Default::default(),
        });
        if let Ok(mut members) = self.members.write() {
            if !members.iter().any(|m| m.client_url == client_url) {
                members.push(member);
            }
        }
    }

    /// The next member in turn that is not benched.
    fn pick(&self) -> Option<Arc<Member>> {
        let members = self.members.read().ok()?;
        let n = members.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..n)
            .map(|i| &members[(start + i) % n])
            .find(|m| !m.is_benched())
            .cloned()
    }

    /// `req` answered by the next member in turn, or `None` when it did not answer (the
    /// caller asks the leader). An error reply is no answer: a follower out of sync refuses
    /// what the leader would answer.
    pub(super) async fn read(&self, req: &Request) -> Option<Reply> {
        let member = self.pick()?;
        let Some(mut stream) = member.stream().await else {
            member.bench();
            return None;
        };
        match stream.call(req).await {
            Ok(Response::Ok(reply)) => {
                member.idle.lock().await.push(stream);
                Some(reply)
            }
            Ok(Response::Err(_)) => {
                member.idle.lock().await.push(stream);
                member.bench();
                None
            }
            // A failed stream is dropped: a new one is marked again.
            Err(_) => {
                member.bench();
                None
            }
        }
    }
}
