//! Whether a set of rules places every key: PD's `buildRuleList`. The key space is cut at every
//! rule's start and end; in each piece the rules covering it are ordered (group index, group
//! id, rule index, rule id), an overriding group drops the groups before it and an overriding
//! rule the rules before it in its group (`prepareRulesForApply`), and what is left must name
//! one leader at most and at least one leader or voter (`checkApplyRules`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::error::RuleError;
use super::keys::upper_hex;
use super::rule::{Rule, RuleGroup};

/// A rule with the range it covers and its group's place.
struct Placed<'a> {
    rule: &'a Rule,
    start: Vec<u8>,
    end: Vec<u8>,
    group_index: i64,
    group_override: bool,
}

fn compare(a: &Placed<'_>, b: &Placed<'_>) -> Ordering {
    (a.group_index, &a.rule.group_id, a.rule.index, &a.rule.id).cmp(&(
        b.group_index,
        &b.rule.group_id,
        b.rule.index,
        &b.rule.id,
    ))
}

/// PD's `prepareRulesForApply` over rules already in order.
fn for_apply<'a>(rules: &[&'a Placed<'a>]) -> Vec<&'a Placed<'a>> {
    let mut kept: Vec<&Placed<'_>> = Vec::new();
    let mut j = 0;
    for i in 1..rules.len() {
        if rules[j].rule.group_id != rules[i].rule.group_id {
            if rules[i].group_override {
                kept.clear();
            } else {
                kept.extend_from_slice(&rules[j..i]);
            }
            j = i;
        }
        if rules[i].rule.r#override {
            j = i;
        }
    }
    if !rules.is_empty() {
        kept.extend_from_slice(&rules[j..]);
    }
    kept
}

/// PD's `checkApplyRules`.
fn check_applied(rules: &[&Placed<'_>]) -> Result<(), &'static str> {
    let (mut leaders, mut voters) = (0i64, 0i64);
    for p in rules {
        if p.rule.is_leader() {
            leaders += p.rule.count;
        } else if p.rule.is_voter() {
            voters += p.rule.count;
        }
        if leaders > 1 {
            return Err("multiple leader replicas");
        }
    }
    if leaders + voters < 1 {
        return Err("needs at least one leader or voter");
    }
    Ok(())
}

/// PD's `buildRuleList`: `Ok` when every key is placed and each piece's rules are sound.
pub fn check_rule_list(
    rules: &BTreeMap<(String, String), Rule>,
    groups: &BTreeMap<String, RuleGroup>,
) -> Result<(), RuleError> {
    if rules.is_empty() {
        return Err(RuleError::BuildList("no rule left".into()));
    }
    let placed: Vec<Placed<'_>> = rules
        .values()
        .map(|rule| {
            let (start, end) = rule.range();
            let group = groups.get(&rule.group_id);
            Placed {
                rule,
                start,
                end,
                group_index: group.map_or(0, |g| g.index),
                group_override: group.is_some_and(|g| g.r#override),
            }
        })
        .collect();
    // The pieces start at every rule's start and end; the first at the empty key.
    let mut cuts: BTreeSet<Vec<u8>> = BTreeSet::new();
    cuts.insert(Vec::new());
    for p in &placed {
        cuts.insert(p.start.clone());
        if !p.end.is_empty() {
            cuts.insert(p.end.clone());
        }
    }
    let cuts: Vec<Vec<u8>> = cuts.into_iter().collect();
    for (i, start) in cuts.iter().enumerate() {
        let end: &[u8] = cuts.get(i + 1).map_or(&[][..], Vec::as_slice);
        let mut covering: Vec<&Placed<'_>> = placed
            .iter()
            .filter(|p| {
                p.start <= *start && (p.end.is_empty() || p.end.as_slice() > start.as_slice())
            })
            .collect();
        if covering.is_empty() {
            return Err(RuleError::BuildList(format!(
                "no rule for range {{{}, {}}}",
                upper_hex(start),
                upper_hex(end)
            )));
        }
        covering.sort_by(|a, b| compare(a, b));
        if let Err(why) = check_applied(&for_apply(&covering)) {
            return Err(RuleError::BuildList(format!(
                "{why} for range {{{}, {}}}",
                upper_hex(start),
                upper_hex(end)
            )));
        }
    }
    Ok(())
}
