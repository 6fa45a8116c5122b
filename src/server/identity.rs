//! This node's identity: the cluster id (created once with the data, never re-created while it
//! exists) and the member id, both kept in the meta store.

use crate::meta::{Keys, MetaError, MetaStore};

/// A random non-zero id (seeded in a simulation, see `crate::entropy`).
fn random_id() -> u64 {
    crate::entropy::random_u64().max(1)
}

async fn load_or_create<M: MetaStore>(store: &M, key: &[u8]) -> Result<u64, MetaError> {
    let bytes = store
        .create(key, random_id().to_string().as_bytes())
        .await?;
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            MetaError::Corrupt(format!(
                "id under {} is not a number",
                String::from_utf8_lossy(key)
            ))
        })
}

pub async fn cluster_id<M: MetaStore>(store: &M) -> Result<u64, MetaError> {
    load_or_create(store, Keys::cluster_id()).await
}

pub async fn member_id<M: MetaStore>(store: &M, keys: &Keys, name: &str) -> Result<u64, MetaError> {
    load_or_create(store, &keys.member_id(name)).await
}
