//! The namespace every etcd call through the client address lives in: keys and range ends
//! are prefixed on the way to etcd and the prefix is stripped from every key that comes back,
//! as etcd's own `client/v3/namespace` (and `grpcproxy --namespace`) do. Lease ids pass through.
//!
//! Owns the key arithmetic and the rewriting of each message that carries a key, nested
//! transactions included. Pure: no I/O, no clock. It must keep one promise: a rewritten
//! request never names a key outside the namespace, so no client reaches Meridian's own keys
//! (`/meridian/`, `meta::Keys`); a key outside it in a response (which etcd never sends for a
//! prefixed request) is dropped, never shown.

use crate::etcdpb::etcdserverpb::{
    request_op, response_op, Compare, DeleteRangeRequest, DeleteRangeResponse,
    LeaseTimeToLiveResponse, PutRequest, PutResponse, RangeRequest, RangeResponse, RequestOp,
    TxnRequest, TxnResponse, WatchCreateRequest, WatchResponse,
};
use crate::etcdpb::mvccpb::KeyValue;

/// The prefix of every key a client writes through Meridian. Beside Meridian's own
/// `/meridian/` but not under it, so neither prefix's range contains the other's keys.
pub const PREFIX: &[u8] = b"/meridian-kv/";

/// A request etcd itself refuses before it looks at a key: an empty key with no range
/// (`ErrGRPCEmptyKey`). Refused here because the prefix would make it a real key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmptyKey;

impl EmptyKey {
    /// etcd's own message for it, which clients match on.
    pub const MESSAGE: &'static str = "etcdserver: key is not provided";
}

/// A key prefix and the first key after all the keys it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    prefix: Vec<u8>,
    end: Vec<u8>,
}

impl Default for Namespace {
    fn default() -> Self {
        Namespace::new(PREFIX)
    }
}

/// The first key after every key starting with `prefix`; `[0]` (etcd's "to the end of the
/// keyspace") when there is none, for a prefix of `0xff` bytes only.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl Namespace {
    pub fn new(prefix: &[u8]) -> Namespace {
        Namespace {
            prefix: prefix.to_vec(),
            end: prefix_end(prefix),
        }
    }

    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// `key` inside the namespace.
    pub fn key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    /// The range `[key, end)` inside the namespace, with etcd's conventions: an empty `end`
    /// is the one key (and stays empty); `"\0"` is every key from `key` on, which inside the
    /// namespace ends where the namespace does.
    pub fn range(&self, key: &[u8], end: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let end = match end {
            [] => Vec::new(),
            [0] => self.end.clone(),
            end => self.key(end),
        };
        (self.key(key), end)
    }

    /// `key` as the client named it, or `None` for a key outside the namespace.
    pub fn strip<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        key.strip_prefix(self.prefix.as_slice())
    }

    /// Strips `kv`'s key in place; false (and `kv` untouched) when it is outside.
    fn strip_kv(&self, kv: &mut KeyValue) -> bool {
        match self.strip(&kv.key) {
            Some(stripped) => {
                kv.key = stripped.to_vec();
                true
            }
            None => false,
        }
    }

    fn strip_kvs(&self, kvs: &mut Vec<KeyValue>) {
        kvs.retain_mut(|kv| self.strip_kv(kv));
    }

    fn strip_prev_kv(&self, prev: &mut Option<KeyValue>) {
        if prev.as_mut().is_some_and(|kv| !self.strip_kv(kv)) {
            *prev = None;
        }
    }

    fn checked_range(&self, key: &mut Vec<u8>, end: &mut Vec<u8>) -> Result<(), EmptyKey> {
        if key.is_empty() && end.is_empty() {
            return Err(EmptyKey);
        }
        (*key, *end) = self.range(key, end);
        Ok(())
    }

    pub fn range_request(&self, r: &mut RangeRequest) -> Result<(), EmptyKey> {
        self.checked_range(&mut r.key, &mut r.range_end)
    }

    pub fn put_request(&self, r: &mut PutRequest) -> Result<(), EmptyKey> {
        if r.key.is_empty() {
            return Err(EmptyKey);
        }
        r.key = self.key(&r.key);
        Ok(())
    }

    pub fn delete_request(&self, r: &mut DeleteRangeRequest) -> Result<(), EmptyKey> {
        self.checked_range(&mut r.key, &mut r.range_end)
    }

    /// A compare's key, and its range end when it has one (etcd 3.3's range compares).
    pub fn compare(&self, c: &mut Compare) {
        (c.key, c.range_end) = self.range(&c.key, &c.range_end);
    }

    /// Every compare and every operation of both branches, nested transactions too.
    pub fn txn_request(&self, r: &mut TxnRequest) -> Result<(), EmptyKey> {
        r.compare.iter_mut().for_each(|c| self.compare(c));
        for op in r.success.iter_mut().chain(r.failure.iter_mut()) {
            self.request_op(op)?;
        }
        Ok(())
    }

    fn request_op(&self, op: &mut RequestOp) -> Result<(), EmptyKey> {
        match &mut op.request {
            Some(request_op::Request::RequestRange(r)) => self.range_request(r),
            Some(request_op::Request::RequestPut(r)) => self.put_request(r),
            Some(request_op::Request::RequestDeleteRange(r)) => self.delete_request(r),
            Some(request_op::Request::RequestTxn(r)) => self.txn_request(r),
            None => Ok(()),
        }
    }

    /// A watch's key and range end. An empty key is left to etcd's own rules: prefixed, it
    /// watches a key no client can write.
    pub fn watch_create(&self, w: &mut WatchCreateRequest) {
        (w.key, w.range_end) = self.range(&w.key, &w.range_end);
    }

    pub fn range_response(&self, r: &mut RangeResponse) {
        self.strip_kvs(&mut r.kvs);
    }

    pub fn put_response(&self, r: &mut PutResponse) {
        self.strip_prev_kv(&mut r.prev_kv);
    }

    pub fn delete_response(&self, r: &mut DeleteRangeResponse) {
        self.strip_kvs(&mut r.prev_kvs);
    }

    pub fn txn_response(&self, r: &mut TxnResponse) {
        for op in &mut r.responses {
            match &mut op.response {
                Some(response_op::Response::ResponseRange(r)) => self.range_response(r),
                Some(response_op::Response::ResponsePut(r)) => self.put_response(r),
                Some(response_op::Response::ResponseDeleteRange(r)) => self.delete_response(r),
                Some(response_op::Response::ResponseTxn(r)) => self.txn_response(r),
                None => {}
            }
        }
    }

    /// Each event's key and previous key; an event outside the namespace is dropped.
    pub fn watch_response(&self, r: &mut WatchResponse) {
        r.events.retain_mut(|event| {
            let inside = event.kv.as_mut().is_some_and(|kv| self.strip_kv(kv));
            self.strip_prev_kv(&mut event.prev_kv);
            inside
        });
    }

    /// The keys attached to a lease, as the client named them; keys outside the namespace
    /// (a lease of Meridian's own carries its keys) are left out.
    pub fn lease_keys(&self, r: &mut LeaseTimeToLiveResponse) {
        r.keys
            .retain_mut(|key| match key.strip_prefix(self.prefix.as_slice()) {
                Some(stripped) => {
                    *key = stripped.to_vec();
                    true
                }
                None => false,
            });
    }

    /// Whether every key in `keys` (as etcd holds them) is inside the namespace.
    pub fn holds_all(&self, keys: &[Vec<u8>]) -> bool {
        keys.iter().all(|k| k.starts_with(&self.prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcdpb::etcdserverpb::ResponseOp;
    use crate::etcdpb::mvccpb::Event;
    use proptest::prelude::*;

    fn ns() -> Namespace {
        Namespace::default()
    }

    fn kv(key: &[u8]) -> KeyValue {
        KeyValue {
            key: key.to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        }
    }

    /// What etcd reads `[key, end)` as: one key, everything from `key` on, or a range.
    fn covers(key: &[u8], end: &[u8], x: &[u8]) -> bool {
        match end {
            [] => x == key,
            [0] => x >= key,
            end => key <= x && x < end,
        }
    }

    #[test]
    fn the_namespace_is_beside_meridians_keys_not_around_them() {
        let ns = ns();
        assert_eq!(ns.end, b"/meridian-kv0");
        for own in [
            &b"/meridian/cluster_id"[..],
            b"/meridian/7/members/n0/info",
            b"/meridian",
        ] {
            assert!(ns.strip(own).is_none());
            assert!(!covers(&ns.prefix, &ns.end, own));
        }
    }

    #[test]
    fn ranges_follow_etcds_conventions() {
        let ns = ns();
        // One key.
        assert_eq!(ns.range(b"a", b""), (b"/meridian-kv/a".to_vec(), vec![]));
        // A prefix: "a".."b".
        assert_eq!(
            ns.range(b"a", b"b"),
            (b"/meridian-kv/a".to_vec(), b"/meridian-kv/b".to_vec())
        );
        // From a key on, and every key ("\0".."\0", what `get "" --from-key` sends).
        assert_eq!(
            ns.range(b"a", b"\0"),
            (b"/meridian-kv/a".to_vec(), b"/meridian-kv0".to_vec())
        );
        assert_eq!(
            ns.range(b"\0", b"\0"),
            (b"/meridian-kv/\0".to_vec(), b"/meridian-kv0".to_vec())
        );
        // A longer end that starts with a zero byte is an ordinary end.
        assert_eq!(ns.range(b"", b"\0\0").1, b"/meridian-kv/\0\0");
        // A prefix of 0xff bytes has no end of its own: etcd's "\0", as in etcd's client.
        assert_eq!(Namespace::new(b"\xff\xff").range(b"a", b"\0").1, vec![0]);
    }

    #[test]
    fn empty_keys_are_refused_as_etcd_refuses_them() {
        let ns = ns();
        let mut get = RangeRequest::default();
        assert_eq!(ns.range_request(&mut get), Err(EmptyKey));
        let mut put = PutRequest::default();
        assert_eq!(ns.put_request(&mut put), Err(EmptyKey));
        let mut del = DeleteRangeRequest::default();
        assert_eq!(ns.delete_request(&mut del), Err(EmptyKey));
        // With a range end, an empty key is the start of the namespace.
        let mut all = RangeRequest {
            range_end: vec![0],
            ..Default::default()
        };
        ns.range_request(&mut all).unwrap();
        assert_eq!(
            (all.key.as_slice(), all.range_end.as_slice()),
            (&b"/meridian-kv/"[..], &b"/meridian-kv0"[..])
        );
        // Inside a transaction too, however deep.
        let mut txn = TxnRequest {
            failure: vec![RequestOp {
                request: Some(request_op::Request::RequestTxn(TxnRequest {
                    success: vec![RequestOp {
                        request: Some(request_op::Request::RequestPut(PutRequest::default())),
                    }],
                    ..Default::default()
                })),
            }],
            ..Default::default()
        };
        assert_eq!(ns.txn_request(&mut txn), Err(EmptyKey));
    }

    #[test]
    fn transactions_are_rewritten_at_every_depth() {
        let ns = ns();
        let get = |key: &[u8], end: &[u8]| RequestOp {
            request: Some(request_op::Request::RequestRange(RangeRequest {
                key: key.to_vec(),
                range_end: end.to_vec(),
                ..Default::default()
            })),
        };
        let mut txn = TxnRequest {
            compare: vec![
                Compare {
                    key: b"k".to_vec(),
                    ..Default::default()
                },
                Compare {
                    key: b"a".to_vec(),
                    range_end: b"\0".to_vec(),
                    ..Default::default()
                },
            ],
            success: vec![
                RequestOp {
                    request: Some(request_op::Request::RequestPut(PutRequest {
                        key: b"k".to_vec(),
                        lease: 42,
                        ..Default::default()
                    })),
                },
                RequestOp {
                    request: Some(request_op::Request::RequestTxn(TxnRequest {
                        compare: vec![Compare {
                            key: b"n".to_vec(),
                            ..Default::default()
                        }],
                        success: vec![get(b"n", b"")],
                        failure: vec![RequestOp {
                            request: Some(request_op::Request::RequestDeleteRange(
                                DeleteRangeRequest {
                                    key: b"d".to_vec(),
                                    range_end: b"e".to_vec(),
                                    ..Default::default()
                                },
                            )),
                        }],
                    })),
                },
            ],
            failure: vec![get(b"f", b"\0")],
        };
        ns.txn_request(&mut txn).unwrap();
        assert_eq!(txn.compare[0].key, b"/meridian-kv/k");
        assert!(txn.compare[0].range_end.is_empty());
        assert_eq!(txn.compare[1].range_end, b"/meridian-kv0");
        let Some(request_op::Request::RequestPut(put)) = &txn.success[0].request else {
            panic!("a put")
        };
        assert_eq!(
            (put.key.as_slice(), put.lease),
            (&b"/meridian-kv/k"[..], 42)
        );
        let Some(request_op::Request::RequestTxn(inner)) = &txn.success[1].request else {
            panic!("a txn")
        };
        assert_eq!(inner.compare[0].key, b"/meridian-kv/n");
        assert_eq!(inner.success[0], get(b"/meridian-kv/n", b""));
        let Some(request_op::Request::RequestDeleteRange(del)) = &inner.failure[0].request else {
            panic!("a delete")
        };
        assert_eq!(
            (del.key.as_slice(), del.range_end.as_slice()),
            (&b"/meridian-kv/d"[..], &b"/meridian-kv/e"[..])
        );
        assert_eq!(txn.failure[0], get(b"/meridian-kv/f", b"/meridian-kv0"));
    }

    #[test]
    fn responses_are_stripped_and_outsiders_dropped() {
        let ns = ns();
        let mut txn = TxnResponse {
            responses: vec![
                ResponseOp {
                    response: Some(response_op::Response::ResponseRange(RangeResponse {
                        kvs: vec![kv(b"/meridian-kv/a"), kv(b"/meridian/secret")],
                        ..Default::default()
                    })),
                },
                ResponseOp {
                    response: Some(response_op::Response::ResponseTxn(TxnResponse {
                        responses: vec![ResponseOp {
                            response: Some(response_op::Response::ResponsePut(PutResponse {
                                prev_kv: Some(kv(b"/meridian-kv/p")),
                                ..Default::default()
                            })),
                        }],
                        ..Default::default()
                    })),
                },
                ResponseOp {
                    response: Some(response_op::Response::ResponseDeleteRange(
                        DeleteRangeResponse {
                            prev_kvs: vec![kv(b"/meridian-kv/d")],
                            ..Default::default()
                        },
                    )),
                },
            ],
            ..Default::default()
        };
        ns.txn_response(&mut txn);
        let Some(response_op::Response::ResponseRange(range)) = &txn.responses[0].response else {
            panic!("a range")
        };
        assert_eq!(range.kvs, vec![kv(b"a")]);
        let Some(response_op::Response::ResponseTxn(inner)) = &txn.responses[1].response else {
            panic!("a txn")
        };
        let Some(response_op::Response::ResponsePut(put)) = &inner.responses[0].response else {
            panic!("a put")
        };
        assert_eq!(put.prev_kv, Some(kv(b"p")));
        let Some(response_op::Response::ResponseDeleteRange(del)) = &txn.responses[2].response
        else {
            panic!("a delete")
        };
        assert_eq!(del.prev_kvs, vec![kv(b"d")]);

        let mut watch = WatchResponse {
            events: vec![
                Event {
                    kv: Some(kv(b"/meridian-kv/w")),
                    prev_kv: Some(kv(b"/meridian-kv/w")),
                    ..Default::default()
                },
                Event {
                    kv: Some(kv(b"/meridian/leader")),
                    ..Default::default()
                },
                Event::default(),
            ],
            ..Default::default()
        };
        ns.watch_response(&mut watch);
        assert_eq!(watch.events.len(), 1);
        assert_eq!(watch.events[0].kv, Some(kv(b"w")));
        assert_eq!(watch.events[0].prev_kv, Some(kv(b"w")));

        let mut ttl = LeaseTimeToLiveResponse {
            keys: vec![b"/meridian-kv/s".to_vec(), b"/meridian/7/leader".to_vec()],
            ..Default::default()
        };
        assert!(!ns.holds_all(&ttl.keys));
        ns.lease_keys(&mut ttl);
        assert_eq!(ttl.keys, vec![b"s".to_vec()]);
        assert!(ns.holds_all(&[b"/meridian-kv/s".to_vec()]) && ns.holds_all(&[]));
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 0..6)
    }

    /// Keys around the namespace's edges as well as anywhere: Meridian's own, the bytes
    /// just before and after the prefix, and arbitrary ones.
    fn any_key() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            bytes(),
            bytes().prop_map(|k| [b"/meridian/".as_slice(), &k].concat()),
            bytes().prop_map(|k| [b"/meridian-kv".as_slice(), &k].concat()),
            bytes().prop_map(|k| [b"/meridian-kv0".as_slice(), &k].concat()),
            bytes().prop_map(|k| [b"/meridian-kv.".as_slice(), &k].concat()),
            bytes().prop_map(|k| [PREFIX, &k].concat()),
        ]
    }

    fn any_end() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![Just(vec![]), Just(vec![0]), bytes(), any_key()]
    }

    proptest! {
        #[test]
        fn prefix_then_strip_is_identity(key in any_key()) {
            let ns = ns();
            let inside = ns.key(&key);
            prop_assert_eq!(ns.strip(&inside), Some(key.as_slice()));
            let mut kv = kv(&inside);
            prop_assert!(ns.strip_kv(&mut kv));
            prop_assert_eq!(kv.key, key);
        }

        #[test]
        fn a_prefixed_range_covers_nothing_outside_the_namespace(
            key in any_key(),
            end in any_end(),
            x in any_key(),
        ) {
            let ns = ns();
            let (k, e) = ns.range(&key, &end);
            // Never etcd's "to the end of the keyspace".
            prop_assert_ne!(e.as_slice(), &[0u8][..]);
            if covers(&k, &e, &x) {
                prop_assert!(ns.strip(&x).is_some(), "{:?}..{:?} covers {:?}", k, e, x);
            }
            // And within the namespace it is the range the client asked for.
            let inside = ns.key(&x);
            prop_assert_eq!(covers(&k, &e, &inside), covers(&key, &end, &x));
        }
    }
}
