//! Key layout, in one place so backends and readers agree.

/// Keys of one cluster, under `/meridian/{cluster_id}/`.
#[derive(Debug, Clone)]
pub struct Keys {
    root: String,
}

impl Keys {
    pub fn new(cluster_id: u64) -> Self {
        Keys {
            root: format!("/meridian/{cluster_id}"),
        }
    }

    /// Where the cluster id of a data dir or etcd prefix is recorded once.
    pub fn cluster_id() -> &'static [u8] {
        b"/meridian/cluster_id"
    }

    /// The member id a node name was given when it first started.
    pub fn member_id(&self, name: &str) -> Vec<u8> {
        format!("{}/members/{name}/id", self.root).into_bytes()
    }

    /// Where a member publishes its addresses (`MemberInfo` as JSON).
    pub fn member_info(&self, name: &str) -> Vec<u8> {
        format!("{}/members/{name}/info", self.root).into_bytes()
    }

    /// The member id of the last incarnation of `name` that was removed; that incarnation never
    /// campaigns again.
    pub fn removed(&self, name: &str) -> Vec<u8> {
        format!("{}/removed/{name}", self.root).into_bytes()
    }

    /// The prefix under which every member's keys live.
    pub fn members_prefix(&self) -> Vec<u8> {
        format!("{}/members/", self.root).into_bytes()
    }

    /// The leader key: the current leader's member info, attached to its lease.
    pub fn leader(&self) -> Vec<u8> {
        format!("{}/leader", self.root).into_bytes()
    }

    /// Present once the cluster was bootstrapped (first store and region written).
    pub fn bootstrapped(&self) -> Vec<u8> {
        format!("{}/placement/bootstrapped", self.root).into_bytes()
    }

    /// The end of the last id block handed to the id allocator (decimal).
    pub fn id_end(&self) -> Vec<u8> {
        format!("{}/placement/id_end", self.root).into_bytes()
    }

    /// A store's metadata; ids zero-padded so keys sort by id.
    pub fn store(&self, id: u64) -> Vec<u8> {
        format!("{}/placement/stores/{id:020}", self.root).into_bytes()
    }

    /// The cluster version: the lowest version of the stores that are not tombstones, as
    /// text (`8.5.7`).
    pub fn cluster_version(&self) -> Vec<u8> {
        format!("{}/placement/cluster_version", self.root).into_bytes()
    }

    /// The certificate a store is bound to under bind-store-identity (its identity, hex); ids
    /// zero-padded as the stores' are.
    pub fn store_binding(&self, id: u64) -> Vec<u8> {
        format!("{}/placement/store_bindings/{id:020}", self.root).into_bytes()
    }

    pub fn store_bindings_prefix(&self) -> Vec<u8> {
        format!("{}/placement/store_bindings/", self.root).into_bytes()
    }

    pub fn stores_prefix(&self) -> Vec<u8> {
        format!("{}/placement/stores/", self.root).into_bytes()
    }

    /// The routes (range, epoch, peers, leader) of the regions whose ids fall in one bucket;
    /// a key per bucket rather than per region keeps a new leader's load to a few thousand
    /// large reads.
    pub fn region_bucket(&self, bucket: u64) -> Vec<u8> {
        format!("{}/placement/regions/{bucket:020}", self.root).into_bytes()
    }

    pub fn regions_prefix(&self) -> Vec<u8> {
        format!("{}/placement/regions/", self.root).into_bytes()
    }

    /// The cluster's record (`metapb.Cluster` as JSON: id and max peer count).
    pub fn cluster_meta(&self) -> Vec<u8> {
        format!("{}/placement/cluster", self.root).into_bytes()
    }

    /// The external timestamp (decimal): only ever raised.
    pub fn external_ts(&self) -> Vec<u8> {
        format!("{}/placement/external_ts", self.root).into_bytes()
    }

    /// The cluster's min resolved ts (decimal): only ever raised.
    pub fn min_resolved_ts(&self) -> Vec<u8> {
        format!("{}/placement/min_resolved_ts", self.root).into_bytes()
    }

    /// The cluster's GC safe point (decimal).
    pub fn gc_safe_point(&self) -> Vec<u8> {
        format!("{}/gc/safe_point", self.root).into_bytes()
    }

    /// A service's GC safe point (JSON), keyed by its service id.
    pub fn service_safe_point(&self, service_id: &str) -> Vec<u8> {
        format!("{}/gc/service/{service_id}", self.root).into_bytes()
    }

    pub fn service_safe_points_prefix(&self) -> Vec<u8> {
        format!("{}/gc/service/", self.root).into_bytes()
    }

    /// A global config item, by its full key (`/global/config/source_id`); the value as
    /// given.
    pub fn global_config_item(&self, key: &str) -> Vec<u8> {
        format!("{}/global_config/items/{key}", self.root).into_bytes()
    }

    pub fn global_config_items_prefix(&self) -> Vec<u8> {
        format!("{}/global_config/items/", self.root).into_bytes()
    }

    /// The changes of the last global config transaction (rkyv archive of its events).
    pub fn global_config_last_txn(&self) -> Vec<u8> {
        format!("{}/global_config/last_txn", self.root).into_bytes()
    }

    /// The revision of the last global config transaction (decimal).
    pub fn global_config_revision(&self) -> Vec<u8> {
        format!("{}/global_config/revision", self.root).into_bytes()
    }

    /// What an operator set while the cluster runs: evict-leader's stores and per-store
    /// limits (JSON, `placement::schedule::Settings`).
    pub fn schedule_settings(&self) -> Vec<u8> {
        format!("{}/placement/schedule_settings", self.root).into_bytes()
    }

    /// A placement rule (PD's JSON), keyed as PD keys it: its group and id in hex, joined by
    /// `-`.
    pub fn placement_rule(&self, group_id: &str, id: &str) -> Vec<u8> {
        format!("{}/rules/rule/{}-{}", self.root, hex(group_id), hex(id)).into_bytes()
    }

    pub fn placement_rules_prefix(&self) -> Vec<u8> {
        format!("{}/rules/rule/", self.root).into_bytes()
    }

    /// A placement rule group that is not the default (PD's JSON), by its id in hex.
    pub fn rule_group(&self, id: &str) -> Vec<u8> {
        format!("{}/rules/group/{}", self.root, hex(id)).into_bytes()
    }

    pub fn rule_groups_prefix(&self) -> Vec<u8> {
        format!("{}/rules/group/", self.root).into_bytes()
    }

    /// A region label rule (PD's JSON), by its id in hex.
    pub fn label_rule(&self, id: &str) -> Vec<u8> {
        format!("{}/rules/label/{}", self.root, hex(id)).into_bytes()
    }

    pub fn label_rules_prefix(&self) -> Vec<u8> {
        format!("{}/rules/label/", self.root).into_bytes()
    }

    /// A resource group's record (kvproto's `ResourceGroup`, protobuf), by name.
    pub fn resource_group(&self, name: &str) -> Vec<u8> {
        format!("{}/resource_group/settings/{name}", self.root).into_bytes()
    }

    pub fn resource_groups_prefix(&self) -> Vec<u8> {
        format!("{}/resource_group/settings/", self.root).into_bytes()
    }

    /// A resource group's running state (PD's `GroupStates` JSON), by name.
    pub fn resource_group_state(&self, name: &str) -> Vec<u8> {
        format!("{}/resource_group/states/{name}", self.root).into_bytes()
    }

    pub fn resource_group_states_prefix(&self) -> Vec<u8> {
        format!("{}/resource_group/states/", self.root).into_bytes()
    }

    /// The persisted TSO window limit (physical milliseconds, decimal).
    pub fn tso_limit(&self) -> Vec<u8> {
        format!("{}/tso/limit", self.root).into_bytes()
    }
}

/// Lower-case hex of a name, so any name is one path segment.
fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}
