//! The `member_record` target: the member records read back from etcd.

use crate::election::{check_member_urls, decode_member, encode_member, read_member};

/// A member record read back from etcd (the leader key, the member registry): it decodes to a
/// member that re-encodes to itself, and `read_member` accepts exactly the decoded members
/// whose addresses parse.
pub fn member_record(data: &[u8]) {
    let decoded = decode_member(data);
    if let Some(m) = &decoded {
        assert_eq!(decode_member(&encode_member(m)).as_ref(), Some(m));
    }
    match read_member(b"/meridian/fuzz/members/m/info", data) {
        Ok(m) => {
            assert_eq!(Some(&m), decoded.as_ref());
            assert_eq!(check_member_urls(&m), Ok(()));
        }
        Err(_) => {
            if let Some(m) = &decoded {
                assert!(check_member_urls(m).is_err(), "{m:?} refused");
            }
        }
    }
}
