//! One placement rule, its group and the forms PD's HTTP API sends them in (a rule, a group
//! bundle, a batch operation), with PD's JSON, and PD's check of a rule as it arrives
//! (`RuleManager.AdjustRule`): keys in hex, the end above the start, each key a memcomparable
//! encoding (PD's default `key-type = "table"`), a group and an id, a known role, a positive
//! count, one leader at most, not too many witnesses, known label operators.

use serde::{Deserialize, Serialize};

use super::error::RuleError;
use super::keys::{check_table_key, decode_hex};

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// How a store's label must match (`in`, `notIn`, `exists`, `notExists`); kept as text so an
/// unknown one is refused in PD's words rather than by the JSON parser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LabelConstraint {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub op: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

const OPS: [&str; 4] = ["in", "notIn", "exists", "notExists"];
const ROLES: [&str; 4] = ["voter", "leader", "follower", "learner"];

/// PD's `placement.Rule`, field for field, in its JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Rule {
    #[serde(default)]
    pub group_id: String,
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub index: i64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub r#override: bool,
    #[serde(default)]
    pub start_key: String,
    #[serde(default)]
    pub end_key: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub is_witness: bool,
    #[serde(default)]
    pub count: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label_constraints: Vec<LabelConstraint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub location_labels: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub isolation_level: String,
    /// Set when the rule is stored: 0 when new, one more at each change.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub version: u64,
    /// Set when the rule is first stored, in Unix seconds.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub create_timestamp: u64,
}

impl Rule {
    /// The rule's identity: `(group_id, id)`.
    pub fn key(&self) -> (String, String) {
        (self.group_id.clone(), self.id.clone())
    }

    /// The keys it covers, decoded (PD keeps both forms; the hex was checked on arrival).
    pub fn range(&self) -> (Vec<u8>, Vec<u8>) {
        (
            decode_hex(&self.start_key).unwrap_or_default(),
            decode_hex(&self.end_key).unwrap_or_default(),
        )
    }

    /// PD's default rule: the `pd` group's `default`, every key, `max_replicas` voters.
    pub fn default_rule(max_replicas: u64) -> Rule {
        Rule {
            group_id: "pd".into(),
            id: "default".into(),
            role: "voter".into(),
            count: max_replicas as i64,
            ..Rule::default()
        }
    }

    pub fn is_leader(&self) -> bool {
        self.role == "leader"
    }

    pub fn is_voter(&self) -> bool {
        self.role == "voter"
    }
}

/// PD's `RuleGroup`: the order groups apply in and whether one overrides those before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RuleGroup {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub index: i64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub r#override: bool,
}

impl RuleGroup {
    /// A group with neither an index nor override is PD's default and is not stored.
    pub fn is_default(&self) -> bool {
        self.index == 0 && !self.r#override
    }
}

/// PD's `GroupBundle`: a group with its rules (`/config/placement-rule`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct GroupBundle {
    #[serde(default)]
    pub group_id: String,
    #[serde(default)]
    pub group_index: i64,
    #[serde(default)]
    pub group_override: bool,
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// PD's `RuleOp` (`/config/rules/batch`): a rule's fields with `action` (`add` or `del`) and,
/// for a delete, whether the id is a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RuleOp {
    #[serde(flatten)]
    pub rule: Rule,
    #[serde(default)]
    pub action: String,
    #[serde(default)]
    pub delete_by_id_prefix: bool,
}

/// PD's `AdjustRule`: checks `rule` as it arrives (into `group_id` when one is named, which
/// the rule takes if it names none).
pub fn adjust(rule: &mut Rule, group_id: &str, max_replicas: u64) -> Result<(), RuleError> {
    let start =
        decode_hex(&rule.start_key).ok_or_else(|| RuleError::Hex(rule.start_key.clone()))?;
    let end = decode_hex(&rule.end_key).ok_or_else(|| RuleError::Hex(rule.end_key.clone()))?;
    if !end.is_empty() && end <= start {
        return Err(RuleError::content("endKey should be greater than startKey"));
    }
    if !start.is_empty() {
        check_table_key(&start).map_err(|why| {
            RuleError::content(format!("start key should be encoded in table mode: {why}"))
        })?;
    }
    if !end.is_empty() {
        check_table_key(&end).map_err(|why| {
            RuleError::content(format!("end key should be encoded in table mode: {why}"))
        })?;
    }
    if !group_id.is_empty() {
        if rule.group_id.is_empty() {
            rule.group_id = group_id.to_string();
        } else if rule.group_id != group_id {
            return Err(RuleError::content(format!(
                "rule group {} does not match group ID {group_id}",
                rule.group_id
            )));
        }
    }
    if rule.group_id.is_empty() {
        return Err(RuleError::content("group ID should not be empty"));
    }
    if rule.id.is_empty() {
        return Err(RuleError::content("ID should not be empty"));
    }
    if !ROLES.contains(&rule.role.as_str()) {
        return Err(RuleError::content(format!("invalid role {}", rule.role)));
    }
    if rule.count <= 0 {
        return Err(RuleError::content(format!("invalid count {}", rule.count)));
    }
    if rule.is_leader() && rule.count > 1 {
        return Err(RuleError::content(format!(
            "define multiple leaders by count {}",
            rule.count
        )));
    }
    if rule.is_witness && rule.count > (max_replicas / 2) as i64 {
        return Err(RuleError::content(format!(
            "define too many witness by count {}",
            rule.count
        )));
    }
    for c in &rule.label_constraints {
        if !OPS.contains(&c.op.as_str()) {
            return Err(RuleError::content(format!("invalid op {}", c.op)));
        }
        if rule.is_witness && c.key == "engine" && c.values.iter().any(|v| v == "tiflash") {
            return Err(RuleError::content("witness can't combine with tiflash"));
        }
    }
    Ok(())
}
