//! The open-loop pacer for `--rate`: an OS thread (tokio's timer has 1 ms granularity, too
//! coarse to pace a million operations a second) that hands scheduled send times to the
//! workers round-robin. Workers measure latency from the scheduled time.

use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

pub fn spawn(
    rate: u64,
    start: Instant,
    deadline: Instant,
    workers: Vec<UnboundedSender<Instant>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
        let mut issued: u64 = 0;
        let mut next = 0usize;
        loop {
            let now = Instant::now();
            if now >= deadline || workers.is_empty() {
                return;
            }
            let due = ((now - start).as_secs_f64() * rate as f64) as u64;
            while issued < due {
                let at = start + interval.mul_f64(issued as f64);
                // A worker that has gone is no reason to stop pacing the others.
                let _ = workers[next].send(at);
                next = (next + 1) % workers.len();
                issued += 1;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    })
}
