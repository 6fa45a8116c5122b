//! The cluster's own routes: `/version`, `/status`, `/health`, `/ping`, `/members`, `/leader`
//! and `/cluster`. The first four any member answers from what it knows, as PD does; a
//! follower sends `/members`, `/leader` and `/cluster` on to the leader (`proxy`), as PD's
//! redirector does, and the leader answers them from what it knows.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;

use super::json::{member, MemberJson};
use super::reply::Failure;
use super::Api;
use crate::proto::{Reply, Request, Response as Answer};

/// The PD release whose HTTP API and behaviour this front end follows, which is what PD's
/// clients compare against when they ask for a version.
pub const PD_VERSION: &str = "v8.5.0";

pub async fn version() -> Json<serde_json::Value> {
    Json(json!({ "version": PD_VERSION }))
}

/// PD's `versioninfo.Status`. The build fields are PD's; Meridian reports no PD build time or
/// hash of its own, so they are empty.
pub async fn status(State(api): State<Api>) -> Json<serde_json::Value> {
    Json(json!({
        "build_ts": "",
        "version": PD_VERSION,
        "git_hash": "",
        "start_timestamp": api.started_secs,
        "kernel_type": "Classic",
    }))
}

/// PD's `Health` list. Members are not probed from here: this node and the leader (which
/// holds its lease) are healthy; another member is reported as not known to be.
pub async fn health(State(api): State<Api>) -> Json<Vec<serde_json::Value>> {
    let reply = api.shared.membership.reply();
    let me = api.shared.membership.me.id;
    let leader = reply.leader.as_ref().map(|l| l.id);
    Json(
        reply
            .members
            .iter()
            .map(|m| {
                let j = member(m);
                json!({
                    "name": j.name,
                    "member_id": j.member_id,
                    "client_urls": j.client_urls,
                    "health": m.id == me || Some(m.id) == leader,
                })
            })
            .collect(),
    )
}

pub async fn ping() -> StatusCode {
    StatusCode::OK
}

/// kvproto's `GetMembersResponse`, as PD's `/members` writes it.
#[derive(Serialize)]
struct Members {
    header: Header,
    members: Vec<MemberJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    leader: Option<MemberJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    etcd_leader: Option<MemberJson>,
}

#[derive(Serialize)]
struct Header {
    cluster_id: u64,
}

pub async fn members(State(api): State<Api>) -> Response {
    let reply = api.shared.membership.reply();
    let leader = reply.leader.as_ref().map(member);
    Json(Members {
        header: Header {
            cluster_id: reply.cluster_id,
        },
        members: reply.members.iter().map(member).collect(),
        etcd_leader: leader.clone(),
        leader,
    })
    .into_response()
}

pub async fn leader(State(api): State<Api>) -> Response {
    match api.shared.membership.leader() {
        Some(l) => Json(member(&l)).into_response(),
        None => Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "[PD:apiutil:ErrRedirectNoLeader]redirect finds no leader",
        )
        .into_response(),
    }
}

/// kvproto's `metapb.Cluster`.
pub async fn cluster(State(api): State<Api>) -> Result<Json<serde_json::Value>, Failure> {
    match api.call(Request::GetClusterConfig).await {
        Answer::Ok(Reply::ClusterConfig(c)) => {
            let mut j = serde_json::Map::new();
            if c.id != 0 {
                j.insert("id".into(), c.id.into());
            }
            if c.max_peer_count != 0 {
                j.insert("max_peer_count".into(), c.max_peer_count.into());
            }
            Ok(Json(j.into()))
        }
        Answer::Ok(other) => Err(super::unexpected(other)),
        Answer::Err(e) => Err(e.into()),
    }
}
