//! Why a reconcile failed, typed by what failed: the Kubernetes API (a call, or a write that
//! lost to another writer), the members' admin API (no member reachable, no leader, a refusal,
//! a transfer that did not show), the operator's own admin certificate, or an object the
//! operator cannot act on. `kind()` is the label of
//! `meridian_operator_reconcile_errors_total{kind}`: dashboards and alerts select on it, so a
//! published label never changes, and a new variant gets a new one.

use std::time::Duration;

use kube::runtime::finalizer;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A Kubernetes API call failed (a conflict is `Conflict`).
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// A write answered 409: another writer changed the object first. The next reconcile
    /// reads it again.
    #[error("{action}: conflict: {source}")]
    Conflict {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// No member answered the members API, or the member a call is for could not be reached.
    #[error("members API unreachable: {what}: {source:#}")]
    MembersUnreachable {
        what: String,
        #[source]
        source: anyhow::Error,
    },
    /// The members answered, and none of them leads.
    #[error("the members API names no leader")]
    NoLeader,
    /// A member answered a call with an error status.
    #[error("{call}: {status} {reply}")]
    MemberRefused {
        call: String,
        status: u16,
        reply: String,
    },
    /// The leader accepted a transfer, but the members API did not name the new leader in
    /// time.
    #[error("leadership did not reach {to} within {within:?} (leader: {leader})")]
    TransferUnverified {
        to: String,
        within: Duration,
        leader: String,
    },
    /// The operator's admin client certificate or the CA could not be loaded (the mounted
    /// Secret is missing or malformed).
    #[error("admin client certificate: {0:#}")]
    AdminTls(#[source] anyhow::Error),
    /// The object cannot be acted on as it is.
    #[error("invalid object: {0}")]
    InvalidObject(&'static str),
    /// A blocking admin call's task panicked or was cancelled.
    #[error("admin call task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl ReconcileError {
    /// Every `kind()`, in the order `/metrics` lists them: each is exported from the start (at
    /// 0), so a rate over it exists before the first failure of that kind.
    pub const KINDS: [&'static str; 9] = [
        "kube_api",
        "conflict",
        "members_unreachable",
        "no_leader",
        "member_refused",
        "transfer_unverified",
        "admin_tls",
        "invalid_object",
        "internal",
    ];

    /// The stable metrics label of this failure.
    pub fn kind(&self) -> &'static str {
        Self::KINDS[self.kind_index()]
    }

    /// The position of `kind()` in `KINDS`; one exhaustive match, so a new variant cannot go
    /// unlabelled.
    pub fn kind_index(&self) -> usize {
        match self {
            ReconcileError::Kube { .. } => 0,
            ReconcileError::Conflict { .. } => 1,
            ReconcileError::MembersUnreachable { .. } => 2,
            ReconcileError::NoLeader => 3,
            ReconcileError::MemberRefused { .. } => 4,
            ReconcileError::TransferUnverified { .. } => 5,
            ReconcileError::AdminTls(_) => 6,
            ReconcileError::InvalidObject(_) => 7,
            ReconcileError::Task(_) => 8,
        }
    }

    /// What went wrong, without the call: the API server's own message when it answered (what
    /// a condition shows a user), else the error as it reads.
    pub fn cause(&self) -> String {
        match self {
            ReconcileError::Kube { source, .. } | ReconcileError::Conflict { source, .. } => {
                match source {
                    kube::Error::Api(status) if !status.message.is_empty() => {
                        status.message.clone()
                    }
                    other => other.to_string(),
                }
            }
            other => other.to_string(),
        }
    }

    /// A failed Kubernetes call doing `action`; a 409 is a `Conflict`.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        let action = action.into();
        match &source {
            kube::Error::Api(status) if status.code == 409 => {
                ReconcileError::Conflict { action, source }
            }
            _ => ReconcileError::Kube { action, source },
        }
    }
}

impl From<finalizer::Error<ReconcileError>> for ReconcileError {
    fn from(e: finalizer::Error<ReconcileError>) -> Self {
        match e {
            finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
            finalizer::Error::AddFinalizer(e) => ReconcileError::kube("adding the finalizer", e),
            finalizer::Error::RemoveFinalizer(e) => {
                ReconcileError::kube("removing the finalizer", e)
            }
            finalizer::Error::UnnamedObject => {
                ReconcileError::InvalidObject("the cluster has no name")
            }
            finalizer::Error::InvalidFinalizer => {
                ReconcileError::InvalidObject("the finalizer cannot be patched")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("refused", "Refused")
                .with_code(code)
                .boxed(),
        )
    }

    /// One of each variant, with the label it must keep.
    fn every_variant() -> Vec<(ReconcileError, &'static str)> {
        let join = tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| {
                rt.block_on(async {
                    let task = tokio::spawn(std::future::pending::<()>());
                    task.abort();
                    task.await.expect_err("an aborted task")
                })
            })
            .expect("a runtime");
        vec![
            (
                ReconcileError::kube("apply Service db/pd", api_error(500)),
                "kube_api",
            ),
            (
                ReconcileError::kube("apply Service db/pd", api_error(409)),
                "conflict",
            ),
            (
                ReconcileError::MembersUnreachable {
                    what: "GET /api/v1/members".into(),
                    source: anyhow::anyhow!("connection refused"),
                },
                "members_unreachable",
            ),
            (ReconcileError::NoLeader, "no_leader"),
            (
                ReconcileError::MemberRefused {
                    call: "delete member pd-2".into(),
                    status: 500,
                    reply: "etcd down".into(),
                },
                "member_refused",
            ),
            (
                ReconcileError::TransferUnverified {
                    to: "pd-1".into(),
                    within: Duration::from_secs(10),
                    leader: "pd-0".into(),
                },
                "transfer_unverified",
            ),
            (
                ReconcileError::AdminTls(anyhow::anyhow!("no such file")),
                "admin_tls",
            ),
            (
                ReconcileError::InvalidObject("the cluster has no name"),
                "invalid_object",
            ),
            (ReconcileError::Task(join), "internal"),
        ]
    }

    #[test]
    fn every_kind_is_labelled_once_and_keeps_its_label() {
        let variants = every_variant();
        let labels: Vec<&str> = variants.iter().map(|(e, _)| e.kind()).collect();
        let wanted: Vec<&str> = variants.iter().map(|(_, k)| *k).collect();
        assert_eq!(labels, wanted);
        assert_eq!(
            labels,
            ReconcileError::KINDS,
            "KINDS lists each label once, in order"
        );
        for label in labels {
            assert!(
                label.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{label} is a plain Prometheus label value"
            );
        }
    }

    #[test]
    fn a_409_is_a_conflict_and_messages_keep_the_action_and_cause() {
        let e = ReconcileError::kube("apply StatefulSet db/pd", api_error(409));
        assert!(matches!(e, ReconcileError::Conflict { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with("apply StatefulSet db/pd: conflict:") && text.contains("refused"),
            "{text}"
        );
        // The cause alone is the API server's message, without the call or the code.
        assert_eq!(e.cause(), "refused");
        let e = ReconcileError::MembersUnreachable {
            what: "POST https://pd-0/api/v1/leader/transfer/pd-1".into(),
            source: anyhow::anyhow!("timed out").context("admin call"),
        };
        assert_eq!(
            e.to_string(),
            "members API unreachable: POST https://pd-0/api/v1/leader/transfer/pd-1: \
             admin call: timed out"
        );
    }

    #[test]
    fn the_finalizer_s_errors_keep_the_reconcile_s_kind() {
        let inner = ReconcileError::NoLeader;
        let e: ReconcileError = finalizer::Error::ApplyFailed(inner).into();
        assert_eq!(e.kind(), "no_leader");
        let e: ReconcileError = finalizer::Error::AddFinalizer(api_error(409)).into();
        assert_eq!(e.kind(), "conflict");
        let e: ReconcileError = finalizer::Error::RemoveFinalizer(api_error(503)).into();
        assert_eq!(e.kind(), "kube_api");
        let e: ReconcileError = finalizer::Error::<ReconcileError>::UnnamedObject.into();
        assert_eq!(e.kind(), "invalid_object");
    }
}
