//! The committed fuzz corpus on stable: every file in `fuzz/corpus/<target>/` goes through
//! `meridian::fuzzing::<target>`, so CI checks the corpus (and any crash input added to it)
//! without nightly or cargo-fuzz. The seeds `meridian::fuzzing::seeds` generates must be in
//! the corpus as committed; after a change to a wire or disk format, write them again with
//!
//!     MERIDIAN_WRITE_FUZZ_SEEDS=1 cargo test --test fuzz_corpus

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use meridian::fuzzing::{seeds, TARGETS};

/// Committed seeds stay small: libFuzzer's default input size is 4 KiB.
const MAX_SEED: usize = 4096;

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_file_replays_without_a_panic() {
    for (name, target) in TARGETS {
        let dir = corpus_root().join(name);
        let files = files_in(&dir);
        assert!(!files.is_empty(), "{} holds no input", dir.display());
        for file in files {
            let bytes = fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            // Name the input that failed, not only the assertion inside the target.
            if catch_unwind(AssertUnwindSafe(|| target(&bytes))).is_err() {
                panic!("{name} panicked on {}", file.display());
            }
        }
    }
}

/// Each target has its corpus and its libFuzzer binary, and nothing else is there.
#[test]
fn every_target_has_a_corpus_and_a_fuzz_binary() {
    let mut dirs: Vec<String> = fs::read_dir(corpus_root())
        .expect("fuzz/corpus")
        .map(|e| {
            e.expect("fuzz/corpus entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    dirs.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    assert_eq!(
        dirs, names,
        "fuzz/corpus/ against meridian::fuzzing::TARGETS"
    );
    let bins = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    for name in &names {
        let bin = bins.join(format!("{name}.rs"));
        let text = fs::read_to_string(&bin).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        assert!(
            text.contains(&format!("meridian::fuzzing::{name}(")),
            "{} does not call meridian::fuzzing::{name}",
            bin.display()
        );
    }
}

/// The generated seeds are what is committed (a format change that left them stale would
/// quietly leave the fuzzer starting from inputs that no longer decode).
#[test]
fn generated_seeds_are_committed() {
    let write = std::env::var_os("MERIDIAN_WRITE_FUZZ_SEEDS").is_some();
    for seed in seeds() {
        assert!(
            seed.bytes.len() < MAX_SEED,
            "seed {}/{} is {} bytes",
            seed.target,
            seed.name,
            seed.bytes.len()
        );
        assert!(TARGETS.iter().any(|(n, _)| *n == seed.target));
        let path = corpus_root().join(seed.target).join(&seed.name);
        if write {
            fs::create_dir_all(path.parent().expect("a seed has a directory"))
                .expect("creating the corpus directory");
            fs::write(&path, &seed.bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        let committed = fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; write the seeds with MERIDIAN_WRITE_FUZZ_SEEDS=1",
                path.display()
            )
        });
        assert!(
            committed == seed.bytes,
            "{} is stale; write the seeds again with MERIDIAN_WRITE_FUZZ_SEEDS=1",
            path.display()
        );
    }
}
