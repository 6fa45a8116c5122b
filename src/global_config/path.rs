//! Go's `path.Join` and `path.Clean`, which PD applies to a global config name under its path:
//! the same name must reach the same key here as there (`/global/config/` + `source_id` is
//! `/global/config/source_id`, and `a//b/../c` is `a/c`).

/// `path.Join`: the non-empty elements joined with `/`, cleaned; empty when all are empty.
pub fn join(elements: &[&str]) -> String {
    let parts: Vec<&str> = elements.iter().copied().filter(|e| !e.is_empty()).collect();
    if parts.is_empty() {
        return String::new();
    }
    clean(&parts.join("/"))
}

/// `path.Clean`: one slash between elements, no `.` elements, each `..` removed with the
/// element before it (at the root it is dropped), no trailing slash; `.` for an empty result.
pub fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for element in path.split('/') {
        match element {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|e| *e != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            e => out.push(e),
        }
    }
    let body = out.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".to_string(),
        (false, false) => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's own table for `path.Clean` and `path.Join` (src/path/path_test.go), in part.
    #[test]
    fn as_go_cleans_and_joins() {
        for (input, want) in [
            ("", "."),
            ("abc", "abc"),
            ("abc/def", "abc/def"),
            (".", "."),
            ("..", ".."),
            ("../..", "../.."),
            ("/", "/"),
            ("abc/", "abc"),
            ("/abc/", "/abc"),
            ("abc//def//ghi", "abc/def/ghi"),
            ("//abc", "/abc"),
            ("abc/./def", "abc/def"),
            ("/./abc/def", "/abc/def"),
            ("abc/def/ghi/../jkl", "abc/def/jkl"),
            ("abc/def/../../..", ".."),
            ("/abc/def/../../..", "/"),
            ("abc/def/../../../ghi/jkl/../../../mno", "../../mno"),
        ] {
            assert_eq!(clean(input), want, "clean({input:?})");
        }
        assert_eq!(
            join(&["/global/config/", "source_id"]),
            "/global/config/source_id"
        );
        assert_eq!(join(&["a", ""]), "a");
        assert_eq!(join(&["", ""]), "");
        assert_eq!(join(&["a/", "/b"]), "a/b");
        assert_eq!(join(&["/cfg", "../x"]), "/x");
    }
}
