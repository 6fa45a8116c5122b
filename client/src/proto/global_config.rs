//! Global config items: the cluster-wide settings TiDB and its tools share through PD
//! (`pdpb`'s `GlobalConfigItem`), as the frames carry them. Data only.

use rkyv::{Archive, Deserialize, Serialize};

#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigEventKind {
    Put,
    Delete,
}

/// One change of a StoreGlobalConfig transaction: `name` under its config path.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ConfigChange {
    pub name: String,
    pub kind: ConfigEventKind,
    /// The new value of a put; ignored for a delete.
    pub value: Vec<u8>,
}

/// What LoadGlobalConfig found under a name (as asked) or a full key (a prefix load).
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ConfigItem {
    pub name: String,
    /// `None`: no item by that name.
    pub value: Option<Vec<u8>>,
}

/// A change as a watcher sees it.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ConfigEvent {
    /// The full key (config path and name).
    pub key: String,
    pub kind: ConfigEventKind,
    /// The new value of a put, the last value of a delete.
    pub value: Vec<u8>,
    /// The revision of the transaction that made the change.
    pub revision: i64,
}
