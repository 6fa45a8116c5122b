//! The pure cores (`src/tso`, `src/placement`, `src/placement_rules`, `src/gc`,
//! `src/global_config`, `src/resource_group`) do no I/O: no file of theirs names tokio, the
//! network, the file system, threads or the OS clock outside its tests. Time comes in as an
//! argument and effects go out as values, so the server and the simulators drive the same code
//! (ARCHITECTURE.md, "Process rules").

use std::path::{Path, PathBuf};

const CORES: [&str; 6] = [
    "src/tso",
    "src/placement",
    "src/placement_rules",
    "src/gc",
    "src/global_config",
    "src/resource_group",
];

/// What a pure module must not name. Each is a path prefix, matched as written in code.
const FORBIDDEN: [&str; 10] = [
    "tokio",
    "std::net",
    "std::fs",
    "std::thread",
    "std::process",
    "SystemTime::now",
    "Instant::now",
    "std::io::stdin",
    "socket2",
    "quinn",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file's code before its tests: a `tests.rs` module is all tests, and a file's
/// `#[cfg(test)]` module ends it.
fn production_code(path: &Path) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let end = text.find("#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn violations(code: &str) -> Vec<&'static str> {
    FORBIDDEN
        .iter()
        .copied()
        .filter(|f| code.contains(f))
        .collect()
}

#[test]
fn the_pure_cores_name_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in CORES {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 10, "found only {files:?}");
    let bad: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let found = violations(&production_code(f));
            (!found.is_empty()).then(|| format!("{}: {found:?}", f.display()))
        })
        .collect();
    assert!(bad.is_empty(), "I/O in a pure core: {bad:#?}");
}

#[test]
fn the_check_sees_io_when_there_is_some() {
    assert_eq!(
        violations("use tokio::sync::mpsc;\nlet t = std::time::Instant::now();"),
        vec!["tokio", "Instant::now"]
    );
    assert!(violations("let now_ms = clock_ms; // no I/O").is_empty());
}
