//! A hook that sees every batch of timestamps a client receives, once per batch, as the reply
//! arrives and before any caller of the batch is woken. It lets an auditor account for a batch
//! in one step instead of once per `get_ts()` call: the load generator's order checker
//! publishes each batch's last timestamp through it, so a check on another thread sees every
//! timestamp a caller here could already hold. It owns nothing and must neither block nor
//! panic: it runs on the stream worker, between the reply and the wake-ups, and a panic there
//! ends that worker.

use std::fmt;
use std::sync::Arc;

use crate::tso::Timestamp;

/// Called with a batch's first timestamp and its count (the batch is `first..first + count`).
#[derive(Clone)]
pub struct BatchHook(Arc<dyn Fn(Timestamp, u32) + Send + Sync>);

impl BatchHook {
    pub fn new(f: impl Fn(Timestamp, u32) + Send + Sync + 'static) -> BatchHook {
        BatchHook(Arc::new(f))
    }

    pub(super) fn call(&self, first: Timestamp, count: u32) {
        (self.0)(first, count)
    }
}

impl fmt::Debug for BatchHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BatchHook")
    }
}
