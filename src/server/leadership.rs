//! The leadership loop of an etcd-backed node: campaign; on winning, start the TSO window above
//! the last persisted limit with guarded writes (T3, T4) and serve until the term ends; then
//! stop serving *before* giving the key up, so two nodes never serve at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::control::{Ended, TsoControl};
use crate::admin::Metrics;
use crate::election::Election;
use crate::meta::{EtcdStore, Keys};
use crate::proto::MemberInfo;
use crate::tso::{Allocator, WindowConfig};

pub struct Leadership {
    pub election: Election,
    pub store: EtcdStore,
    pub keys: Keys,
    pub cfg: WindowConfig,
    pub tick: Duration,
    pub allocator: Arc<Allocator>,
    pub metrics: Arc<Metrics>,
    pub leader: watch::Sender<Option<MemberInfo>>,
}

impl Leadership {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            let term = match self.election.campaign(&self.leader, &mut shutdown).await {
                Ok(Some(term)) => Arc::new(term),
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("campaign failed: {e}; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                        _ = shutdown.wait_for(|s| *s) => return,
                    }
                }
            };
            tracing::info!("elected leader");
            let tso = TsoControl {
                store: self.store.guarded(term.guard.clone()),
                keys: self.keys.clone(),
                cfg: self.cfg,
                allocator: self.allocator.clone(),
                metrics: self.metrics.clone(),
                term: Some(term.clone()),
            };
            let ended = match tso.start().await {
                Ok(limit) => tso.run(self.tick, limit, shutdown.clone()).await,
                Err(e) => {
                    tracing::warn!("starting tso as leader failed: {e}");
                    drop(tso);
                    Ended::LeadershipLost
                }
            };
            self.allocator.suspend();
            self.leader.send_replace(None);
            if let Ok(term) = Arc::try_unwrap(term) {
                self.election.resign(term).await;
            }
            tracing::info!(?ended, "leadership ended");
            if ended == Ended::Shutdown {
                return;
            }
        }
    }
}
