//! A group's running state as PD persists it beside the group's settings (`GroupStates`,
//! JSON): the RU bucket's tokens as of `last_update` and the consumption its clients
//! reported, so a new leader resumes the bucket (accruing only the time since) rather than
//! refilling it, and keeps the consumption. Only the fields Meridian reads and PD writes;
//! what a state means for a bucket is the registry's. Pure: the wall time is an argument.

use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::kvproto::resource_manager::Consumption;

/// One group's persisted state.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    pub tokens: f64,
    /// When `tokens` was current (PD's `last_update`), in Unix nanoseconds.
    pub last_update_unix_ns: i128,
    pub consumption: Consumption,
}

/// Why a stored state was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a resource group state does not decode: {0}")]
pub struct StateError(String);

/// PD's `rmpb.Consumption` JSON names, with how to reach each float field.
type Field = (&'static str, fn(&mut Consumption) -> &mut f64);
const FIELDS: [Field; 11] = [
    ("r_r_u", |c| &mut c.r_r_u),
    ("w_r_u", |c| &mut c.w_r_u),
    ("read_bytes", |c| &mut c.read_bytes),
    ("write_bytes", |c| &mut c.write_bytes),
    ("total_cpu_time_ms", |c| &mut c.total_cpu_time_ms),
    ("sql_layer_cpu_time_ms", |c| &mut c.sql_layer_cpu_time_ms),
    ("kv_read_rpc_count", |c| &mut c.kv_read_rpc_count),
    ("kv_write_rpc_count", |c| &mut c.kv_write_rpc_count),
    ("tikv_r_u_v2", |c| &mut c.tikv_r_u_v2),
    ("tidb_r_u_v2", |c| &mut c.tidb_r_u_v2),
    ("tiflash_r_u_v2", |c| &mut c.tiflash_r_u_v2),
];

impl GroupState {
    /// PD's JSON for the state.
    pub fn encode(&self) -> Vec<u8> {
        let last_update = OffsetDateTime::from_unix_timestamp_nanos(self.last_update_unix_ns)
            .ok()
            .and_then(|t| t.format(&Rfc3339).ok());
        let mut consumption = Map::new();
        let mut c = self.consumption;
        for (name, field) in FIELDS {
            let v = *field(&mut c);
            // Go's omitempty, and JSON has no NaN.
            if v != 0.0 && v.is_finite() {
                consumption.insert(name.into(), json!(v));
            }
        }
        let tokens = if self.tokens.is_finite() {
            self.tokens
        } else {
            0.0
        };
        json!({
            "r_u": {"tokens": tokens, "last_update": last_update, "initialized": true},
            "ru_consumption": consumption,
        })
        .to_string()
        .into_bytes()
    }

    /// Reads PD's JSON; a state without an initialized RU bucket, or with no time, is `None`
    /// (PD initializes such a bucket afresh).
    pub fn decode(bytes: &[u8]) -> Result<Option<GroupState>, StateError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| StateError(e.to_string()))?;
        let Some(ru) = value.get("r_u") else {
            return Ok(None);
        };
        if ru.get("initialized").and_then(Value::as_bool) != Some(true) {
            return Ok(None);
        }
        let tokens = match ru.get("tokens") {
            None => 0.0,
            Some(t) => t
                .as_f64()
                .filter(|t| t.is_finite())
                .ok_or_else(|| StateError("tokens is not a number".into()))?,
        };
        let Some(last_update) = ru.get("last_update").and_then(Value::as_str) else {
            return Ok(None);
        };
        let last_update = OffsetDateTime::parse(last_update, &Rfc3339)
            .map_err(|e| StateError(format!("last_update: {e}")))?;
        let mut consumption = Consumption::default();
        if let Some(stored) = value.get("ru_consumption").and_then(Value::as_object) {
            for (name, field) in FIELDS {
                if let Some(v) = stored.get(name).and_then(Value::as_f64) {
                    *field(&mut consumption) = v;
                }
            }
        }
        Ok(Some(GroupState {
            tokens,
            last_update_unix_ns: last_update.unix_timestamp_nanos(),
            consumption,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_pds_json() {
        let state = GroupState {
            tokens: -12.5,
            last_update_unix_ns: 1_700_000_000_123_456_789,
            consumption: Consumption {
                r_r_u: 3.0,
                write_bytes: 7.0,
                ..Default::default()
            },
        };
        assert_eq!(GroupState::decode(&state.encode()), Ok(Some(state)));
        // As PD writes it (Go's time.Time in RFC 3339 with a zone).
        let pd = br#"{"r_u":{"tokens":100,"last_update":"2023-11-14T22:13:20.5+08:00","initialized":true},"ru_consumption":{"r_r_u":1.5}}"#;
        let got = GroupState::decode(pd).unwrap().unwrap();
        assert_eq!(got.tokens, 100.0);
        assert_eq!(got.last_update_unix_ns, 1_699_971_200_500_000_000);
        assert_eq!(got.consumption.r_r_u, 1.5);
        // Not initialized: PD starts the bucket afresh.
        assert_eq!(
            GroupState::decode(br#"{"r_u":{"tokens":5,"initialized":false}}"#),
            Ok(None)
        );
        assert!(GroupState::decode(b"{").is_err());
        assert!(GroupState::decode(
            br#"{"r_u":{"tokens":"x","last_update":"2023-11-14T22:13:20Z","initialized":true}}"#
        )
        .is_err());
    }
}
