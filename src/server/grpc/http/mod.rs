//! PD's HTTP API (`/pd/api/v1/...`) on the gRPC port, and the split that puts both on one TCP
//! port and one TLS session, as PD's embedded etcd splits its client port: an HTTP/2 request
//! whose `content-type` names `application/grpc` goes to gRPC, everything else (HTTP/1.1 or
//! HTTP/2) comes here. Every route reads or writes through the request service
//! (`server::service`), as the gRPC adapters do, and is authorized per connection with the
//! grants its certificate carries (`auth.rs`). One file per group of routes: `cluster`
//! (version, status, health, members, leader, cluster), `stores`, `regions`, `gc`
//! (GC safe points, min resolved ts), `config`, `rules` (placement and region label rules),
//! `scheduling` (decommission, store limits, evict-leader), `operators` (PD's operator API:
//! admin operators started, listed, cancelled; their text forms in `operator_text`);
//! `json` holds PD's JSON shapes, `reply` PD's error bodies, `proxy` how a follower sends what
//! only the leader answers on to it. Owns no placement, TSO, GC or rule logic.

mod auth;
mod cluster;
mod config;
mod gc;
mod json;
pub(crate) mod operator_string;
mod operator_text;
pub(crate) use json::go_duration_ms;
mod operators;
pub mod proxy;
mod regions;
mod reply;
mod rules;
mod scheduling;
mod stores;

use std::sync::Arc;
use std::time::Duration;

use axum::error_handling::HandleErrorLayer;
use axum::extract::Request;
use axum::http::{header, StatusCode, Uri, Version};
use axum::routing::{get, post};
use axum::{BoxError, Router};
use tower::{ServiceBuilder, ServiceExt};

use crate::admin::CoreMetrics;
use crate::proto::{Request as Req, Response};
use crate::server::service::{execute, Op};
use crate::server::Shared;

/// PD's prefix for its v1 API.
const PREFIX: &str = "/pd/api/v1";

/// An HTTP request not answered by then gets 408.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// HTTP requests served at once over all connections; more get 503 at once, so the API cannot
/// crowd out gRPC on the shared runtime.
const MAX_CONCURRENT_REQUESTS: usize = 64;

/// What every route handler is given.
#[derive(Clone)]
pub struct Api {
    shared: Arc<Shared>,
    metrics_slot: usize,
    /// When this front end started, in Unix seconds (PD's `start_timestamp`).
    started_secs: i64,
    /// How this node reaches the leader's HTTP API when it follows; `None` where it never
    /// follows (the embedded store).
    proxy: Option<proxy::LeaderProxy>,
}

impl Api {
    fn metrics(&self) -> &CoreMetrics {
        self.shared.metrics.core(self.metrics_slot)
    }

    /// Serves one request through the request service, as the gRPC adapters do.
    async fn call(&self, req: Req) -> Response {
        self.read(req, false).await
    }

    /// [`call`](Self::call) for a routing read, answered from this follower's synced copy
    /// when `from_copy` (`auth::FromCopy`).
    async fn read(&self, req: Req, from_copy: bool) -> Response {
        let op = Op::of(req);
        let op = if from_copy {
            op.allowing_follower()
        } else {
            op
        };
        execute(op, &self.shared, self.metrics()).await
    }
}

/// A route under PD's prefix. Routes are named in full rather than nested, so that a handler
/// sees the whole path (a key in it, a redirect to the leader).
fn at(route: &str) -> String {
    format!("{PREFIX}{route}")
}

/// The HTTP API's routes, with their authorization and limits.
pub fn router(
    shared: Arc<Shared>,
    metrics_slot: usize,
    proxy: Option<proxy::LeaderProxy>,
) -> Router {
    let started_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let api = Api {
        shared,
        metrics_slot,
        started_secs,
        proxy,
    };
    let routes = Router::new()
        .route(&at("/version"), get(cluster::version))
        .route(&at("/status"), get(cluster::status))
        .route(&at("/health"), get(cluster::health))
        .route(&at("/ping"), get(cluster::ping))
        .route(&at("/members"), get(cluster::members))
        .route(&at("/leader"), get(cluster::leader))
        .route(&at("/cluster"), get(cluster::cluster))
        .route(&at("/stores"), get(stores::all))
        .route(
            &at("/store/{id}"),
            get(stores::one).delete(scheduling::delete_store),
        )
        .route(&at("/store/{id}/limit"), post(scheduling::set_limit))
        .route(
            &at("/stores/limit"),
            get(scheduling::get_limits).post(scheduling::set_all_limits),
        )
        .route(
            &at("/schedulers"),
            get(scheduling::schedulers).post(scheduling::add_scheduler),
        )
        .route(
            &at("/schedulers/{name}"),
            axum::routing::delete(scheduling::remove_scheduler),
        )
        .route(
            &at("/operators"),
            get(operators::list)
                .post(operators::create)
                .delete(operators::cancel_all),
        )
        .route(&at("/operators/records"), get(operators::records))
        .route(
            &at("/operators/{region_id}"),
            get(operators::by_region).delete(operators::cancel_one),
        )
        .route(&at("/regions"), get(regions::all))
        .route(&at("/regions/key"), get(regions::scan))
        .route(&at("/region/id/{id}"), get(regions::by_id))
        .route(&at("/region/key/{key}"), get(regions::by_key))
        .route(&at("/min-resolved-ts"), get(gc::min_resolved_ts))
        .route(&at("/gc/safepoint"), get(gc::safe_points))
        .route(&at("/config"), get(config::all))
        .route(&at("/config/schedule"), get(config::schedule))
        .route(&at("/config/replicate"), get(config::replicate))
        .route(
            &at("/config/rules"),
            get(rules::get_rules).post(rules::set_rules),
        )
        .route(&at("/config/rules/batch"), post(rules::batch))
        .route(
            &at("/config/placement-rule"),
            get(rules::get_bundles).post(rules::set_bundles),
        )
        .route(
            &at("/config/region-label/rules"),
            get(rules::get_label_rules).patch(rules::patch_label_rules),
        )
        .route(
            &at("/config/placement-rule/{group}"),
            get(rules::get_bundle),
        )
        .route(
            &at("/config/region-label/rules/ids"),
            get(rules::get_label_rules_by_ids),
        )
        .route(
            &at("/config/region-label/rule"),
            post(rules::set_label_rule),
        )
        .route(
            &at("/config/region-label/rule/{id}"),
            get(rules::get_label_rule).delete(rules::delete_label_rule),
        )
        // A route runs only if the caller's certificate allows it, and on a follower only if
        // PD answers it on every member; the rest goes on to the leader (`auth`, `proxy`).
        .route_layer(axum::middleware::from_fn_with_state(
            api.clone(),
            auth::authorize,
        ));
    routes.fallback(reply::not_found).with_state(api).layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(|_: BoxError| async {
                (StatusCode::SERVICE_UNAVAILABLE, "HTTP API busy; retry")
            }))
            .load_shed()
            .concurrency_limit(MAX_CONCURRENT_REQUESTS)
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                REQUEST_TIMEOUT,
            )),
    )
}

/// A reply of the wrong kind for the request: a bug, answered 500 rather than a panic.
fn unexpected(got: crate::proto::Reply) -> reply::Failure {
    reply::Failure::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("unexpected reply {got:?}"),
    )
}

/// Every value of the query parameter `name`, unescaped to bytes as Go's `url.ParseQuery`
/// does (`+` is a space), so a key parameter may hold any bytes.
fn query_values(uri: &Uri, name: &str) -> Result<Vec<Vec<u8>>, reply::Failure> {
    let Some(query) = uri.query() else {
        return Ok(Vec::new());
    };
    let mut values = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if unescape(key, true)? == name.as_bytes() {
            values.push(unescape(value, true)?);
        }
    }
    Ok(values)
}

/// The first value of the query parameter `name`, as Go's `Query().Get` reads it.
fn query_value(uri: &Uri, name: &str) -> Result<Option<Vec<u8>>, reply::Failure> {
    Ok(query_values(uri, name)?.into_iter().next())
}

/// Go's `url.QueryUnescape` (`plus_is_space`) or `PathUnescape`: `%XX` to its byte; a bad
/// escape is refused with Go's words.
fn unescape(text: &str, plus_is_space: bool) -> Result<Vec<u8>, reply::Failure> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let escape = bytes
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                let Some(byte) = escape else {
                    let end = (i + 3).min(bytes.len());
                    let shown = String::from_utf8_lossy(&bytes[i..end]);
                    return Err(reply::Failure::bad_request(format!(
                        "invalid URL escape {shown:?}"
                    )));
                };
                out.push(byte);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Whether a request is gRPC: HTTP/2 and a `content-type` naming `application/grpc` (PD's
/// embedded etcd tests the same two things).
fn is_grpc<B>(req: &axum::http::Request<B>) -> bool {
    req.version() == Version::HTTP_2
        && req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("application/grpc"))
}

/// One service for the port: gRPC requests to `grpc` (tonic's routes, which answer an
/// unknown method UNIMPLEMENTED), all others to `http` (which answers an unknown path 404).
pub fn split(grpc: Router, http: Router) -> tonic::service::Routes {
    let both = tower::service_fn(move |req: Request| {
        let target = if is_grpc(&req) {
            grpc.clone()
        } else {
            http.clone()
        };
        target.oneshot(req)
    });
    tonic::service::Routes::from(Router::new().fallback_service(both))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: Version, content_type: Option<&str>) -> axum::http::Request<()> {
        let mut b = axum::http::Request::builder()
            .version(version)
            .uri("/pdpb.PD/GetMembers");
        if let Some(ct) = content_type {
            b = b.header(header::CONTENT_TYPE, ct);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn queries_and_paths_unescape_as_go_does() {
        let uri: Uri = "/x?key=a%00b+c&end_key=&key=second&limit".parse().unwrap();
        assert_eq!(
            query_values(&uri, "key").unwrap(),
            vec![b"a\0b c".to_vec(), b"second".to_vec()]
        );
        assert_eq!(query_value(&uri, "end_key").unwrap(), Some(vec![]));
        assert_eq!(query_value(&uri, "limit").unwrap(), Some(vec![]));
        assert_eq!(query_value(&uri, "absent").unwrap(), None);
        assert_eq!(unescape("t%80%FF", true).unwrap(), vec![b't', 0x80, 0xff]);
        assert_eq!(unescape("a+b", false).unwrap(), b"a+b".to_vec());
        for bad in ["%", "%4", "%zz", "a%+1"] {
            assert!(unescape(bad, true).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Whatever bytes a key holds, escaping every byte and unescaping gives them back.
        #[test]
        fn escaped_bytes_come_back(key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let escaped: String = key.iter().map(|b| format!("%{b:02X}")).collect();
            proptest::prop_assert_eq!(unescape(&escaped, true).unwrap(), key);
        }
    }

    #[test]
    fn only_http2_with_a_grpc_content_type_is_grpc() {
        assert!(is_grpc(&request(Version::HTTP_2, Some("application/grpc"))));
        assert!(is_grpc(&request(
            Version::HTTP_2,
            Some("application/grpc+proto")
        )));
        assert!(!is_grpc(&request(
            Version::HTTP_2,
            Some("application/json")
        )));
        assert!(!is_grpc(&request(Version::HTTP_2, None)));
        assert!(!is_grpc(&request(
            Version::HTTP_11,
            Some("application/grpc")
        )));
    }
}
