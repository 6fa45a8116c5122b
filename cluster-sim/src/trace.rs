//! The trace of one seed: what the nemesis did, who served, what was handed out, and every
//! violation, one line per event stamped with simulated milliseconds. Owns only the text: no
//! wall time, no temporary paths, no hash-ordered collections go in, so the same seed writes
//! the same bytes in any process.

use std::fmt::Write as _;

#[derive(Debug, Default, Clone)]
pub struct Trace {
    lines: Vec<String>,
}

impl Trace {
    /// Records `event` at simulated time `at_ms`.
    pub fn at(&mut self, at_ms: u64, event: impl AsRef<str>) {
        self.lines.push(format!("{at_ms:>7} {}", event.as_ref()));
    }

    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The whole trace, one event a line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            let _ = writeln!(out, "{line}");
        }
        out
    }
}
