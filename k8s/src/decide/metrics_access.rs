//! Who may read the operator's `/metrics`, the decision half (controller-runtime's
//! `WithAuthenticationAndAuthorization`, kube-rbac-proxy): the bearer token of a request, what
//! the API server's TokenReview answer means (a user, or 401), the SubjectAccessReview to ask
//! for that user (nonResourceURL `/metrics`, verb `get`) and what its answer means (serve, or
//! 403 naming the user), and the short-lived cache of those decisions by token digest, so a
//! scrape every 30 s is not two API calls each time. No API calls, no clock: the shell asks
//! the API server and passes the time in as the duration since an origin it chose.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenReviewStatus;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};

/// The non-resource URL a scraper must be allowed to `get` (what the ClusterRole
/// `meridian-operator-metrics-reader` in rbac.yaml grants).
pub const METRICS_PATH: &str = "/metrics";
pub const METRICS_VERB: &str = "get";

/// How long an allowed token is served without asking again: a revoked binding takes effect
/// within this, and a scraper every 30 s costs about one review pair per scrape interval.
pub const ALLOWED_TTL: Duration = Duration::from_secs(30);
/// How long a refused token stays refused without asking again: short, so a binding just
/// created is honoured almost at once, yet a scraper retrying a bad token in a loop does not
/// turn each attempt into API calls.
pub const REFUSED_TTL: Duration = Duration::from_secs(5);
/// Tokens remembered at once: a client sending random tokens must not grow memory without
/// bound.
pub const CACHE_ENTRIES: usize = 1024;

/// The token of an `Authorization: Bearer <token>` header value; the scheme is
/// case-insensitive (RFC 7235). `None` for no header, another scheme, or an empty token.
pub fn bearer_token(header: Option<&[u8]>) -> Option<&str> {
    let value = std::str::from_utf8(header?).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' '))
        .then_some(token)
}

/// Who the API server says a token belongs to: what the SubjectAccessReview asks about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What to answer a request for `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// 200 with the metrics.
    Serve,
    /// 401: no token, or one the API server did not authenticate. `why` is for the log, not the
    /// client: what the API server says about a token is no business of whoever sent it.
    Unauthenticated { why: String },
    /// 403: an authenticated user the API server does not let `get` `/metrics`.
    Forbidden { user: String, why: String },
}

impl Decision {
    pub fn status(&self) -> u16 {
        match self {
            Decision::Serve => 200,
            Decision::Unauthenticated { .. } => 401,
            Decision::Forbidden { .. } => 403,
        }
    }

    /// How long the decision may be reused for the same token.
    pub fn ttl(&self) -> Duration {
        match self {
            Decision::Serve => ALLOWED_TTL,
            Decision::Unauthenticated { .. } | Decision::Forbidden { .. } => REFUSED_TTL,
        }
    }
}

/// A request without a usable bearer token.
pub fn no_token() -> Decision {
    Decision::Unauthenticated {
        why: "no bearer token".into(),
    }
}

/// The TokenReview's answer: the user it authenticated, or the 401. Anything short of
/// `authenticated: true` with a user name is a refusal.
pub fn after_token_review(status: Option<&TokenReviewStatus>) -> Result<User, Decision> {
    let refused = |why: String| Decision::Unauthenticated { why };
    let Some(status) = status else {
        return Err(refused("the TokenReview came back without a status".into()));
    };
    if status.authenticated != Some(true) {
        return Err(refused(match status.error.as_deref() {
            Some(e) if !e.is_empty() => format!("token not authenticated: {e}"),
            _ => "token not authenticated".into(),
        }));
    }
    let info = status.user.clone().unwrap_or_default();
    match info.username {
        Some(name) if !name.is_empty() => Ok(User {
            name,
            uid: info.uid.filter(|u| !u.is_empty()),
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default(),
        }),
        _ => Err(refused("the TokenReview authenticated no user name".into())),
    }
}

/// Whether `user` may `get` `/metrics`: the user with its groups, uid and extra, as the
/// authenticator returned them, so group bindings (`system:serviceaccounts:<ns>`) count.
pub fn access_review(user: &User) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: user.uid.clone(),
            groups: (!user.groups.is_empty()).then(|| user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(METRICS_PATH.into()),
                verb: Some(METRICS_VERB.into()),
            }),
            resource_attributes: None,
        },
        ..SubjectAccessReview::default()
    }
}

/// The SubjectAccessReview's answer for `user`: serve only on `allowed` without `denied`.
pub fn after_access_review(user: &User, status: Option<&SubjectAccessReviewStatus>) -> Decision {
    let forbidden = |why: String| Decision::Forbidden {
        user: user.name.clone(),
        why,
    };
    let Some(status) = status else {
        return forbidden("the SubjectAccessReview came back without a status".into());
    };
    if status.allowed && status.denied != Some(true) {
        return Decision::Serve;
    }
    let mut why = format!("may not {METRICS_VERB} {METRICS_PATH}");
    for detail in [&status.reason, &status.evaluation_error]
        .into_iter()
        .flatten()
    {
        if !detail.is_empty() {
            why.push_str(": ");
            why.push_str(detail);
        }
    }
    forbidden(why)
}

/// A token's SHA-256: the cache keeps digests, never tokens.
pub type TokenDigest = [u8; 32];

/// Decisions by token digest, each until its TTL runs out; at most `capacity` of them.
#[derive(Debug)]
pub struct DecisionCache {
    entries: HashMap<TokenDigest, (Decision, Duration)>,
    capacity: usize,
}

impl Default for DecisionCache {
    fn default() -> Self {
        DecisionCache::with_capacity(CACHE_ENTRIES)
    }
}

impl DecisionCache {
    pub fn with_capacity(capacity: usize) -> Self {
        DecisionCache {
            entries: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The decision for `token` if it has not expired at `now`.
    pub fn get(&self, token: &TokenDigest, now: Duration) -> Option<&Decision> {
        self.entries
            .get(token)
            .filter(|(_, expires)| now < *expires)
            .map(|(d, _)| d)
    }

    /// Remembers `decision` for `token` from `now` for the decision's TTL. When full, expired
    /// entries go first, then the one closest to expiring: the newest decision always fits.
    pub fn put(&mut self, token: TokenDigest, decision: Decision, now: Duration) {
        if !self.entries.contains_key(&token) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, expires)| now < *expires);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| *k);
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        let expires = now + decision.ttl();
        self.entries.insert(token, (decision, expires));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::authentication::v1::UserInfo;

    #[test]
    fn only_a_nonempty_bearer_token_is_a_token() {
        let cases: [(Option<&[u8]>, Option<&str>); 9] = [
            (None, None),
            (Some(b"Bearer abc.def"), Some("abc.def")),
            (Some(b"bearer abc"), Some("abc")),
            (Some(b"BEARER  abc "), Some("abc")),
            (Some(b"Bearer "), None),
            (Some(b"Bearer"), None),
            (Some(b"Basic dXNlcjpwdw=="), None),
            (Some(b"Bearer a b"), None),
            (Some(b"Bearer \xff"), None),
        ];
        for (header, want) in cases {
            assert_eq!(bearer_token(header), want, "{header:?}");
        }
        assert_eq!(no_token().status(), 401);
    }

    fn reviewed(authenticated: Option<bool>, name: Option<&str>) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated,
            user: Some(UserInfo {
                username: name.map(str::to_string),
                uid: Some("u-1".into()),
                groups: Some(vec!["system:serviceaccounts".into()]),
                extra: Some(BTreeMap::from([("k".to_string(), vec!["v".to_string()])])),
            }),
            ..TokenReviewStatus::default()
        }
    }

    #[test]
    fn a_token_review_yields_the_user_only_when_it_authenticated_a_name() {
        let prom = "system:serviceaccount:monitoring:prometheus";
        let user = after_token_review(Some(&reviewed(Some(true), Some(prom)))).unwrap();
        assert_eq!(user.name, prom);
        assert_eq!(user.uid.as_deref(), Some("u-1"));
        assert_eq!(user.groups, ["system:serviceaccounts"]);
        assert_eq!(user.extra["k"], ["v"]);
        for (why, status) in [
            ("no status", None),
            ("not authenticated", Some(reviewed(Some(false), Some(prom)))),
            ("authenticated unset", Some(reviewed(None, Some(prom)))),
            ("no user name", Some(reviewed(Some(true), None))),
            ("empty user name", Some(reviewed(Some(true), Some("")))),
        ] {
            let refused = after_token_review(status.as_ref()).expect_err(why);
            assert_eq!(refused.status(), 401, "{why}");
            assert_eq!(refused.ttl(), REFUSED_TTL, "{why}");
        }
        let mut expired = reviewed(Some(false), None);
        expired.error = Some("token has expired".into());
        assert_eq!(
            after_token_review(Some(&expired)),
            Err(Decision::Unauthenticated {
                why: "token not authenticated: token has expired".into()
            })
        );
    }

    #[test]
    fn the_access_review_asks_for_get_on_metrics_as_the_authenticated_user() {
        let user = after_token_review(Some(&reviewed(Some(true), Some("alice")))).unwrap();
        let sar = access_review(&user).spec;
        assert_eq!(sar.user.as_deref(), Some("alice"));
        assert_eq!(sar.uid.as_deref(), Some("u-1"));
        assert_eq!(sar.groups, Some(vec!["system:serviceaccounts".to_string()]));
        assert_eq!(sar.extra, Some(user.extra.clone()));
        assert_eq!(sar.resource_attributes, None);
        let attrs = sar.non_resource_attributes.unwrap();
        assert_eq!(attrs.path.as_deref(), Some("/metrics"));
        assert_eq!(attrs.verb.as_deref(), Some("get"));
        // Empty lists are left out rather than sent as [] (the API server's own omitempty).
        let bare = access_review(&User {
            name: "bob".into(),
            ..User::default()
        })
        .spec;
        assert_eq!((bare.groups, bare.extra, bare.uid), (None, None, None));
    }

    #[test]
    fn only_allowed_and_not_denied_serves_and_a_refusal_names_the_user() {
        let user = User {
            name: "system:serviceaccount:ops:nosy".into(),
            ..User::default()
        };
        let status = |allowed, denied, reason: Option<&str>| SubjectAccessReviewStatus {
            allowed,
            denied,
            reason: reason.map(str::to_string),
            evaluation_error: None,
        };
        assert_eq!(
            after_access_review(&user, Some(&status(true, None, None))),
            Decision::Serve
        );
        assert_eq!(
            after_access_review(&user, Some(&status(true, Some(false), None))),
            Decision::Serve
        );
        for (why, answer) in [
            ("no status", None),
            ("not allowed", Some(status(false, None, None))),
            ("denied", Some(status(false, Some(true), Some("deny rule")))),
            ("allowed and denied", Some(status(true, Some(true), None))),
        ] {
            let d = after_access_review(&user, answer.as_ref());
            assert_eq!(d.status(), 403, "{why}");
            assert!(
                matches!(&d, Decision::Forbidden { user: u, .. } if u == &user.name),
                "{why}: {d:?}"
            );
        }
        let mut errored = status(false, None, Some("no RBAC policy matched"));
        errored.evaluation_error = Some("webhook timed out".into());
        assert_eq!(
            after_access_review(&user, Some(&errored)),
            Decision::Forbidden {
                user: user.name.clone(),
                why: "may not get /metrics: no RBAC policy matched: webhook timed out".into()
            }
        );
        assert_eq!(Decision::Serve.ttl(), ALLOWED_TTL);
    }

    fn at(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn the_cache_keeps_an_allowed_token_30s_and_a_refused_one_5s() {
        let mut cache = DecisionCache::default();
        let (good, bad, forbidden) = ([1; 32], [2; 32], [3; 32]);
        cache.put(good, Decision::Serve, at(100));
        cache.put(bad, no_token(), at(100));
        let nosy = Decision::Forbidden {
            user: "nosy".into(),
            why: "no".into(),
        };
        cache.put(forbidden, nosy.clone(), at(100));
        assert_eq!(cache.get(&good, at(100)), Some(&Decision::Serve));
        assert_eq!(cache.get(&bad, at(104)), Some(&no_token()));
        assert_eq!(cache.get(&forbidden, at(104)), Some(&nosy));
        assert_eq!(cache.get(&bad, at(105)), None, "refusals expire after 5 s");
        assert_eq!(cache.get(&forbidden, at(105)), None);
        assert_eq!(cache.get(&good, at(129)), Some(&Decision::Serve));
        assert_eq!(
            cache.get(&good, at(130)),
            None,
            "allowed expires after 30 s"
        );
        assert_eq!(cache.get(&[9; 32], at(100)), None, "never seen");
        // A new answer for the same token replaces the old, from its own time.
        cache.put(good, nosy.clone(), at(131));
        assert_eq!(cache.get(&good, at(135)), Some(&nosy));
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn a_full_cache_drops_expired_entries_then_the_soonest_to_expire() {
        let mut cache = DecisionCache::with_capacity(3);
        cache.put([1; 32], Decision::Serve, at(0)); // until 30
        cache.put([2; 32], no_token(), at(0)); // until 5
        cache.put([3; 32], Decision::Serve, at(1)); // until 31
                                                    // Full, nothing expired: the refusal (soonest to expire) makes room.
        cache.put([4; 32], Decision::Serve, at(2));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&[2; 32], at(2)), None);
        for k in [[1; 32], [3; 32], [4; 32]] {
            assert_eq!(cache.get(&k, at(2)), Some(&Decision::Serve));
        }
        // Replacing a remembered token needs no room.
        cache.put([4; 32], no_token(), at(3));
        assert_eq!(cache.len(), 3);
        assert!(cache.get(&[1; 32], at(3)).is_some());
        // Later, the expired entries go at once and the live ones stay.
        cache.put([5; 32], Decision::Serve, at(30));
        assert_eq!(cache.len(), 2, "the two expired entries went");
        assert!(cache.get(&[3; 32], at(30)).is_some());
        assert!(cache.get(&[5; 32], at(30)).is_some());
        // Never more than the capacity, whatever is sent.
        for i in 0..100u8 {
            cache.put([i; 32], no_token(), at(40));
            assert!(cache.len() <= 3);
        }
    }
}
