//! Live progress: a bar over the run's duration with the current rate, on stderr (hidden when
//! stderr is not a terminal).

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: ProgressBar,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    pub fn start(duration: Duration, ops: Arc<dyn Fn() -> u64 + Send + Sync>) -> Progress {
        let bar = ProgressBar::new(duration.as_millis() as u64);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let b = bar.clone();
        let task = tokio::spawn(async move {
            let start = Instant::now();
            let (mut last_ops, mut last_at) = (0u64, start);
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let now = Instant::now();
                let total = ops();
                let rate = (total - last_ops) as f64 / (now - last_at).as_secs_f64().max(1e-9);
                (last_ops, last_at) = (total, now);
                b.set_position((now - start).as_millis() as u64);
                b.set_message(format!("{total} ops, {:.0}/s", rate));
            }
        });
        Progress { bar, task }
    }

    pub fn finish(self) {
        self.task.abort();
        self.bar.finish_and_clear();
    }
}
