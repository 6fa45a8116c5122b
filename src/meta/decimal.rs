//! Numbers the server keeps as decimal text under one key (the TSO limit, the id block end,
//! the GC safe point), read back checked: a value that is not a number is a
//! corrupt store, named with its key, never a zero or a silent jump. Owns only the reading;
//! what each number means is its reader's.

use super::{MetaError, MetaStore};

/// A number stored as decimal text (the TSO limit, the id block end), if the key exists.
pub async fn load_decimal<M: MetaStore>(store: &M, key: &[u8]) -> Result<Option<u64>, MetaError> {
    match store.get(key).await? {
        None => Ok(None),
        Some(bytes) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map(Some)
            .ok_or_else(|| {
                MetaError::Corrupt(format!(
                    "{} holds {bytes:?}, not a number",
                    String::from_utf8_lossy(key)
                ))
            }),
    }
}
