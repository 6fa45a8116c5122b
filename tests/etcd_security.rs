//! A node reaching etcd securely, end to end with a real etcd and real `meridian` processes:
//! TLS with client certificates (`--client-cert-auth`), etcd's own users (a password from a
//! file or the environment, or the user named by the client certificate), and values in etcd
//! that cannot be right (a TSO limit, an id end, a member address), which the node refuses with
//! an error naming the key instead of overflowing or jumping.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use meridian::client::{Client, ClientOptions};
use meridian::harness::{test_binary, EtcdProcess, EtcdTlsFiles, ServerProcess};
use meridian::tls::Trust;

/// A short lease, so a hand-over or a pause after a refusal takes two seconds, not ten.
fn config(tmp: &Path) -> PathBuf {
    let config = tmp.join("meridian.toml");
    std::fs::write(&config, "[election]\nlease_ttl_secs = 2\n").unwrap();
    config
}

/// `meridian serve --etcd ENDPOINT --name NAME` plus `flags` and `env`, in `tmp/NAME`.
fn start(
    tmp: &Path,
    etcd: &EtcdProcess,
    name: &str,
    flags: &[String],
    env: &[(&str, &str)],
) -> anyhow::Result<ServerProcess> {
    let mut args: Vec<String> = [
        "--etcd",
        &etcd.endpoint(),
        "--name",
        name,
        "--cores",
        "1",
        "--config",
        config(tmp).to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend_from_slice(flags);
    ServerProcess::start_with_env(test_binary(), &tmp.join(name), "127.0.0.1:0", &args, env)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

async fn client(server: &ServerProcess, retry_budget: Duration) -> Client {
    let mut opts = ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(server.data_dir.join("tls/ca.pem")),
    );
    opts.retry_budget = retry_budget;
    Client::connect(opts).await.unwrap()
}

/// The node serves increasing timestamps and the cluster names `leader` as its leader.
async fn serves_as(server: &ServerProcess, leader: &str) {
    let client = client(server, Duration::from_secs(10)).await;
    let first = client.get_ts().await.expect("timestamps are served");
    let second = client.get_ts().await.unwrap();
    assert!(second > first, "{second:?} after {first:?}");
    let members = client.members().await.unwrap();
    assert_eq!(
        members.leader.as_ref().map(|l| l.name.as_str()),
        Some(leader),
        "{members:?}"
    );
}

/// The node is up and names `leader` as the leader (each node has its own CA here, so the
/// client cannot follow it to the leader).
async fn follows(server: &ServerProcess, leader: &str) {
    let client = client(server, Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let members = client.members().await.unwrap();
        if members.leader.as_ref().map(|l| l.name.as_str()) == Some(leader) {
            return;
        }
        assert!(Instant::now() < deadline, "{leader} never led: {members:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn log_of(server: &ServerProcess) -> String {
    std::fs::read_to_string(server.data_dir.with_extension("log")).unwrap_or_default()
}

/// Waits until the node's log holds every one of `needles` on one line; returns that line.
fn await_log_line(server: &ServerProcess, needles: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let log = log_of(server);
        if let Some(line) = log.lines().find(|l| needles.iter().all(|n| l.contains(n))) {
            return line.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {needles:?} within 15 s; the log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A start that must fail: its error (which carries the node's log) must hold every one of
/// `needles`, and must not be a panic.
fn refused(result: anyhow::Result<ServerProcess>, needles: &[&str]) -> String {
    let message = match result {
        Ok(server) => panic!("the node started; its log:\n{}", log_of(&server)),
        Err(e) => format!("{e:#}"),
    };
    for needle in needles {
        assert!(message.contains(needle), "no {needle:?} in:\n{message}");
    }
    assert!(!message.contains("panicked"), "{message}");
    message
}

fn write_secret(path: &Path, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// etcd with TLS and `--client-cert-auth`: the node with the client pair gets in, leads and
/// serves; without a client certificate, or trusting another CA, it stops at start with an
/// error that names etcd, the endpoint and the TLS setup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate_serves_and_without_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start_tls(&tmp.path().join("etcd")).unwrap();
    let tls = etcd.tls().unwrap().clone();
    assert!(etcd.endpoint().starts_with("https://"));

    let a = start(tmp.path(), &etcd, "a", &tls.serve_flags(), &[]).unwrap();
    serves_as(&a, "a").await;
    // What the node wrote went through TLS to this etcd.
    let mut admin = etcd.client(None).await.unwrap();
    let cluster_id = admin.get("/meridian/cluster_id", None).await.unwrap();
    assert_eq!(cluster_id.kvs().len(), 1);

    let ca_only = strings(&["--etcd-ca", tls.ca.to_str().unwrap()]);
    let e = refused(
        start(tmp.path(), &etcd, "no-cert", &ca_only, &[]),
        &[
            "connecting to etcd",
            &etcd.endpoint(),
            "no client certificate",
            "--etcd-cert",
        ],
    );
    println!("without a client certificate: {e}");

    // Trusting another CA: etcd's own certificate does not verify.
    let stranger = EtcdTlsFiles::create(&tmp.path().join("stranger")).unwrap();
    let mut wrong_ca = stranger.serve_flags();
    wrong_ca[1] = stranger.ca.display().to_string();
    refused(
        start(tmp.path(), &etcd, "wrong-ca", &wrong_ca, &[]),
        &["connecting to etcd", "invalid peer certificate"],
    );

    // The node that got in is still the leader, serving.
    serves_as(&a, "a").await;
    a.stop().unwrap();
}

/// Flags that cannot work are refused before anything starts, naming the flag and the path.
#[test]
fn unusable_etcd_flags_name_the_flag_and_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing.pem");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = std::process::Command::new(test_binary())
            .args(["serve", "--data-dir"])
            .arg(tmp.path().join("data"))
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        // 1: refused by the node; 2: refused by the argument parser. Never a panic (101).
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "{args:?}: not a clean refusal: {:?}",
            out.status
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let m = missing.to_str().unwrap();
    let e = run(&["--etcd", "https://127.0.0.1:1", "--etcd-ca", m], &[]);
    assert!(e.contains("--etcd-ca") && e.contains(m), "{e}");
    let e = run(&["--etcd", "https://127.0.0.1:1"], &[]);
    assert!(e.contains("pass --etcd-ca"), "{e}");
    let e = run(
        &["--etcd", "http://127.0.0.1:1", "--etcd-user", "meridian"],
        &[],
    );
    assert!(e.contains("needs a password"), "{e}");
    let e = run(
        &[
            "--etcd",
            "http://127.0.0.1:1",
            "--etcd-user",
            "meridian",
            "--etcd-password-file",
            m,
        ],
        &[],
    );
    assert!(e.contains("--etcd-password-file") && e.contains(m), "{e}");
    // A password is never a flag.
    let e = run(
        &["--etcd", "http://127.0.0.1:1", "--etcd-password", "x"],
        &[],
    );
    assert!(e.contains("--etcd-password"), "{e}");
    let e = run(
        &["--etcd", "http://127.0.0.1:1"],
        &[("MERIDIAN_ETCD_PASSWORD", "hunter2")],
    );
    assert!(
        e.contains("no --etcd-user") && !e.contains("hunter2"),
        "{e}"
    );
}

/// etcd with auth enabled: the password from a file works, a wrong one is refused at start
/// with etcd's reason (and neither password is printed), and the password from
/// `MERIDIAN_ETCD_PASSWORD` works too: that node takes over when the first one leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_auth_with_a_password_from_a_file_or_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let password = "correct-horse-battery";
    etcd.enable_auth("meridian", password).await.unwrap();
    // Auth is on: a request without a user is refused.
    let mut anonymous = etcd.client(None).await.unwrap();
    assert!(anonymous.get("/meridian/cluster_id", None).await.is_err());

    let right = tmp.path().join("right-password");
    write_secret(&right, &format!("{password}\n"));
    let wrong = tmp.path().join("wrong-password");
    write_secret(&wrong, "not-the-password\n");
    let user = |file: &Path| {
        strings(&[
            "--etcd-user",
            "meridian",
            "--etcd-password-file",
            file.to_str().unwrap(),
        ])
    };

    let a = start(tmp.path(), &etcd, "a", &user(&right), &[]).unwrap();
    serves_as(&a, "a").await;

    let e = refused(
        start(tmp.path(), &etcd, "wrong", &user(&wrong), &[]),
        &[
            "connecting to etcd",
            "user meridian",
            "authentication failed",
        ],
    );
    assert!(
        !e.contains("not-the-password") && !e.contains(password),
        "{e}"
    );
    println!("a wrong password: {e}");

    let b = start(
        tmp.path(),
        &etcd,
        "b",
        &strings(&["--etcd-user", "meridian"]),
        &[("MERIDIAN_ETCD_PASSWORD", password)],
    )
    .unwrap();
    assert!(!log_of(&a).contains(password) && !log_of(&b).contains(password));
    // b got in; it follows a, then leads once a leaves (campaign, lease, guarded writes all
    // under b's user).
    follows(&b, "a").await;
    a.stop().unwrap();
    serves_as(&b, "b").await;
    b.stop().unwrap();
}

/// TLS, `--client-cert-auth` and auth enabled: etcd takes the user from the client
/// certificate's CN, so the `meridian` certificate alone logs in; a certificate from the same
/// CA whose CN is no etcd user is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_and_auth_the_certificate_names_the_user() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start_tls(&tmp.path().join("etcd")).unwrap();
    let tls = etcd.tls().unwrap().clone();
    etcd.enable_auth(EtcdTlsFiles::CLIENT_NAME, "unused-by-the-node")
        .await
        .unwrap();

    let a = start(tmp.path(), &etcd, "a", &tls.serve_flags(), &[]).unwrap();
    serves_as(&a, "a").await;

    let (cert, key) = tls.client("intruder").unwrap();
    let mut flags = tls.serve_flags();
    flags[3] = cert.display().to_string();
    flags[5] = key.display().to_string();
    let e = refused(
        start(tmp.path(), &etcd, "intruder", &flags, &[]),
        &["connecting to etcd", "intruder.pem", "permission denied"],
    );
    println!("a certificate naming no etcd user: {e}");
    serves_as(&a, "a").await;
    a.stop().unwrap();
}

/// Values written into etcd behind the node's back: a TSO limit past what a timestamp holds,
/// then an id end at the top of the id space, then a member record whose address is no
/// address. Each is refused with an error naming its key, the node neither panics nor rewrites
/// the value, and it serves again once the value is fixed; a corrupt placement value stops
/// placement only, not the TSO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_values_in_etcd_are_refused_naming_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = EtcdProcess::start(&tmp.path().join("etcd")).unwrap();
    let mut kv = etcd.client(None).await.unwrap();
    let limit_key = "/meridian/4242/tso/limit";
    let id_end_key = "/meridian/4242/placement/id_end";
    let too_late = (1u64 << 50).to_string();
    kv.put("/meridian/cluster_id", "4242", None).await.unwrap();
    kv.put(limit_key, too_late.as_str(), None).await.unwrap();

    let a = start(tmp.path(), &etcd, "a", &[], &[]).unwrap();
    let line = await_log_line(
        &a,
        &["refusing to serve as leader", "out of range", limit_key],
    );
    println!("{line}");
    // Not serving: no timestamp comes back.
    let c = client(&a, Duration::from_millis(500)).await;
    assert!(
        c.get_ts().await.is_err(),
        "served timestamps above a corrupt limit"
    );
    let stored = kv.get(limit_key, None).await.unwrap();
    assert_eq!(
        stored.kvs()[0].value_str().unwrap(),
        too_late,
        "the limit was rewritten"
    );

    // The limit fixed, an id end no allocator can continue from.
    kv.put(id_end_key, u64::MAX.to_string(), None)
        .await
        .unwrap();
    kv.delete(limit_key, None).await.unwrap();
    let line = await_log_line(&a, &["placement is not served", "out of range", id_end_key]);
    println!("{line}");
    // Placement's value is placement's failure: the TSO serves meanwhile, placement does not.
    let tso = client(&a, Duration::from_secs(10)).await;
    tso.get_ts()
        .await
        .expect("the TSO serves beside a corrupt id end");
    let refused = client(&a, Duration::from_millis(500))
        .await
        .alloc_id()
        .await;
    assert!(refused.is_err(), "an id was handed out: {refused:?}");
    let stored = kv.get(id_end_key, None).await.unwrap();
    assert_eq!(
        stored.kvs()[0].value_str().unwrap(),
        u64::MAX.to_string(),
        "the id end was rewritten"
    );

    // Fixed: the same process leads and serves.
    kv.put(id_end_key, "1000", None).await.unwrap();
    serves_as(&a, "a").await;
    let alloc = client(&a, Duration::from_secs(10)).await;
    let id = alloc.alloc_id().await.unwrap();
    assert!(id >= 1000, "id {id} below the persisted end");

    // A member record whose client address is no address is not handed to clients.
    let ghost_key = "/meridian/4242/members/ghost/info";
    kv.put(
        ghost_key,
        r#"{"name":"ghost","id":9,"client_url":"not an address","admin_url":"https://h:1"}"#,
        None,
    )
    .await
    .unwrap();
    await_log_line(&a, &["skipping a member", ghost_key, "client_url"]);
    let members = alloc.members().await.unwrap();
    assert!(
        members.members.iter().all(|m| m.name != "ghost"),
        "{members:?}"
    );

    assert!(!log_of(&a).contains("panicked"));
    a.stop().unwrap();
}
