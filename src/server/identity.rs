//! This node's identity: the cluster id (created once with the data, never re-created while it
//! exists) and the member id, both kept in the meta store.

use std::hash::{BuildHasher, Hasher};

use crate::meta::{Keys, MetaError, MetaStore};

/// A random non-zero id. `RandomState` is seeded from the OS's randomness, which is all an id
/// needs; no extra crate for it.
fn random_id() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish().max(1)
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
