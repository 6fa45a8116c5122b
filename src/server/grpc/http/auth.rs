//! Who may run a route, and where: a GET (or HEAD) needs any role, anything else `admin`,
//! exactly as on the admin port (`auth::Call::PdHttpRead`, `PdHttpChange`), from the grants the
//! connection's certificate carried at the handshake (or, on a request another member sent on,
//! the caller's it names: `proxy::acting_grants`). Then PD's redirector: a follower answers
//! only PD's local-only routes (version, status, health, ping, and GET of the node's config)
//! and sends the rest on to the leader (`proxy`), which alone holds placement and answers for
//! the cluster. A region read whose caller sets PD's [`FOLLOWER_HANDLE`] header a follower in
//! sync answers itself, from its region syncer's copy ([`FromCopy`]), as PD's follower does
//! from its synced cluster; one not in sync answers PD's 500 "not bootstrapped". PD's follower
//! also keeps any other route with that header to itself, where it mostly answers that same
//! 500: here those go on to the leader, which can answer them. Owns no route's logic.

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::proxy::{self, Route};
use super::reply;
use super::{Api, PREFIX};
use crate::auth::Call;
use crate::server::grpc::connection::ConnectionGrants;

/// Routes every member answers itself, whatever the method (PD's `localOnlyPaths`; its
/// `/admin/log` and `/debug/pprof` are not served here).
const LOCAL: &[&str] = &["/version", "/status", "/health", "/ping"];

/// PD's header by which a caller lets a follower answer (`apiutil.PDAllowFollowerHandleHeader`;
/// its HTTP client sends `PD-Allow-Follower-Handle`: names are case-insensitive). PD looks at
/// whether it is set, not at its value.
pub const FOLLOWER_HANDLE: &str = "PD-Allow-follower-handle";

/// The region reads a PD follower answers from its synced copy (its `regionReadRouter`), of
/// those this API serves.
const REGION_READS: &[&str] = &[
    "/regions",
    "/regions/key",
    "/region/id/{id}",
    "/region/key/{key}",
];

/// Marks a request this follower answers from its copy of the regions.
#[derive(Debug, Clone, Copy)]
pub struct FromCopy;

/// Where a request a follower is sent, and PD would not answer on every member, is answered.
#[derive(Debug, PartialEq, Eq)]
enum OnFollower {
    /// From the follower's copy of the regions.
    Copy,
    /// Nowhere: the follower was allowed to answer but holds no copy in sync.
    NotSynced,
    /// By the leader (PD's redirector).
    Leader,
}

/// PD's choice at a follower: a region read with the follower header is the copy's, if the
/// copy is in sync.
fn on_follower(method: &Method, route: &str, asked: bool, in_sync: bool) -> OnFollower {
    if !asked || *method != Method::GET || !REGION_READS.contains(&route) {
        OnFollower::Leader
    } else if in_sync {
        OnFollower::Copy
    } else {
        OnFollower::NotSynced
    }
}

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

pub async fn authorize(State(api): State<Api>, mut req: Request, next: Next) -> Response {
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
    if !api.shared.membership.is_leader() {
        let placement = &api.shared.placement;
        let asked = req.headers().contains_key(FOLLOWER_HANDLE);
        let in_sync = placement.sync.serves_reads(placement.clock.now_ms());
        match on_follower(req.method(), route, asked, in_sync) {
            OnFollower::Copy => {
                req.extensions_mut().insert(FromCopy);
                return next.run(req).await;
            }
            OnFollower::NotSynced => {
                return reply::Failure::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    reply::NOT_BOOTSTRAPPED,
                )
                .into_response()
            }
            OnFollower::Leader => {}
        }
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

    /// A follower answers a region read from its copy only when asked to and in sync; PD's
    /// other routes, and changes, go to the leader whatever the header.
    #[test]
    fn a_follower_answers_region_reads_from_its_copy_when_asked() {
        for route in REGION_READS {
            assert_eq!(
                on_follower(&Method::GET, route, true, true),
                OnFollower::Copy
            );
            assert_eq!(
                on_follower(&Method::GET, route, true, false),
                OnFollower::NotSynced
            );
            assert_eq!(
                on_follower(&Method::GET, route, false, true),
                OnFollower::Leader
            );
            assert_eq!(
                on_follower(&Method::DELETE, route, true, true),
                OnFollower::Leader
            );
        }
        for route in ["/stores", "/members", "/config/rules", "/operators"] {
            assert_eq!(
                on_follower(&Method::GET, route, true, true),
                OnFollower::Leader,
                "{route}"
            );
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
