//! `/config`, `/config/schedule` and `/config/replicate`: the settings Meridian has under PD's
//! names and encodings (durations as Go writes them, PD's `,string` booleans, the location
//! labels as one comma-joined string). What PD has and Meridian does not is left out rather
//! than invented. Read from the node's configuration, which every member is started with.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::json::go_duration_ms;
use super::Api;

fn schedule_json(api: &Api) -> Value {
    let s = &api.shared.config.schedule;
    json!({
        "max-store-down-time": go_duration_ms(s.max_store_down_time_ms),
        "leader-schedule-limit": s.leader_schedule_limit,
        "replica-schedule-limit": s.replica_schedule_limit,
        "enable-joint-consensus": s.enable_joint_consensus.to_string(),
    })
}

/// PD's `ReplicationConfig`. Placement rules are on, as in PD since 5.0 (kept and served;
/// Meridian's scheduler does not read them yet).
fn replication_json(api: &Api) -> Value {
    json!({
        "max-replicas": api.shared.config.schedule.max_replicas,
        "location-labels": "",
        "strictly-match-label": "false",
        "enable-placement-rules": "true",
        "enable-placement-rules-cache": "false",
        "isolation-level": "",
    })
}

pub async fn schedule(State(api): State<Api>) -> Json<Value> {
    Json(schedule_json(&api))
}

pub async fn replicate(State(api): State<Api>) -> Json<Value> {
    Json(replication_json(&api))
}

pub async fn all(State(api): State<Api>) -> Json<Value> {
    let me = &api.shared.membership.me;
    Json(json!({
        "name": me.name,
        "client-urls": me.grpc_url,
        "schedule": schedule_json(&api),
        "replication": replication_json(&api),
        "pd-server": {
            "min-resolved-ts-persistence-interval": "1s",
        },
    }))
}
