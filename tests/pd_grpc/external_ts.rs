//! The external timestamp and GetMinTS as PD answers them: 0 before bootstrap and u64::MAX
//! until the cluster is initialized (more than one region here); a new value refused in PD's
//! words (INVALID_VALUE) when it is above the oracle, before bootstrap, or not above the
//! current one; a value set survives a SIGKILL. GetMinTS hands out a fresh timestamp.

use super::*;

impl Node {
    async fn set_external(&mut self, timestamp: u64) -> pdpb::SetExternalTimestampResponse {
        self.pd
            .set_external_timestamp(pdpb::SetExternalTimestampRequest {
                header: self.h(),
                timestamp,
            })
            .await
            .unwrap()
            .into_inner()
    }

    async fn get_external(&mut self) -> u64 {
        let r = self
            .pd
            .get_external_timestamp(pdpb::GetExternalTimestampRequest { header: self.h() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(error_type(&r.header), None, "{:?}", r.header);
        r.timestamp
    }

    /// A timestamp the oracle has handed out.
    async fn now(&mut self) -> u64 {
        last_and_first(&self.tso(&[1]).await.unwrap()[0]).0
    }
}

fn invalid_value(r: &pdpb::SetExternalTimestampResponse, message: &str) {
    let e = r
        .header
        .as_ref()
        .and_then(|h| h.error.as_ref())
        .expect("refused");
    assert_eq!(e.r#type, pdpb::ErrorType::InvalidValue as i32);
    assert_eq!(e.message, message);
}

const ABOVE: &str = "the external timestamp should not be larger than global ts";
const NOT_BOOTSTRAPPED: &str =
    "[PD:cluster:ErrNotBootstrapped]TiKV cluster not bootstrapped, please start TiKV first";
const NOT_INCREASING: &str =
    "the external timestamp should be larger than current external timestamp";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_external_timestamp_only_rises_and_never_passes_the_oracle() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut n = start(&data).await;

    assert_eq!(n.get_external().await, 0, "not bootstrapped: 0");
    let now = n.now().await;
    invalid_value(&n.set_external(now).await, NOT_BOOTSTRAPPED);
    invalid_value(&n.set_external(u64::MAX).await, ABOVE);

    // One region with one of three voters: not initialized, so nothing is above the current.
    let boot = n.bootstrap().await;
    assert_eq!(n.get_external().await, u64::MAX);
    let now = n.now().await;
    invalid_value(&n.set_external(now).await, NOT_INCREASING);

    n.split(boot, b"m").await;
    assert_eq!(n.get_external().await, 0);
    let first = n.now().await;
    let r = n.set_external(first).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(n.get_external().await, first);
    invalid_value(&n.set_external(first).await, NOT_INCREASING);
    invalid_value(&n.set_external(first - 1).await, NOT_INCREASING);
    // Far above anything handed out (an hour ahead): refused before it is compared.
    invalid_value(&n.set_external(first + (3_600_000 << 18)).await, ABOVE);
    assert_eq!(n.get_external().await, first);

    // GetMinTS: one fresh timestamp, between two handed out around it.
    let before = n.now().await;
    let r =
        n.pd.get_min_ts(pdpb::GetMinTsRequest { header: n.h() })
            .await
            .unwrap()
            .into_inner();
    assert_eq!(error_type(&r.header), None);
    let ts = r.timestamp.unwrap();
    let min = ((ts.physical as u64) << 18) | ts.logical as u64;
    let after = n.now().await;
    assert!(before < min && min < after, "{before} < {min} < {after}");

    n.server.kill().unwrap();
    let mut n = start(&data).await;
    assert_eq!(n.get_external().await, first);
    let later = n.now().await;
    let r = n.set_external(later).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(n.get_external().await, later);
    n.server.stop().unwrap();
}
