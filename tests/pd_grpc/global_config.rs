//! StoreGlobalConfig, LoadGlobalConfig and WatchGlobalConfig as PD answers them: no header and
//! no bootstrap needed; `value` or else `payload` stored under PD's default path; a load by
//! names (not-found items carry PD's error) or by prefix (full keys and the revision); a watch
//! that sees later stores from a revision on, deletes carrying the last value; changes before
//! a restart answered DATA_COMPACTED; items and revision persisted.

use super::*;

fn put(name: &str, value: &str) -> pdpb::GlobalConfigItem {
    pdpb::GlobalConfigItem {
        name: name.into(),
        value: value.into(),
        kind: pdpb::EventType::Put as i32,
        ..Default::default()
    }
}

fn delete(name: &str) -> pdpb::GlobalConfigItem {
    pdpb::GlobalConfigItem {
        name: name.into(),
        kind: pdpb::EventType::Delete as i32,
        ..Default::default()
    }
}

impl Node {
    async fn store_config(
        &mut self,
        changes: Vec<pdpb::GlobalConfigItem>,
    ) -> Result<pdpb::StoreGlobalConfigResponse, tonic::Status> {
        self.pd
            .store_global_config(pdpb::StoreGlobalConfigRequest {
                changes,
                config_path: String::new(),
            })
            .await
            .map(|r| r.into_inner())
    }

    async fn load_config(&mut self, names: &[&str]) -> pdpb::LoadGlobalConfigResponse {
        self.pd
            .load_global_config(pdpb::LoadGlobalConfigRequest {
                names: names.iter().map(|n| n.to_string()).collect(),
                config_path: String::new(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn watch_config(
        &mut self,
        revision: i64,
    ) -> tonic::Streaming<pdpb::WatchGlobalConfigResponse> {
        self.pd
            .watch_global_config(pdpb::WatchGlobalConfigRequest {
                config_path: String::new(),
                revision,
            })
            .await
            .unwrap()
            .into_inner()
    }
}

async fn next_watched(
    watch: &mut tonic::Streaming<pdpb::WatchGlobalConfigResponse>,
) -> Result<Option<pdpb::WatchGlobalConfigResponse>, tonic::Status> {
    tokio::time::timeout(Duration::from_secs(10), watch.message())
        .await
        .expect("a watch answer within 10 s")
}

/// (full key, kind, payload) of each change.
fn changes(r: &pdpb::WatchGlobalConfigResponse) -> Vec<(String, i32, Vec<u8>)> {
    r.changes
        .iter()
        .map(|c| (c.name.clone(), c.kind, c.payload.clone()))
        .collect()
}

const PUT: i32 = pdpb::EventType::Put as i32;
const DELETE: i32 = pdpb::EventType::Delete as i32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_config_is_stored_loaded_and_watched_as_pd_serves_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    // Nothing yet, and no bootstrap needed: a load by name carries PD's not-found error.
    let r = n.load_config(&["source_id"]).await;
    assert_eq!(r.revision, 0);
    let e = r.items[0].error.as_ref().unwrap();
    assert_eq!(e.r#type, pdpb::ErrorType::GlobalConfigNotFound as i32);
    assert_eq!(e.message, "key source_id not found");
    let empty = n.load_config(&[]).await;
    assert!(empty.items.is_empty());

    // A watch from now, opened before the store it sees.
    let mut from_now = n.watch_config(0).await;
    // TiDB writes `value`; TiCDC writes `payload`.
    let payload = pdpb::GlobalConfigItem {
        payload: b"true".to_vec(),
        ..put("enable_resource_metering", "")
    };
    n.store_config(vec![put("source_id", "1"), payload])
        .await
        .unwrap();
    let loaded = n.load_config(&[]).await;
    let first = loaded.revision;
    assert!(first > 0);
    let items: Vec<(&str, &[u8])> = loaded
        .items
        .iter()
        .map(|i| (i.name.as_str(), i.payload.as_slice()))
        .collect();
    assert_eq!(
        items,
        vec![
            ("/global/config/enable_resource_metering", &b"true"[..]),
            ("/global/config/source_id", b"1"),
        ]
    );
    let by_name = n.load_config(&["source_id"]).await;
    assert_eq!(by_name.items[0].name, "source_id", "named as asked");
    assert_eq!(by_name.items[0].payload, b"1");
    assert_eq!(by_name.items[0].kind, PUT);

    let seen = next_watched(&mut from_now).await.unwrap().unwrap();
    assert_eq!(seen.revision, first);
    assert_eq!(
        changes(&seen),
        vec![
            ("/global/config/source_id".to_string(), PUT, b"1".to_vec()),
            (
                "/global/config/enable_resource_metering".to_string(),
                PUT,
                b"true".to_vec()
            ),
        ]
    );

    // A watch from the load's revision sees that revision again, then a later store: a
    // delete, carrying the value it removed.
    let mut from_load = n.watch_config(first).await;
    assert_eq!(
        next_watched(&mut from_load)
            .await
            .unwrap()
            .unwrap()
            .revision,
        first
    );
    n.store_config(vec![delete("source_id")]).await.unwrap();
    for watch in [&mut from_load, &mut from_now] {
        let seen = next_watched(watch).await.unwrap().unwrap();
        assert_eq!(seen.revision, first + 1);
        assert_eq!(
            changes(&seen),
            vec![(
                "/global/config/source_id".to_string(),
                DELETE,
                b"1".to_vec()
            )]
        );
    }

    // What etcd refuses in one transaction, PD passes on; nothing changes.
    let err = n
        .store_config(vec![put("x", "1"), put("./x", "2")])
        .await
        .unwrap_err();
    assert!(err.message().contains("duplicate key"), "{err}");
    let many = (0..=128).map(|i| put(&format!("k{i}"), "v")).collect();
    assert!(n.store_config(many).await.is_err());
    assert_eq!(n.load_config(&[]).await.revision, first + 1);

    // After a SIGKILL: the items and the revision are back, and the last transaction's
    // changes; older ones are not held, which a watch from then is told in PD's words before
    // its stream ends.
    n.server.kill().unwrap();
    let mut n = start(&data).await;
    let loaded = n.load_config(&[]).await;
    assert_eq!(loaded.revision, first + 1);
    assert_eq!(loaded.items.len(), 1);
    let mut stale = n.watch_config(first).await;
    let told = next_watched(&mut stale).await.unwrap().unwrap();
    let e = told.header.unwrap().error.unwrap();
    assert_eq!(e.r#type, pdpb::ErrorType::DataCompacted as i32);
    assert_eq!(
        e.message,
        format!(
            "required watch revision: {first} is smaller than current compact/min revision {}.",
            first + 1
        )
    );
    assert!(
        next_watched(&mut stale).await.is_err(),
        "then the stream ends"
    );
    // A watch from the revision the load answered, as TiDB watches after a load, starts with
    // that revision's transaction, kept across the restart with it.
    let mut from_load = n.watch_config(loaded.revision).await;
    let seen = next_watched(&mut from_load).await.unwrap().unwrap();
    assert_eq!(seen.header.as_ref().and_then(|h| h.error.clone()), None);
    assert_eq!(seen.revision, first + 1);
    assert_eq!(
        changes(&seen),
        vec![(
            "/global/config/source_id".to_string(),
            DELETE,
            b"1".to_vec()
        )]
    );
    let mut fresh = n.watch_config(first + 2).await;
    n.store_config(vec![put("source_id", "2")]).await.unwrap();
    let seen = next_watched(&mut fresh).await.unwrap().unwrap();
    assert_eq!(seen.revision, first + 2);
    n.server.stop().unwrap();
}
