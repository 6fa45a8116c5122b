//! The ConfigMap the members read their config from, and the hash that rolls a config change
//! through the pods.

use super::*;

pub fn config_map_name(mc: &MeridianCluster) -> String {
    format!("{}-config", mc.name_any())
}

pub fn config_map(mc: &MeridianCluster) -> ConfigMap {
    ConfigMap {
        metadata: meta(mc, config_map_name(mc)),
        data: Some(BTreeMap::from([(
            "meridian.toml".to_string(),
            mc.spec.config.clone(),
        )])),
        ..ConfigMap::default()
    }
}

/// On the pod template: [`config_hash`] of the config the pods run with.
pub const CONFIG_HASH_ANNOTATION: &str = "meridian.io/config-hash";

/// FNV-1a of the config text, in hex: stable across operator builds and Rust versions
/// (`DefaultHasher` is not), so an operator upgrade alone never looks like a config change.
pub fn config_hash(config: &str) -> String {
    let hash = config.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}
