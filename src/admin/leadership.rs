//! Leadership and membership routes of an etcd-backed node: resign, transfer, and the member
//! list from the registry with each member's health probed over its own admin API.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tokio::sync::oneshot;

use super::client::AdminClient;
use super::state::{member_json, AdminControl, AdminState};
use crate::election::{decode_member, Command, Membership};
use crate::meta::{MetaError, MetaStore};

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// The leader's control handle, or the reply explaining why this node cannot act.
fn leader_control(s: &AdminState) -> Result<&AdminControl, Box<Response>> {
    let Some(control) = &s.control else {
        return Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "a single node on the embedded store has no one to hand over to",
        )));
    };
    if !s.membership.is_leader() {
        let leader = s.membership.leader().map(|l| member_json(&l));
        return Err(Box::new(
            (
                StatusCode::CONFLICT,
                Json(json!({"error": "not the leader", "leader": leader})),
            )
                .into_response(),
        ));
    }
    Ok(control)
}

/// Sends `command` to the leadership loop and waits (bounded) for its outcome on `rx`; a
/// refusal is a 409 carrying the loop's reason.
async fn ask<T, E: std::fmt::Display>(
    control: &AdminControl,
    command: Command,
    rx: oneshot::Receiver<Result<T, E>>,
) -> Result<T, Box<Response>> {
    if control.commands.send(command).await.is_err() {
        return Err(Box::new(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "leadership loop stopped",
        )));
    }
    match tokio::time::timeout(Duration::from_secs(10), rx).await {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(e))) => Err(Box::new(error(StatusCode::CONFLICT, e.to_string()))),
        _ => Err(Box::new(error(
            StatusCode::GATEWAY_TIMEOUT,
            "no answer from the leadership loop",
        ))),
    }
}

pub async fn resign(State(s): State<AdminState>) -> Response {
    let control = match leader_control(&s) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let (tx, rx) = oneshot::channel();
    match ask(control, Command::Resign(tx), rx).await {
        Ok(()) => Json(json!({"resigned": s.membership.me.name})).into_response(),
        Err(r) => *r,
    }
}

pub async fn transfer(State(s): State<AdminState>, Path(name): Path<String>) -> Response {
    let control = match leader_control(&s) {
        Ok(c) => c,
        Err(r) => return *r,
    };
    if name == s.membership.me.name {
        return error(StatusCode::CONFLICT, format!("{name} already leads"));
    }
    match control.store.get(&control.keys.member_info(&name)).await {
        Ok(Some(_)) => {}
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("no member named {name}")),
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
    let (tx, rx) = oneshot::channel();
    match ask(control, Command::Transfer(name, tx), rx).await {
        Ok(leader) => Json(json!({"leader": member_json(&leader)})).into_response(),
        Err(r) => *r,
    }
}

/// Removes a member: it stops campaigning for good and leaves the member list. The leader is
/// refused (transfer leadership off it first, so no term ends abruptly).
pub async fn delete_member(State(s): State<AdminState>, Path(name): Path<String>) -> Response {
    let Some(control) = &s.control else {
        return error(
            StatusCode::BAD_REQUEST,
            "a single node on the embedded store cannot remove itself",
        );
    };
    if s.membership.leader().is_some_and(|l| l.name == name) {
        return error(
            StatusCode::CONFLICT,
            format!("{name} leads: transfer leadership off it first"),
        );
    }
    let info = match control.store.get(&control.keys.member_info(&name)).await {
        Ok(Some(info)) => info,
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("no member named {name}")),
        Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    let Some(member) = decode_member(&info) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the registry entry of {name} does not decode"),
        );
    };
    // The marker names the removed incarnation (its member id), and the name's id goes with
    // it: a pod that later comes back under the same name (a replaced or re-added ordinal)
    // starts as a new member instead of staying removed for good. One transaction.
    let keys = &control.keys;
    let removal = vec![
        (
            keys.removed(&name),
            Some(member.id.to_string().into_bytes()),
        ),
        (keys.member_info(&name), None),
        (keys.member_id(&name), None),
    ];
    match control.store.batch(removal).await {
        Ok(()) => Json(json!({"removed": name})).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

/// The members API body from the registry, each member's health probed at its own `/health`
/// with `peers` (this member's certificate, a short timeout).
pub async fn registered_members(
    control: &AdminControl,
    membership: &Membership,
    peers: Option<&AdminClient>,
) -> Result<serde_json::Value, MetaError> {
    let listed = control.store.list(&control.keys.members_prefix()).await?;
    let members: Vec<_> = listed
        .iter()
        .filter(|(k, _)| k.ends_with(b"/info"))
        .filter_map(|(_, v)| decode_member(v))
        .collect();
    let leader = membership.leader();
    let mut probes = Vec::new();
    for m in members {
        let me = m.id == membership.me.id;
        let client = peers.map(|p| p.at(&m.admin_url));
        probes.push((
            m,
            tokio::task::spawn_blocking(move || {
                me || client
                    .is_some_and(|c| c.get("/health").is_ok_and(|(status, _)| status == 200))
            }),
        ));
    }
    let mut out = Vec::new();
    for (m, probe) in probes {
        let mut j = member_json(&m);
        j["healthy"] = json!(probe.await.unwrap_or(false));
        j["is_leader"] = json!(leader.as_ref().is_some_and(|l| l.id == m.id));
        out.push(j);
    }
    Ok(json!({
        "cluster_id": membership.cluster_id,
        "leader": leader.as_ref().map(member_json),
        "members": out,
    }))
}
