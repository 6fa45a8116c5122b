//! A batch of requests served together, answered in order: what one QUIC read brought, or
//! what one gRPC stream message asks for. Two kinds gain from company and are served
//! together while placement serves a bootstrapped cluster: region heartbeats (fanned out by
//! owning core, `placement::heartbeats`) and GetRegion lookups (from one snapshot,
//! `placement::locate_many`). GetRegion lookups a follower may answer are served together
//! on any member (`placement::locate_many_from_copy`: a follower's copy while it is in sync).
//! Everything else goes through [`execute`] one by one, as does every request while placement
//! cannot serve, so that each reply says why.

use crate::admin::{CoreMetrics, RequestKind};
use crate::proto::{ErrorReply, Response};
use crate::server::placement::{self, PlacementOp, RouteOp};
use crate::server::Shared;

use super::{execute, Op};

/// A request on its way to a reply. Two words: the two kinds served together are the many,
/// the boxed rest the few, and a batch's list is written and read once per request.
enum Pending {
    /// Refused by the front end (malformed, not permitted): answered as it is.
    Now(Box<Response>),
    Later(Box<Op>),
    /// The next of the batch's heartbeat replies.
    Beat,
    /// The next of the batch's lookups; `true` for one a follower may answer.
    Located(bool),
}

/// Where a batch's replies go, in request order: a list (the gRPC adapters read them
/// afterwards), or straight into a stream's encoder, so that a reply is never copied into a
/// list only to be read back and encoded.
pub trait Replies {
    fn reply(&mut self, response: Response);
}

impl Replies for Vec<Response> {
    fn reply(&mut self, response: Response) {
        self.push(response);
    }
}

/// Room a caller keeps between batches so that a stream's reads reuse it: a read of a few
/// hundred heartbeats needs tens of KiB of `Pending` and of heartbeat replies, past the
/// allocator's small classes (14 KiB), whose pages, freed read after read, go back to the
/// kernel with a TLB flush on every core: that cost a fifth of the heartbeat rate.
#[derive(Default)]
pub struct BatchRoom {
    pending: Vec<Pending>,
    beat_replies: Vec<Response>,
}

/// Where the batch's lookups are answered from.
enum Lookups {
    /// A snapshot is taken at the next lookup.
    Fresh,
    /// Answers for the lookups from here on, from one snapshot (of a follower's copy when
    /// the flag is set).
    From(std::vec::IntoIter<Option<crate::placement::Region>>, bool),
    /// The snapshot was refused (a key over the limit, placement stopped): each lookup is
    /// answered alone, which says why.
    Alone,
}

/// Serves what `batch` holds, in order, handing the replies to `out` (these and `room` are
/// the caller's, so a stream reuses their room read after read). `Err` items are the front end's refusals,
/// answered as they are. `core` is the calling core (its own shard's heartbeats are handled
/// inline), `None` from a thread that is no core.
pub async fn execute_batch(
    batch: &mut Vec<Result<Op, ErrorReply>>,
    out: &mut (impl Replies + Send),
    room: &mut BatchRoom,
    shared: &Shared,
    core: Option<usize>,
    metrics: &CoreMetrics,
) {
    let together = shared.placement.serves_bootstrapped();
    if !batch.iter().any(|item| groups(item, together)) {
        // Nothing to serve together (a read of timestamps, say): one by one, in order.
        for item in batch.drain(..) {
            out.reply(match item {
                Err(reply) => {
                    metrics.error(&reply);
                    Response::Err(reply)
                }
                Ok(op) => execute(op, shared, metrics).await,
            });
        }
        return;
    }
    let mut beats = Vec::new();
    let mut keys = Vec::new();
    let BatchRoom {
        pending,
        beat_replies,
    } = room;
    pending.clear();
    beat_replies.clear();
    pending.reserve(batch.len());
    for item in batch.drain(..) {
        pending.push(match item {
            Err(reply) => {
                metrics.error(&reply);
                Pending::Now(Box::new(Response::Err(reply)))
            }
            Ok(Op::Placement(PlacementOp::Heartbeat(region, stats))) if together => {
                metrics.request(RequestKind::RegionHeartbeat);
                beats.push((region, stats));
                Pending::Beat
            }
            Ok(Op::Placement(PlacementOp::Routing(RouteOp::Region(key)))) if together => {
                metrics.request(RequestKind::Placement);
                keys.push(key);
                Pending::Located(false)
            }
            // On the leader the same lookup as any; on a follower, from its copy.
            Ok(Op::FollowerRead(RouteOp::Region(key))) => {
                metrics.request(RequestKind::Placement);
                keys.push(key);
                Pending::Located(true)
            }
            Ok(op) => Pending::Later(Box::new(op)),
        });
    }
    // The heartbeats are handed to the shards together (their own shard inline, the others
    // forwarded in one batch per core); replies still go out in request order.
    if !beats.is_empty() {
        placement::heartbeats(&shared.placement, core, beats, beat_replies).await;
    }
    let mut beat_replies = beat_replies.drain(..);
    // Lookups are answered from one snapshot, taken at the first of them and again after any
    // other request ran (it may have changed a route: a lookup sees every request before it
    // in its batch).
    let mut lookups = Lookups::Fresh;
    let mut next_key = 0;
    for p in pending.drain(..) {
        let response = match p {
            Pending::Now(r) => *r,
            Pending::Later(op) => {
                lookups = Lookups::Fresh;
                execute(*op, shared, metrics).await
            }
            Pending::Beat => {
                let r = beat_replies.next().unwrap_or_else(|| {
                    Response::Err(ErrorReply::Unavailable("shutting down".into()))
                });
                if let Response::Err(e) = &r {
                    metrics.error(e);
                }
                r
            }
            Pending::Located(from_copy) => {
                // A snapshot serves the lookups of its own kind; one of the other kind (a
                // batch that mixes them) takes a snapshot of its own.
                if matches!(lookups, Lookups::From(_, copy) if copy != from_copy) {
                    lookups = Lookups::Fresh;
                }
                if let Lookups::Fresh = lookups {
                    let rest = &keys[next_key..];
                    let found = if from_copy {
                        placement::locate_many_from_copy(shared, rest)
                    } else {
                        placement::locate_many(shared, rest)
                    };
                    lookups = match found {
                        Ok(found) => Lookups::From(found.into_iter(), from_copy),
                        Err(_) => Lookups::Alone,
                    };
                }
                let key = std::mem::take(&mut keys[next_key]);
                next_key += 1;
                match &mut lookups {
                    Lookups::From(found, _) => match found.next() {
                        Some(region) => Response::Ok(crate::proto::Reply::Region(region)),
                        None => Response::Err(ErrorReply::Internal("a lookup went missing".into())),
                    },
                    Lookups::Fresh | Lookups::Alone => {
                        let r = if from_copy {
                            placement::follower_read(RouteOp::Region(key), shared).await
                        } else {
                            let op = PlacementOp::Routing(RouteOp::Region(key));
                            placement::handle(op, shared).await
                        };
                        if let Response::Err(e) = &r {
                            metrics.error(e);
                        }
                        r
                    }
                }
            }
        };
        out.reply(response);
    }
}

/// GetRegion lookups a follower may answer (PD's follower handle), from one snapshot of this
/// member's index: the leader's, or a follower's copy while it is in sync. Each counts as a
/// placement request, as in a batch.
pub fn locate_many_from_copy(
    shared: &Shared,
    keys: &[Vec<u8>],
    metrics: &CoreMetrics,
) -> Result<Vec<Option<crate::placement::Region>>, ErrorReply> {
    for _ in keys {
        metrics.request(RequestKind::Placement);
    }
    let found = placement::locate_many_from_copy(shared, keys);
    if let Err(e) = &found {
        metrics.error(e);
    }
    found
}

/// Whether an item is one of the kinds served together: heartbeats and lookups where
/// placement serves (`together`), lookups a follower may answer anywhere.
fn groups(item: &Result<Op, ErrorReply>, together: bool) -> bool {
    match item {
        Ok(Op::Placement(
            PlacementOp::Heartbeat(..) | PlacementOp::Routing(RouteOp::Region(_)),
        )) => together,
        Ok(Op::FollowerRead(RouteOp::Region(_))) => true,
        _ => false,
    }
}
