//! PD's operator API, with its routes, input, words and status codes (`server/api/
//! operator.go`, `pkg/schedule/handler`): `GET /operators` (`?kind=`, `?object`), `POST
//! /operators` (`{"name": ...}`: transfer-leader, transfer-region, transfer-peer, add-peer,
//! add-learner, remove-peer, merge-region, split-region by each of PD's policies,
//! scatter-region, scatter-regions), `DELETE /operators`, `GET /operators/records`, and
//! `GET`/`DELETE /operators/{region_id}`. The input is read as PD reads its `map[string]any` (numbers are JSON numbers; a field of the wrong type is a missing one);
//! the checks and plans are `placement::schedule::admin`'s, reached through the request
//! service's operators view. A read needs any role, a change `admin` (`auth.rs`).
//!
//! Not as PD: an ended operator (`/operators/{id}`, `/operators/records`) is shown by its
//! record, without the steps it ran.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{Map, Value};

use super::operator_string::operator_text;
use super::operator_text::{self as text, OpObject};
use super::reply::Failure;
use super::{query_values, Api};
use crate::placement::schedule::{AdminAsk, AdminRefused, AskedRole};
use crate::placement::SplitPolicy;
use crate::server::service::views::operators as view;

/// PD's error when a region has no operator.
const NOT_FOUND: &str = "[PD:operator:ErrOperatorNotFound]operator not found";
const CREATED: &str = "The operator is created.";

fn internal(message: impl Into<String>) -> Failure {
    Failure::new(StatusCode::INTERNAL_SERVER_ERROR, message)
}

/// `strconv.ParseUint(id, 10, 64)`, refused in Go's words.
fn region_id(raw: &str) -> Result<u64, Failure> {
    raw.parse().map_err(|_| {
        let why = if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        Failure::bad_request(format!("strconv.ParseUint: parsing {raw:?}: {why}"))
    })
}

/// `GET /operators`: every running operator as PD's operator string; with `?kind=` those
/// of each kind asked (PD appends per kind, and lists none at all as `null`); with
/// `?object` as PD's `OpObject`.
pub async fn list(State(api): State<Api>, uri: Uri) -> Result<Response, Failure> {
    let kinds: Vec<String> = query_values(&uri, "kind")?
        .into_iter()
        .map(|k| String::from_utf8_lossy(&k).into_owned())
        .collect();
    let object = has_param(&uri, "object");
    let running = view::running(&api.shared, None).await?;
    let chosen: Option<Vec<_>> = if !has_param(&uri, "kind") {
        Some(running.iter().collect())
    } else {
        let mut picked = Vec::new();
        for kind in &kinds {
            picked.extend(
                running
                    .iter()
                    .filter(|op| text::kind_matches(op.kind, kind)),
            );
        }
        (!picked.is_empty()).then_some(picked)
    };
    if object {
        let objects: Vec<OpObject> = chosen
            .unwrap_or_default()
            .into_iter()
            .map(text::object)
            .collect();
        return Ok(Json(objects).into_response());
    }
    let texts: Option<Vec<String>> = chosen.map(|ops| ops.into_iter().map(operator_text).collect());
    Ok(Json(texts).into_response())
}

fn has_param(uri: &Uri, name: &str) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| p.split('=').next() == Some(name)))
}

/// `GET /operators/{region_id}`: PD's `OpWithStatus` string.
pub async fn by_region(
    State(api): State<Api>,
    Path(id): Path<String>,
) -> Result<Response, Failure> {
    let id = region_id(&id)?;
    let (running, record) = view::status(&api.shared, id).await?;
    match text::with_status(id, running.as_ref(), record.as_ref()) {
        Some(shown) => Ok(Json(shown).into_response()),
        None => Err(internal(NOT_FOUND)),
    }
}

/// `GET /operators/records`: the operators that ended since `?from=` (Unix seconds; all
/// kept without it), each as its record shows it; none is PD's 500.
pub async fn records(State(api): State<Api>, uri: Uri) -> Result<Response, Failure> {
    let from = match query_values(&uri, "from")?.into_iter().next() {
        None => 0,
        Some(raw) if raw.is_empty() => 0,
        Some(raw) => {
            let text = String::from_utf8_lossy(&raw).into_owned();
            let secs: i64 = text.parse().map_err(|_| {
                Failure::bad_request(format!(
                    "strconv.ParseInt: parsing {text:?}: invalid syntax"
                ))
            })?;
            u64::try_from(secs).unwrap_or(0).saturating_mul(1000)
        }
    };
    let ended = view::ended(&api.shared, from).await?;
    if ended.is_empty() {
        return Err(internal(NOT_FOUND));
    }
    let shown: Vec<String> = ended
        .iter()
        .map(|(id, r)| text::record_text(*id, r))
        .collect();
    Ok(Json(shown).into_response())
}

/// `DELETE /operators/{region_id}`: the region's running operator cancelled.
pub async fn cancel_one(
    State(api): State<Api>,
    Path(id): Path<String>,
) -> Result<Response, Failure> {
    let id = region_id(&id)?;
    if view::cancel(&api.shared, Some(id)).await?.is_empty() {
        return Err(internal(NOT_FOUND));
    }
    Ok(Json("The pending operator is canceled.").into_response())
}

/// `DELETE /operators`: every running operator cancelled.
pub async fn cancel_all(State(api): State<Api>) -> Result<Response, Failure> {
    view::cancel(&api.shared, None).await?;
    Ok(Json("All pending operators are canceled.").into_response())
}

/// PD reads the body as `map[string]any`: `null` is an empty map; not an object is 400.
fn input(bytes: &Bytes) -> Result<Map<String, Value>, Failure> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(Failure::bad_request(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_type(&other)
        ))),
        Err(e) => Err(Failure::bad_request(e.to_string())),
    }
}

fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null | Value::Object(_) => "object",
    }
}

/// `input[key].(float64)` then `uint64(...)`: a JSON number, else `missing`.
fn number(input: &Map<String, Value>, key: &str, missing: &str) -> Result<u64, Failure> {
    input
        .get(key)
        .and_then(Value::as_f64)
        .map(|f| f as u64)
        .ok_or_else(|| Failure::bad_request(missing))
}

/// PD's `parseStoreIDsAndPeerRole`: the store ids, each with the role at its index when
/// `peer_roles` is a list as long (a role that is not a string is none).
fn stores_and_roles(
    ids: Option<&Value>,
    roles: Option<&Value>,
) -> Option<BTreeMap<u64, Option<AskedRole>>> {
    let ids: Vec<u64> = ids?
        .as_array()?
        .iter()
        .map(|v| v.as_f64().map(|f| f as u64))
        .collect::<Option<_>>()?;
    let roles = roles
        .and_then(Value::as_array)
        .filter(|r| r.len() == ids.len());
    let mut out = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        let role = roles
            .and_then(|r| r[i].as_str())
            .filter(|r| !r.is_empty())
            .map(AskedRole::parse);
        out.insert(*id, role);
    }
    Some(out)
}

/// Go's `hex.DecodeString`, refused in its words.
fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 2);
    for pair in bytes.chunks(2) {
        let digit = |j: usize| -> Result<u8, String> {
            let b = pair[j];
            (b as char)
                .to_digit(16)
                .map(|d| d as u8)
                .ok_or_else(|| format!("encoding/hex: invalid byte: U+{:04X} {:?}", b, b as char))
        };
        if pair.len() < 2 {
            digit(0)?;
            return Err("encoding/hex: odd length hex string".into());
        }
        out.push((digit(0)? << 4) | digit(1)?);
    }
    Ok(out)
}

/// An admin operator's answer: PD's success string, or its refusal (500, as PD's handler
/// answers every error past the input's shape).
fn started(answer: Result<(), AdminRefused>) -> Result<Response, Failure> {
    match answer {
        Ok(()) => Ok(Json(CREATED).into_response()),
        Err(e) => Err(internal(text::refusal_text(&e))),
    }
}

/// `POST /operators`.
pub async fn create(State(api): State<Api>, bytes: Bytes) -> Result<Response, Failure> {
    let input = input(&bytes)?;
    let Some(name) = input.get("name").and_then(Value::as_str) else {
        return Err(Failure::bad_request("missing operator name"));
    };
    let region = || number(&input, "region_id", "missing region id");
    let shared = &api.shared;
    let ask = match name {
        "transfer-leader" => {
            let id = region()?;
            let store = number(
                &input,
                "to_store_id",
                "missing store id to transfer leader to",
            )?;
            (id, AdminAsk::TransferLeader { store })
        }
        "transfer-region" => {
            let id = region()?;
            let Some(stores) = stores_and_roles(input.get("to_store_ids"), input.get("peer_roles"))
            else {
                return Err(Failure::bad_request(
                    "invalid store ids to transfer region to",
                ));
            };
            if stores.is_empty() {
                return Err(Failure::bad_request(
                    "missing store ids to transfer region to",
                ));
            }
            (id, AdminAsk::TransferRegion { stores })
        }
        "transfer-peer" => {
            let id = region()?;
            let from = number(
                &input,
                "from_store_id",
                "invalid store id to transfer peer from",
            )?;
            let to = number(
                &input,
                "to_store_id",
                "invalid store id to transfer peer to",
            )?;
            (id, AdminAsk::TransferPeer { from, to })
        }
        "add-peer" | "add-learner" | "remove-peer" => {
            let id = region()?;
            let store = number(&input, "store_id", "invalid store id to transfer peer to")?;
            let ask = match name {
                "add-peer" => AdminAsk::AddPeer { store },
                "add-learner" => AdminAsk::AddLearner { store },
                _ => AdminAsk::RemovePeer { store },
            };
            (id, ask)
        }
        "merge-region" => {
            let source = number(&input, "source_region_id", "missing region id")?;
            let target = number(
                &input,
                "target_region_id",
                "invalid target region id to merge to",
            )?;
            // PD looks the source up before the target.
            if !view::known(shared, source)? {
                return Err(internal(text::refusal_text(&AdminRefused::RegionNotFound(
                    source,
                ))));
            }
            return started(view::merge(shared, source, target).await?);
        }
        "split-region" => {
            let id = region()?;
            let Some(policy) = input.get("policy").and_then(Value::as_str) else {
                return Err(Failure::bad_request("missing split policy"));
            };
            let mut keys = Vec::new();
            if let Some(given) = input.get("keys") {
                for k in given
                    .as_array()
                    .ok_or_else(|| Failure::bad_request("bad format keys"))?
                {
                    let k = k
                        .as_str()
                        .ok_or_else(|| Failure::bad_request("bad format keys"))?;
                    keys.push(k.to_string());
                }
            }
            // PD looks the region up before the policy and the keys.
            if !view::known(shared, id)? {
                return Err(internal(text::refusal_text(&AdminRefused::RegionNotFound(
                    id,
                ))));
            }
            let Some(policy) = SplitPolicy::parse(policy) else {
                return Err(internal(format!("check policy {policy} is not supported")));
            };
            // PD reads the keys for USEKEY only; with the others the leader picks the key.
            let mut raw = Vec::with_capacity(keys.len());
            if policy == SplitPolicy::UseKey {
                for k in &keys {
                    raw.push(
                        decode_hex(k)
                            .map_err(|_| internal(format!("split key {k} is not in hex format")))?,
                    );
                }
            }
            (id, AdminAsk::Split { policy, keys: raw })
        }
        "scatter-region" => {
            let id = region()?;
            let group = input
                .get("group")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return match view::scatter_one(shared, id, group.to_string()).await? {
                Ok(()) => Ok(Json(CREATED).into_response()),
                Err(None) => Err(internal(text::refusal_text(&AdminRefused::RegionNotFound(
                    id,
                )))),
                Err(Some(why)) => Err(internal(why)),
            };
        }
        "scatter-regions" => return scatter_regions(&api, &input).await,
        _ => return Err(Failure::bad_request("unknown operator")),
    };
    let (id, ask) = ask;
    started(view::create(shared, id, ask).await?)
}

/// PD's `scatter-regions`: `region_ids` (which PD requires, even with a key range), or the
/// regions in `[start_key, end_key)` (hex) when both are given; answered 200 with the
/// percentage scattered and an error text.
async fn scatter_regions(api: &Api, input: &Map<String, Value>) -> Result<Response, Failure> {
    let start = input
        .get("start_key")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let end = input
        .get("end_key")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ids: Option<Vec<u64>> = input
        .get("region_ids")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .map(|v| v.as_f64().map(|f| f as u64))
                .collect::<Option<_>>()
        });
    let Some(ids) = ids else {
        return Err(Failure::bad_request("region_ids is invalid"));
    };
    if ids.len() > view::MAX_SCATTER {
        return Err(Failure::bad_request(format!(
            "{} regions in one call, at most {}",
            ids.len(),
            view::MAX_SCATTER
        )));
    }
    let group = input
        .get("group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let retry_limit = input
        .get("retry_limit")
        .and_then(Value::as_f64)
        .map_or(5, |f| f.max(0.0) as u64);
    let answer = |percentage: u64, error: String| {
        Json(serde_json::json!({"processed-percentage": percentage, "error": error}))
            .into_response()
    };
    let range = if !start.is_empty() && !end.is_empty() {
        match (decode_hex(start), decode_hex(end)) {
            (Ok(s), Ok(e)) => Some((s, e)),
            (Err(why), _) | (_, Err(why)) => return Ok(answer(0, why)),
        }
    } else {
        None
    };
    let done = view::scatter_many(&api.shared, ids, range, group.to_string(), retry_limit).await?;
    Ok(answer(done, String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_read_as_pd_reads_its_map() {
        let body = |s: &str| Bytes::from(s.to_string());
        assert!(input(&body("null")).unwrap().is_empty());
        assert_eq!(
            input(&body("[1]")).unwrap_err().message,
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        );
        let map = input(&body(r#"{"region_id": 7, "store_id": "4"}"#)).unwrap();
        assert_eq!(number(&map, "region_id", "missing region id").unwrap(), 7);
        let missing = number(&map, "store_id", "invalid store id to transfer peer to");
        assert_eq!(
            missing.unwrap_err().message,
            "invalid store id to transfer peer to"
        );
        assert_eq!(region_id("12").unwrap(), 12);
        assert_eq!(
            region_id("x1").unwrap_err().message,
            "strconv.ParseUint: parsing \"x1\": invalid syntax"
        );
        assert_eq!(
            region_id("99999999999999999999").unwrap_err().message,
            "strconv.ParseUint: parsing \"99999999999999999999\": value out of range"
        );
    }

    #[test]
    fn store_ids_and_roles_as_pd_pairs_them() {
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        let got = stores_and_roles(Some(&v("[1, 2]")), Some(&v(r#"["leader", 5]"#))).unwrap();
        assert_eq!(got[&1], Some(AskedRole::Leader));
        assert_eq!(got[&2], None);
        // Roles of another length are ignored.
        let got = stores_and_roles(Some(&v("[1, 2]")), Some(&v(r#"["leader"]"#))).unwrap();
        assert!(got.values().all(Option::is_none));
        assert_eq!(stores_and_roles(Some(&v(r#"[1, "2"]"#)), None), None);
        assert_eq!(stores_and_roles(None, None), None);
        assert!(stores_and_roles(Some(&v("[]")), None).unwrap().is_empty());
    }

    #[test]
    fn hex_as_go_decodes_it() {
        assert_eq!(decode_hex("7a80FF").unwrap(), vec![0x7a, 0x80, 0xff]);
        assert_eq!(decode_hex("").unwrap(), Vec::<u8>::new());
        assert_eq!(
            decode_hex("7").unwrap_err(),
            "encoding/hex: odd length hex string"
        );
        assert_eq!(
            decode_hex("zz").unwrap_err(),
            "encoding/hex: invalid byte: U+007A 'z'"
        );
    }
}
