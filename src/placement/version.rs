//! Store versions and the cluster version, as PD decides them: a store's version is a semantic
//! version read the way PD reads it (`versioninfo.ParseVersion`: an empty one is `1.0.0`, one
//! leading `v` is dropped, then coreos/go-semver's grammar and ordering); the cluster version
//! is the lowest version among the stores that are not tombstones; a store may register only
//! if it is no downgrade of the cluster by major.minor (`versioninfo.IsCompatible`). TiKV turns
//! features on by the cluster version it hears in heartbeat replies, so this is what keeps a
//! feature off while any store lacks it. Pure; owns no store map (`store` calls in here).

use std::cmp::Ordering;
use std::fmt;

/// A semantic version: `major.minor.patch[-pre][+metadata]`, compared by precedence (the
/// metadata does not count), printed as go-semver prints it (no `v`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub major: i64,
    pub minor: i64,
    pub patch: i64,
    /// Dot-separated identifiers; empty for a release.
    pub pre_release: String,
    pub metadata: String,
}

/// Why a version string is not a version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("{0} is not in dotted-tri format")]
    NotDottedTri(String),
    #[error("failed to validate {what}: {value} is not dot-separated alphanumeric identifiers")]
    BadIdentifier { what: &'static str, value: String },
    #[error("{0:?} is not a number")]
    NotANumber(String),
}

/// The version of a store that sends none: PD's `Base` feature version.
const BASE: Version = Version {
    major: 1,
    minor: 0,
    patch: 0,
    pre_release: String::new(),
    metadata: String::new(),
};

impl Version {
    /// A store's version as PD parses it: `""` is `1.0.0`, one leading `v` is dropped.
    pub fn parse(v: &str) -> Result<Version, VersionError> {
        if v.is_empty() {
            return Ok(BASE);
        }
        Version::parse_semver(v.strip_prefix('v').unwrap_or(v))
    }

    /// go-semver's `NewVersion`: metadata is split off at the first `+`, then the pre-release
    /// at the first `-`; what is left is exactly three decimal numbers.
    fn parse_semver(v: &str) -> Result<Version, VersionError> {
        let (rest, metadata) = v.split_once('+').unwrap_or((v, ""));
        let (core, pre_release) = rest.split_once('-').unwrap_or((rest, ""));
        let parts: Vec<&str> = core.splitn(3, '.').collect();
        let [major, minor, patch] = parts[..] else {
            return Err(VersionError::NotDottedTri(core.to_string()));
        };
        for (what, value) in [("pre-release", pre_release), ("metadata", metadata)] {
            if !value.is_empty() && !value.split('.').all(is_identifier) {
                return Err(VersionError::BadIdentifier {
                    what,
                    value: value.to_string(),
                });
            }
        }
        let number = |s: &str| {
            // Go's ParseInt: digits within i64 (signs cannot reach here: `-` and `+` were
            // split off above).
            s.parse::<i64>()
                .ok()
                .filter(|_| s.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| VersionError::NotANumber(s.to_string()))
        };
        Ok(Version {
            major: number(major)?,
            minor: number(minor)?,
            patch: number(patch)?,
            pre_release: pre_release.to_string(),
            metadata: metadata.to_string(),
        })
    }

    /// go-semver's `Compare`: major, minor, patch, then a release above its pre-releases and
    /// pre-releases identifier by identifier. The metadata is ignored, so two versions can
    /// compare `Equal` and still differ.
    pub fn precedence(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(
                || match (self.pre_release.is_empty(), other.pre_release.is_empty()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => compare_pre_release(
                        self.pre_release.split('.'),
                        other.pre_release.split('.'),
                    ),
                },
            )
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre_release.is_empty() {
            write!(f, "-{}", self.pre_release)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

/// go-semver's identifier pattern, one dot-separated part: `[0-9A-Za-z-]+`.
fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// go-semver's `recursivePreReleaseCompare`: numeric identifiers below others and compared as
/// numbers, then as strings (so `01` and `1` still differ), and more identifiers above fewer.
fn compare_pre_release<'a>(
    mut a: impl Iterator<Item = &'a str>,
    mut b: impl Iterator<Item = &'a str>,
) -> Ordering {
    loop {
        let (x, y) = match (a.next(), b.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => (x, y),
        };
        let order = match (atoi(x), atoi(y)) {
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(i), Some(j)) => i.cmp(&j).then_with(|| x.cmp(y)),
            (None, None) => x.cmp(y),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
}

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign, then decimal digits.
fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

/// Whether a store at `store` may register in a cluster at `cluster` (PD's `IsCompatible`):
/// it is newer, or the same major.minor. A store a minor release behind is a downgrade and is
/// refused; a patch release behind is not, and lowers the cluster version.
pub fn is_compatible(cluster: &Version, store: &Version) -> bool {
    cluster.precedence(store) == Ordering::Less
        || (cluster.major, cluster.minor) == (store.major, store.minor)
}

/// Whether a cluster at `cluster` takes conf changes as `ChangePeerV2` (joint consensus among
/// them), as PD's `IsFeatureSupported(version, ConfChangeV2)` decides it: the feature came in
/// 5.0.0, so PD asks `IsCompatible(5.0.0, cluster)`, which a 5.0 pre-release passes too. No
/// cluster version yet (no store registered) is PD's initial `0.0.0`: not supported.
pub fn supports_conf_change_v2(cluster: Option<&Version>) -> bool {
    let since = Version {
        major: 5,
        minor: 0,
        patch: 0,
        pre_release: String::new(),
        metadata: String::new(),
    };
    cluster.is_some_and(|c| is_compatible(&since, c))
}

/// The cluster version of stores at `versions` (tombstones left out by the caller): the lowest,
/// the first of equals; `None` without a store.
pub fn cluster_version<'a>(versions: impl IntoIterator<Item = &'a Version>) -> Option<Version> {
    versions
        .into_iter()
        .fold(None::<&Version>, |low, v| match low {
            Some(low) if low.precedence(v) != Ordering::Greater => Some(low),
            _ => Some(v),
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn versions_read_and_print_as_pd_reads_and_prints_them() {
        assert_eq!(v("8.5.7").to_string(), "8.5.7");
        assert_eq!(v("v8.5.7").to_string(), "8.5.7", "one leading v is dropped");
        assert_eq!(
            v("").to_string(),
            "1.0.0",
            "no version is PD's base version"
        );
        assert_eq!(
            v("6.1.0-alpha.1+build.5").to_string(),
            "6.1.0-alpha.1+build.5"
        );
        assert_eq!(v("08.5.7").major, 8, "Go's ParseInt takes leading zeros");
        // go-semver takes an empty pre-release or metadata after its separator.
        assert_eq!(v("8.5.7-+").to_string(), "8.5.7");
        for bad in [
            "8.5",
            "8.5.7.1",
            "vv8.5.7",
            "8.x.7",
            "8.5.7-a..b",
            "8.5.7+a_b",
            " 8.5.7",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn precedence_is_go_semvers() {
        let order = [
            "1.0.0-1",
            "1.0.0-2",
            "1.0.0-10",
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-beta",
            "1.0.0",
            "1.0.1",
            "1.2.0",
            "2.0.0",
        ];
        for pair in order.windows(2) {
            assert_eq!(
                v(pair[0]).precedence(&v(pair[1])),
                Ordering::Less,
                "{pair:?}"
            );
        }
        assert_eq!(v("1.0.0+a").precedence(&v("1.0.0+b")), Ordering::Equal);
    }

    #[test]
    fn a_minor_downgrade_is_refused_and_a_patch_one_is_not() {
        let cluster = v("8.5.7");
        assert!(is_compatible(&cluster, &v("8.5.7")));
        assert!(is_compatible(&cluster, &v("8.5.0")), "same major.minor");
        assert!(is_compatible(&cluster, &v("9.0.0")));
        assert!(!is_compatible(&cluster, &v("8.4.9")));
        assert!(!is_compatible(&cluster, &v("7.9.9")));
        assert_eq!(
            cluster_version(&[v("8.5.7"), v("8.5.0"), v("9.1.0")]),
            Some(v("8.5.0"))
        );
        assert_eq!(cluster_version(&[]), None);
    }

    #[test]
    fn conf_change_v2_comes_with_5_0_as_pd_decides_it() {
        let supported = |s: &str| supports_conf_change_v2(Some(&v(s)));
        for yes in [
            "5.0.0",
            "5.0.0-rc",
            "5.0.0-alpha.1",
            "5.0.3",
            "5.1.0",
            "8.5.0",
            "v6.1.0",
        ] {
            assert!(supported(yes), "{yes}");
        }
        for no in ["4.0.16", "4.9.9", "3.1.0", "", "0.0.0"] {
            assert!(!supported(no), "{no:?}");
        }
        assert!(!supports_conf_change_v2(None), "no store yet: PD's 0.0.0");
    }

    fn arb_version() -> impl Strategy<Value = Version> {
        (
            0i64..4,
            0i64..4,
            0i64..4,
            prop::option::of("(alpha|beta|rc|[0-9])(\\.[0-9a-z]{1,2}){0,2}"),
        )
            .prop_map(|(major, minor, patch, pre)| Version {
                major,
                minor,
                patch,
                pre_release: pre.unwrap_or_default(),
                metadata: String::new(),
            })
    }

    proptest! {
        /// The cluster version is the minimum of the versions given: one of them, and none
        /// precedes it.
        #[test]
        fn the_cluster_version_is_the_lowest(versions in prop::collection::vec(arb_version(), 1..8)) {
            let low = cluster_version(&versions).unwrap();
            prop_assert!(versions.contains(&low));
            for x in &versions {
                prop_assert_ne!(x.precedence(&low), Ordering::Less);
            }
        }

        /// A store the rule admits never takes the cluster below its major.minor, however the
        /// stores join: the cluster version after each admitted join is at least the
        /// major.minor it had before.
        #[test]
        fn admitted_stores_never_lower_the_major_minor(versions in prop::collection::vec(arb_version(), 1..12)) {
            let mut stores: Vec<Version> = Vec::new();
            for store in versions {
                let before = cluster_version(&stores);
                if let Some(cluster) = &before {
                    if !is_compatible(cluster, &store) {
                        continue;
                    }
                }
                stores.push(store);
                let after = cluster_version(&stores).unwrap();
                if let Some(before) = before {
                    prop_assert!((after.major, after.minor) >= (before.major, before.minor));
                }
            }
        }

        /// What prints parses back to the same version.
        #[test]
        fn versions_survive_printing(x in arb_version()) {
            prop_assert_eq!(Version::parse(&x.to_string()).unwrap(), x);
        }
    }
}
