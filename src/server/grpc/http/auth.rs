//! Who may run a route, and where: a GET (or HEAD) needs any role, anything else `admin`,
//! exactly as on the admin port (`auth::Call::PdHttpRead`, `PdHttpChange`), from the grants the
//! connection's certificate carried at the handshake (or, on a request another member sent on,
//! the caller's it names: `proxy::acting_grants`). Then PD's redirector: a follower answers
//! only PD's local-only routes (version, status, health, ping, and GET of the node's config)
//! and sends the rest on to the leader (`proxy`), which alone holds placement and answers for
//! the cluster. Owns no route's logic.

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use super::proxy::{self, Route};
use super::reply;
use super::{Api, PREFIX};
use crate::auth::Call;
use crate::server::grpc::connection::ConnectionGrants;

/// Routes every member answers itself, whatever the method (PD's `localOnlyPaths`; its
/// `/admin/log` and `/debug/pprof` are not served here).
const LOCAL: &[&str] = &["/version", "/status", "/health", "/ping"];

/// The call a request makes, by its method: what is not a read changes something.
fn call_of(method: &Method) -> Call {
    match *method {
        Method::GET | Method::HEAD => Call::PdHttpRead,
        _ => Call::PdHttpChange,
    }
}

/// Whether PD's redirector lets any member answer: its local-only routes, and GET `/config`
/// (this node's own config).
fn is_local(method: &Method, route: &str) -> bool {
    LOCAL.contains(&route) || (*method == Method::GET && route == "/config")
}

pub async fn authorize(State(api): State<Api>, req: Request, next: Next) -> Response {
    let connection = ConnectionGrants::of(req.extensions().get());
    // A member forwarding a follower's request acts with the roles it vouches for.
    let grants = proxy::acting_grants(connection, req.headers());
    if let Err(denied) = ConnectionGrants::permit(grants, call_of(req.method()), api.metrics()) {
        return reply::forbidden(&denied.to_string());
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let route = route.strip_prefix(PREFIX).unwrap_or(&route);
    if is_local(req.method(), route) {
        return next.run(req).await;
    }
    match proxy::route(&api, req.headers()).await {
        Ok(Route::Here) => next.run(req).await,
        Ok(Route::Leader(leader)) => proxy::forward(&api, &leader, req, grants).await,
        Err(refused) => refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Grants, Role};

    /// The admin port's rule: reads need a role, anything else `admin`.
    #[test]
    fn reads_need_a_role_and_changes_need_admin() {
        for role in Role::ALL {
            assert!(call_of(&Method::GET)
                .permitted(Grants::of_roles(&[role]))
                .is_ok());
        }
        assert!(call_of(&Method::GET).permitted(Grants::NONE).is_err());
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let call = call_of(&method);
            assert!(call.permitted(Grants::of_roles(&[Role::Admin])).is_ok());
            let refused = call
                .permitted(Grants::of_roles(&[Role::Client, Role::Store, Role::Member]))
                .unwrap_err();
            assert!(refused.to_string().contains("`admin`"), "{refused}");
        }
    }

    /// PD's `localOnlyPaths` by any method, and only GET of `/config`; everything else,
    /// members and leader included, is the leader's.
    #[test]
    fn only_pds_local_routes_stay_on_a_follower() {
        for route in ["/version", "/status", "/health", "/ping"] {
            assert!(is_local(&Method::GET, route));
            assert!(is_local(&Method::POST, route));
        }
        assert!(is_local(&Method::GET, "/config"));
        assert!(!is_local(&Method::POST, "/config"));
        for route in [
            "/members",
            "/leader",
            "/regions",
            "/config/rules",
            "/stores",
        ] {
            assert!(!is_local(&Method::GET, route), "{route}");
        }
    }
}
