//! The timestamps a worker keeps for the duplicate check, in fixed-size chunks.
//!
//! A `Vec` doubles: every worker of a thread receives about as many timestamps as the others,
//! so all of them double at about the same moment, and the thread copies and faults in the
//! whole new memory at once (512 workers with 64 KB each is 32 MB copied and 64 MB touched):
//! a pause of tens of milliseconds that grows with the run and shows as the latency tail of an
//! open-loop run. Chunks are never copied, and their pages are touched a few at a time as the
//! run goes.

/// Timestamps per chunk (64 KiB).
const CHUNK: usize = 8192;

pub struct Kept {
    chunks: Vec<Vec<u64>>,
    len: usize,
    quota: usize,
}

impl Kept {
    /// Keeps at most `quota` timestamps; more are dropped.
    pub fn new(quota: usize) -> Kept {
        Kept {
            chunks: Vec::new(),
            len: 0,
            quota,
        }
    }

    pub fn push(&mut self, ts: u64) {
        if self.len == self.quota {
            return;
        }
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(ts),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(ts);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends everything kept to `all`, in the order pushed.
    pub fn drain_into(self, all: &mut Vec<u64>) {
        all.reserve(self.len);
        for chunk in self.chunks {
            all.extend(chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_in_order_up_to_the_quota() {
        let mut k = Kept::new(2 * CHUNK + 3);
        for ts in 0..3 * CHUNK as u64 {
            k.push(ts);
        }
        assert_eq!(k.len(), 2 * CHUNK + 3);
        let mut all = vec![u64::MAX];
        k.drain_into(&mut all);
        let expected: Vec<u64> = std::iter::once(u64::MAX)
            .chain(0..2 * CHUNK as u64 + 3)
            .collect();
        assert_eq!(all, expected);
        let mut none = Kept::new(0);
        none.push(1);
        assert!(none.is_empty());
    }
}
