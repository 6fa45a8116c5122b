//! How PD's HTTP API answers what is not a success: its error bodies (a JSON string, as PD's
//! `render.JSON(w, status, err.Error())` writes them, or Go's plain `http.Error` text) and the
//! 404 of an unknown route.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::proto::ErrorReply;

/// PD's words when the cluster is not bootstrapped (its cluster middleware answers 500).
pub const NOT_BOOTSTRAPPED: &str =
    "[PD:cluster:ErrNotBootstrapped]TiKV cluster not bootstrapped, please start TiKV first";

/// A refusal in PD's shape: the status and the message, written as a JSON string.
#[derive(Debug)]
pub struct Failure {
    pub status: StatusCode,
    pub message: String,
}

impl Failure {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Failure {
        Failure::new(StatusCode::NOT_FOUND, message)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        json_string(self.status, &self.message)
    }
}

/// The request service's refusals, with the status PD gives each.
impl From<ErrorReply> for Failure {
    fn from(e: ErrorReply) -> Failure {
        let status = match &e {
            ErrorReply::NotBootstrapped => {
                return Failure::new(StatusCode::INTERNAL_SERVER_ERROR, NOT_BOOTSTRAPPED)
            }
            ErrorReply::InvalidArgument(_) | ErrorReply::LimitExceeded(_) => {
                StatusCode::BAD_REQUEST
            }
            ErrorReply::PermissionDenied(_) => StatusCode::FORBIDDEN,
            ErrorReply::NotLeader { .. } | ErrorReply::Unavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ErrorReply::StaleEpoch(_) | ErrorReply::Internal(_) | ErrorReply::Refused(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        Failure::new(status, e.to_string())
    }
}

/// A body that is one JSON string, as PD's renderer writes an error.
fn json_string(status: StatusCode, message: &str) -> Response {
    let body = serde_json::to_string(message).unwrap_or_else(|_| "\"\"".into());
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        body,
    )
        .into_response()
}

/// Go's `http.Error`: plain text and a newline.
pub fn plain(status: StatusCode, message: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        format!("{message}\n"),
    )
        .into_response()
}

/// An unknown route: what PD's router (gorilla/mux, no handler of its own) answers, Go's
/// `http.NotFound`.
pub async fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "404 page not found")
}

/// The certificate lacks the role; the route did not run.
pub fn forbidden(why: &str) -> Response {
    json_string(StatusCode::FORBIDDEN, &format!("permission denied: {why}"))
}
