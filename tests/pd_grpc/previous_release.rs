//! A data dir written by the previous release (before stores kept their details and the
//! cluster kept its version and record) starts with today's binary and reads as it should.

use super::versions::tikv;
use super::*;

/// The embedded store's log of a data dir the previous release made (bootstrapped with store 1
/// at `tikv-1.example:20160`, zone=z1, region 2 with peer 3), before stores kept details.
const DATA_DIR_BEFORE: &str = "\
    d48c3f272c00000001140000002f6d6572696469616e2f636c75737465725f69643131313139323432313631\
    3333393539343830080aaf7e4900000001300000002f6d6572696469616e2f31313131393234323136313333\
    3935393438302f6d656d626572732f6861726e6573732f696431373735383430353338333035393833343137\
    34e042eb9d3900000001270000002f6d6572696469616e2f313131313932343231363133333935393438302f\
    74736f2f6c696d697431373935363330323235323032d8fc830d39000000012e0000002f6d6572696469616e\
    2f313131313932343231363133333935393438302f706c6163656d656e742f69645f656e64313030303031c8\
    f4a9099000000001430000002f6d6572696469616e2f313131313932343231363133333935393438302f706c\
    6163656d656e742f73746f7265732f303030303030303030303030303030303030303174696b762d312e6578\
    616d706c653a32303136307a6f6e65ffffffff7a31ffffffffffff00000000010000000000000094000000d0\
    ffffffdcffffff010000000000000000000000bcce89bea900000001440000002f6d6572696469616e2f3131\
    31313932343231363133333935393438302f706c6163656d656e742f726567696f6e732f3030303030303030\
    3030303030303030303030300300000000000000010000000000000000000000000000000200000000000000\
    e0ffffff00000000d8ffffff0000000001000000000000000100000000000000c0ffffff0100000001000000\
    000000000300000000000000c0ffffff01000000a6fe02253a00000001340000002f6d6572696469616e2f31\
    3131313932343231363133333935393438302f706c6163656d656e742f626f6f74737472617070656431";

fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// That data dir starts: its store is back with no version (PD's base version, 1.0.0, until
/// it registers again) and its next registration sets the cluster version; its cluster record
/// is the one bootstrap writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_of_the_previous_release_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(data.join("meta")).unwrap();
    std::fs::write(data.join("meta/meta.wal"), unhex(DATA_DIR_BEFORE)).unwrap();
    let mut n = start(&data).await;
    let got =
        n.pd.get_store(pdpb::GetStoreRequest {
            header: n.h(),
            store_id: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(error_type(&got.header), None, "{:?}", got.header);
    let store = got.store.unwrap();
    assert_eq!(store.address, "tikv-1.example:20160");
    assert_eq!(store.labels[0].value, "z1");
    assert_eq!(store.version, "");
    assert_eq!(n.get_region(b"k").await.region.unwrap().id, 2);
    assert_eq!(n.store_heartbeat(1).await.cluster_version, "1.0.0");
    let r = n.put_store(tikv(1, "tikv-1.example:20160", "8.5.7")).await;
    assert_eq!(error_type(&r.header), None, "{:?}", r.header);
    assert_eq!(n.store_heartbeat(1).await.cluster_version, "8.5.7");
    let cluster =
        n.pd.get_cluster_config(pdpb::GetClusterConfigRequest { header: n.h() })
            .await
            .unwrap()
            .into_inner()
            .cluster
            .unwrap();
    assert_eq!((cluster.id, cluster.max_peer_count), (n.cluster_id, 3));
    n.server.stop().unwrap();
}
