//! PD's rule checks and edits, message for message, and the property that an edit either is
//! refused and changes nothing or leaves a rule set that places every key.

use proptest::prelude::*;

use super::*;

fn table_key(raw: &[u8]) -> String {
    upper_hex(&encode_table_key(raw))
}

fn rule(group: &str, id: &str, role: &str, count: i64) -> Rule {
    Rule {
        group_id: group.into(),
        id: id.into(),
        role: role.into(),
        count,
        ..Rule::default()
    }
}

#[test]
fn a_rule_is_checked_in_pds_words() {
    let cases: Vec<(Rule, &str)> = vec![
        (Rule { start_key: "zz".into(), ..rule("g", "r", "voter", 1) },
         "[PD:hex:ErrHexDecodingString]decode string zz error"),
        (Rule { start_key: table_key(b"b"), end_key: table_key(b"a"), ..rule("g", "r", "voter", 1) },
         "[PD:placement:ErrRuleContent]invalid rule content, endKey should be greater than startKey"),
        (Rule { start_key: "74".into(), ..rule("g", "r", "voter", 1) },
         "[PD:placement:ErrRuleContent]invalid rule content, start key should be encoded in table mode: insufficient bytes to decode value"),
        (rule("", "r", "voter", 1),
         "[PD:placement:ErrRuleContent]invalid rule content, group ID should not be empty"),
        (rule("g", "", "voter", 1),
         "[PD:placement:ErrRuleContent]invalid rule content, ID should not be empty"),
        (rule("g", "r", "master", 1),
         "[PD:placement:ErrRuleContent]invalid rule content, invalid role master"),
        (rule("g", "r", "voter", 0),
         "[PD:placement:ErrRuleContent]invalid rule content, invalid count 0"),
        (rule("g", "r", "leader", 2),
         "[PD:placement:ErrRuleContent]invalid rule content, define multiple leaders by count 2"),
        (Rule { is_witness: true, ..rule("g", "r", "voter", 2) },
         "[PD:placement:ErrRuleContent]invalid rule content, define too many witness by count 2"),
        (Rule {
            label_constraints: vec![LabelConstraint { key: "zone".into(), op: "near".into(), values: vec![] }],
            ..rule("g", "r", "voter", 1)
        }, "[PD:placement:ErrRuleContent]invalid rule content, invalid op near"),
    ];
    for (mut r, want) in cases {
        assert_eq!(adjust(&mut r, "", 3).unwrap_err().to_string(), want);
    }
    let mut named = rule("", "r", "voter", 1);
    adjust(&mut named, "tidb", 3).unwrap();
    assert_eq!(named.group_id, "tidb", "the bundle's group is taken");
    let mut other = rule("pd", "r", "voter", 1);
    assert_eq!(
        adjust(&mut other, "tidb", 3).unwrap_err().to_string(),
        "[PD:placement:ErrRuleContent]invalid rule content, rule group pd does not match group ID tidb"
    );
}

#[test]
fn the_rules_together_must_place_every_key() {
    let set = RuleSet::new(vec![], vec![], 3);
    assert_eq!(set.rules(), vec![Rule::default_rule(3)]);
    // Deleting the only rule leaves keys unplaced.
    let del = RuleOp {
        rule: rule("pd", "default", "", 0),
        action: "del".into(),
        delete_by_id_prefix: false,
    };
    assert_eq!(
        set.plan_batch(vec![del]).unwrap_err().to_string(),
        "[PD:placement:ErrBuildRuleList]build rule list failed, no rule left"
    );
    // A learner-only range has no voter.
    let learners = Rule {
        start_key: table_key(b"t1"),
        end_key: table_key(b"t2"),
        ..rule("pd", "default", "learner", 1)
    };
    let err = set.plan_set(vec![learners]).unwrap_err().to_string();
    assert!(
        err.starts_with("[PD:placement:ErrBuildRuleList]build rule list failed, "),
        "{err}"
    );
    // An overriding rule in a later group with two leaders for a range.
    let lead = |id: &str| Rule {
        index: 1,
        ..rule("pd", id, "leader", 1)
    };
    let err = set
        .plan_set(vec![lead("l1"), lead("l2")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("multiple leader replicas for range {, }"),
        "{err}"
    );
    // An override rule replaces the default: one leader, two followers is sound.
    let over = Rule {
        index: 1,
        r#override: true,
        ..rule("pd", "three", "leader", 1)
    };
    let followers = Rule {
        index: 2,
        ..rule("pd", "followers", "follower", 2)
    };
    let change = set.plan_set(vec![over, followers]).unwrap();
    assert_eq!(change.rules.len(), 2);
}

#[test]
fn edits_are_stamped_and_trimmed_as_pd_does() {
    let mut set = RuleSet::new(vec![], vec![], 3);
    let extra = Rule {
        start_key: table_key(b"t1"),
        end_key: table_key(b"t2"),
        ..rule("tidb", "t1", "learner", 1)
    };
    let change = set.plan_set(vec![extra.clone()]).unwrap();
    let change = set.stamp(change, 1000);
    set.commit(&change);
    let stored = set
        .rules()
        .into_iter()
        .find(|r| r.group_id == "tidb")
        .unwrap();
    assert_eq!((stored.version, stored.create_timestamp), (0, 1000));
    // The same rule again changes nothing.
    assert!(set.plan_set(vec![extra.clone()]).unwrap().is_empty());
    let changed = Rule { count: 2, ..extra };
    let change = set.stamp(set.plan_set(vec![changed]).unwrap(), 2000);
    set.commit(&change);
    let stored = set
        .rules()
        .into_iter()
        .find(|r| r.group_id == "tidb")
        .unwrap();
    assert_eq!(
        (stored.version, stored.create_timestamp, stored.count),
        (1, 1000, 2)
    );
    // Bundles: replacing everything with one group of one rule.
    let bundle = GroupBundle {
        group_id: "pd".into(),
        group_index: 5,
        group_override: true,
        rules: vec![rule("", "only", "voter", 3)],
    };
    let change = set.plan_bundles(vec![bundle], true).unwrap();
    set.commit(&set.stamp(change, 3000));
    let bundles = set.bundles();
    assert_eq!(bundles.len(), 1);
    assert_eq!(
        (bundles[0].group_index, bundles[0].group_override),
        (5, true)
    );
    assert_eq!(bundles[0].rules.len(), 1);
    assert_eq!(bundles[0].rules[0].group_id, "pd");
    // Delete by prefix.
    let mut set = RuleSet::new(vec![], vec![], 3);
    let two: Vec<Rule> = ["t-1", "t-2"]
        .iter()
        .map(|id| Rule {
            start_key: table_key(id.as_bytes()),
            end_key: table_key(&[id.as_bytes(), b"z"].concat()),
            ..rule("tidb", id, "learner", 1)
        })
        .collect();
    let change = set.plan_set(two).unwrap();
    set.commit(&set.stamp(change, 1));
    let del = RuleOp {
        rule: rule("tidb", "t-", "", 0),
        action: "del".into(),
        delete_by_id_prefix: true,
    };
    let change = set.plan_batch(vec![del]).unwrap();
    assert_eq!(change.rules.len(), 2);
    set.commit(&change);
    assert_eq!(set.rules(), vec![Rule::default_rule(3)]);
}

#[test]
fn label_rules_are_checked_in_pds_words() {
    let good = || LabelRule {
        id: "schema/test/t".into(),
        index: 0,
        labels: vec![RegionLabel {
            key: "merge_option".into(),
            value: "deny".into(),
            ..RegionLabel::default()
        }],
        rule_type: KEY_RANGE.into(),
        data: serde_json::json!([{"start_key": "7480", "end_key": "7481"}]),
    };
    let mut ok = good();
    check_label_rule(&mut ok, 0).unwrap();
    let cases: Vec<(LabelRule, &str)> = vec![
        (
            LabelRule {
                id: "".into(),
                ..good()
            },
            "empty rule id",
        ),
        (
            LabelRule {
                labels: vec![],
                ..good()
            },
            "no region labels",
        ),
        (
            LabelRule {
                rule_type: "range".into(),
                ..good()
            },
            "invalid rule type: range",
        ),
        (
            LabelRule {
                data: serde_json::json!([]),
                ..good()
            },
            "no key ranges",
        ),
        (
            LabelRule {
                data: serde_json::json!([{"start_key": "7481", "end_key": "7480"}]),
                ..good()
            },
            "endKey should be greater than startKey",
        ),
        (
            LabelRule {
                labels: vec![RegionLabel {
                    key: "k".into(),
                    value: "v".into(),
                    ttl: "10x".into(),
                    ..RegionLabel::default()
                }],
                ..good()
            },
            "region label with invalid ttl info time: unknown unit \"x\" in duration \"10x\"",
        ),
        (
            LabelRule {
                labels: vec![RegionLabel {
                    key: "k".into(),
                    value: "v".into(),
                    ttl: "1s".into(),
                    start_at: "Mon Jan  2 15:04:05 UTC 2006".into(),
                }],
                ..good()
            },
            "region label with expired ttl",
        ),
    ];
    for (mut r, want) in cases {
        assert_eq!(
            check_label_rule(&mut r, 2_000_000_000)
                .unwrap_err()
                .to_string(),
            format!("[PD:region:ErrRegionRuleContent]invalid region rule content, {want}")
        );
    }
    let mut bad_hex = LabelRule {
        data: serde_json::json!([{"start_key": "7G", "end_key": ""}]),
        ..good()
    };
    assert_eq!(
        check_label_rule(&mut bad_hex, 0).unwrap_err().to_string(),
        "[PD:hex:ErrHexDecodingString]decode string 7G error"
    );
    // A TTL without a start starts now.
    let mut ttl = LabelRule {
        labels: vec![RegionLabel {
            key: "k".into(),
            value: "v".into(),
            ttl: "1h".into(),
            ..RegionLabel::default()
        }],
        ..good()
    };
    check_label_rule(&mut ttl, 1_136_214_245).unwrap();
    assert_eq!(ttl.labels[0].start_at, "Mon Jan  2 15:04:05 UTC 2006");
}

fn arb_rule() -> impl Strategy<Value = Rule> {
    (
        prop::sample::select(vec!["pd", "tidb", "tiflash"]),
        prop::sample::select(vec!["a", "b", "c", "default"]),
        prop::sample::select(vec!["voter", "leader", "follower", "learner", "bogus"]),
        0i64..4,
        prop::option::of((0u8..4, 1u8..4)),
        any::<bool>(),
        -1i64..3,
    )
        .prop_map(|(group, id, role, count, range, over, index)| {
            let (start_key, end_key) = match range {
                Some((a, len)) => (table_key(&[a]), table_key(&[a + len])),
                None => (String::new(), String::new()),
            };
            Rule {
                group_id: group.into(),
                id: id.into(),
                role: role.into(),
                count,
                start_key,
                end_key,
                r#override: over,
                index,
                ..Rule::default()
            }
        })
}

proptest! {
    /// Whatever is asked, an edit is refused (and the set is as it was) or the set after it
    /// places every key with at most one leader and at least one voter or leader.
    #[test]
    fn every_accepted_edit_leaves_a_sound_rule_set(batches in prop::collection::vec(prop::collection::vec(arb_rule(), 1..4), 1..6)) {
        let mut set = RuleSet::new(vec![], vec![], 3);
        for batch in batches {
            let before = set.clone();
            match set.plan_set(batch) {
                Err(_) => prop_assert_eq!(&set, &before),
                Ok(change) => {
                    let change = set.stamp(change, 7);
                    set.commit(&change);
                    let rules: std::collections::BTreeMap<_, _> =
                        set.rules().into_iter().map(|r| (r.key(), r)).collect();
                    prop_assert!(apply::check_rule_list(&rules, &Default::default()).is_ok());
                }
            }
        }
    }
}
