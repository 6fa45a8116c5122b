//! `meridian-client` the way a user meets it: a crate outside the workspace depends on it by
//! path, builds, and gets a timestamp from a running `meridian serve`.
//!
//! Outside the workspace nothing of ours applies: not `.cargo/config.toml` (which points
//! etcd-client's build script at a vendored protoc) and not `[patch.crates-io]` (the build
//! gets crates.io's quinn-proto). The build runs in a temp dir with `PROTOC` naming a file that
//! does not exist, so a build script that needs protoc fails here even on a machine that has
//! one, and the dependency tree must hold nothing of the server.
//!
//! It builds into the workspace's own target dir, where the test build has already compiled
//! most of what the client needs: what it adds is the client and the few dependencies whose
//! features differ outside the workspace. On the 2-core machine (with other builds running)
//! that took 14 s after a workspace build, against 77 s into an empty target dir; once built,
//! the whole test takes about a second.

use std::path::{Path, PathBuf};
use std::process::Command;

use meridian::client::{Client, ClientOptions};
use meridian::harness::ServerProcess;
use meridian::tls::Trust;

/// What must never be in the client's dependency tree: the server and what it alone needs.
const SERVER_ONLY: [&str; 8] = [
    "meridian ",
    "etcd-client ",
    "tonic ",
    "axum ",
    "tikv-jemallocator ",
    "prost-build ",
    "protoc-bin-vendored ",
    "hyper ",
];

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The target dir this test binary was built into (`<target>/<profile>/deps/<test>`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

/// The outside crate: `client/examples/get_ts.rs` as its `main.rs`, and the workspace's
/// `Cargo.lock` as its starting point, so that it builds the versions CI tested and a new
/// release on crates.io does not change what this test builds. The dev profile is the
/// workspace's, so the dependencies already built for the workspace are used as they are.
fn write_outside_crate(dir: &Path) {
    let client = workspace().join("client");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            r#"[package]
name = "client-outside-workspace"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
meridian-client = {{ path = {client:?} }}
tokio = {{ version = "1", features = ["rt-multi-thread", "macros"] }}

[profile.dev]
debug = "line-tables-only"

[profile.dev.package."*"]
debug = false

# Its own workspace, whatever encloses the temp dir.
[workspace]
"#
        ),
    )
    .unwrap();
    std::fs::copy(client.join("examples/get_ts.rs"), dir.join("src/main.rs")).unwrap();
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
}

/// What Cargo sets for a test it runs, and a user's shell does not have. Build scripts that
/// watch one of them (ring's watches `CARGO_PKG_NAME` and `CARGO_MANIFEST_DIR`) would see a
/// change from the workspace's build and rebuild, and the workspace's next build would rebuild
/// them back.
const SET_FOR_TESTS: [&str; 8] = [
    "CARGO_PKG_",
    "CARGO_MANIFEST_",
    "CARGO_BIN_",
    "CARGO_CRATE_",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// `cargo ARGS` in `dir`, as a user outside the workspace would run it.
fn cargo(dir: &Path, target: &Path, args: &[&str]) -> std::process::Output {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if SET_FOR_TESTS.iter().any(|p| key.starts_with(p)) {
            cmd.env_remove(&*key);
        }
    }
    cmd.args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env("PROTOC", dir.join("no-protoc-here"))
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crate_outside_the_workspace_builds_the_client_without_protoc_and_gets_a_timestamp() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("outside");
    assert!(
        !dir.starts_with(workspace()),
        "{} is inside the workspace: its .cargo/config.toml would apply",
        dir.display()
    );
    write_outside_crate(&dir);
    let target = target_dir();

    let build = cargo(&dir, &target, &["build", "--quiet"]);
    assert!(
        build.status.success(),
        "the outside crate does not build:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let tree = cargo(
        &dir,
        &target,
        &["tree", "--edges", "normal,build", "--prefix", "none"],
    );
    assert!(
        tree.status.success(),
        "{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let tree = String::from_utf8_lossy(&tree.stdout);
    for name in SERVER_ONLY {
        assert!(
            !tree.lines().any(|l| l.starts_with(name)),
            "the client depends on {name}:\n{tree}"
        );
    }

    let data = tmp.path().join("data");
    let bin: &Path = env!("CARGO_BIN_EXE_meridian").as_ref();
    let server = ServerProcess::start(bin, &data, "127.0.0.1:0", Some(1)).unwrap();
    let ca = data.join("tls/ca.pem");
    let inside = Client::connect(ClientOptions::new(
        vec![server.client_addr.clone()],
        Trust::Ca(ca.clone()),
    ))
    .await
    .unwrap();
    let before = inside.get_ts().await.unwrap();

    let run = Command::new(target.join("debug/client-outside-workspace"))
        .arg(&server.client_addr)
        .arg(&ca)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "the outside program failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out = String::from_utf8_lossy(&run.stdout);
    let ts: u64 = out
        .split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no timestamp in {out:?}"));
    // Handed out after `before` was: strictly greater (T1), so it came from this server.
    assert!(ts > before.as_u64(), "{ts} is not after {before:?}");
}
