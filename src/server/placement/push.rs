//! Operators pushed to a store as soon as they are made, without waiting for the region's next
//! heartbeat (PD's heartbeat streams): a front end's region heartbeat stream binds itself to
//! each leader store it reports for, and whatever makes an operator outside a heartbeat (the
//! patrol) sends it to the stream bound to the region leader's store. The last stream a store
//! opened wins, as in PD. Sends never wait: a full or gone stream loses the push, and the
//! operator still goes with the region's next heartbeat reply (it stays pending in its shard).
//! Owns no operator decisions and no wire format: the front end converts what it is given.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;

use crate::placement::{Operator, Region};

/// Pushes a stream may have waiting before more are dropped.
pub const PUSH_BACKLOG: usize = 256;

/// An operator step for the region's leader, with the region as the shard knows it.
pub type Push = (Region, Operator);

type Bound = HashMap<u64, (u64, mpsc::Sender<Push>)>;

#[derive(Default)]
pub struct Pushes {
    /// Store id to (the stream's id, its queue).
    streams: Mutex<Bound>,
    next_stream: AtomicU64,
}

impl Pushes {
    fn lock(&self) -> MutexGuard<'_, Bound> {
        // Each edit is one map insert or remove: a panic cannot leave the map half-changed.
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new stream's end of the registry: its queue, bound to stores as it reports for them.
    pub fn open(self: &Arc<Self>) -> PushStream {
        let (tx, rx) = mpsc::channel(PUSH_BACKLOG);
        PushStream {
            id: self.next_stream.fetch_add(1, Ordering::Relaxed),
            pushes: self.clone(),
            tx,
            rx,
            stores: Vec::new(),
        }
    }

    /// Sends `op` to the stream bound to `store`; false when there is none or it is full.
    pub fn push(&self, store: u64, region: Region, op: Operator) -> bool {
        let tx = match self.lock().get(&store) {
            Some((_, tx)) => tx.clone(),
            None => return false,
        };
        tx.try_send((region, op)).is_ok()
    }

    /// Stores with a stream bound.
    pub fn bound(&self) -> usize {
        self.lock().len()
    }
}

/// One stream's binding; unbinds what is still its own when dropped.
pub struct PushStream {
    id: u64,
    pushes: Arc<Pushes>,
    tx: mpsc::Sender<Push>,
    pub rx: mpsc::Receiver<Push>,
    /// Stores this stream bound, few (one for a TiKV store).
    stores: Vec<u64>,
}

impl PushStream {
    /// Binds `store` to this stream (a heartbeat reported a leader on it).
    pub fn bind(&mut self, store: u64) {
        if self.stores.contains(&store) {
            return;
        }
        self.stores.push(store);
        self.pushes.lock().insert(store, (self.id, self.tx.clone()));
    }
}

impl Drop for PushStream {
    fn drop(&mut self) {
        let mut streams = self.pushes.lock();
        for store in &self.stores {
            if streams.get(store).is_some_and(|(id, _)| *id == self.id) {
                streams.remove(store);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Peer, PeerRole};

    fn region() -> Region {
        Region {
            id: 1,
            start_key: Vec::new(),
            end_key: Vec::new(),
            epoch: Default::default(),
            peers: Vec::new(),
            leader: None,
        }
    }

    fn op() -> Operator {
        Operator::TransferLeader(Peer {
            id: 7,
            store_id: 2,
            role: PeerRole::Voter,
        })
    }

    #[test]
    fn the_last_stream_of_a_store_gets_its_pushes_and_a_closed_one_unbinds() {
        let pushes = Arc::new(Pushes::default());
        assert!(!pushes.push(1, region(), op()), "no stream yet");
        let mut first = pushes.open();
        first.bind(1);
        let mut second = pushes.open();
        second.bind(1);
        assert!(pushes.push(1, region(), op()));
        assert!(second.rx.try_recv().is_ok());
        assert!(first.rx.try_recv().is_err(), "the later stream wins");
        // The first one closing leaves the second bound.
        drop(first);
        assert!(pushes.push(1, region(), op()));
        drop(second);
        assert_eq!(pushes.bound(), 0);
        assert!(!pushes.push(1, region(), op()));
    }

    #[test]
    fn a_full_stream_loses_the_push_without_waiting() {
        let pushes = Arc::new(Pushes::default());
        let mut s = pushes.open();
        s.bind(3);
        for _ in 0..PUSH_BACKLOG {
            assert!(pushes.push(3, region(), op()));
        }
        assert!(!pushes.push(3, region(), op()));
    }
}
