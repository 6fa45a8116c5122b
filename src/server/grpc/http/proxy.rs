//! PD's redirector (`pkg/utils/apiutil/serverapi/middleware.go`) for what only the leader
//! holds: a follower sends the request on to the leader and answers with the leader's answer,
//! marked with `PD-Redirector` (its own name) so that it is never sent on twice: a member
//! that is sent a marked request and does not lead answers PD's "redirect to not leader". A
//! follower that knows no leader waits for one as PD does (100 ms, doubling, 3 s in all) and
//! then answers PD's "redirect finds no leader"; a leader it cannot reach is PD's "redirect
//! failed".
//!
//! Who the caller is goes with the request: the follower has checked the caller's role
//! already (`auth`), then connects to the leader over mTLS with its own node certificate (role
//! `member`) and names the roles of the caller's certificate in [`CALLER_ROLES`]. The leader
//! acts with those roles, and believes them only from a `member` certificate on a request
//! marked as forwarded ([`acting_grants`]); anyone else's claim is ignored. Owns no route.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use hyper_util::rt::TokioIo;

use super::reply::plain;
use super::Api;
use crate::auth::{Grants, Role};
use crate::proto::MemberInfo;

/// PD's mark on a request a follower sent on (`apiutil.PDRedirectorHeader`).
pub const REDIRECTOR: &str = "PD-Redirector";
/// The roles of the certificate the caller presented to the follower, comma-separated.
pub const CALLER_ROLES: &str = "Meridian-Caller-Roles";

const NO_LEADER: &str = "[PD:apiutil:ErrRedirectNoLeader]redirect finds no leader";
const TO_NOT_LEADER: &str = "[PD:apiutil:ErrRedirectToNotLeader]redirect to not leader";
const REDIRECT_FAILED: &str = "[PD:apiutil:ErrRedirect]redirect failed";

/// PD's wait for a leader: first pause, and the most waited in all.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_WAIT: Duration = Duration::from_secs(3);
/// Reaching the leader (TCP and TLS) takes no longer than this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest body sent on; the routes take far less.
const MAX_BODY: usize = 16 << 20;

/// Headers of one connection, not passed on (RFC 9110 §7.6.1), and `Host`, which is the
/// leader's on the way there.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// How a follower reaches the leader: TLS with this node's certificate as the client's,
/// verifying the leader against the cluster CA.
#[derive(Clone)]
pub struct LeaderProxy {
    tls: tokio_rustls::TlsConnector,
}

impl LeaderProxy {
    pub fn new(mut tls: rustls::ClientConfig) -> LeaderProxy {
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        LeaderProxy {
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
        }
    }
}

/// Where a request PD's redirector would not answer locally goes.
pub enum Route {
    /// This node leads: it answers.
    Here,
    Leader(MemberInfo),
}

/// PD's redirector's choice for a request only the leader answers; `Err` is its refusal.
pub async fn route(api: &Api, headers: &HeaderMap) -> Result<Route, Response> {
    let membership = &api.shared.membership;
    if membership.is_leader() {
        return Ok(Route::Here);
    }
    if headers.contains_key(REDIRECTOR) {
        return Err(plain(StatusCode::INTERNAL_SERVER_ERROR, TO_NOT_LEADER));
    }
    let Some(leader) = wait_for_leader(api).await else {
        return Err(plain(StatusCode::SERVICE_UNAVAILABLE, NO_LEADER));
    };
    if leader.id == membership.me.id {
        return Ok(Route::Here);
    }
    Ok(Route::Leader(leader))
}

async fn wait_for_leader(api: &Api) -> Option<MemberInfo> {
    let mut pause = FIRST_PAUSE;
    let mut waited = Duration::ZERO;
    loop {
        if let Some(leader) = api.shared.membership.leader() {
            return Some(leader);
        }
        if waited >= MAX_WAIT {
            return None;
        }
        let step = pause.min(MAX_WAIT - waited);
        tokio::time::sleep(step).await;
        waited += step;
        pause *= 2;
    }
}

/// The roles a request acts with: its connection's, or, on a request a member forwarded, the
/// roles that member says its caller's certificate carried.
pub fn acting_grants(connection: Grants, headers: &HeaderMap) -> Grants {
    if !connection.has(Role::Member) || !headers.contains_key(REDIRECTOR) {
        return connection;
    }
    let Some(named) = headers.get(CALLER_ROLES).and_then(|v| v.to_str().ok()) else {
        return Grants::NONE;
    };
    let roles: Vec<Role> = named.split(',').filter_map(Role::of_name).collect();
    Grants::of_roles(&roles)
}

fn roles_of(grants: Grants) -> String {
    Role::ALL
        .into_iter()
        .filter(|r| grants.has(*r))
        .map(Role::name)
        .collect::<Vec<_>>()
        .join(",")
}

/// Sends `req` to `leader` for a caller holding `grants`, and answers with what the leader
/// answers.
pub async fn forward(api: &Api, leader: &MemberInfo, req: Request, grants: Grants) -> Response {
    let Some(proxy) = &api.proxy else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, REDIRECT_FAILED);
    };
    match send(proxy, &api.shared.membership.me.name, leader, req, grants).await {
        Ok(answer) => answer,
        Err(why) => {
            tracing::warn!(leader = %leader.grpc_url, "sending an HTTP request to the leader failed: {why:#}");
            plain(StatusCode::INTERNAL_SERVER_ERROR, REDIRECT_FAILED)
        }
    }
}

/// `host:port` of a client URL (`https://host:port`).
fn authority(url: &str) -> anyhow::Result<String> {
    let uri: Uri = url.parse()?;
    uri.authority()
        .map(|a| a.as_str().to_string())
        .ok_or_else(|| anyhow::anyhow!("the leader's client URL {url:?} names no host"))
}

async fn send(
    proxy: &LeaderProxy,
    me: &str,
    leader: &MemberInfo,
    req: Request,
    grants: Grants,
) -> anyhow::Result<Response> {
    let addr = authority(&leader.grpc_url)?;
    let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let name = rustls::pki_types::ServerName::try_from(host)?;

    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY).await?;
    let mut out = axum::http::Request::builder()
        .method(parts.method)
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for (key, value) in &parts.headers {
        let skipped = HOP_BY_HOP.contains(&key.as_str())
            || key.as_str().eq_ignore_ascii_case(CALLER_ROLES)
            || key.as_str().eq_ignore_ascii_case(REDIRECTOR);
        if !skipped {
            out = out.header(key, value);
        }
    }
    let out = out
        .header(header::HOST, addr.as_str())
        .header(REDIRECTOR, HeaderValue::from_str(me)?)
        .header(CALLER_ROLES, roles_of(grants))
        .body(Body::from(body))?;

    let connected = tokio::time::timeout(CONNECT_TIMEOUT, async {
        let tcp = tokio::net::TcpStream::connect(addr.as_str()).await?;
        let tls = proxy.tls.connect(name, tcp).await?;
        anyhow::Ok(tls)
    })
    .await
    .map_err(|_| anyhow::anyhow!("reaching the leader took over {CONNECT_TIMEOUT:?}"))??;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(connected)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("a connection to the leader ended: {e}");
        }
    });
    let answer = sender.send_request(out).await?;
    let (mut parts, body) = answer.into_parts();
    // The length is the body's as sent on here, which the server writes itself.
    parts.headers.remove(header::CONTENT_LENGTH);
    for hop in HOP_BY_HOP {
        parts.headers.remove(HeaderName::from_static(hop));
    }
    parts.version = axum::http::Version::default();
    Ok(Response::from_parts(parts, Body::new(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    /// Only a member's forwarded request acts with the roles it names; anyone else acts with
    /// its own certificate's, whatever it claims.
    #[test]
    fn forwarded_roles_are_believed_only_from_a_member() {
        let member = Grants::of_roles(&[Role::Member]);
        let client = Grants::of_roles(&[Role::Client]);
        let forwarded = headers(&[(REDIRECTOR, "n1"), (CALLER_ROLES, "admin,client")]);
        assert_eq!(
            acting_grants(member, &forwarded),
            Grants::of_roles(&[Role::Admin, Role::Client])
        );
        assert_eq!(acting_grants(client, &forwarded), client);
        assert_eq!(
            acting_grants(member, &headers(&[(CALLER_ROLES, "admin")])),
            member
        );
        assert_eq!(
            acting_grants(member, &headers(&[(REDIRECTOR, "n1")])),
            Grants::NONE
        );
        assert_eq!(
            acting_grants(member, &headers(&[(REDIRECTOR, "n1"), (CALLER_ROLES, "")])),
            Grants::NONE
        );
        // What a follower writes for a caller, read back as the same roles.
        let all = Grants::all();
        let mut h = headers(&[(REDIRECTOR, "n1")]);
        h.insert(CALLER_ROLES, HeaderValue::from_str(&roles_of(all)).unwrap());
        assert_eq!(acting_grants(member, &h), all);
    }

    #[test]
    fn a_client_url_gives_its_authority() {
        assert_eq!(
            authority("https://127.0.0.1:2379").unwrap(),
            "127.0.0.1:2379"
        );
        assert_eq!(authority("https://[::1]:2379/").unwrap(), "[::1]:2379");
        assert!(authority("").is_err());
    }
}
