//! Who may run a route, and where: a GET (or HEAD) needs any role, anything else `admin`,
//! exactly as on the admin port (`auth::Call::PdHttpRead`, `PdHttpChange`), from the grants the
//! connection's certificate carried at the handshake. Then PD's redirector: a follower answers
//! only the routes whose answer is the same on every member (version, status, health, members,
//! leader, the node's config) and sends the rest to the leader, which alone holds placement.
//! Owns no route's logic.

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use super::reply;
use super::{Api, PREFIX};
use crate::auth::Call;
use crate::server::grpc::connection::ConnectionGrants;

/// Routes a follower answers itself (PD's `localOnlyPaths`, and GET `/config`); the members
/// and the leader are what this node learned from the election, which every member follows.
const LOCAL: &[&str] = &[
    "/version", "/status", "/health", "/ping", "/members", "/leader", "/config",
];

/// The call a request makes, by its method: what is not a read changes something.
fn call_of(method: &Method) -> Call {
    match *method {
        Method::GET | Method::HEAD => Call::PdHttpRead,
        _ => Call::PdHttpChange,
    }
}

pub async fn authorize(State(api): State<Api>, req: Request, next: Next) -> Response {
    let grants = req.extensions().get::<ConnectionGrants>();
    if let Err(denied) = ConnectionGrants::permit(grants, call_of(req.method()), api.metrics()) {
        return reply::forbidden(&denied.to_string());
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let route = route.strip_prefix(PREFIX).unwrap_or(&route);
    let local = *req.method() == Method::GET && LOCAL.contains(&route);
    if local || api.shared.membership.is_leader() {
        return next.run(req).await;
    }
    reply::to_leader(&api, req.uri())
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
}
