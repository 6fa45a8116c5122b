//! Watches: the event history a watch may start from, the watchers of each watch stream, and
//! the responses queued for the streams, as etcd's `v3rpc/watch.go` and watchable store
//! produce them. A watch stream is only an id here; delivering its queued responses is the
//! caller's business.

use std::collections::{BTreeMap, VecDeque};

use super::key_range::KeyRange;
use super::{Config, Etcd};
use crate::mvccpb::event::EventType;
use crate::mvccpb::Event;
use crate::pb::watch_create_request::FilterType;
use crate::pb::watch_request::RequestUnion;
use crate::pb::{ResponseHeader, WatchCreateRequest, WatchRequest, WatchResponse};

/// Names one watch stream (one `Watch` call) among those open.
pub type StreamId = u64;

/// etcd's id for a response that belongs to no watcher.
const NO_WATCH: i64 = -1;

/// etcd's mvcc messages for refused watches, sent as a cancel reason.
const WATCH_RANGE_EMPTY: &str = "mvcc: watcher range is empty";
const WATCH_DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";
const WATCH_COMPACTED: &str = "mvcc: required revision has been compacted";

#[derive(Debug, Clone)]
struct Watcher {
    range: KeyRange,
    /// The first revision whose events it has not been sent.
    next_revision: i64,
    no_put: bool,
    no_delete: bool,
    prev_kv: bool,
}

impl Watcher {
    /// The events of `events` it wants, shaped as it asked.
    fn select<'a>(&self, events: impl Iterator<Item = &'a Event>) -> Vec<Event> {
        events
            .filter(|e| {
                let key_in = e.kv.as_ref().is_some_and(|kv| self.range.contains(&kv.key));
                let wanted = if e.r#type == EventType::Delete as i32 {
                    !self.no_delete
                } else {
                    !self.no_put
                };
                key_in && wanted
            })
            .map(|e| {
                let mut e = e.clone();
                if !self.prev_kv {
                    e.prev_kv = None;
                }
                e
            })
            .collect()
    }
}

#[derive(Debug, Default, Clone)]
struct Stream {
    watchers: BTreeMap<i64, Watcher>,
    next_id: i64,
}

/// Every open watch stream, the history, and what is waiting to be sent.
#[derive(Debug, Default)]
pub(super) struct Watchers {
    streams: BTreeMap<StreamId, Stream>,
    next_stream: StreamId,
    /// Every event since the last compaction, each with its revision, oldest first. Events
    /// keep their previous key-value for watchers that ask for it.
    history: Vec<(i64, Event)>,
    outbox: VecDeque<(StreamId, WatchResponse)>,
}

fn header(config: &Config, revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        cluster_id: config.cluster_id,
        member_id: config.member_id,
        revision,
        raft_term: config.raft_term,
    })
}

impl Watchers {
    /// Records the events of one revision and queues them for each watcher that wants them.
    pub(super) fn publish(&mut self, revision: i64, events: Vec<Event>, config: &Config) {
        for (id, stream) in &mut self.streams {
            for (watch_id, watcher) in &mut stream.watchers {
                if watcher.next_revision > revision {
                    continue;
                }
                watcher.next_revision = revision + 1;
                let selected = watcher.select(events.iter());
                if !selected.is_empty() {
                    self.outbox.push_back((
                        *id,
                        WatchResponse {
                            header: header(config, revision),
                            watch_id: *watch_id,
                            events: selected,
                            ..Default::default()
                        },
                    ));
                }
            }
        }
        self.history
            .extend(events.into_iter().map(|event| (revision, event)));
    }

    /// Forgets the history below `revision`, and the deletions at it (etcd's compaction drops
    /// those tombstones, so a watch from `revision` does not see them).
    pub(super) fn compact(&mut self, revision: i64) {
        self.history.retain(|(r, e)| {
            *r > revision || (*r == revision && e.r#type != EventType::Delete as i32)
        });
    }
}

impl Etcd {
    /// Opens a watch stream; its responses are queued under the id returned.
    pub fn open_watch_stream(&mut self) -> StreamId {
        let id = self.watch.next_stream;
        self.watch.next_stream += 1;
        self.watch.streams.insert(id, Stream::default());
        id
    }

    /// Closes a watch stream: its watchers stop, and nothing more is queued for it.
    pub fn close_watch_stream(&mut self, stream: StreamId) {
        self.watch.streams.remove(&stream);
        self.watch.outbox.retain(|(s, _)| *s != stream);
    }

    /// The watch responses queued since the last call, in the order they were made, each
    /// with the stream it belongs to.
    pub fn take_watch_responses(&mut self) -> Vec<(StreamId, WatchResponse)> {
        self.watch.outbox.drain(..).collect()
    }

    /// One message a client sent on watch stream `stream`: create, cancel or progress.
    pub fn watch_request(&mut self, stream: StreamId, r: &WatchRequest, now_ms: u64) {
        self.advance(now_ms);
        if !self.watch.streams.contains_key(&stream) {
            return;
        }
        match &r.request_union {
            Some(RequestUnion::CreateRequest(create)) => self.watch_create(stream, create),
            Some(RequestUnion::CancelRequest(cancel)) => {
                let removed = self
                    .watch
                    .streams
                    .get_mut(&stream)
                    .and_then(|s| s.watchers.remove(&cancel.watch_id));
                if removed.is_some() {
                    self.queue(
                        stream,
                        WatchResponse {
                            watch_id: cancel.watch_id,
                            canceled: true,
                            ..Default::default()
                        },
                    );
                }
            }
            Some(RequestUnion::ProgressRequest(_)) => self.queue(
                stream,
                WatchResponse {
                    watch_id: NO_WATCH,
                    ..Default::default()
                },
            ),
            None => {}
        }
    }

    /// Queues `response` with the current revision in its header.
    fn queue(&mut self, stream: StreamId, mut response: WatchResponse) {
        response.header = header(&self.config, self.revision);
        self.watch.outbox.push_back((stream, response));
    }

    fn refuse_watch(&mut self, stream: StreamId, reason: &str) {
        self.queue(
            stream,
            WatchResponse {
                watch_id: NO_WATCH,
                created: true,
                canceled: true,
                cancel_reason: reason.to_string(),
                ..Default::default()
            },
        );
    }

    fn watch_create(&mut self, stream: StreamId, c: &WatchCreateRequest) {
        if c.start_revision < 0 {
            return self.refuse_watch(stream, WATCH_COMPACTED);
        }
        // An empty key is the smallest key, so "" with range end "\0" watches everything.
        let key: &[u8] = if c.key.is_empty() { &[0] } else { &c.key };
        let range = KeyRange::new(key, &c.range_end);
        if matches!(&range, KeyRange::Span { end: Some(_), .. }) && range.bounds().is_none() {
            return self.refuse_watch(stream, WATCH_RANGE_EMPTY);
        }
        let Some(state) = self.watch.streams.get_mut(&stream) else {
            return;
        };
        let id = if c.watch_id != 0 {
            if state.watchers.contains_key(&c.watch_id) {
                return self.refuse_watch(stream, WATCH_DUPLICATE_ID);
            }
            c.watch_id
        } else {
            while state.watchers.contains_key(&state.next_id) {
                state.next_id += 1;
            }
            state.next_id += 1;
            state.next_id - 1
        };
        let start = if c.start_revision == 0 {
            self.revision + 1
        } else {
            c.start_revision
        };
        let mut watcher = Watcher {
            range,
            next_revision: start.max(self.revision + 1),
            no_put: c.filters.contains(&(FilterType::Noput as i32)),
            no_delete: c.filters.contains(&(FilterType::Nodelete as i32)),
            prev_kv: c.prev_kv,
        };
        self.queue(
            stream,
            WatchResponse {
                watch_id: id,
                created: true,
                ..Default::default()
            },
        );
        if start < self.compacted {
            return self.queue(
                stream,
                WatchResponse {
                    watch_id: id,
                    canceled: true,
                    compact_revision: self.compacted,
                    ..Default::default()
                },
            );
        }
        // A start in the past: everything since, in one response, as etcd's catch-up sends.
        if start <= self.revision {
            let past = watcher.select(
                self.watch
                    .history
                    .iter()
                    .filter(|(r, _)| *r >= start)
                    .map(|(_, e)| e),
            );
            if !past.is_empty() {
                self.queue(
                    stream,
                    WatchResponse {
                        watch_id: id,
                        events: past,
                        ..Default::default()
                    },
                );
            }
        }
        watcher.next_revision = watcher.next_revision.max(self.revision + 1);
        if let Some(state) = self.watch.streams.get_mut(&stream) {
            state.watchers.insert(id, watcher);
        }
    }
}
