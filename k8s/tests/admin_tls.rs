//! The operator's `admin` client certificate comes from a mounted Secret, and a renewed Secret
//! must be used without restarting the operator. The kubelet renews a Secret volume in place:
//! it writes the new files into a fresh timestamped directory and moves the `..data` symlink
//! over to it, the visible `ca.crt`, `tls.crt` and `tls.key` being symlinks through `..data`.
//! These tests lay the files out the same way and swap them the same way, against real
//! `meridian serve` processes that demand client certificates on the admin port.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meridian::harness::{test_binary, EtcdProcess, ServerProcess};
use meridian::tls::cert::{self, Pem, Role};
use meridian::tls::Trust;
use meridian_operator::crd::{MeridianCluster, MeridianClusterSpec};
use meridian_operator::shell::members::{AdminMembers, Members};

/// A CA with a member certificate for loopback, and the operator's `admin` certificate.
struct Pki {
    ca: Pem,
    node: Pem,
    admin: Pem,
}

fn pki(name: &str) -> Pki {
    let ca = cert::create_ca(name).unwrap();
    let node = cert::create_node(&ca, &["127.0.0.1".into(), "localhost".into()]).unwrap();
    let admin = cert::create_client(&ca, "meridian-operator", Role::Admin).unwrap();
    Pki { ca, node, admin }
}

/// A member serving with `pki`'s certificate and letting in only clients its CA signed, as the
/// operator's StatefulSet runs members (`--tls-cert`, `--tls-key`, `--tls-ca` from the Secret);
/// on `etcd` when given, alone on its embedded store otherwise.
fn member(dir: &Path, pki: &Pki, etcd: Option<&EtcdProcess>) -> ServerProcess {
    let tls = dir.join("secret");
    std::fs::create_dir_all(&tls).unwrap();
    for (file, text) in [
        ("ca.crt", &pki.ca.cert),
        ("tls.crt", &pki.node.cert),
        ("tls.key", &pki.node.key),
    ] {
        std::fs::write(tls.join(file), text).unwrap();
    }
    let arg = |file: &str| tls.join(file).display().to_string();
    let mut args = vec![
        "--tls-cert".to_string(),
        arg("tls.crt"),
        "--tls-key".into(),
        arg("tls.key"),
        "--tls-ca".into(),
        arg("ca.crt"),
        "--admin-open-probes".into(),
    ];
    if let Some(etcd) = etcd {
        args.extend(["--etcd".to_string(), etcd.endpoint()]);
    }
    ServerProcess::start_with(test_binary(), &dir.join("data"), "127.0.0.1:0", &args).unwrap()
}

/// A Secret volume as the kubelet lays it out, holding the operator's admin certificate.
struct SecretVolume {
    dir: PathBuf,
    generation: u32,
}

impl SecretVolume {
    fn new(dir: PathBuf, pki: &Pki) -> SecretVolume {
        std::fs::create_dir_all(&dir).unwrap();
        let mut volume = SecretVolume { dir, generation: 0 };
        volume.publish(pki);
        for file in ["ca.crt", "tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(Path::new("..data").join(file), volume.dir.join(file))
                .unwrap();
        }
        volume
    }

    /// The kubelet's atomic update: the new files in a new directory, then `..data` renamed
    /// over to point at it, then the old directory removed.
    fn publish(&mut self, pki: &Pki) {
        self.generation += 1;
        let name = format!("..2026_01_01_00_00_0{}.000000001", self.generation);
        let payload = self.dir.join(&name);
        std::fs::create_dir(&payload).unwrap();
        for (file, text) in [
            ("ca.crt", &pki.ca.cert),
            ("tls.crt", &pki.admin.cert),
            ("tls.key", &pki.admin.key),
        ] {
            std::fs::write(payload.join(file), text).unwrap();
        }
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&name, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }

    /// What `meridian-operator run` makes of `MERIDIAN_ADMIN_TLS_DIR`.
    fn trust(&self) -> Trust {
        Trust::Mutual {
            ca: self.dir.join("ca.crt"),
            cert: self.dir.join("tls.crt"),
            key: self.dir.join("tls.key"),
        }
    }
}

fn cluster() -> MeridianCluster {
    MeridianCluster::new(
        "pd",
        MeridianClusterSpec {
            replicas: 1,
            tls_secret: Some("pd-tls".into()),
            ..MeridianClusterSpec::default()
        },
    )
}

/// The names the members API lists, or `None` when no member answered (refused, unverified).
async fn listed(members: &AdminMembers) -> Option<Vec<String>> {
    members
        .list(&cluster())
        .await
        .map(|v| v.members.into_iter().map(|m| m.name).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_admin_secret_is_used_at_the_next_call_without_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (pki("old CA"), pki("new CA"));
    // The renewed member is on etcd, so it has a leader to take a member deletion.
    let (etcd, old_member, new_member) = tokio::task::block_in_place(|| {
        let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
        let old_member = member(&tmp.path().join("old"), &old, None);
        let new_member = member(&tmp.path().join("new"), &new, Some(&etcd));
        (etcd, old_member, new_member)
    });
    let mut volume = SecretVolume::new(tmp.path().join("meridian-admin-tls"), &old);
    // Where the admin Service leads: the old member first, the renewed one after.
    let target = Arc::new(Mutex::new(old_member.admin_addr.clone()));
    let members = {
        let target = target.clone();
        AdminMembers::new(
            move |_| vec![target.lock().unwrap().clone()],
            volume.trust(),
        )
    };
    assert_eq!(
        listed(&members).await,
        Some(vec!["harness".to_string()]),
        "the old certificate works with the old CA's member"
    );

    // The cluster moves to the new CA before the operator's Secret does: the files still
    // hold the old pair, so the call fails both ways (the member refuses the old client
    // certificate, the old CA does not verify the member).
    *target.lock().unwrap() = new_member.admin_addr.clone();
    assert_eq!(listed(&members).await, None);

    // The Secret is renewed in place; the same `AdminMembers`, the same process.
    volume.publish(&new);
    assert_eq!(
        listed(&members).await,
        Some(vec!["harness".to_string()]),
        "the next call uses the renewed files"
    );
    // And it is really the new pair in use: the old member is now refused.
    *target.lock().unwrap() = old_member.admin_addr.clone();
    assert_eq!(listed(&members).await, None);
    // A state-changing call (it needs the `admin` role) goes through with the renewed pair
    // too, once the member leads: deleting a member that does not exist is a 404, done.
    *target.lock().unwrap() = new_member.admin_addr.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while members
        .list(&cluster())
        .await
        .and_then(|v| v.leader().cloned())
        .is_none()
    {
        assert!(Instant::now() < deadline, "no leader within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    members
        .delete_member(&cluster(), "nobody")
        .await
        .expect("an admin call with the renewed certificate");
    tokio::task::block_in_place(|| {
        old_member.stop().unwrap();
        new_member.stop().unwrap();
        drop(etcd);
    });
}
