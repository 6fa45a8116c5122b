//! Resource groups and token requests as PD's Go client sends them to the resource manager
//! (`client/resource_group/controller`): every call names the null keyspace, a group is in RU
//! mode at the middle priority, a token request asks RU for each group. Written out here, not
//! taken from the server's `resource_group` module, so that a test holds the server to PD's
//! values rather than to its own.

use crate::kvproto::resource_manager::{
    keyspace_id_value, token_bucket_request, GroupMode, GroupRequestUnitSettings, KeyspaceIdValue,
    RequestUnitItem, RequestUnitType, ResourceGroup, TokenBucket, TokenBucketRequest,
    TokenBucketsRequest, TokenLimitSettings,
};

/// The keyspace PD's Go client names in every resource-group call: none (`u32::MAX`).
pub fn null_keyspace() -> Option<KeyspaceIdValue> {
    Some(KeyspaceIdValue {
        keyspace: Some(keyspace_id_value::Keyspace::Value(u32::MAX)),
    })
}

/// A group in RU mode filled at `fill_rate` RU/s up to `burst_limit` (-1: unlimited), at
/// priority 8, in the null keyspace: what `CREATE RESOURCE GROUP` sends.
pub fn ru_group(name: &str, fill_rate: u64, burst_limit: i64) -> ResourceGroup {
    ResourceGroup {
        name: name.into(),
        mode: GroupMode::RuMode as i32,
        r_u_settings: Some(GroupRequestUnitSettings {
            r_u: Some(TokenBucket {
                settings: Some(TokenLimitSettings {
                    fill_rate,
                    burst_limit,
                    max_tokens: 0.0,
                }),
                tokens: 0.0,
            }),
        }),
        priority: 8,
        keyspace_id: null_keyspace(),
        ..Default::default()
    }
}

/// An AcquireTokenBuckets message from client `client` asking `(group, RU)` for each group,
/// for a period of 5 s, as TiDB's controller sends it.
pub fn token_request(groups: &[(&str, f64)], client: u64) -> TokenBucketsRequest {
    TokenBucketsRequest {
        requests: groups
            .iter()
            .map(|(name, value)| TokenBucketRequest {
                resource_group_name: name.to_string(),
                request: Some(token_bucket_request::Request::RuItems(
                    token_bucket_request::RequestRu {
                        request_r_u: vec![RequestUnitItem {
                            r#type: RequestUnitType::Ru as i32,
                            value: *value,
                        }],
                    },
                )),
                keyspace_id: null_keyspace(),
                ..Default::default()
            })
            .collect(),
        target_request_period_ms: 5000,
        client_unique_id: client,
    }
}
