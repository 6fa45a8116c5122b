//! What only PD's HTTP API asks and no wire request carries: the cluster's min resolved ts
//! (with each store's when asked), the sizes regions last reported, the GC safe point with every service safe point, placement
//! and label rules, scheduling's run-time settings (decommission, evict-leader, limits), and
//! the operators PD's operator API starts, cancels and lists.
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

/// The sizes and pending peers regions last reported (`placement::region_sizes`), for PD's
/// region JSON; a region no shard holds is left out.
pub async fn region_sizes(
    shared: &Shared,
    ids: impl IntoIterator<Item = u64>,
) -> Result<std::collections::HashMap<u64, crate::placement::RegionReport>, ErrorReply> {
    gate(shared)?;
    crate::server::placement::region_sizes::sizes(&shared.placement, ids).await
}

/// Per store, the regions with a peer there and those it leads, with their sizes
/// (`placement::store_totals`), for PD's store status.
pub async fn store_totals(
    shared: &Shared,
) -> Result<std::collections::HashMap<u64, crate::placement::StoreTotal>, ErrorReply> {
    gate(shared)?;
    crate::server::placement::store_totals::totals(&shared.placement).await
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

/// PD's operator API (`/operators`): admin operators started, cancelled and listed
/// (`placement::admin_operators`), and an admin scatter (`placement::operators`).
pub mod operators {
    use super::{gate, ErrorReply, Shared};
    use crate::placement::schedule::{AdminAsk, AdminRefused};
    use crate::placement::{OpRecord, RunningOp};
    use crate::server::placement::{admin_operators as held, operators};

    /// The most regions one `scatter-regions` call may name or cover.
    pub const MAX_SCATTER: usize = operators::MAX_PER_CALL;

    /// Whether the leader knows region `id`.
    pub fn known(shared: &Shared, id: u64) -> Result<bool, ErrorReply> {
        gate(shared)?;
        Ok(operators::is_known(shared, id))
    }

    pub async fn create(
        shared: &Shared,
        id: u64,
        ask: AdminAsk,
    ) -> Result<Result<(), AdminRefused>, ErrorReply> {
        gate(shared)?;
        held::create(&shared.placement, id, ask).await
    }

    /// PD's `merge-region`: region `source` merged into `target`.
    pub async fn merge(
        shared: &Shared,
        source: u64,
        target: u64,
    ) -> Result<Result<(), AdminRefused>, ErrorReply> {
        gate(shared)?;
        held::merge(&shared.placement, source, target).await
    }

    pub async fn cancel(shared: &Shared, region: Option<u64>) -> Result<Vec<u64>, ErrorReply> {
        gate(shared)?;
        held::cancel(&shared.placement, region).await
    }

    pub async fn running(
        shared: &Shared,
        region: Option<u64>,
    ) -> Result<Vec<RunningOp>, ErrorReply> {
        gate(shared)?;
        held::running(&shared.placement, region).await
    }

    pub async fn ended(shared: &Shared, from_ms: u64) -> Result<Vec<(u64, OpRecord)>, ErrorReply> {
        gate(shared)?;
        held::ended(&shared.placement, from_ms).await
    }

    pub async fn status(
        shared: &Shared,
        id: u64,
    ) -> Result<(Option<RunningOp>, Option<OpRecord>), ErrorReply> {
        gate(shared)?;
        held::status(&shared.placement, id).await
    }

    /// PD's admin scatter of one region: `Ok(Err(why))` when the region is unknown
    /// (`None`) or the scatterer refused it.
    pub async fn scatter_one(
        shared: &Shared,
        id: u64,
        group: String,
    ) -> Result<Result<(), Option<String>>, ErrorReply> {
        gate(shared)?;
        if !operators::is_known(shared, id) {
            return Ok(Err(None));
        }
        let done = operators::scatter(shared, vec![id], group, 0, false).await?;
        Ok(match done.failed.into_iter().next() {
            Some((_, why)) => Err(Some(why)),
            None => Ok(()),
        })
    }

    /// PD's `scatter-regions`: the regions named, or those overlapping `[start, end)`;
    /// the percentage scattered.
    pub async fn scatter_many(
        shared: &Shared,
        ids: Vec<u64>,
        range: Option<(Vec<u8>, Vec<u8>)>,
        group: String,
        retry_limit: u64,
    ) -> Result<u64, ErrorReply> {
        gate(shared)?;
        let ids = match range {
            Some((start, end)) => held::regions_in(&shared.placement, &start, &end, MAX_SCATTER),
            None => ids,
        };
        if ids.is_empty() {
            return Ok(100);
        }
        let done = operators::scatter(shared, ids, group, retry_limit, false).await?;
        Ok(done.finished_percentage)
    }
}
