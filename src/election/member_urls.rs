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

/// `host:port` with a non-empty host and a non-zero port, and nothing else (no user info).
fn check_authority(authority: &Authority) -> Result<(), String> {
    if authority.as_str().contains('@') {
        return Err("user info in the address".into());
    }
    if authority.host().is_empty() {
        return Err("no host".into());
    }
    match authority.port_u16() {
        None => Err("no port".into()),
        Some(0) => Err("port 0".into()),
        Some(_) => Ok(()),
    }
}

/// `host:port`: how `client_url` is written (QUIC has no URL scheme).
pub fn check_host_port(address: &str) -> Result<(), String> {
    let authority: Authority = address.parse().map_err(|e| format!("not host:port: {e}"))?;
    check_authority(&authority)
}

/// `http://host:port` or `https://host:port`, with no path beyond `/` and no query.
pub fn check_http_url(url: &str) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(format!("scheme {other}, not http or https")),
        None => return Err("no http:// or https:// scheme".into()),
    }
    let authority = uri.authority().ok_or("no host")?;
    check_authority(authority)?;
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err("a path or query after host:port".into());
    }
    Ok(())
}

/// Each address of `m` parses; the error names the field. `grpc_url` may be empty (gRPC off,
/// or a member from before the gRPC front end).
pub fn check_member_urls(m: &MemberInfo) -> Result<(), (&'static str, String)> {
    let field = |name: &'static str, url: &str, r: Result<(), String>| {
        r.map_err(|why| (name, format!("{url:?}: {why}")))
    };
    field("client_url", &m.client_url, check_host_port(&m.client_url))?;
    field("admin_url", &m.admin_url, check_http_url(&m.admin_url))?;
    if !m.grpc_url.is_empty() {
        field("grpc_url", &m.grpc_url, check_http_url(&m.grpc_url))?;
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
    check_member_urls(&m).map_err(|(field, why)| {
        MetaError::out_of_range(key, format!("member {} with a bad {field}", m.name), why)
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
                check_member_urls(&m).map_err(|(f, _)| f),
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
