//! What only PD's HTTP API asks and no wire request carries: the cluster's min resolved ts
//! (with each store's when asked), the GC safe point with every service safe point, placement
//! and label rules, and scheduling's run-time settings (decommission, evict-leader, limits).
//! Gated as every placement request is (this node serves placement, the cluster is
//! bootstrapped) and answered from placement's public reads, so the HTTP front end reaches
//! placement only through this layer. Owns no rule: the values are `placement`'s and `gc`'s.

use std::sync::atomic::Ordering;

use crate::gc::ServiceSafePoint;
use crate::proto::ErrorReply;
use crate::server::Shared;

/// The cluster's min resolved ts, and each asked store's (`None` when none were asked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinResolvedTs {
    pub min_resolved_ts: u64,
    pub stores: Option<Vec<(u64, u64)>>,
}

/// The GC safe point and the service safe points as they are now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcSafePoints {
    pub gc_safe_point: u64,
    pub services: Vec<ServiceSafePoint>,
    /// When they were read, in Unix seconds on placement's clock (what expiry is against).
    pub now_secs: i64,
}

fn gate(shared: &Shared) -> Result<(), ErrorReply> {
    let state = &*shared.placement;
    if !state.is_ready() {
        return Err(shared.membership.not_serving());
    }
    if !state.bootstrapped.load(Ordering::Acquire) {
        return Err(ErrorReply::NotBootstrapped);
    }
    Ok(())
}

/// PD's `GetMinResolvedTS`, or with `stores` its `GetMinResolvedTSByStoreIDs`: then the
/// minimum is over those stores.
pub fn min_resolved_ts(
    shared: &Shared,
    stores: Option<&[u64]>,
) -> Result<MinResolvedTs, ErrorReply> {
    gate(shared)?;
    let state = &*shared.placement;
    Ok(match stores {
        None => MinResolvedTs {
            min_resolved_ts: state.min_resolved_ts(),
            stores: None,
        },
        Some(ids) => {
            let (low, each) = state.stores_min_resolved_ts(ids);
            MinResolvedTs {
                min_resolved_ts: low,
                stores: Some(each),
            }
        }
    })
}

pub async fn gc_safe_points(shared: &Shared) -> Result<GcSafePoints, ErrorReply> {
    gate(shared)?;
    let gc = shared.placement.gc.lock().await;
    Ok(GcSafePoints {
        now_secs: (shared.placement.clock.now_ms() / 1000) as i64,
        gc_safe_point: gc.gc(),
        services: gc.services().cloned().collect(),
    })
}

/// Placement rules and region label rules (`placement::rules`), read and edited for PD's
/// HTTP API.
pub mod rules {
    use super::{gate, ErrorReply, Shared};
    use crate::placement_rules::{GroupBundle, LabelRule, LabelRulePatch, Rule};
    use crate::server::placement::rules as held;
    pub use crate::server::placement::rules::{Answer, RulesEdit};

    pub async fn rules(shared: &Shared) -> Result<Vec<Rule>, ErrorReply> {
        gate(shared)?;
        held::rules(&shared.placement).await
    }

    pub async fn bundles(shared: &Shared) -> Result<Vec<GroupBundle>, ErrorReply> {
        gate(shared)?;
        held::bundles(&shared.placement).await
    }

    pub async fn label_rules(shared: &Shared) -> Result<Vec<LabelRule>, ErrorReply> {
        gate(shared)?;
        held::label_rules(&shared.placement).await
    }

    pub async fn edit(shared: &Shared, edit: RulesEdit) -> Answer<()> {
        gate(shared)?;
        held::edit_rules(&shared.placement, edit).await
    }

    pub async fn patch_labels(shared: &Shared, patch: LabelRulePatch) -> Answer<()> {
        gate(shared)?;
        held::patch_labels(&shared.placement, patch).await
    }
}

/// What an operator changes in scheduling while the cluster runs (`placement::scheduling`):
/// decommission, evict-leader and store limits, read and changed for PD's HTTP API.
pub mod scheduling {
    use std::collections::BTreeMap;

    use super::{gate, ErrorReply, Shared};
    use crate::placement::schedule::{LimitType, Settings, StoreLimit};
    use crate::server::placement::scheduling as held;
    pub use crate::server::placement::scheduling::Answer;

    pub async fn settings(shared: &Shared) -> Result<Settings, ErrorReply> {
        gate(shared)?;
        held::settings(&shared.placement).await
    }

    pub async fn store_limits(shared: &Shared) -> Result<BTreeMap<u64, StoreLimit>, ErrorReply> {
        gate(shared)?;
        held::store_limits(&shared.placement).await
    }

    pub async fn set_store_limit(
        shared: &Shared,
        store: Option<u64>,
        rate: f64,
        types: &[LimitType],
    ) -> Answer<()> {
        gate(shared)?;
        held::set_store_limit(&shared.placement, store, rate, types).await
    }

    pub async fn evict_leader(shared: &Shared, store: u64, evict: bool) -> Answer<bool> {
        gate(shared)?;
        held::evict_leader(&shared.placement, store, evict).await
    }

    pub async fn decommission(shared: &Shared, store: u64) -> Answer<()> {
        gate(shared)?;
        held::decommission(&shared.placement, store).await
    }
}
