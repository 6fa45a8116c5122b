//! Growing the members' volumes when `spec.storage.size` grows: a pure
//! decision over the claims as stored and whether their StorageClass allows expansion. Owns
//! which claims to resize and what the `VolumesExpanded` condition says; touches no API.
//!
//! A StatefulSet's claim template cannot change once the StatefulSet exists, so growth goes
//! through the claims themselves, as PVC expansion does (`kubectl edit pvc`): the operator
//! raises each claim's request and the storage driver grows the volume, online where the
//! driver can. The StatefulSet keeps the size it was made with ([`kept_size`]); a claim it makes
//! later for a new member starts at that size and is raised on the next pass like the others.
//! A StorageClass without `allowVolumeExpansion` would refuse every raise: then nothing is
//! written and the condition says so, and the rest of the cluster goes on (a shrink is refused
//! by the CRD's rules before it reaches the operator).

use super::drift::quantity_nanos;

/// One member's claim as stored: its request and the capacity the driver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub name: String,
    pub requested: Option<String>,
    pub capacity: Option<String>,
}

/// Raise `claim`'s storage request to `size`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resize {
    pub claim: String,
    pub size: String,
}

/// What the `VolumesExpanded` condition says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Every claim's volume holds the spec's size (or more).
    AtSize,
    /// Raises requested; `pending` claims' volumes are not yet at the size.
    Resizing { pending: usize },
    /// Claims are below the size and their StorageClass does not allow expansion (or it was
    /// not found): nothing is written.
    NotExpandable { below: usize },
    /// Claims are below the size and whether their class allows expansion is not known yet
    /// (the lookup failed): nothing is written this pass.
    Unknown { below: usize },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Growth {
    pub resize: Vec<Resize>,
    pub state: State,
}

/// The claims to raise to `want` (the spec's size), given whether their StorageClass allows
/// expansion (`None`: not known). A claim whose size does not parse is left alone.
pub fn grow(want: &str, claims: &[Claim], expandable: Option<bool>) -> Growth {
    let Some(want_n) = quantity_nanos(want) else {
        return Growth {
            resize: Vec::new(),
            state: State::AtSize,
        };
    };
    let below = |q: &Option<String>| {
        q.as_deref()
            .and_then(quantity_nanos)
            .is_some_and(|n| n < want_n)
    };
    let small: Vec<&Claim> = claims.iter().filter(|c| below(&c.requested)).collect();
    if !small.is_empty() {
        return match expandable {
            Some(true) => Growth {
                resize: small
                    .iter()
                    .map(|c| Resize {
                        claim: c.name.clone(),
                        size: want.to_string(),
                    })
                    .collect(),
                state: State::Resizing {
                    pending: claims.iter().filter(|c| !at_size(c, want_n)).count(),
                },
            },
            Some(false) => Growth {
                resize: Vec::new(),
                state: State::NotExpandable { below: small.len() },
            },
            None => Growth {
                resize: Vec::new(),
                state: State::Unknown { below: small.len() },
            },
        };
    }
    let pending = claims.iter().filter(|c| !at_size(c, want_n)).count();
    Growth {
        resize: Vec::new(),
        state: if pending == 0 {
            State::AtSize
        } else {
            State::Resizing { pending }
        },
    }
}

/// The volume holds `want`: its capacity says so (a claim not yet bound reports none, and
/// counts as at size once its request is).
fn at_size(c: &Claim, want: i128) -> bool {
    match c.capacity.as_deref().and_then(quantity_nanos) {
        Some(capacity) => capacity >= want,
        None => c
            .requested
            .as_deref()
            .and_then(quantity_nanos)
            .is_some_and(|r| r >= want),
    }
}

/// Whether any claim asks for less than `want`: only then is the StorageClass looked up.
pub fn any_below(want: &str, claims: &[Claim]) -> bool {
    let Some(want) = quantity_nanos(want) else {
        return false;
    };
    claims.iter().any(|c| {
        c.requested
            .as_deref()
            .and_then(quantity_nanos)
            .is_some_and(|n| n < want)
    })
}

/// The size the StatefulSet's claim template keeps: the stored template's when the spec asks
/// for more (the template cannot change; the claims grow instead), else the spec's (a new
/// StatefulSet, or an equal size; a smaller or different one goes to the apply and is refused
/// there, which the `ApplyFailed` condition reports).
pub fn kept_size(spec_size: &str, stored_template: Option<&str>) -> String {
    match (
        quantity_nanos(spec_size),
        stored_template.and_then(quantity_nanos),
    ) {
        (Some(want), Some(have)) if want > have => stored_template.unwrap_or(spec_size).to_string(),
        _ => spec_size.to_string(),
    }
}

/// The condition's status, reason and message.
pub fn condition(state: &State, want: &str) -> (bool, &'static str, String) {
    match state {
        State::AtSize => (
            true,
            "AtSize",
            format!("every member's volume holds {want}"),
        ),
        State::Resizing { pending } => (
            false,
            "Resizing",
            format!("{pending} member volume(s) growing to {want} through PVC expansion"),
        ),
        State::NotExpandable { below } => (
            false,
            "ExpansionNotAllowed",
            format!(
                "{below} claim(s) below {want}, and their StorageClass does not allow volume \
                 expansion (allowVolumeExpansion): set it on the class, or keep the old size"
            ),
        ),
        State::Unknown { below } => (
            false,
            "StorageClassUnknown",
            format!("{below} claim(s) below {want}; their StorageClass could not be read"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, requested: &str, capacity: Option<&str>) -> Claim {
        Claim {
            name: name.into(),
            requested: Some(requested.into()),
            capacity: capacity.map(Into::into),
        }
    }

    #[test]
    fn claims_below_the_size_are_raised_when_the_class_allows() {
        let claims = [
            claim("data-pd-0", "1Gi", Some("1Gi")),
            claim("data-pd-1", "2Gi", Some("1Gi")),
            claim("data-pd-2", "1024Mi", Some("1Gi")),
        ];
        let g = grow("2Gi", &claims, Some(true));
        assert_eq!(
            g.resize,
            vec![
                Resize {
                    claim: "data-pd-0".into(),
                    size: "2Gi".into()
                },
                Resize {
                    claim: "data-pd-2".into(),
                    size: "2Gi".into()
                },
            ]
        );
        assert_eq!(g.state, State::Resizing { pending: 3 });
    }

    #[test]
    fn nothing_is_written_when_the_class_refuses_or_is_unknown() {
        let claims = [claim("data-pd-0", "1Gi", Some("1Gi"))];
        let refused = grow("2Gi", &claims, Some(false));
        assert!(refused.resize.is_empty());
        assert_eq!(refused.state, State::NotExpandable { below: 1 });
        let unknown = grow("2Gi", &claims, None);
        assert!(unknown.resize.is_empty());
        assert_eq!(unknown.state, State::Unknown { below: 1 });
    }

    #[test]
    fn requested_but_not_yet_grown_is_resizing_then_at_size() {
        let growing = [claim("data-pd-0", "2Gi", Some("1Gi"))];
        let g = grow("2Gi", &growing, Some(true));
        assert!(g.resize.is_empty(), "raised once, not again");
        assert_eq!(g.state, State::Resizing { pending: 1 });
        let grown = [
            claim("data-pd-0", "2Gi", Some("2Gi")),
            claim("data-pd-1", "2Gi", None),
        ];
        assert_eq!(grow("2Gi", &grown, Some(false)).state, State::AtSize);
    }

    #[test]
    fn an_idle_cluster_at_size_writes_nothing_and_needs_no_lookup() {
        let claims = [claim("data-pd-0", "10Gi", Some("10Gi"))];
        assert!(!any_below("10Gi", &claims));
        let g = grow("10Gi", &claims, None);
        assert!(g.resize.is_empty());
        assert_eq!(g.state, State::AtSize);
        // A larger volume than asked (drivers round up) is at size too.
        assert!(!any_below(
            "10Gi",
            &[claim("data-pd-0", "10Gi", Some("12Gi"))]
        ));
    }

    #[test]
    fn the_template_keeps_its_size_only_while_the_spec_asks_for_more() {
        assert_eq!(kept_size("2Gi", Some("1Gi")), "1Gi");
        assert_eq!(kept_size("2Gi", Some("2048Mi")), "2Gi");
        assert_eq!(kept_size("2Gi", None), "2Gi");
        // A shrink goes to the apply, which refuses it visibly.
        assert_eq!(kept_size("1Gi", Some("2Gi")), "1Gi");
        assert_eq!(kept_size("junk", Some("2Gi")), "junk");
    }

    #[test]
    fn a_size_that_does_not_parse_changes_nothing() {
        let claims = [claim("data-pd-0", "junk", None)];
        assert!(grow("2Gi", &claims, Some(true)).resize.is_empty());
        assert!(grow("junk", &[claim("data-pd-0", "1Gi", None)], Some(true))
            .resize
            .is_empty());
    }
}
