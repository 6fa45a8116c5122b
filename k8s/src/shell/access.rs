//! Who may read the operator's `/metrics`, the I/O half: the TokenReview and the
//! SubjectAccessReview sent to the API server through the operator's own client, and the
//! decision cache they fill. The decisions, the review asked for and the cache's rules are
//! `decide::metrics_access`; this only asks, times out, hashes the token and reads the clock.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use kube::Client;

use crate::decide::metrics_access::{self, Decision, DecisionCache, TokenDigest};

/// How long one review may take before the scrape gets 503: the client's own timeouts are
/// sized for watches, and a scraper gives up after its scrape timeout (10 s by default).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

/// The API server could not be asked: not a decision, so neither cached nor a 401.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(String);

/// Reviews bearer tokens for `/metrics` against the API server, remembering the answers
/// briefly.
pub struct MetricsAccess {
    client: Client,
    cache: Mutex<DecisionCache>,
    origin: Instant,
}

impl MetricsAccess {
    /// `client` needs `create` on `tokenreviews` and `subjectaccessreviews` (rbac.yaml).
    pub fn new(client: Client) -> Self {
        MetricsAccess {
            client,
            cache: Mutex::default(),
            origin: Instant::now(),
        }
    }

    /// The decision for a request whose `Authorization` header is `header`.
    pub async fn check(&self, header: Option<&[u8]>) -> Result<Decision, Unavailable> {
        let Some(token) = metrics_access::bearer_token(header) else {
            return Ok(metrics_access::no_token());
        };
        let digest = digest(token);
        if let Some(known) = self.cache().get(&digest, self.now()) {
            return Ok(known.clone());
        }
        let decision = self.review(token).await?;
        self.cache().put(digest, decision.clone(), self.now());
        Ok(decision)
    }

    async fn review(&self, token: &str) -> Result<Decision, Unavailable> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.into()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = within(
            "TokenReview",
            Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review),
        )
        .await?;
        let user = match metrics_access::after_token_review(reviewed.status.as_ref()) {
            Ok(user) => user,
            Err(refused) => return Ok(refused),
        };
        let access = within(
            "SubjectAccessReview",
            Api::<SubjectAccessReview>::all(self.client.clone()).create(
                &PostParams::default(),
                &metrics_access::access_review(&user),
            ),
        )
        .await?;
        Ok(metrics_access::after_access_review(
            &user,
            access.status.as_ref(),
        ))
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, DecisionCache> {
        // The cache holds no invariant a panicking holder could break halfway.
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

async fn within<T>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, Unavailable> {
    match tokio::time::timeout(REVIEW_TIMEOUT, call).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(Unavailable(format!("{what} failed: {e}"))),
        Err(_) => Err(Unavailable(format!(
            "{what} not answered within {REVIEW_TIMEOUT:?}"
        ))),
    }
}

fn digest(token: &str) -> TokenDigest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()).as_ref());
    out
}
