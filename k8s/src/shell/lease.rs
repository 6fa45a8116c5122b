//! The operator's leader election on a `coordination.k8s.io` Lease, the I/O half: read the
//! Lease, write it back with its resourceVersion (a lost race is a 409, never two holders),
//! and report losing it so the process stops acting. Each round tells the probes whether the
//! API server answered (a follower's readiness). Decisions in `decide::lease`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;

use super::endpoint::Probes;
use crate::decide::lease::{self, Step};

pub struct Elector {
    api: Api<Lease>,
    name: String,
    me: String,
    duration: Duration,
    probes: Option<Arc<Probes>>,
}

fn observed(l: &Lease) -> lease::Observed {
    let spec = l.spec.clone().unwrap_or_default();
    lease::Observed {
        holder: spec.holder_identity,
        renewed_ms: spec.renew_time.map_or(0, |t| t.0.as_millisecond()),
        duration_ms: i64::from(spec.lease_duration_seconds.unwrap_or(15)) * 1_000,
    }
}

impl Elector {
    pub fn new(client: Client, namespace: &str, name: &str, me: &str, duration: Duration) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.into(),
            me: me.into(),
            duration,
            probes: None,
        }
    }

    /// Reports every round's reach of the API server to `probes`.
    pub fn reporting(mut self, probes: Arc<Probes>) -> Self {
        self.probes = Some(probes);
        self
    }

    /// One round: read, decide, write. `Ok(true)` while this replica holds the Lease.
    pub async fn try_hold(&self) -> anyhow::Result<bool> {
        let held = self.round().await;
        if let Some(p) = &self.probes {
            p.api_reached(held.is_ok());
        }
        held
    }

    async fn round(&self) -> anyhow::Result<bool> {
        let now = Timestamp::now();
        let current = self.api.get_opt(&self.name).await?;
        let step = lease::decide(
            current.as_ref().map(observed).as_ref(),
            &self.me,
            now.as_millisecond(),
        );
        let transitions = current
            .as_ref()
            .and_then(|l| l.spec.as_ref()?.lease_transitions)
            .unwrap_or(0);
        let spec = |acquired: Option<MicroTime>, transitions| LeaseSpec {
            holder_identity: Some(self.me.clone()),
            lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
            acquire_time: acquired,
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        };
        let written = match (step, current) {
            (Step::Follow { .. }, _) => return Ok(false),
            (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec(Some(MicroTime(now)), 0)),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            (step, Some(mut lease)) => {
                let acquired = match step {
                    Step::Renew => lease.spec.as_ref().and_then(|s| s.acquire_time.clone()),
                    _ => Some(MicroTime(now)),
                };
                let transitions = if step == Step::Renew {
                    transitions
                } else {
                    transitions + 1
                };
                lease.spec = Some(spec(acquired, transitions));
                // `replace` carries metadata.resourceVersion: a concurrent writer makes it 409.
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Blocks until this replica holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_hold().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!("lease {}: {e:#}", self.name),
            }
            tokio::time::sleep(self.duration / 5).await;
        }
    }

    /// Renews until a renewal cannot be proven in time; returns when this replica must stop.
    pub async fn hold(&self) -> anyhow::Error {
        let duration_ms = self.duration.as_millis() as i64;
        let mut renewed = Timestamp::now().as_millisecond();
        loop {
            tokio::time::sleep(self.duration / 5).await;
            let attempt = Timestamp::now().as_millisecond();
            match self.try_hold().await {
                Ok(true) => renewed = attempt,
                Ok(false) => {
                    return anyhow::anyhow!("lease {} taken by another replica", self.name)
                }
                Err(e) => tracing::warn!("renewing lease {}: {e:#}", self.name),
            }
            if lease::must_stop(renewed, duration_ms, Timestamp::now().as_millisecond()) {
                return anyhow::anyhow!("lease {} not renewed in time", self.name);
            }
        }
    }
}
