//! The cluster's placement rules and rule groups, and PD's edits of them (`SetRules`, `Batch`,
//! `SetAllGroupBundles`): each edit is checked rule by rule (`rule::adjust`) and as a whole
//! (`apply::check_rule_list`) before anything changes, and yields the writes to persist; the
//! caller makes them durable, then commits. Pure: the time a new rule is stamped with is
//! passed in.

use std::collections::BTreeMap;

use super::apply::check_rule_list;
use super::error::RuleError;
use super::rule::{adjust, GroupBundle, Rule, RuleGroup, RuleOp};

/// What an edit changes: rules and groups to store (`Some`) or remove (`None`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RulesChange {
    pub rules: BTreeMap<(String, String), Option<Rule>>,
    pub groups: BTreeMap<String, Option<RuleGroup>>,
}

impl RulesChange {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.groups.is_empty()
    }
}

/// The rules and the groups that are not PD's default (index 0, no override).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    rules: BTreeMap<(String, String), Rule>,
    groups: BTreeMap<String, RuleGroup>,
    max_replicas: u64,
}

impl RuleSet {
    /// The stored rules and groups; with no rule stored, PD's default rule.
    pub fn new(rules: Vec<Rule>, groups: Vec<RuleGroup>, max_replicas: u64) -> RuleSet {
        let mut rules: BTreeMap<_, _> = rules.into_iter().map(|r| (r.key(), r)).collect();
        if rules.is_empty() {
            let default = Rule::default_rule(max_replicas);
            rules.insert(default.key(), default);
        }
        RuleSet {
            rules,
            groups: groups
                .into_iter()
                .filter(|g| !g.is_default())
                .map(|g| (g.id.clone(), g))
                .collect(),
            max_replicas,
        }
    }

    /// Every rule, in the order PD lists them (group index, group, index, id).
    pub fn rules(&self) -> Vec<Rule> {
        let mut all: Vec<Rule> = self.rules.values().cloned().collect();
        all.sort_by(|a, b| {
            let ga = self.groups.get(&a.group_id).map_or(0, |g| g.index);
            let gb = self.groups.get(&b.group_id).map_or(0, |g| g.index);
            (ga, &a.group_id, a.index, &a.id).cmp(&(gb, &b.group_id, b.index, &b.id))
        });
        all
    }

    /// The groups with their rules (every group a rule names, and the stored ones), ordered by
    /// index then id, as PD's `GetAllGroupBundles`.
    pub fn bundles(&self) -> Vec<GroupBundle> {
        let mut bundles: BTreeMap<String, GroupBundle> = BTreeMap::new();
        for g in self.groups.values() {
            bundles.insert(
                g.id.clone(),
                GroupBundle {
                    group_id: g.id.clone(),
                    group_index: g.index,
                    group_override: g.r#override,
                    rules: Vec::new(),
                },
            );
        }
        for r in self.rules() {
            bundles
                .entry(r.group_id.clone())
                .or_insert_with(|| GroupBundle {
                    group_id: r.group_id.clone(),
                    ..GroupBundle::default()
                })
                .rules
                .push(r);
        }
        let mut out: Vec<GroupBundle> = bundles.into_values().collect();
        out.sort_by(|a, b| (a.group_index, &a.group_id).cmp(&(b.group_index, &b.group_id)));
        out
    }

    /// PD's `SetRules` (`POST /config/rules`): each rule stored or replaced.
    pub fn plan_set(&self, rules: Vec<Rule>) -> Result<RulesChange, RuleError> {
        let mut change = RulesChange::default();
        for mut rule in rules {
            adjust(&mut rule, "", self.max_replicas)?;
            change.rules.insert(rule.key(), Some(rule));
        }
        self.checked(change)
    }

    /// PD's `Batch` (`POST /config/rules/batch`): adds and deletes in order, a delete by id
    /// prefix removing every rule of the group whose id starts with it.
    pub fn plan_batch(&self, ops: Vec<RuleOp>) -> Result<RulesChange, RuleError> {
        let mut change = RulesChange::default();
        for mut op in ops {
            match op.action.as_str() {
                "add" => {
                    adjust(&mut op.rule, "", self.max_replicas)?;
                    change.rules.insert(op.rule.key(), Some(op.rule));
                }
                "del" if op.delete_by_id_prefix => {
                    for key in self.rules.keys() {
                        if key.0 == op.rule.group_id && key.1.starts_with(&op.rule.id) {
                            change.rules.insert(key.clone(), None);
                        }
                    }
                }
                "del" => {
                    change.rules.insert(op.rule.key(), None);
                }
                other => {
                    return Err(RuleError::content(format!("unknown action {other:?}")));
                }
            }
        }
        self.checked(change)
    }

    /// PD's `SetAllGroupBundles` (`POST /config/placement-rule`): the bundles' groups and
    /// rules replace those groups (with `replace_all`, every group and rule).
    pub fn plan_bundles(
        &self,
        bundles: Vec<GroupBundle>,
        replace_all: bool,
    ) -> Result<RulesChange, RuleError> {
        let named = |g: &str| bundles.iter().any(|b| b.group_id == g);
        let mut change = RulesChange::default();
        for key in self.rules.keys() {
            if replace_all || named(&key.0) {
                change.rules.insert(key.clone(), None);
            }
        }
        for id in self.groups.keys() {
            if replace_all || named(id) {
                change.groups.insert(id.clone(), None);
            }
        }
        for bundle in bundles {
            let group = RuleGroup {
                id: bundle.group_id.clone(),
                index: bundle.group_index,
                r#override: bundle.group_override,
            };
            change
                .groups
                .insert(group.id.clone(), (!group.is_default()).then_some(group));
            for mut rule in bundle.rules {
                adjust(&mut rule, &bundle.group_id, self.max_replicas)?;
                change.rules.insert(rule.key(), Some(rule));
            }
        }
        self.checked(change)
    }

    /// The set as it would be after `change`.
    fn applied(
        &self,
        change: &RulesChange,
    ) -> (
        BTreeMap<(String, String), Rule>,
        BTreeMap<String, RuleGroup>,
    ) {
        let mut rules = self.rules.clone();
        for (key, rule) in &change.rules {
            match rule {
                Some(r) => rules.insert(key.clone(), r.clone()),
                None => rules.remove(key),
            };
        }
        let mut groups = self.groups.clone();
        for (id, group) in &change.groups {
            match group {
                Some(g) => groups.insert(id.clone(), g.clone()),
                None => groups.remove(id),
            };
        }
        (rules, groups)
    }

    /// `change` if the rules after it place every key; what it leaves as it is is dropped
    /// (PD's `trim`), so nothing unchanged is written.
    fn checked(&self, mut change: RulesChange) -> Result<RulesChange, RuleError> {
        let (rules, groups) = self.applied(&change);
        check_rule_list(&rules, &groups)?;
        change.rules.retain(|key, rule| {
            let old = self.rules.get(key);
            match (rule.as_ref(), old) {
                (None, None) => false,
                (Some(new), Some(old)) => !same_content(new, old),
                _ => true,
            }
        });
        change
            .groups
            .retain(|id, group| group.as_ref() != self.groups.get(id));
        Ok(change)
    }

    /// Stamps the new and changed rules as PD does (a new rule: version 0, created `now_secs`;
    /// a changed one: one version more, its creation kept), and returns the change to persist.
    pub fn stamp(&self, mut change: RulesChange, now_secs: u64) -> RulesChange {
        for (key, rule) in change.rules.iter_mut() {
            if let Some(rule) = rule {
                match self.rules.get(key) {
                    Some(old) => {
                        rule.version = old.version + 1;
                        rule.create_timestamp = old.create_timestamp;
                    }
                    None => {
                        rule.version = 0;
                        rule.create_timestamp = now_secs;
                    }
                }
            }
        }
        change
    }

    /// Applies a stamped change once it is durable.
    pub fn commit(&mut self, change: &RulesChange) {
        let (rules, groups) = self.applied(change);
        self.rules = rules;
        self.groups = groups;
    }
}

/// Whether two rules say the same, ignoring the stamps the server sets.
fn same_content(a: &Rule, b: &Rule) -> bool {
    let strip = |r: &Rule| Rule {
        version: 0,
        create_timestamp: 0,
        ..r.clone()
    };
    strip(a) == strip(b)
}
