//! The PodDisruptionBudget.

use super::*;

/// Voluntary disruptions (node drains) may take members down one at a time. From 3 members
/// on, a quorum stays up (`minAvailable` = a majority), so a drain never stops the cluster.
/// With 1 or 2 members there is no failure to tolerate: any member down is an outage (2 need
/// both for a majority), and a budget that kept a quorum would forbid every eviction and block
/// node maintenance for good. There one member at a time may go (`maxUnavailable` 1); run 3
/// or more for a cluster that survives a drain.
pub fn disruption_budget(mc: &MeridianCluster) -> PodDisruptionBudget {
    let replicas = mc.spec.replicas.max(0);
    let (min_available, max_unavailable) = if replicas >= 3 {
        (Some(IntOrString::Int(replicas / 2 + 1)), None)
    } else {
        (None, Some(IntOrString::Int(1)))
    };
    PodDisruptionBudget {
        metadata: meta(mc, mc.name_any()),
        spec: Some(PodDisruptionBudgetSpec {
            min_available,
            max_unavailable,
            selector: Some(LabelSelector {
                match_labels: Some(labels(mc)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}
