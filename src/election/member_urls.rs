//! Whether the addresses in a member record read back from etcd can be used. Clients are sent
//! to the leader's `client_url` and members probe each other's `admin_url`, so a record whose
//! addresses do not parse (a corrupt value, a hand edit) is refused with an error naming its
//! key rather than handed on. Pure: the caller reads the record and decides what a refusal
//! means (the leader counts as unknown; a registry entry is skipped).

use hyper::http::uri::Authority;
use hyper::Uri;

use super::campaign::decode_member;
use crate::meta::MetaError;
use crate::proto::MemberInfo;

/// What is wrong with an address read from a member record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("user info in the address")]
    UserInfo,
    #[error("no host")]
    NoHost,
    #[error("no port")]
    NoPort,
    #[error("port 0")]
    PortZero,
    /// The parser's reason.
    #[error("not host:port: {0}")]
    NotHostPort(String),
    /// The parser's reason.
    #[error("not a URL: {0}")]
    NotUrl(String),
    #[error("scheme {0}, not http or https")]
    Scheme(String),
    #[error("no http:// or https:// scheme")]
    NoScheme,
    #[error("a path or query after host:port")]
    PathOrQuery,
}

/// A member record's address that does not parse, and which field holds it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {url:?}: {why}")]
pub struct BadMemberUrl {
    pub field: &'static str,
    pub url: String,
    pub why: AddressError,
}

/// `host:port` with a non-empty host and a non-zero port, and nothing else (no user info).
fn check_authority(authority: &Authority) -> Result<(), AddressError> {
    if authority.as_str().contains('@') {
        return Err(AddressError::UserInfo);
    }
    if authority.host().is_empty() {
        return Err(AddressError::NoHost);
    }
    match authority.port_u16() {
        None => Err(AddressError::NoPort),
        Some(0) => Err(AddressError::PortZero),
        Some(_) => Ok(()),
    }
}

/// `host:port`: how `client_url` is written (QUIC has no URL scheme).
pub fn check_host_port(address: &str) -> Result<(), AddressError> {
    let authority = address
        .parse::<Authority>()
        .map_err(|e| AddressError::NotHostPort(e.to_string()))?;
    check_authority(&authority)
}

/// `http://host:port` or `https://host:port`, with no path beyond `/` and no query.
pub fn check_http_url(url: &str) -> Result<(), AddressError> {
    let uri = url
        .parse::<Uri>()
        .map_err(|e| AddressError::NotUrl(e.to_string()))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(AddressError::Scheme(other.to_string())),
        None => return Err(AddressError::NoScheme),
    }
    let authority = uri.authority().ok_or(AddressError::NoHost)?;
    check_authority(authority)?;
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(AddressError::PathOrQuery);
    }
    Ok(())
}

/// Each address of `m` parses; the error names the field. `grpc_url` may be empty (gRPC off,
/// or a member from before the gRPC front end).
pub fn check_member_urls(m: &MemberInfo) -> Result<(), BadMemberUrl> {
    let field = |field: &'static str, url: &str, check: fn(&str) -> Result<(), AddressError>| {
        check(url).map_err(|why| BadMemberUrl {
            field,
            url: url.to_string(),
            why,
        })
    };
    field("client_url", &m.client_url, check_host_port)?;
    field("admin_url", &m.admin_url, check_http_url)?;
    if !m.grpc_url.is_empty() {
        field("grpc_url", &m.grpc_url, check_http_url)?;
    }
    Ok(())
}

/// The member record `bytes` read at `key`, if it decodes and every address in it parses.
pub fn read_member(key: &[u8], bytes: &[u8]) -> Result<MemberInfo, MetaError> {
    let m = decode_member(bytes).ok_or_else(|| {
        MetaError::Corrupt(format!(
            "{} is not a member record",
            String::from_utf8_lossy(key)
        ))
    })?;
    check_member_urls(&m).map_err(|e| {
        MetaError::out_of_range(
            key,
            format!("member {} with a bad {}", m.name, e.field),
            format!("{:?}: {}", e.url, e.why),
        )
    })?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::election::encode_member;
    use proptest::prelude::*;

    fn member(client_url: &str, admin_url: &str, grpc_url: &str) -> MemberInfo {
        MemberInfo {
            name: "m".into(),
            id: 1,
            client_url: client_url.into(),
            admin_url: admin_url.into(),
            grpc_url: grpc_url.into(),
        }
    }

    #[test]
    fn what_a_node_publishes_is_accepted() {
        for m in [
            member("127.0.0.1:2379", "https://127.0.0.1:2380", ""),
            member(
                "meridian-0.meridian.ns.svc:2379",
                "https://meridian-0.meridian.ns.svc:2380",
                "https://meridian-0.meridian.ns.svc:2379",
            ),
            member("[::1]:2379", "http://[::1]:2380/", "https://[::1]:2379"),
        ] {
            assert_eq!(check_member_urls(&m), Ok(()), "{m:?}");
            assert_eq!(read_member(b"/k", &encode_member(&m)), Ok(m));
        }
    }

    #[test]
    fn bad_addresses_are_refused_naming_the_field_and_the_key() {
        for (m, field) in [
            (member("", "https://h:1", ""), "client_url"),
            (member("host", "https://h:1", ""), "client_url"),
            (member("host:0", "https://h:1", ""), "client_url"),
            (member("host:99999", "https://h:1", ""), "client_url"),
            (member("https://h:1", "https://h:1", ""), "client_url"),
            (member("u@h:1", "https://h:1", ""), "client_url"),
            (member("h:1", "", ""), "admin_url"),
            (member("h:1", "h:1", ""), "admin_url"),
            (member("h:1", "ftp://h:1", ""), "admin_url"),
            (member("h:1", "https://h", ""), "admin_url"),
            (member("h:1", "https://h:1/x", ""), "admin_url"),
            (member("h:1", "https://h:1?q", ""), "admin_url"),
            (member("h:1", "https://h:1", "not a url"), "grpc_url"),
        ] {
            assert_eq!(
                check_member_urls(&m).map_err(|e| e.field),
                Err(field),
                "{m:?}"
            );
            let e = read_member(b"/meridian/1/members/m/info", &encode_member(&m)).unwrap_err();
            assert!(matches!(e, MetaError::OutOfRange { .. }), "{e}");
            let shown = e.to_string();
            assert!(
                shown.contains("/meridian/1/members/m/info") && shown.contains(field),
                "{shown}"
            );
        }
        let e = read_member(b"/meridian/1/leader", b"garbage").unwrap_err();
        assert!(
            matches!(e, MetaError::Corrupt(ref s) if s.contains("/meridian/1/leader")),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn host_and_port_round_trip(host in "[a-z][a-z0-9-]{0,20}(\\.[a-z][a-z0-9-]{0,10}){0,3}", port in 1u16..) {
            let m = member(
                &format!("{host}:{port}"),
                &format!("https://{host}:{port}"),
                &format!("http://{host}:{port}"),
            );
            prop_assert_eq!(check_member_urls(&m), Ok(()));
        }

        /// Whatever is stored, reading it returns (a member or an error) and never panics.
        #[test]
        fn arbitrary_records_never_panic(client in ".{0,40}", admin in ".{0,40}", grpc in ".{0,40}") {
            let m = member(&client, &admin, &grpc);
            let _ = read_member(b"/k", &encode_member(&m));
        }
    }
}
