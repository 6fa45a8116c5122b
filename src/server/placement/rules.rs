//! Placement rules and region label rules on the leader, for PD's HTTP API: loaded with the
//! term from the embedded store or etcd alike, each edit planned by the pure
//! `placement_rules` (checked, PD's words for a refusal), made durable in one write, and only
//! then applied. A follower holds none and refuses, as for every placement call. Scheduling
//! does not read the rules yet.

use super::answer::persist_now;
use super::state::PlacementState;
use crate::meta::{Keys, MetaError, MetaStore, WriteOp};
use crate::placement_rules::{
    GroupBundle, LabelRule, LabelRulePatch, Labeler, Rule, RuleError, RuleGroup, RuleOp, RuleSet,
    Rules, RulesChange,
};
use crate::proto::{ErrorReply, Response};

/// Rules read from the store a page at a time.
const PAGE: usize = 1024;

/// An edit of the placement rules, as PD's routes make them.
#[derive(Debug)]
pub enum RulesEdit {
    /// `POST /config/rules`.
    Set(Vec<Rule>),
    /// `POST /config/rules/batch`.
    Batch(Vec<RuleOp>),
    /// `POST /config/placement-rule` (`replace_all` unless `?partial`).
    Bundles {
        bundles: Vec<GroupBundle>,
        replace_all: bool,
    },
}

/// A read or an edit: `Err` is the service's refusal (not the leader, a failed write), `Ok`
/// holds PD's answer, which may itself be PD's refusal of the input.
pub type Answer<T> = Result<Result<T, RuleError>, ErrorReply>;

fn not_held() -> ErrorReply {
    ErrorReply::Unavailable(
        "placement rules are not loaded on this node (not the leader, or starting)".into(),
    )
}

fn write_failed(r: Response) -> ErrorReply {
    match r {
        Response::Err(e) => e,
        Response::Ok(_) => ErrorReply::Internal("a write answered without an error".into()),
    }
}

pub async fn rules(state: &PlacementState) -> Result<Vec<Rule>, ErrorReply> {
    let held = state.rules.lock().await;
    held.as_ref().map(|r| r.set.rules()).ok_or_else(not_held)
}

pub async fn bundles(state: &PlacementState) -> Result<Vec<GroupBundle>, ErrorReply> {
    let held = state.rules.lock().await;
    held.as_ref().map(|r| r.set.bundles()).ok_or_else(not_held)
}

pub async fn label_rules(state: &PlacementState) -> Result<Vec<LabelRule>, ErrorReply> {
    let held = state.rules.lock().await;
    held.as_ref().map(|r| r.labels.rules()).ok_or_else(not_held)
}

fn json(value: &impl serde::Serialize) -> Result<Vec<u8>, ErrorReply> {
    serde_json::to_vec(value).map_err(|e| ErrorReply::Internal(format!("encoding a rule: {e}")))
}

/// The writes a rules change makes.
fn rule_writes(keys: &Keys, change: &RulesChange) -> Result<Vec<WriteOp>, ErrorReply> {
    let mut ops = Vec::new();
    for ((group, id), rule) in &change.rules {
        let value = rule.as_ref().map(json).transpose()?;
        ops.push((keys.placement_rule(group, id), value));
    }
    for (id, group) in &change.groups {
        let value = group.as_ref().map(json).transpose()?;
        ops.push((keys.rule_group(id), value));
    }
    Ok(ops)
}

pub async fn edit_rules(state: &PlacementState, edit: RulesEdit) -> Answer<()> {
    // Held across the durable write: edits are persisted in the order they were planned.
    let mut held = state.rules.lock().await;
    let rules = held.as_mut().ok_or_else(not_held)?;
    let planned = match edit {
        RulesEdit::Set(list) => rules.set.plan_set(list),
        RulesEdit::Batch(ops) => rules.set.plan_batch(ops),
        RulesEdit::Bundles {
            bundles,
            replace_all,
        } => rules.set.plan_bundles(bundles, replace_all),
    };
    let change = match planned {
        Ok(change) => change,
        Err(refused) => return Ok(Err(refused)),
    };
    if change.is_empty() {
        return Ok(Ok(()));
    }
    let change = rules.set.stamp(change, state.clock.now_ms() / 1000);
    persist_now(state, rule_writes(&state.keys, &change)?)
        .await
        .map_err(write_failed)?;
    rules.set.commit(&change);
    Ok(Ok(()))
}

pub async fn patch_labels(state: &PlacementState, patch: LabelRulePatch) -> Answer<()> {
    let mut held = state.rules.lock().await;
    let rules = held.as_mut().ok_or_else(not_held)?;
    let now = (state.clock.now_ms() / 1000) as i64;
    let change = match rules.labels.plan_patch(patch, now) {
        Ok(change) => change,
        Err(refused) => return Ok(Err(refused)),
    };
    if change.is_empty() {
        return Ok(Ok(()));
    }
    let ops = change
        .iter()
        .map(|(id, rule)| -> Result<WriteOp, ErrorReply> {
            Ok((
                state.keys.label_rule(id),
                rule.as_ref().map(json).transpose()?,
            ))
        })
        .collect::<Result<Vec<WriteOp>, ErrorReply>>()?;
    persist_now(state, ops).await.map_err(write_failed)?;
    rules.labels.commit(&change);
    Ok(Ok(()))
}

/// Reads every value under `prefix` as JSON of `T`, skipping (and logging) what does not
/// decode: a corrupt rule must not stop a term.
async fn load_json<M: MetaStore, T: serde::de::DeserializeOwned>(
    store: &M,
    prefix: &[u8],
    what: &str,
) -> Result<Vec<T>, MetaError> {
    let mut out = Vec::new();
    for (key, value) in store.scan(prefix, PAGE).await? {
        match serde_json::from_slice(&value) {
            Ok(v) => out.push(v),
            Err(e) => {
                tracing::warn!(key = %String::from_utf8_lossy(&key), "skipping a {what}: {e}")
            }
        }
    }
    Ok(out)
}

/// A term's rules, from the store.
pub(super) async fn load<M: MetaStore>(
    state: &PlacementState,
    store: &M,
    keys: &Keys,
) -> Result<(), MetaError> {
    let rules: Vec<Rule> =
        load_json(store, &keys.placement_rules_prefix(), "placement rule").await?;
    let groups: Vec<RuleGroup> = load_json(store, &keys.rule_groups_prefix(), "rule group").await?;
    let labels: Vec<LabelRule> = load_json(store, &keys.label_rules_prefix(), "label rule").await?;
    let fresh = rules.is_empty();
    let set = RuleSet::new(rules, groups, state.cfg.max_replicas as u64);
    if fresh {
        // PD's default rule, stored once like any other, so that it stays what it was made
        // (a later `max-replicas` does not rewrite it) and an edit that removes it sticks.
        for rule in set.rules() {
            match serde_json::to_vec(&rule) {
                Ok(bytes) => {
                    store
                        .put(&keys.placement_rule(&rule.group_id, &rule.id), &bytes)
                        .await?
                }
                Err(e) => tracing::warn!("the default placement rule does not encode: {e}"),
            }
        }
    }
    *state.rules.lock().await = Some(Rules {
        set,
        labels: Labeler::new(labels),
    });
    Ok(())
}
