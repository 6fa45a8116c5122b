//! Placement rules (`/config/rules`, `/config/rules/batch`, `/config/placement-rule[/{group}]`)
//! and region label rules (`/config/region-label/rules[/ids]`,
//! `/config/region-label/rule[/{id}]`),
//! read and edited through the request service's rules view; PD's answers, its words for a
//! refusal (400 for bad input, as PD), and PD's success strings.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;

use super::reply::Failure;
use super::Api;
use crate::placement_rules::{LabelRule, LabelRulePatch, RuleError};
use crate::server::service::views::rules::{self as view, Answer, RulesEdit};

/// PD's `ReadJSONRespondError`: a body that is not the JSON expected is 400 with the reason.
fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, Failure> {
    serde_json::from_slice(bytes).map_err(|e| Failure::bad_request(e.to_string()))
}

/// An edit's answer: PD's success string, or its refusal.
fn answered(answer: Answer<()>, done: &str) -> Response {
    match answer {
        Ok(Ok(())) => Json(done).into_response(),
        Ok(Err(refused)) => refusal(&refused).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

fn refusal(e: &RuleError) -> Failure {
    let status = if e.is_bad_input() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    Failure::new(status, e.to_string())
}

pub async fn get_rules(State(api): State<Api>) -> Response {
    match view::rules(&api.shared).await {
        Ok(rules) => Json(rules).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

pub async fn set_rules(State(api): State<Api>, bytes: Bytes) -> Response {
    match body(&bytes) {
        Ok(rules) => answered(
            view::edit(&api.shared, RulesEdit::Set(rules)).await,
            "Update rules successfully.",
        ),
        Err(f) => f.into_response(),
    }
}

pub async fn batch(State(api): State<Api>, bytes: Bytes) -> Response {
    match body(&bytes) {
        Ok(ops) => answered(
            view::edit(&api.shared, RulesEdit::Batch(ops)).await,
            "Batch operations successfully.",
        ),
        Err(f) => f.into_response(),
    }
}

pub async fn get_bundles(State(api): State<Api>) -> Response {
    match view::bundles(&api.shared).await {
        Ok(bundles) => Json(bundles).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

/// Replaces every group and rule, or with `?partial` only the groups named.
pub async fn set_bundles(State(api): State<Api>, uri: Uri, bytes: Bytes) -> Response {
    let partial = uri.query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "partial" || p.starts_with("partial="))
    });
    match body(&bytes) {
        Ok(bundles) => answered(
            view::edit(
                &api.shared,
                RulesEdit::Bundles {
                    bundles,
                    replace_all: !partial,
                },
            )
            .await,
            "Update rules and groups successfully.",
        ),
        Err(f) => f.into_response(),
    }
}

/// One group's bundle (PD's `GetGroupBundle`): its place and its rules; a group nobody named
/// is index 0, no override, no rules.
pub async fn get_bundle(State(api): State<Api>, Path(group): Path<String>) -> Response {
    match view::bundles(&api.shared).await {
        Ok(bundles) => match bundles.into_iter().find(|b| b.group_id == group) {
            Some(bundle) => Json(bundle).into_response(),
            None => Json(serde_json::json!({
                "group_id": group,
                "group_index": 0,
                "group_override": false,
                "rules": null,
            }))
            .into_response(),
        },
        Err(e) => Failure::from(e).into_response(),
    }
}

/// The label rules with the ids the body lists, in its order, those that exist (PD's
/// `GetLabelRules`).
pub async fn get_label_rules_by_ids(State(api): State<Api>, bytes: Bytes) -> Response {
    let ids: Vec<String> = match body(&bytes) {
        Ok(ids) => ids,
        Err(f) => return f.into_response(),
    };
    match view::label_rules(&api.shared).await {
        Ok(rules) => Json(by_ids(rules, &ids)).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

/// The rules with `ids`, in their order, each once. Any role may ask, with a body of up to
/// 2 MiB: a lookup per id keeps the work to the ids and the rules, not their product, and an
/// id listed again adds nothing, so the answer is never larger than all the rules (PD repeats
/// a rule for each time its id is listed).
fn by_ids(rules: Vec<LabelRule>, ids: &[String]) -> Vec<LabelRule> {
    let mut by_id: HashMap<String, LabelRule> =
        rules.into_iter().map(|r| (r.id.clone(), r)).collect();
    ids.iter().filter_map(|id| by_id.remove(id)).collect()
}

pub async fn get_label_rules(State(api): State<Api>) -> Response {
    match view::label_rules(&api.shared).await {
        Ok(rules) => Json(rules).into_response(),
        Err(e) => Failure::from(e).into_response(),
    }
}

pub async fn patch_label_rules(State(api): State<Api>, bytes: Bytes) -> Response {
    match body::<LabelRulePatch>(&bytes) {
        Ok(patch) => answered(
            view::patch_labels(&api.shared, patch).await,
            "Update region label rules successfully.",
        ),
        Err(f) => f.into_response(),
    }
}

pub async fn set_label_rule(State(api): State<Api>, bytes: Bytes) -> Response {
    match body::<LabelRule>(&bytes) {
        Ok(rule) => answered(
            view::patch_labels(
                &api.shared,
                LabelRulePatch {
                    set_rules: vec![rule],
                    delete_rules: Vec::new(),
                },
            )
            .await,
            "Update region label rule successfully.",
        ),
        Err(f) => f.into_response(),
    }
}

pub async fn get_label_rule(State(api): State<Api>, Path(id): Path<String>) -> Response {
    match view::label_rules(&api.shared).await {
        Ok(rules) => match rules.into_iter().find(|r| r.id == id) {
            Some(rule) => Json(rule).into_response(),
            None => Failure::not_found(format!(
                "[PD:region:ErrRegionRuleNotFound]region label rule not found for id {id}"
            ))
            .into_response(),
        },
        Err(e) => Failure::from(e).into_response(),
    }
}

pub async fn delete_label_rule(State(api): State<Api>, Path(id): Path<String>) -> Response {
    answered(
        view::patch_labels(
            &api.shared,
            LabelRulePatch {
                set_rules: Vec::new(),
                delete_rules: vec![id],
            },
        )
        .await,
        "Delete region label rule successfully.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str) -> LabelRule {
        LabelRule {
            id: id.into(),
            ..LabelRule::default()
        }
    }

    #[test]
    fn rules_by_ids_come_in_the_asked_order_each_once() {
        let rules = vec![rule("a"), rule("b"), rule("c")];
        let ids: Vec<String> = ["c", "nope", "a", "c"].map(String::from).to_vec();
        let found: Vec<String> = by_ids(rules, &ids).into_iter().map(|r| r.id).collect();
        assert_eq!(found, ["c", "a"]);
    }

    /// A body that names one rule over and over (what 2 MiB holds) is answered with it once:
    /// the answer is bounded by the rules held, whatever the body.
    #[test]
    fn an_id_listed_many_times_is_answered_once() {
        let rules: Vec<LabelRule> = (0..2_000).map(|i| rule(&format!("r{i}"))).collect();
        let ids = vec!["r1999".to_string(); 300_000];
        let found = by_ids(rules, &ids);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "r1999");
    }
}
