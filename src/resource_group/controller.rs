//! The resource-group controller's config as PD's resource manager writes it when it starts
//! (`pkg/mcs/resourcemanager/server`: `initControllerConfig` saves `ControllerConfig` as JSON
//! under `resource_group/controller`), for TiDB's controller to read through `MetaStorage.Get`
//! (`client/resource_group/controller`: `loadServerConfig`). Only PD's defaults: Meridian has
//! no setting that changes them. Pure: the key and the bytes; the shell writes them.

/// Where PD keeps the controller config, relative to the namespace `MetaStorage` serves.
pub const CONTROLLER_CONFIG_KEY: &[u8] = b"resource_group/controller";

/// PD's default `ControllerConfig` exactly as Go's `encoding/json` writes it: fields in the
/// struct's order, durations as `time.Duration` strings, the trace-log flag as a string (its
/// `,string` tag), costs as Go's shortest floats (1 RU = 64 KiB read, 1 KiB written, 3 ms of
/// CPU), and `ru-version-policy` left out (nil, `omitempty`).
pub const DEFAULT_CONTROLLER_CONFIG: &str = concat!(
    r#"{"degraded-mode-wait-duration":"0s","ltb-max-wait-duration":"30s","#,
    r#""ltb-token-rpc-max-delay":"1s","request-unit":{"read-base-cost":0.125,"#,
    r#""read-per-batch-base-cost":0.5,"read-cost-per-byte":0.0000152587890625,"#,
    r#""write-base-cost":1,"write-per-batch-base-cost":1,"write-cost-per-byte":0.0009765625,"#,
    r#""read-cpu-ms-cost":0.3333333333333333},"enable-controller-trace-log":"false","#,
    r#""push-metrics-address":"","push-metrics-interval":"0s"}"#,
);

/// Whether a stored config is one PD's manager would load rather than replace with its
/// defaults: a JSON object (PD unmarshals it onto the defaults and saves it back).
pub fn is_loadable(stored: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<serde_json::Value>(stored),
        Ok(serde_json::Value::Object(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_holds_pds_values() {
        let v: serde_json::Value = serde_json::from_str(DEFAULT_CONTROLLER_CONFIG).unwrap();
        let ru = &v["request-unit"];
        assert_eq!(ru["read-base-cost"], 1.0 / 8.0);
        assert_eq!(ru["read-per-batch-base-cost"], 1.0 / 2.0);
        assert_eq!(ru["read-cost-per-byte"], 1.0 / (64.0 * 1024.0));
        assert_eq!(ru["write-base-cost"], 1.0);
        assert_eq!(ru["write-per-batch-base-cost"], 1.0);
        assert_eq!(ru["write-cost-per-byte"], 1.0 / 1024.0);
        assert_eq!(ru["read-cpu-ms-cost"], 1.0 / 3.0);
        assert_eq!(v["ltb-max-wait-duration"], "30s");
        assert_eq!(v["enable-controller-trace-log"], "false");
        assert!(v.get("ru-version-policy").is_none());
        assert!(is_loadable(DEFAULT_CONTROLLER_CONFIG.as_bytes()));
        assert!(!is_loadable(b"not json"));
        assert!(!is_loadable(b"[1]"));
    }
}
