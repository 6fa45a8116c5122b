//! The groups a leader serves: each group's record, its token bucket and the consumption its
//! clients reported. Writes come in two steps, so the shell can make a change durable before
//! anyone sees it: `plan_*` checks a call and returns what to persist, and the matching apply
//! (`put`, `modify`, `delete`) makes it visible. `acquire` serves one AcquireTokenBuckets
//! message as PD does: requests for a keyspace or group that does not exist are skipped, a
//! background request only reports consumption, and each RU item gets a grant from the
//! group's bucket, shared among the clients asking it (each message names its client). Pure:
//! time is an argument, no I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use prost::Message;

use super::bucket::TokenBucket;
use super::error::GroupError;
use super::group::{
    check_keyspace, default_group, new_record, null_keyspace, patched, ru_settings, DEFAULT_GROUP,
};
use super::limit::{Limit, MODERATED_BURST};
use super::state::GroupState;
use crate::kvproto::resource_manager::{
    token_bucket_request, Consumption, GrantedRuTokenBucket, RequestUnitType, ResourceGroup,
    TokenBucket as TokenBucketPb, TokenBucketRequest, TokenBucketResponse, TokenLimitSettings,
};

/// Most groups a cluster may have (PD has no bound): AddResourceGroup of a new one beyond it
/// is refused.
pub const MAX_GROUPS: usize = 10_000;
/// Most bytes the groups' records may take together, encoded. Each is bounded
/// (`MAX_GROUP_BYTES`), but `MAX_GROUPS` of the largest would be 640 MiB: held by the leader,
/// written twice to etcd (near its default 2 GiB quota), and a ListResourceGroups answer far
/// over the largest gRPC reply, so that no client could list them again. Real records are
/// some hundred bytes: `MAX_GROUPS` of them fit many times over.
pub const MAX_TOTAL_BYTES: usize = 16 << 20;
/// PD's `defaultInitialTokens`: what a group with a positive burst limit starts with (never
/// more than its capacity here).
const INITIAL_TOKENS: f64 = 100_000.0;

struct Entry {
    record: ResourceGroup,
    /// `None` for a group without RU settings, which is granted nothing (as in PD).
    bucket: Option<TokenBucket>,
    consumption: Consumption,
    /// Changed by a client since its state was last taken for persisting.
    touched: bool,
}

/// A checked ModifyResourceGroup: the record to persist and the tokens to add.
#[derive(Debug, Clone, PartialEq)]
pub struct Modification {
    pub record: ResourceGroup,
    delta: f64,
}

fn bucket_of(record: &ResourceGroup, now: Duration) -> Option<TokenBucket> {
    let settings = ru_settings(record)?;
    let persisted = record
        .r_u_settings
        .as_ref()
        .and_then(|s| s.r_u.as_ref())
        .map_or(0.0, |b| b.tokens);
    let tokens = if settings.burst_limit > 0 {
        persisted.max(INITIAL_TOKENS)
    } else {
        persisted
    };
    Some(TokenBucket::new(
        Limit::of(settings.fill_rate, settings.burst_limit),
        tokens,
        now,
    ))
}

impl Entry {
    fn new(record: ResourceGroup, now: Duration) -> Entry {
        Entry {
            bucket: bucket_of(&record, now),
            record,
            consumption: Consumption::default(),
            touched: false,
        }
    }

    /// Resumes the persisted state, `idle` after it was current, as PD's `setState` does: the
    /// bucket keeps its tokens (no initial refill) plus the fill of the idle time, and the
    /// consumption carries on.
    fn restore(&mut self, state: &GroupState, idle: Duration, now: Duration) {
        if let (Some(bucket), Some(settings)) = (&mut self.bucket, ru_settings(&self.record)) {
            let limit = Limit::of(settings.fill_rate, settings.burst_limit);
            *bucket = TokenBucket::new(limit, state.tokens, now);
            bucket.resume(idle);
        }
        self.consumption = state.consumption;
    }

    /// The group as Get and List answer it: the bucket's tokens now, the null keyspace, and
    /// the consumption when asked for.
    fn answer(&self, with_stats: bool) -> ResourceGroup {
        let mut group = self.record.clone();
        if let (Some(bucket), Some(ru)) = (
            &self.bucket,
            group.r_u_settings.as_mut().and_then(|s| s.r_u.as_mut()),
        ) {
            ru.tokens = bucket.tokens();
        }
        group.keyspace_id = null_keyspace();
        group.ru_stats = with_stats.then_some(self.consumption);
        group
    }
}

/// Adds `more` to `total`, field by field; a value that is not a finite number is dropped.
fn add_consumption(total: &mut Consumption, more: &Consumption) {
    fn add(to: &mut f64, v: f64) {
        if v.is_finite() {
            *to += v;
        }
    }
    add(&mut total.r_r_u, more.r_r_u);
    add(&mut total.w_r_u, more.w_r_u);
    add(&mut total.read_bytes, more.read_bytes);
    add(&mut total.write_bytes, more.write_bytes);
    add(&mut total.total_cpu_time_ms, more.total_cpu_time_ms);
    add(&mut total.sql_layer_cpu_time_ms, more.sql_layer_cpu_time_ms);
    add(&mut total.kv_read_rpc_count, more.kv_read_rpc_count);
    add(&mut total.kv_write_rpc_count, more.kv_write_rpc_count);
    add(&mut total.tikv_r_u_v2, more.tikv_r_u_v2);
    add(&mut total.tidb_r_u_v2, more.tidb_r_u_v2);
    add(&mut total.tiflash_r_u_v2, more.tiflash_r_u_v2);
    total.read_cross_az_traffic_bytes = total
        .read_cross_az_traffic_bytes
        .saturating_add(more.read_cross_az_traffic_bytes);
    total.write_cross_az_traffic_bytes = total
        .write_cross_az_traffic_bytes
        .saturating_add(more.write_cross_az_traffic_bytes);
}

pub struct Registry {
    groups: BTreeMap<String, Entry>,
}

impl Registry {
    /// The groups a term loaded (a record whose name is taken by an earlier one is skipped),
    /// and the default group when none was stored.
    pub fn new(records: Vec<ResourceGroup>, now: Duration) -> Registry {
        Registry::resumed(records, Vec::new(), now)
    }

    /// As `new`, each group with a persisted state resuming it: `(name, state, idle)`, where
    /// `idle` is how long ago the state was current. A state of no group is ignored.
    pub fn resumed(
        records: Vec<ResourceGroup>,
        states: Vec<(String, GroupState, Duration)>,
        now: Duration,
    ) -> Registry {
        let mut groups = BTreeMap::new();
        for record in records {
            groups
                .entry(record.name.clone())
                .or_insert_with(|| Entry::new(record, now));
        }
        groups
            .entry(DEFAULT_GROUP.to_string())
            .or_insert_with(|| Entry::new(default_group(), now));
        for (name, state, idle) in states {
            if let Some(entry) = groups.get_mut(&name) {
                entry.restore(&state, idle, now);
            }
        }
        Registry { groups }
    }

    /// Marks the groups named as changed again, so the next `take_states` returns them (their
    /// states taken last were not written).
    pub fn retouch<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) {
        for name in names {
            if let Some(entry) = self.groups.get_mut(name) {
                entry.touched = true;
            }
        }
    }

    /// The states of the groups clients changed since the last call, as of `now`, to persist
    /// with `unix_ns` (the wall time of `now`); they count as persisted from here on.
    pub fn take_states(&mut self, now: Duration, unix_ns: i128) -> Vec<(String, GroupState)> {
        let mut states = Vec::new();
        for (name, entry) in &mut self.groups {
            if !std::mem::take(&mut entry.touched) {
                continue;
            }
            let tokens = entry.bucket.as_mut().map_or(0.0, |b| {
                b.settle(now);
                b.tokens()
            });
            states.push((
                name.clone(),
                GroupState {
                    tokens,
                    last_update_unix_ns: unix_ns,
                    consumption: entry.consumption,
                },
            ));
        }
        states
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn get(&self, name: &str, with_stats: bool) -> Result<ResourceGroup, GroupError> {
        self.groups
            .get(name)
            .map(|e| e.answer(with_stats))
            .ok_or_else(|| GroupError::NotExists(name.to_string()))
    }

    /// Every group, in name order.
    pub fn list(&self, with_stats: bool) -> Vec<ResourceGroup> {
        self.groups.values().map(|e| e.answer(with_stats)).collect()
    }

    /// Refuses `record` if, stored in place of the group of its name, the records would take
    /// more than `MAX_TOTAL_BYTES` together.
    fn check_total(&self, record: &ResourceGroup) -> Result<(), GroupError> {
        let others: usize = self
            .groups
            .iter()
            .filter(|(name, _)| **name != record.name)
            .map(|(_, e)| e.record.encoded_len())
            .sum();
        let total = others + record.encoded_len();
        if total > MAX_TOTAL_BYTES {
            return Err(GroupError::TooLarge(format!(
                "the resource groups' settings would take {total} bytes together, more than \
                 {MAX_TOTAL_BYTES}"
            )));
        }
        Ok(())
    }

    /// The record AddResourceGroup would store. As in PD, adding a group that exists
    /// replaces it, bucket and all.
    pub fn plan_add(&self, group: ResourceGroup) -> Result<ResourceGroup, GroupError> {
        let record = new_record(group)?;
        if !self.groups.contains_key(&record.name) && self.groups.len() >= MAX_GROUPS {
            return Err(GroupError::TooLarge(format!(
                "a cluster holds at most {MAX_GROUPS} resource groups"
            )));
        }
        self.check_total(&record)?;
        Ok(record)
    }

    pub fn plan_modify(&self, update: &ResourceGroup) -> Result<Modification, GroupError> {
        if update.name.is_empty() {
            return Err(GroupError::Invalid("the group name"));
        }
        let current = self
            .groups
            .get(&update.name)
            .ok_or_else(|| GroupError::NotExists(update.name.clone()))?;
        let (record, delta) = patched(&current.record, update)?;
        self.check_total(&record)?;
        Ok(Modification { record, delta })
    }

    pub fn plan_delete(&self, name: &str) -> Result<(), GroupError> {
        if name == DEFAULT_GROUP {
            return Err(GroupError::DeleteReserved);
        }
        if !self.groups.contains_key(name) {
            return Err(GroupError::NotExists(name.to_string()));
        }
        Ok(())
    }

    /// Applies a planned add: the group starts afresh.
    pub fn put(&mut self, record: ResourceGroup, now: Duration) {
        self.groups
            .insert(record.name.clone(), Entry::new(record, now));
    }

    /// Applies a planned modification: the bucket keeps its tokens under the new settings.
    pub fn modify(&mut self, m: Modification, now: Duration) {
        let Some(entry) = self.groups.get_mut(&m.record.name) else {
            self.put(m.record, now);
            return;
        };
        match (ru_settings(&m.record), entry.bucket.as_mut()) {
            (Some(s), Some(bucket)) => {
                bucket.reconfigure(Limit::of(s.fill_rate, s.burst_limit), m.delta, now)
            }
            (Some(_), None) => entry.bucket = bucket_of(&m.record, now),
            (None, _) => entry.bucket = None,
        }
        entry.record = m.record;
    }

    /// Applies a planned delete.
    pub fn delete(&mut self, name: &str) {
        if name != DEFAULT_GROUP {
            self.groups.remove(name);
        }
    }

    /// One group's part of an AcquireTokenBuckets message, or `None` when PD skips it (a
    /// keyspace or group that does not exist, a background request).
    pub fn acquire(
        &mut self,
        request: &TokenBucketRequest,
        target_period_ms: u64,
        client: u64,
        now: Duration,
    ) -> Option<TokenBucketResponse> {
        check_keyspace(request.keyspace_id.as_ref()).ok()?;
        let entry = self.groups.get_mut(&request.resource_group_name)?;
        entry.touched = true;
        if let Some(c) = &request.consumption_since_last_request {
            add_consumption(&mut entry.consumption, c);
        }
        if request.is_background {
            return None;
        }
        let mut response = TokenBucketResponse {
            resource_group_name: entry.record.name.clone(),
            keyspace_id: null_keyspace(),
            ..Default::default()
        };
        let (Some(bucket), Some(settings)) = (entry.bucket.as_mut(), ru_settings(&entry.record))
        else {
            return Some(response);
        };
        let items = match &request.request {
            Some(token_bucket_request::Request::RuItems(ru)) => ru.request_r_u.as_slice(),
            // Raw mode is not served (PD logs and skips it too).
            _ => &[],
        };
        for item in items {
            if item.r#type != RequestUnitType::Ru as i32 {
                continue;
            }
            let grant = bucket.request(now, item.value, target_period_ms, client);
            // PD tells a client its slot's burst limit: its part of the capacity in the
            // limited and moderated modes, the group's setting otherwise.
            let shared = settings.burst_limit > 0 || settings.burst_limit == MODERATED_BURST;
            let burst_limit = match bucket.share_of(client) {
                Some((_, burst)) if shared => burst as i64,
                _ => Limit::granted_burst(settings.fill_rate, settings.burst_limit),
            };
            response.granted_r_u_tokens.push(GrantedRuTokenBucket {
                r#type: RequestUnitType::Ru as i32,
                granted_tokens: Some(TokenBucketPb {
                    settings: Some(TokenLimitSettings {
                        burst_limit,
                        ..Default::default()
                    }),
                    tokens: grant.tokens,
                }),
                trickle_time_ms: grant.trickle_ms,
            });
        }
        Some(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvproto::resource_manager::{
        keyspace_id_value, token_bucket_request::RequestRu, GroupMode, GroupRequestUnitSettings,
        KeyspaceIdValue, RequestUnitItem,
    };

    const T0: Duration = Duration::from_secs(100);

    fn ru_group(name: &str, fill_rate: u64, burst_limit: i64) -> ResourceGroup {
        ResourceGroup {
            name: name.into(),
            mode: GroupMode::RuMode as i32,
            r_u_settings: Some(GroupRequestUnitSettings {
                r_u: Some(TokenBucketPb {
                    settings: Some(TokenLimitSettings {
                        fill_rate,
                        burst_limit,
                        max_tokens: 0.0,
                    }),
                    tokens: 0.0,
                }),
            }),
            ..Default::default()
        }
    }

    fn ask(name: &str, value: f64) -> TokenBucketRequest {
        TokenBucketRequest {
            resource_group_name: name.into(),
            request: Some(token_bucket_request::Request::RuItems(RequestRu {
                request_r_u: vec![RequestUnitItem {
                    r#type: RequestUnitType::Ru as i32,
                    value,
                }],
            })),
            ..Default::default()
        }
    }

    fn granted(r: &TokenBucketResponse) -> (f64, i64) {
        let g = &r.granted_r_u_tokens[0];
        (g.granted_tokens.as_ref().unwrap().tokens, g.trickle_time_ms)
    }

    #[test]
    fn the_default_group_is_always_there_and_never_deleted() {
        let mut r = Registry::new(vec![], T0);
        assert_eq!(r.list(false).len(), 1);
        assert_eq!(r.get("default", false).unwrap().priority, 8);
        assert_eq!(r.plan_delete("default"), Err(GroupError::DeleteReserved));
        r.delete("default");
        assert!(r.get("default", false).is_ok());
        // A stored default replaces PD's.
        let r = Registry::new(vec![ru_group("default", 5, 5)], T0);
        assert_eq!(
            ru_settings(&r.get("default", false).unwrap())
                .unwrap()
                .fill_rate,
            5
        );
    }

    #[test]
    fn crud_in_pds_words() {
        let mut r = Registry::new(vec![], T0);
        assert_eq!(
            r.get("nope", false).unwrap_err().to_string(),
            "[PD:resourcemanager:ErrGroupNotExists]the nope resource group does not exist"
        );
        let record = r.plan_add(ru_group("rg1", 10, 20)).unwrap();
        r.put(record, T0);
        let got = r.get("rg1", true).unwrap();
        assert_eq!(got.keyspace_id, null_keyspace());
        assert_eq!(got.ru_stats, Some(Consumption::default()));
        assert_eq!(r.get("rg1", false).unwrap().ru_stats, None);
        // Starts at its capacity (PD's 100,000 initial tokens, capped).
        assert_eq!(got.r_u_settings.unwrap().r_u.unwrap().tokens, 20.0);
        assert_eq!(
            r.list(false)
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>(),
            ["default", "rg1"]
        );
        assert_eq!(
            r.plan_modify(&ru_group("", 1, 1)),
            Err(GroupError::Invalid("the group name"))
        );
        assert_eq!(
            r.plan_modify(&ru_group("rg2", 1, 1)),
            Err(GroupError::NotExists("rg2".into()))
        );
        let m = r.plan_modify(&ru_group("rg1", 1000, -1)).unwrap();
        r.modify(m, T0);
        assert_eq!(
            granted(&r.acquire(&ask("rg1", 1e9), 5000, 1, T0).unwrap()),
            (1e9, 0)
        );
        assert_eq!(
            r.plan_delete("rg2"),
            Err(GroupError::NotExists("rg2".into()))
        );
        r.plan_delete("rg1").unwrap();
        r.delete("rg1");
        assert!(r.get("rg1", false).is_err());
    }

    fn burst_told(r: &TokenBucketResponse) -> i64 {
        r.granted_r_u_tokens[0]
            .granted_tokens
            .as_ref()
            .and_then(|t| t.settings.as_ref())
            .map_or(i64::MIN, |s| s.burst_limit)
    }

    /// Two clients of one group (PD's slots, by `client_unique_id`): each is told its half of
    /// the burst limit in the limited and moderated modes, the group's setting in the others.
    #[test]
    fn clients_of_one_group_are_told_their_share_of_the_burst() {
        let mut r = Registry::new(
            vec![
                ru_group("limited", 100, 1000),
                ru_group("moderated", 100, -2),
                ru_group("rate", 100, 0),
            ],
            T0,
        );
        for (name, alone, shared) in [
            ("limited", 1000, 500),
            ("moderated", 10_100, 5050),
            ("rate", 0, 0),
        ] {
            let first = r.acquire(&ask(name, 1.0), 5000, 7, T0).unwrap();
            assert_eq!(burst_told(&first), alone, "{name}");
            let second = r.acquire(&ask(name, 1.0), 5000, 8, T0).unwrap();
            assert_eq!(burst_told(&second), shared, "{name}");
            let again = r.acquire(&ask(name, 1.0), 5000, 7, T0).unwrap();
            assert_eq!(burst_told(&again), shared, "{name}");
        }
    }

    #[test]
    fn grants_follow_the_bucket_and_skips_follow_pd() {
        let mut r = Registry::new(vec![ru_group("slow", 100, 200)], T0);
        let first = r.acquire(&ask("slow", 150.0), 5000, 1, T0).unwrap();
        assert_eq!(granted(&first), (150.0, 0));
        assert_eq!(
            first.granted_r_u_tokens[0]
                .granted_tokens
                .as_ref()
                .unwrap()
                .settings
                .as_ref()
                .unwrap()
                .burst_limit,
            200
        );
        // 50 held and 100 lent (PD's first round, 200/s): trickled over 150 / 200 s.
        assert_eq!(
            granted(&r.acquire(&ask("slow", 150.0), 5000, 1, T0).unwrap()),
            (150.0, 750)
        );
        // Half a second repays 50 of the 100 owed; lent again, over the whole period.
        let later = T0 + Duration::from_millis(500);
        assert_eq!(
            granted(&r.acquire(&ask("slow", 150.0), 5000, 1, later).unwrap()),
            (150.0, 5000)
        );
        // Unknown group, other keyspace, background: skipped, consumption still counted.
        assert!(r.acquire(&ask("nope", 1.0), 5000, 1, later).is_none());
        let mut other = ask("slow", 1.0);
        other.keyspace_id = Some(KeyspaceIdValue {
            keyspace: Some(keyspace_id_value::Keyspace::Value(3)),
        });
        assert!(r.acquire(&other, 5000, 1, later).is_none());
        let mut background = ask("slow", 1.0);
        background.is_background = true;
        background.consumption_since_last_request = Some(Consumption {
            r_r_u: 2.5,
            w_r_u: f64::NAN,
            ..Default::default()
        });
        assert!(r.acquire(&background, 5000, 1, later).is_none());
        let stats = r.get("slow", true).unwrap().ru_stats.unwrap();
        assert_eq!((stats.r_r_u, stats.w_r_u), (2.5, 0.0));
        // The default group is unlimited.
        assert_eq!(
            granted(&r.acquire(&ask("default", 1e12), 5000, 1, later).unwrap()),
            (1e12, 0)
        );
    }

    #[test]
    fn a_resumed_group_keeps_its_tokens_and_consumption_and_accrues_only_the_idle_time() {
        let mut r = Registry::new(
            vec![ru_group("g", 10, 10_000), ru_group("h", 10, 10_000)],
            T0,
        );
        assert!(r.take_states(T0, 0).is_empty(), "nothing touched yet");
        let mut drain = ask("g", 10_000.0);
        drain.consumption_since_last_request = Some(Consumption {
            r_r_u: 4.0,
            ..Default::default()
        });
        assert_eq!(
            granted(&r.acquire(&drain, 5000, 1, T0).unwrap()),
            (10_000.0, 0)
        );
        let later = T0 + Duration::from_secs(2);
        let states = r.take_states(later, 77);
        assert_eq!(states.len(), 1, "only the touched group: {states:?}");
        let (name, state) = &states[0];
        assert_eq!(name, "g");
        assert!((state.tokens - 20.0).abs() < 1e-9, "{state:?}");
        assert_eq!(
            (state.last_update_unix_ns, state.consumption.r_r_u),
            (77, 4.0)
        );
        assert!(r.take_states(later, 78).is_empty(), "taken once");
        r.retouch(["g", "nope"]);
        assert_eq!(
            r.take_states(later, 79).len(),
            1,
            "taken again once retouched"
        );
        // A new term 3 s later: 20 + 30 tokens, not PD's initial 100,000 nor the burst.
        let t1 = Duration::from_secs(5);
        let resumed = Registry::resumed(
            vec![ru_group("g", 10, 10_000), ru_group("h", 10, 10_000)],
            vec![
                (name.clone(), state.clone(), Duration::from_secs(3)),
                ("gone".into(), state.clone(), Duration::ZERO),
            ],
            t1,
        );
        let got = resumed.get("g", true).unwrap();
        assert!((got.r_u_settings.unwrap().r_u.unwrap().tokens - 50.0).abs() < 1e-9);
        assert_eq!(got.ru_stats.unwrap().r_r_u, 4.0);
        let fresh = resumed.get("h", false).unwrap();
        assert_eq!(fresh.r_u_settings.unwrap().r_u.unwrap().tokens, 10_000.0);
    }

    #[test]
    fn the_groups_bytes_together_are_bounded() {
        use crate::kvproto::resource_manager::RunawaySettings;
        use crate::resource_group::MAX_GROUP_BYTES;
        // Groups each just under the bound of one record, as many as the budget takes.
        let big = |name: &str, fill: usize| {
            let mut g = ru_group(name, 1, 1);
            g.runaway_settings = Some(RunawaySettings {
                switch_group_name: "s".repeat(fill),
                ..Default::default()
            });
            g
        };
        let used =
            |r: &Registry| -> usize { r.groups.values().map(|e| e.record.encoded_len()).sum() };
        let fill = MAX_GROUP_BYTES - 1024;
        let mut r = Registry::new(vec![], T0);
        let mut added = 0;
        let refused = loop {
            match r.plan_add(big(&format!("g{added}"), fill)) {
                Ok(record) => {
                    r.put(record, T0);
                    added += 1;
                }
                Err(e) => break e,
            }
            assert!(added <= MAX_GROUPS, "the budget never refused an add");
        };
        assert!(matches!(refused, GroupError::TooLarge(_)), "{refused}");
        assert!(added < MAX_GROUPS, "refused by bytes, not by count");
        assert!(used(&r) <= MAX_TOTAL_BYTES);
        // A group that takes what is left but a few bytes fits...
        let left = MAX_TOTAL_BYTES - used(&r);
        let mut fill_top = left;
        while fill_top > 0 && big("top", fill_top).encoded_len() > left - 4 {
            fill_top -= 1;
        }
        let top = big("top", fill_top);
        r.put(r.plan_add(top).unwrap(), T0);
        assert!(used(&r) <= MAX_TOTAL_BYTES);
        // ...and then neither a new group nor a grown one does; the same one again does.
        assert!(matches!(
            r.plan_add(ru_group("small", 1, 1)),
            Err(GroupError::TooLarge(_))
        ));
        assert!(matches!(
            r.plan_modify(&big("g0", fill + 100)),
            Err(GroupError::TooLarge(_))
        ));
        assert!(r.plan_add(big("g0", fill)).is_ok());
        assert!(r.plan_modify(&big("g0", fill)).is_ok());
    }

    #[test]
    fn the_number_of_groups_is_bounded() {
        let records = (0..MAX_GROUPS - 1)
            .map(|i| ru_group(&format!("g{i}"), 1, 1))
            .collect();
        let r = Registry::new(records, T0);
        assert_eq!(r.len(), MAX_GROUPS);
        assert!(matches!(
            r.plan_add(ru_group("more", 1, 1)),
            Err(GroupError::TooLarge(_))
        ));
        assert!(
            r.plan_add(ru_group("g1", 2, 2)).is_ok(),
            "replacing one is fine"
        );
    }
}
