//! The measured stretch of a run: when it started, the live progress line, and, for `--plot`,
//! the leader changes seen meanwhile. Owns starting and ending those three together; it must
//! not drive load or count anything (it reads the caller's counter).

use std::sync::Arc;
use std::time::{Duration, Instant};

use meridian::tls::Trust;

use crate::leader::LeaderWatch;
use crate::progress::Progress;

pub struct Phase {
    /// When the phase started: what latencies and gaps are timed from.
    pub started: Instant,
    /// When the load stops: `started` and the run's duration.
    pub deadline: Instant,
    progress: Progress,
    leaders: Option<LeaderWatch>,
}

impl Phase {
    /// Starts the clock and the progress line over `duration`, reading the count done from
    /// `done`; watches who leads among `leaders`' endpoints when given (`--plot`).
    pub fn start(
        duration: Duration,
        done: impl Fn() -> u64 + Send + Sync + 'static,
        leaders: Option<(Vec<String>, Trust)>,
    ) -> Phase {
        let started = Instant::now();
        Phase {
            started,
            deadline: started + duration,
            progress: Progress::start(duration, Arc::new(done)),
            leaders: leaders
                .map(|(endpoints, trust)| LeaderWatch::start(endpoints, trust, started)),
        }
    }

    /// Ends the phase: how long it ran, and each change of leader seen (none without a watch).
    pub async fn finish(self) -> (Duration, Vec<(f64, String)>) {
        let elapsed = self.started.elapsed();
        self.progress.finish();
        let failovers = match self.leaders {
            Some(l) => l.finish().await,
            None => Vec::new(),
        };
        (elapsed, failovers)
    }
}
