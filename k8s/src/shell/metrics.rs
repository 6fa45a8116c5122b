//! The operator's metrics registry and its Prometheus text rendering (`/metrics`): reconciles
//! (count, duration, errors by `ReconcileError::kind`), the steps the shell carried out (leader
//! moves, failovers, every step by its event reason), and per cluster what the last reconcile
//! observed (rollout progress, conditions). The shell records here as it carries decisions
//! out; `decide` never sees it. One registry per operator process, passed in (no global), so a
//! test owns its own.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kube::ResourceExt;

use super::error::ReconcileError;
use crate::crd::MeridianCluster;
use crate::decide::reconcile::{Conditions, Rollout};

/// Upper bounds of the reconcile duration buckets, in seconds: a healthy reconcile is a few
/// reads (milliseconds); a leader transfer waits for the hand-over and its verification (up
/// to about 25 s).
const DURATION_BOUNDS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Why the operator moved a cluster's leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderMove {
    /// Off the last outdated member, before its pod is restarted.
    Upgrade = 0,
    /// Off a member that scaling removes.
    Scale = 1,
}

const LEADER_MOVES: [&str; 2] = ["upgrade", "scale"];

/// A failover step that took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failover {
    /// A member unhealthy past the period was recorded as a failure member.
    Declared = 0,
    /// A failure member was deleted with its pod and volume, to join anew.
    Replaced = 1,
    /// Every member served again; the failure members were cleared.
    Recovered = 2,
}

const FAILOVERS: [&str; 3] = ["declared", "replaced", "recovered"];

const CONDITIONS: [&str; 4] = ["Available", "Quorate", "Progressing", "Degraded"];

/// What one cluster's reconciles recorded.
#[derive(Debug, Clone, Default)]
struct ClusterSeries {
    leader_moves: [u64; LEADER_MOVES.len()],
    failovers: [u64; FAILOVERS.len()],
    rollout: Rollout,
    conditions: Conditions,
}

#[derive(Default)]
pub struct Metrics {
    reconciles: AtomicU64,
    errors: [AtomicU64; ReconcileError::KINDS.len()],
    duration: [AtomicU64; DURATION_BOUNDS.len()],
    duration_sum_us: AtomicU64,
    watch_errors: AtomicU64,
    lease_held: AtomicBool,
    /// Steps carried out, by (action, reason) as their events name them.
    steps: Mutex<BTreeMap<(String, String), u64>>,
    /// By `namespace/name`.
    clusters: Mutex<BTreeMap<String, ClusterSeries>>,
}

/// The `cluster` label of a cluster's series.
pub fn cluster_label(mc: &MeridianCluster) -> String {
    format!(
        "{}/{}",
        mc.namespace().unwrap_or_else(|| "default".into()),
        mc.name_any()
    )
}

/// A poisoned lock only means a panic elsewhere mid-update of plain counters; the numbers are
/// still worth serving.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Metrics {
    /// One reconcile ended after `took`, with this error if it failed.
    pub fn reconciled(&self, took: Duration, error: Option<&ReconcileError>) {
        self.reconciles.fetch_add(1, Relaxed);
        if let Some(e) = error {
            self.errors[e.kind_index()].fetch_add(1, Relaxed);
        }
        let seconds = took.as_secs_f64();
        // Past the last bound it is counted in +Inf only (the total).
        if let Some(i) = DURATION_BOUNDS.iter().position(|b| seconds <= *b) {
            self.duration[i].fetch_add(1, Relaxed);
        }
        let us = took.as_micros().min(u128::from(u64::MAX)) as u64;
        self.duration_sum_us.fetch_add(us, Relaxed);
    }

    /// The controller's watch stream reported an error (kube-runtime retries it).
    pub fn watch_error(&self) {
        self.watch_errors.fetch_add(1, Relaxed);
    }

    /// Whether this replica holds the operator's Lease (the one that acts).
    pub fn set_lease_held(&self, held: bool) {
        self.lease_held.store(held, Relaxed);
    }

    /// A step carried out (or a wait), as its event names it.
    pub fn step(&self, action: &str, reason: &str) {
        *lock(&self.steps)
            .entry((action.to_string(), reason.to_string()))
            .or_default() += 1;
    }

    /// What a reconcile observed of `mc`. The cluster's counters start at zero here, so they
    /// are exported before their first step.
    pub fn observed(&self, mc: &MeridianCluster, rollout: Rollout, conditions: Conditions) {
        let mut clusters = lock(&self.clusters);
        let series = clusters.entry(cluster_label(mc)).or_default();
        series.rollout = rollout;
        series.conditions = conditions;
    }

    pub fn leader_moved(&self, mc: &MeridianCluster, why: LeaderMove) {
        lock(&self.clusters)
            .entry(cluster_label(mc))
            .or_default()
            .leader_moves[why as usize] += 1;
    }

    pub fn failover(&self, mc: &MeridianCluster, step: Failover) {
        lock(&self.clusters)
            .entry(cluster_label(mc))
            .or_default()
            .failovers[step as usize] += 1;
    }

    /// A deleted cluster's series go, so they do not pile up over the process's life.
    pub fn forget(&self, mc: &MeridianCluster) {
        lock(&self.clusters).remove(&cluster_label(mc));
    }

    /// Prometheus text exposition format, version 0.0.4.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        family(
            &mut out,
            "meridian_operator_build_info",
            "gauge",
            "The operator's version.",
        );
        let _ = writeln!(
            out,
            "meridian_operator_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        family(
            &mut out,
            "meridian_operator_lease_held",
            "gauge",
            "Whether this replica holds the operator's Lease and reconciles.",
        );
        let _ = writeln!(
            out,
            "meridian_operator_lease_held {}",
            u8::from(self.lease_held.load(Relaxed))
        );
        family(
            &mut out,
            "meridian_operator_reconciles_total",
            "counter",
            "Reconciles run, failed or not.",
        );
        let _ = writeln!(
            out,
            "meridian_operator_reconciles_total {}",
            self.reconciles.load(Relaxed)
        );
        family(
            &mut out,
            "meridian_operator_reconcile_errors_total",
            "counter",
            "Reconciles that failed, by what failed.",
        );
        for (kind, n) in ReconcileError::KINDS.iter().zip(&self.errors) {
            let _ = writeln!(
                out,
                "meridian_operator_reconcile_errors_total{{kind=\"{kind}\"}} {}",
                n.load(Relaxed)
            );
        }
        let name = "meridian_operator_reconcile_duration_seconds";
        family(&mut out, name, "histogram", "How long one reconcile took.");
        let mut cumulative = 0;
        for (bound, n) in DURATION_BOUNDS.iter().zip(&self.duration) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        // Read once more: a reconcile ending mid-render must not make +Inf smaller than a
        // bucket before it.
        let count = self.reconciles.load(Relaxed).max(cumulative);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.duration_sum_us.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {count}");
        family(
            &mut out,
            "meridian_operator_watch_errors_total",
            "counter",
            "Errors of the controller's watches (retried with a backoff).",
        );
        let _ = writeln!(
            out,
            "meridian_operator_watch_errors_total {}",
            self.watch_errors.load(Relaxed)
        );
        family(
            &mut out,
            "meridian_operator_steps_total",
            "counter",
            "Steps carried out and waits, by action and event reason.",
        );
        for ((action, reason), n) in lock(&self.steps).iter() {
            let _ = writeln!(
                out,
                "meridian_operator_steps_total{{action=\"{}\",reason=\"{}\"}} {n}",
                escape(action),
                escape(reason)
            );
        }
        let clusters = lock(&self.clusters).clone();
        family(
            &mut out,
            "meridian_operator_clusters",
            "gauge",
            "MeridianClusters this replica has reconciled and not seen deleted.",
        );
        let _ = writeln!(out, "meridian_operator_clusters {}", clusters.len());
        family(
            &mut out,
            "meridian_operator_leader_moves_total",
            "counter",
            "Leader transfers the operator carried out, by why.",
        );
        for (cluster, s) in &clusters {
            for (why, n) in LEADER_MOVES.iter().zip(s.leader_moves) {
                let _ = writeln!(
                    out,
                    "meridian_operator_leader_moves_total{{cluster=\"{}\",reason=\"{why}\"}} {n}",
                    escape(cluster)
                );
            }
        }
        family(
            &mut out,
            "meridian_operator_failovers_total",
            "counter",
            "Failover steps that took effect: members declared failed, replaced, recovered.",
        );
        for (cluster, s) in &clusters {
            for (step, n) in FAILOVERS.iter().zip(s.failovers) {
                let _ = writeln!(
                    out,
                    "meridian_operator_failovers_total{{cluster=\"{}\",step=\"{step}\"}} {n}",
                    escape(cluster)
                );
            }
        }
        family(
            &mut out,
            "meridian_operator_upgrade_members",
            "gauge",
            "Members the StatefulSet runs, as the last reconcile saw it.",
        );
        for (cluster, s) in &clusters {
            let _ = writeln!(
                out,
                "meridian_operator_upgrade_members{{cluster=\"{}\"}} {}",
                escape(cluster),
                s.rollout.members
            );
        }
        family(
            &mut out,
            "meridian_operator_upgrade_members_updated",
            "gauge",
            "Members running the StatefulSet's update revision, as the last reconcile saw it.",
        );
        for (cluster, s) in &clusters {
            let _ = writeln!(
                out,
                "meridian_operator_upgrade_members_updated{{cluster=\"{}\"}} {}",
                escape(cluster),
                s.rollout.updated
            );
        }
        family(
            &mut out,
            "meridian_operator_cluster_condition",
            "gauge",
            "The cluster's status conditions (1 when True), as the last reconcile wrote them.",
        );
        for (cluster, s) in &clusters {
            let c = s.conditions;
            for (name, on) in
                CONDITIONS
                    .iter()
                    .zip([c.available, c.quorate, c.progressing, c.degraded])
            {
                let _ = writeln!(
                    out,
                    "meridian_operator_cluster_condition{{cluster=\"{}\",condition=\"{name}\"}} {}",
                    escape(cluster),
                    u8::from(on)
                );
            }
        }
        out
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the text format quotes it. Kubernetes names cannot hold these characters;
/// the exposition must stay parseable whatever a label holds.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::MeridianClusterSpec;

    fn cluster(namespace: &str, name: &str) -> MeridianCluster {
        let mut mc = MeridianCluster::new(name, MeridianClusterSpec::default());
        mc.metadata.namespace = Some(namespace.into());
        mc
    }

    /// The value of one exact series line.
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|l| {
            let (s, v) = l.rsplit_once(' ')?;
            (s == series).then(|| v.parse().ok())?
        })
    }

    #[test]
    fn reconciles_errors_and_durations_render_as_prometheus_wants() {
        let m = Metrics::default();
        let text = m.render();
        for kind in ReconcileError::KINDS {
            let series = format!("meridian_operator_reconcile_errors_total{{kind=\"{kind}\"}}");
            assert_eq!(
                value(&text, &series),
                Some(0.0),
                "{series} before any failure"
            );
        }
        m.reconciled(Duration::from_millis(3), None);
        m.reconciled(Duration::from_millis(700), Some(&ReconcileError::NoLeader));
        m.reconciled(Duration::from_secs(90), Some(&ReconcileError::NoLeader));
        let text = m.render();
        let d = "meridian_operator_reconcile_duration_seconds";
        for (series, want) in [
            ("meridian_operator_reconciles_total".to_string(), 3.0),
            (
                "meridian_operator_reconcile_errors_total{kind=\"no_leader\"}".into(),
                2.0,
            ),
            (
                "meridian_operator_reconcile_errors_total{kind=\"kube_api\"}".into(),
                0.0,
            ),
            (format!("{d}_bucket{{le=\"0.005\"}}"), 1.0),
            (format!("{d}_bucket{{le=\"0.5\"}}"), 1.0),
            (format!("{d}_bucket{{le=\"1\"}}"), 2.0),
            (format!("{d}_bucket{{le=\"60\"}}"), 2.0),
            (format!("{d}_bucket{{le=\"+Inf\"}}"), 3.0),
            (format!("{d}_count"), 3.0),
        ] {
            assert_eq!(value(&text, &series), Some(want), "{series}\n{text}");
        }
        let sum = value(&text, &format!("{d}_sum")).expect("a sum");
        assert!((sum - 90.703).abs() < 1e-9, "{sum}");
        assert!(text.contains(&format!("# TYPE {d} histogram")), "{text}");
        assert!(
            text.contains("# TYPE meridian_operator_reconcile_errors_total counter"),
            "{text}"
        );
    }

    #[test]
    fn cluster_series_start_at_zero_count_steps_and_go_with_the_cluster() {
        let m = Metrics::default();
        let pd = cluster("db", "pd");
        m.set_lease_held(true);
        m.observed(
            &pd,
            Rollout {
                updated: 1,
                members: 3,
            },
            Conditions {
                available: true,
                quorate: true,
                progressing: true,
                degraded: false,
            },
        );
        let text = m.render();
        for (series, want) in [
            ("meridian_operator_lease_held", 1.0),
            ("meridian_operator_clusters", 1.0),
            (
                "meridian_operator_leader_moves_total{cluster=\"db/pd\",reason=\"upgrade\"}",
                0.0,
            ),
            (
                "meridian_operator_failovers_total{cluster=\"db/pd\",step=\"replaced\"}",
                0.0,
            ),
            ("meridian_operator_upgrade_members{cluster=\"db/pd\"}", 3.0),
            (
                "meridian_operator_upgrade_members_updated{cluster=\"db/pd\"}",
                1.0,
            ),
            (
                "meridian_operator_cluster_condition{cluster=\"db/pd\",condition=\"Progressing\"}",
                1.0,
            ),
            (
                "meridian_operator_cluster_condition{cluster=\"db/pd\",condition=\"Degraded\"}",
                0.0,
            ),
        ] {
            assert_eq!(value(&text, series), Some(want), "{series}\n{text}");
        }

        m.leader_moved(&pd, LeaderMove::Upgrade);
        m.leader_moved(&pd, LeaderMove::Scale);
        m.leader_moved(&pd, LeaderMove::Upgrade);
        m.failover(&pd, Failover::Declared);
        m.step("Upgrade", "DeletedPod");
        m.step("Upgrade", "DeletedPod");
        m.step("Scale", "Waiting");
        let text = m.render();
        for (series, want) in [
            (
                "meridian_operator_leader_moves_total{cluster=\"db/pd\",reason=\"upgrade\"}",
                2.0,
            ),
            (
                "meridian_operator_leader_moves_total{cluster=\"db/pd\",reason=\"scale\"}",
                1.0,
            ),
            (
                "meridian_operator_failovers_total{cluster=\"db/pd\",step=\"declared\"}",
                1.0,
            ),
            (
                "meridian_operator_steps_total{action=\"Upgrade\",reason=\"DeletedPod\"}",
                2.0,
            ),
            (
                "meridian_operator_steps_total{action=\"Scale\",reason=\"Waiting\"}",
                1.0,
            ),
        ] {
            assert_eq!(value(&text, series), Some(want), "{series}\n{text}");
        }

        m.forget(&pd);
        let text = m.render();
        assert_eq!(value(&text, "meridian_operator_clusters"), Some(0.0));
        assert!(!text.contains("cluster=\"db/pd\""), "{text}");
    }

    #[test]
    fn every_sample_line_parses_and_label_values_are_escaped() {
        let m = Metrics::default();
        m.observed(
            &cluster("db", "pd"),
            Rollout::default(),
            Conditions::default(),
        );
        m.step("Odd\"action", "back\\slash\nnewline");
        m.reconciled(Duration::from_millis(1), Some(&ReconcileError::NoLeader));
        let text = m.render();
        assert!(
            text.contains(
                "meridian_operator_steps_total{action=\"Odd\\\"action\",reason=\"back\\\\slash\\nnewline\"} 1"
            ),
            "{text}"
        );
        let mut families = std::collections::BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default();
                assert!(families.insert(name.to_string()), "{name} declared twice");
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (series, v) = line.rsplit_once(' ').expect("name value");
            assert!(v.parse::<f64>().is_ok(), "{line}");
            let name = series.split('{').next().unwrap_or_default();
            assert!(name.starts_with("meridian_operator_"), "{line}");
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|f| families.contains(*f))
                .unwrap_or(name);
            assert!(families.contains(family), "{line}: no # TYPE before it");
        }
    }
}
