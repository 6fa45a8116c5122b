//! PD's placement rules and region label rules, as rules (pure, like `placement`): what a
//! rule, a rule group and a label rule are, in PD's JSON; PD's checks of each as it arrives
//! and of the rules together (every key placed, one leader at most, a leader or a voter); and
//! the edits PD's HTTP API makes, each planned as a change to persist and committed once it is
//! durable. No I/O, no clock: the time is passed in. The server keeps them and persists them
//! (`server::placement::rules`); scheduling does not read them yet.

mod apply;
mod duration;
mod error;
mod keys;
mod label;
mod rule;
mod set;

pub use error::RuleError;
pub use keys::{decode_hex, encode_table_key, upper_hex};
pub use label::{check_label_rule, LabelRule, LabelRulePatch, Labeler, RegionLabel, KEY_RANGE};
pub use rule::{adjust, GroupBundle, LabelConstraint, Rule, RuleGroup, RuleOp};
pub use set::{RuleSet, RulesChange};

/// What a leader holds: the placement rules and the region label rules.
#[derive(Debug, Clone)]
pub struct Rules {
    pub set: RuleSet,
    pub labels: Labeler,
}

#[cfg(test)]
mod tests;
