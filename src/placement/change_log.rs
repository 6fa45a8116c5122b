//! The route change log: every route the range index published, in the order it published
//! them, numbered, and the last [`CHANGE_LOG_CAPACITY`] of them kept. A follower that applies
//! a snapshot taken at index `n` and then the records from `n` on, in order, with the same
//! heartbeat rules, holds the same index as the leader did at each step (the region syncer).
//!
//! A log is one `stream`: a new term's load starts a new one, so an index from another
//! leader's log (or an earlier term's) is never taken for this one's.
//!
//! Owns: the numbering and the window of records. Must not touch: the index itself, I/O or
//! the clock.

use std::collections::VecDeque;
use std::sync::Arc;

use super::route::Route;

/// Records kept. A follower more than this far behind starts again from a snapshot; it must
/// be above the lag at which a follower stops answering reads (10,000 changes), so that a
/// follower that refuses can still catch up from the log.
pub const CHANGE_LOG_CAPACITY: usize = 32_768;

/// What the log holds from an index on.
#[derive(Debug)]
pub enum Since {
    /// The records from the asked index to the end, in order (empty when caught up).
    Records(Vec<Arc<Route>>),
    /// The asked index is of another stream, before the window or past the end: start again
    /// from a snapshot.
    Gone,
}

#[derive(Debug)]
pub struct ChangeLog {
    stream: u64,
    /// The index of `records[0]`; indexes start at 1 (0 asks for a snapshot, as PD's
    /// `start_index` 0 does).
    first: u64,
    records: VecDeque<Arc<Route>>,
    capacity: usize,
}

impl Default for ChangeLog {
    fn default() -> Self {
        ChangeLog::new(0, CHANGE_LOG_CAPACITY)
    }
}

impl ChangeLog {
    pub fn new(stream: u64, capacity: usize) -> ChangeLog {
        ChangeLog {
            stream,
            first: 1,
            records: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    pub fn stream(&self) -> u64 {
        self.stream
    }

    /// The index the next record gets.
    pub fn next_index(&self) -> u64 {
        self.first + self.records.len() as u64
    }

    pub fn record(&mut self, route: Arc<Route>) {
        if self.records.len() == self.capacity {
            self.records.pop_front();
            self.first += 1;
        }
        self.records.push_back(route);
    }

    /// Drops every record and starts stream `stream` from index 1.
    pub fn restart(&mut self, stream: u64) {
        *self = ChangeLog::new(stream, self.capacity);
    }

    /// The records of `stream` from `from` on, at most `max` of them.
    pub fn since(&self, stream: u64, from: u64, max: usize) -> Since {
        if stream != self.stream || from < self.first || from > self.next_index() {
            return Since::Gone;
        }
        let skip = (from - self.first) as usize;
        Since::Records(self.records.iter().skip(skip).take(max).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{Epoch, Region};

    fn route(id: u64) -> Arc<Route> {
        Route::new(Region {
            id,
            start_key: Vec::new(),
            end_key: Vec::new(),
            epoch: Epoch::default(),
            peers: Vec::new(),
            leader: None,
        })
    }

    fn ids(s: Since) -> Option<Vec<u64>> {
        match s {
            Since::Records(r) => Some(r.iter().map(|r| r.id()).collect()),
            Since::Gone => None,
        }
    }

    #[test]
    fn records_are_numbered_from_one_and_read_back_in_order() {
        let mut log = ChangeLog::new(7, 4);
        assert_eq!(log.next_index(), 1);
        for id in 10..13 {
            log.record(route(id));
        }
        assert_eq!(log.next_index(), 4);
        assert_eq!(ids(log.since(7, 1, 100)), Some(vec![10, 11, 12]));
        assert_eq!(ids(log.since(7, 2, 1)), Some(vec![11]));
        assert_eq!(ids(log.since(7, 4, 100)), Some(vec![]));
    }

    #[test]
    fn an_index_outside_the_window_or_of_another_stream_is_gone() {
        let mut log = ChangeLog::new(7, 2);
        for id in 10..14 {
            log.record(route(id));
        }
        // Indexes 1 and 2 fell out of the window of 2.
        assert_eq!(ids(log.since(7, 2, 100)), None);
        assert_eq!(ids(log.since(7, 3, 100)), Some(vec![12, 13]));
        assert_eq!(ids(log.since(7, 6, 100)), None, "past the end");
        assert_eq!(ids(log.since(8, 3, 100)), None, "another stream");
        log.restart(8);
        assert_eq!(log.next_index(), 1);
        assert_eq!(ids(log.since(7, 1, 100)), None);
        assert_eq!(ids(log.since(8, 1, 100)), Some(vec![]));
    }
}
