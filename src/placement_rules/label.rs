//! Region label rules (PD's `labeler`): labels (`key`, `value`, optionally a `ttl` from
//! `start_at`) put on key ranges; TiDB keeps table attributes and FLASHBACK's marks in them.
//! PD's check of a rule as it arrives (`checkAndAdjust`), its patch (`sets`, then `deletes`
//! applied before them), and the rules in PD's JSON. Pure: the time labels expire against is
//! passed in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::duration::{format_unix_date, parse_go_duration, parse_unix_date, TimeTextError};
use super::error::RuleError;
use super::keys::decode_hex;

/// The only rule type PD has.
pub const KEY_RANGE: &str = "key-range";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RegionLabel {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ttl: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub start_at: String,
}

/// PD's `LabelRule`; `data` is kept as the JSON it came in, checked to be key ranges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LabelRule {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub index: i64,
    #[serde(default)]
    pub labels: Vec<RegionLabel>,
    #[serde(default)]
    pub rule_type: String,
    #[serde(default)]
    pub data: Value,
}

/// PD's `LabelRulePatch` (`PATCH /config/region-label/rules`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LabelRulePatch {
    #[serde(default, rename = "sets")]
    pub set_rules: Vec<LabelRule>,
    #[serde(default, rename = "deletes")]
    pub delete_rules: Vec<String>,
}

fn content(why: impl Into<String>) -> RuleError {
    RuleError::LabelContent(why.into())
}

impl RegionLabel {
    /// When the label expires (Unix seconds), filling in `start_at` as PD does; `None`: never.
    fn expiry(&mut self, now_secs: i64) -> Result<Option<i64>, TimeTextError> {
        if self.ttl.is_empty() {
            return Ok(None);
        }
        let ttl_ms = parse_go_duration(&self.ttl)?;
        let start = if self.start_at.is_empty() {
            self.start_at = format_unix_date(now_secs).ok_or(TimeTextError::OutOfRange)?;
            now_secs
        } else {
            parse_unix_date(&self.start_at)?
        };
        Ok(Some(start.saturating_add(ttl_ms / 1000)))
    }
}

/// PD's `checkAndAdjust`: an id, labels with keys and values and valid TTLs (those already
/// expired at `now_secs` dropped, and at least one left), and key ranges in hex with each end
/// above its start.
pub fn check_label_rule(rule: &mut LabelRule, now_secs: i64) -> Result<(), RuleError> {
    if rule.id.is_empty() {
        return Err(content("empty rule id"));
    }
    if rule.labels.is_empty() {
        return Err(content("no region labels"));
    }
    let mut live = Vec::with_capacity(rule.labels.len());
    for mut label in std::mem::take(&mut rule.labels) {
        if label.key.is_empty() {
            return Err(content("empty region label key"));
        }
        if label.value.is_empty() {
            return Err(content("empty region label value"));
        }
        match label.expiry(now_secs) {
            Err(why) => return Err(content(format!("region label with invalid ttl info {why}"))),
            Ok(Some(expires)) if expires < now_secs => {}
            Ok(_) => live.push(label),
        }
    }
    rule.labels = live;
    if rule.labels.is_empty() {
        return Err(content("region label with expired ttl"));
    }
    if rule.rule_type != KEY_RANGE {
        return Err(content(format!("invalid rule type: {}", rule.rule_type)));
    }
    let Value::Array(ranges) = &rule.data else {
        return Err(content(format!(
            "invalid rule type: {}",
            go_type(&rule.data)
        )));
    };
    if ranges.is_empty() {
        return Err(content("no key ranges"));
    }
    let mut normalized = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Object(fields) = range else {
            return Err(content(format!("invalid rule type: {}", go_type(range))));
        };
        let key = |name: &str| -> Result<String, RuleError> {
            match fields.get(name) {
                Some(Value::String(s)) => Ok(s.clone()),
                other => Err(content(format!(
                    "invalid {} type: {}",
                    if name == "start_key" {
                        "startKey"
                    } else {
                        "endKey"
                    },
                    other.map_or("<nil>", go_type)
                ))),
            }
        };
        let (start_hex, end_hex) = (key("start_key")?, key("end_key")?);
        let start = decode_hex(&start_hex).ok_or_else(|| RuleError::Hex(start_hex.clone()))?;
        let end = decode_hex(&end_hex).ok_or_else(|| RuleError::Hex(end_hex.clone()))?;
        if !end.is_empty() && end <= start {
            return Err(content("endKey should be greater than startKey"));
        }
        normalized.push(serde_json::json!({"start_key": start_hex, "end_key": end_hex}));
    }
    rule.data = Value::Array(normalized);
    Ok(())
}

/// Go's name for what a JSON value decodes to, for PD's messages.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The label rules, by id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Labeler {
    rules: BTreeMap<String, LabelRule>,
}

impl Labeler {
    pub fn new(rules: Vec<LabelRule>) -> Labeler {
        Labeler {
            rules: rules.into_iter().map(|r| (r.id.clone(), r)).collect(),
        }
    }

    /// Every rule, by id.
    pub fn rules(&self) -> Vec<LabelRule> {
        self.rules.values().cloned().collect()
    }

    pub fn get(&self, id: &str) -> Option<&LabelRule> {
        self.rules.get(id)
    }

    /// PD's `Patch`: every rule to set is checked first; the change is the deletes, then the
    /// sets (a rule both deleted and set is set).
    pub fn plan_patch(
        &self,
        patch: LabelRulePatch,
        now_secs: i64,
    ) -> Result<BTreeMap<String, Option<LabelRule>>, RuleError> {
        let mut sets = Vec::with_capacity(patch.set_rules.len());
        for mut rule in patch.set_rules {
            check_label_rule(&mut rule, now_secs)?;
            sets.push(rule);
        }
        let mut change: BTreeMap<String, Option<LabelRule>> = BTreeMap::new();
        for id in patch.delete_rules {
            if self.rules.contains_key(&id) {
                change.insert(id, None);
            }
        }
        for rule in sets {
            change.insert(rule.id.clone(), Some(rule));
        }
        Ok(change)
    }

    /// Applies a change once it is durable.
    pub fn commit(&mut self, change: &BTreeMap<String, Option<LabelRule>>) {
        for (id, rule) in change {
            match rule {
                Some(r) => self.rules.insert(id.clone(), r.clone()),
                None => self.rules.remove(id),
            };
        }
    }
}
