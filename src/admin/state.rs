//! What every admin route reads: the node's state as the server hands it over, the leader's
//! control handle, and the JSON shape of a member. Owns these types only; it must not hold
//! routes or handlers (`http` and `leadership` do, and both read from here), so the route
//! modules never import each other.

use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;

use super::client::AdminClient;
use super::metrics::Metrics;
use crate::clock::WallClock;
use crate::election::{Command, Membership};
use crate::meta::{EtcdStore, Keys};
use crate::proto::MemberInfo;
use crate::tso::Allocator;

#[derive(Clone)]
pub struct AdminState {
    pub membership: Membership,
    pub metrics: Arc<Metrics>,
    pub allocator: Arc<Allocator>,
    /// Whether this member's placement state is loaded and serving (a leader only).
    pub placement_ready: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Leadership control and the member registry; `None` on the single embedded node.
    pub control: Option<AdminControl>,
    /// The TSO clock, when `[debug] clock_injection` is on.
    pub clock: Option<Arc<WallClock>>,
    /// Probes answer clients without a certificate.
    pub open_probes: bool,
    /// How this member reaches the others' admin APIs to probe their health.
    pub peers: Option<AdminClient>,
    /// The last member list with health, and when it was made: one etcd read and one round of
    /// probes a second at most, however often it is asked.
    pub members_cache: Arc<tokio::sync::Mutex<Option<(std::time::Instant, serde_json::Value)>>>,
}

#[derive(Clone)]
pub struct AdminControl {
    pub commands: mpsc::Sender<Command>,
    pub store: EtcdStore,
    pub keys: Keys,
}

/// A member as every admin answer shows it (DESIGN.md's leader shape).
pub(super) fn member_json(m: &MemberInfo) -> serde_json::Value {
    json!({"name": m.name, "id": m.id, "client_url": m.client_url, "admin_url": m.admin_url})
}
