//! `meridian ctl`'s scheduling verbs, as pd-ctl has them: `store delete`, `store limit` and
//! `scheduler show|add|remove`. Each is one call to PD's HTTP API at a member's client address
//! (the same TCP port and TLS as gRPC), sent to the first endpoint that answers; a follower's
//! redirect is followed to the leader with the same method and body. What the server answers is
//! shown as it is; a refusal is an error carrying the server's words.

use serde_json::{json, Value};

use super::Shown;
use crate::admin::AdminClient;
use crate::tls::Trust;

const API: &str = "/pd/api/v1";

/// One PD HTTP call, its JSON answer on success.
pub(super) fn call(
    endpoints: &[String],
    trust: &Trust,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Value> {
    let path = format!("{API}{path}");
    let mut last = None;
    for endpoint in endpoints {
        let client = AdminClient::without_redirects(endpoint, trust)?;
        let mut answer = match client.send(method, &path, body) {
            Ok(a) => a,
            Err(e) => {
                last = Some(anyhow::anyhow!("{endpoint}: {e}"));
                continue;
            }
        };
        if answer.status == 307 {
            let leader = answer
                .location
                .as_deref()
                .and_then(|l| l.strip_suffix(path.as_str()))
                .ok_or_else(|| anyhow::anyhow!("{endpoint} redirected {path} elsewhere"))?
                .to_string();
            answer = AdminClient::without_redirects(&leader, trust)?.send(method, &path, body)?;
        }
        let shown = serde_json::from_str(&answer.body).unwrap_or(Value::String(answer.body));
        if answer.status != 200 {
            let words = shown
                .as_str()
                .map_or_else(|| shown.to_string(), str::to_string);
            anyhow::bail!("{method} {path}: {}: {words}", answer.status);
        }
        return Ok(shown);
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("pass --endpoints HOST:PORT")))
}

/// The server's answer as it is: a message, or the JSON.
pub(super) fn said(answer: Value) -> Shown {
    let text = answer
        .as_str()
        .map_or_else(|| answer.to_string(), str::to_string);
    Shown { json: answer, text }
}

/// Starts draining store `id` (Offline, then Tombstone once it holds no region).
pub fn store_delete(endpoints: &[String], trust: &Trust, id: u64) -> anyhow::Result<Shown> {
    call(endpoints, trust, "DELETE", &format!("/store/{id}"), None).map(said)
}

/// Every store's limits, in peers per minute.
pub fn store_limits(endpoints: &[String], trust: &Trust) -> anyhow::Result<Shown> {
    let limits = call(endpoints, trust, "GET", "/stores/limit", None)?;
    let mut text = String::from("STORE  ADD-PEER  REMOVE-PEER\n");
    if let Some(map) = limits.as_object() {
        let mut rows: Vec<(u64, &Value)> = map
            .iter()
            .filter_map(|(id, l)| Some((id.parse().ok()?, l)))
            .collect();
        rows.sort_unstable_by_key(|r| r.0);
        for (id, l) in rows {
            text.push_str(&format!(
                "{id:<6} {:<9} {}\n",
                l["add-peer"], l["remove-peer"]
            ));
        }
    }
    Ok(Shown {
        json: limits,
        text: text.trim_end().to_string(),
    })
}

/// Sets `rate` (peers per minute) for one store or, with `None`, every store; `kind` names
/// `add-peer` or `remove-peer`, both when absent.
pub fn set_store_limit(
    endpoints: &[String],
    trust: &Trust,
    store: Option<u64>,
    rate: f64,
    kind: Option<&str>,
) -> anyhow::Result<Shown> {
    let mut body = json!({ "rate": rate });
    if let Some(kind) = kind {
        body["type"] = json!(kind);
    }
    let path = match store {
        Some(id) => format!("/store/{id}/limit"),
        None => "/stores/limit".to_string(),
    };
    call(endpoints, trust, "POST", &path, Some(&body)).map(said)
}

pub fn schedulers(endpoints: &[String], trust: &Trust) -> anyhow::Result<Shown> {
    let names = call(endpoints, trust, "GET", "/schedulers", None)?;
    let text = names
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    Ok(Shown { json: names, text })
}

/// pd-ctl's names: `evict-leader` is short for `evict-leader-scheduler`.
fn full_name(name: &str) -> String {
    if name.ends_with("-scheduler") || name.contains("-scheduler-") {
        name.to_string()
    } else {
        format!("{name}-scheduler")
    }
}

/// Adds a scheduler; evict-leader takes the store whose leaders it moves away.
pub fn add_scheduler(
    endpoints: &[String],
    trust: &Trust,
    name: &str,
    store: Option<u64>,
) -> anyhow::Result<Shown> {
    let mut body = json!({ "name": full_name(name) });
    if let Some(store) = store {
        body["store_id"] = json!(store);
    }
    call(endpoints, trust, "POST", "/schedulers", Some(&body)).map(said)
}

/// Removes a scheduler: `evict-leader-scheduler-4` (or `evict-leader 4`) stops evicting
/// store 4's leaders.
pub fn remove_scheduler(
    endpoints: &[String],
    trust: &Trust,
    name: &str,
    store: Option<u64>,
) -> anyhow::Result<Shown> {
    let mut name = full_name(name);
    if let Some(store) = store {
        name = format!("{name}-{store}");
    }
    call(
        endpoints,
        trust,
        "DELETE",
        &format!("/schedulers/{name}"),
        None,
    )
    .map(said)
}

#[cfg(test)]
mod tests {
    use super::full_name;

    #[test]
    fn short_scheduler_names_are_pd_ctls() {
        assert_eq!(full_name("evict-leader"), "evict-leader-scheduler");
        assert_eq!(
            full_name("evict-leader-scheduler"),
            "evict-leader-scheduler"
        );
        assert_eq!(
            full_name("evict-leader-scheduler-4"),
            "evict-leader-scheduler-4"
        );
    }
}
