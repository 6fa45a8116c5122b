//! The Meridian members API as the shell uses it: list with health and leader, move the
//! leadership, delete a member. `AdminMembers` speaks the admin HTTPS API of the members at the
//! addresses a function of the cluster gives (its admin Service in Kubernetes, the processes in
//! the simulation), with the operator's `admin` client certificate.
//!
//! The certificate files are read again for every call, never cached: they come from a mounted
//! Secret, which the kubelet replaces in place when it is renewed, so the next call after a
//! renewal presents the new certificate and trusts the new CA without a restart. The kubelet
//! swaps the whole directory at once (a `..data` symlink), but three files are read one after
//! the other; a call that straddles a swap may fail, and the next reconcile reads them again.
//!
//! A failed call says what failed (`ReconcileError`): no member reachable, no leader, a
//! refusal, or the operator's own certificate.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use meridian::admin::AdminClient;
use meridian::tls::Trust;

use super::error::ReconcileError;
use crate::crd::MeridianCluster;
use crate::decide::snapshot::{MemberView, MembersView};

pub trait Members: Send + Sync {
    /// `None` when no member answered.
    fn list(&self, mc: &MeridianCluster) -> impl Future<Output = Option<MembersView>> + Send;
    /// Asks the leader to hand its term to `to` (waits for the hand-over to be accepted).
    /// `false` when `to` led already: nothing moved.
    fn transfer_leader(
        &self,
        mc: &MeridianCluster,
        to: &str,
    ) -> impl Future<Output = Result<bool, ReconcileError>> + Send;
    fn delete_member(
        &self,
        mc: &MeridianCluster,
        name: &str,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send;
}

type Addresses = dyn Fn(&MeridianCluster) -> Vec<String> + Send + Sync;

/// The admin API over HTTPS, tried at each address in turn, with the operator's `admin`
/// client certificate. `trust` names files; each call builds its client from them afresh.
#[derive(Clone)]
pub struct AdminMembers {
    addresses: Arc<Addresses>,
    trust: Trust,
    timeout: Duration,
}

impl AdminMembers {
    pub fn new(
        addresses: impl Fn(&MeridianCluster) -> Vec<String> + Send + Sync + 'static,
        trust: Trust,
    ) -> Self {
        AdminMembers {
            addresses: Arc::new(addresses),
            trust,
            timeout: Duration::from_secs(3),
        }
    }

    /// The admin Service of a cluster in Kubernetes.
    pub fn in_cluster(trust: Trust) -> Self {
        Self::new(
            |mc| {
                use kube::ResourceExt;
                vec![format!(
                    "https://{}-admin.{}.svc:{}",
                    mc.name_any(),
                    mc.namespace().unwrap_or_else(|| "default".into()),
                    crate::decide::resources::ADMIN_PORT
                )]
            },
            trust,
        )
    }

    /// The first address that answers `GET /api/v1/members`, with its body.
    async fn members_json(&self, mc: &MeridianCluster) -> Option<serde_json::Value> {
        let addresses = (self.addresses)(mc);
        let timeout = self.timeout;
        let trust = self.trust.clone();
        tokio::task::spawn_blocking(move || {
            let client = match AdminClient::with_timeout("localhost", &trust, timeout) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("admin client: {e:#}");
                    return None;
                }
            };
            addresses
                .iter()
                .find_map(|a| match client.at(a).get_json("/api/v1/members") {
                    Ok((200, body)) => Some(body),
                    _ => None,
                })
        })
        .await
        .ok()
        .flatten()
    }

    /// The leader's name and admin address, from the members API.
    async fn leader(&self, mc: &MeridianCluster) -> Result<(String, String), ReconcileError> {
        let body =
            self.members_json(mc)
                .await
                .ok_or_else(|| ReconcileError::MembersUnreachable {
                    what: "GET /api/v1/members".into(),
                    source: anyhow!("no member answered"),
                })?;
        let name = parse_members(&body)
            .leader()
            .map(|l| l.name.clone())
            .ok_or(ReconcileError::NoLeader)?;
        let url = admin_url_of(&body, &name).ok_or_else(|| ReconcileError::MembersUnreachable {
            what: format!("the leader {name}"),
            source: anyhow!("it lists no admin address"),
        })?;
        Ok((name, url))
    }

    /// One admin call, `verb path` at `url`, off the async threads (the admin client blocks).
    async fn call(
        &self,
        verb: Verb,
        url: String,
        path: String,
    ) -> Result<(u16, String), ReconcileError> {
        // Long enough for a transfer, which the leader answers once the hand-over is done.
        let timeout = self.timeout.max(Duration::from_secs(12));
        let trust = self.trust.clone();
        tokio::task::spawn_blocking(move || {
            // Building the client only reads the certificate files.
            let client = AdminClient::with_timeout(&url, &trust, timeout)
                .map_err(ReconcileError::AdminTls)?;
            let reply = match verb {
                Verb::Post => client.post(&path),
                Verb::Delete => client.delete(&path),
            };
            reply.map_err(|source| ReconcileError::MembersUnreachable {
                what: format!("{} {url}{path}", verb.name()),
                source,
            })
        })
        .await?
    }
}

/// The admin calls that change something.
#[derive(Debug, Clone, Copy)]
enum Verb {
    Post,
    Delete,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        }
    }
}

/// Reads the members API body; members without a name or id are skipped.
pub fn parse_members(body: &serde_json::Value) -> MembersView {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    MembersView {
        cluster_id: text(&body["cluster_id"]),
        members: body["members"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .filter_map(|m| {
                        Some(MemberView {
                            name: m["name"].as_str()?.to_string(),
                            id: text(&m["id"])?,
                            healthy: m["healthy"].as_bool().unwrap_or(false),
                            is_leader: m["is_leader"].as_bool().unwrap_or(false),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn admin_url_of(body: &serde_json::Value, name: &str) -> Option<String> {
    body["members"]
        .as_array()?
        .iter()
        .find(|m| m["name"] == name)?["admin_url"]
        .as_str()
        .map(str::to_string)
}

impl Members for AdminMembers {
    async fn list(&self, mc: &MeridianCluster) -> Option<MembersView> {
        self.members_json(mc).await.map(|b| parse_members(&b))
    }

    async fn transfer_leader(
        &self,
        mc: &MeridianCluster,
        to: &str,
    ) -> Result<bool, ReconcileError> {
        let (leader, url) = self.leader(mc).await?;
        if leader == to {
            return Ok(false);
        }
        let path = format!("/api/v1/leader/transfer/{to}");
        let (status, reply) = self.call(Verb::Post, url, path).await?;
        if status != 200 {
            return Err(ReconcileError::MemberRefused {
                call: format!("transfer from {leader} to {to}"),
                status,
                reply,
            });
        }
        Ok(true)
    }

    async fn delete_member(&self, mc: &MeridianCluster, name: &str) -> Result<(), ReconcileError> {
        // Any member on etcd can remove one; the leader answers for sure.
        let (_, url) = self.leader(mc).await?;
        let path = format!("/api/v1/members/{name}");
        let (status, reply) = self.call(Verb::Delete, url, path).await?;
        match status {
            // Already gone is what was wanted.
            200 | 404 => Ok(()),
            _ => Err(ReconcileError::MemberRefused {
                call: format!("delete member {name}"),
                status,
                reply,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_body() {
        let body = serde_json::json!({
            "cluster_id": 42,
            "leader": {"name": "pd-1"},
            "members": [
                {"name": "pd-0", "id": 7, "healthy": true, "is_leader": false, "admin_url": "http://a"},
                {"name": "pd-1", "id": "8", "healthy": true, "is_leader": true, "admin_url": "http://b"},
                {"id": 9},
                {"name": "pd-2", "id": 10},
            ]
        });
        let v = parse_members(&body);
        assert_eq!(v.cluster_id.as_deref(), Some("42"));
        assert_eq!(v.members.len(), 3);
        assert_eq!(v.leader().unwrap().name, "pd-1");
        assert!(!v.members[2].healthy, "health unknown is not healthy");
        assert_eq!(admin_url_of(&body, "pd-1").as_deref(), Some("http://b"));
    }
}
