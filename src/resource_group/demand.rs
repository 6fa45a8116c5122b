//! One client's demand on a group, in RU per second, as PD's resource manager measures it
//! (`ruTracker` in `keyspace_manager.go`): a time-aware exponential moving average of what
//! the client asks for, with a half-life of 5 s, so that requests at any spacing weigh by the
//! time they cover. The first request only starts the clock; the second sets the average;
//! an average under 1 RU/s counts as 0. Owns only the average. Pure: time is an argument.

use std::time::Duration;

/// PD's `defaultRUTrackerTimeConstant`: the average's half-life.
const HALF_LIFE_S: f64 = 5.0;
/// PD's `minSampledRUPerSec`.
const MIN_PER_SEC: f64 = 1.0;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Demand {
    last: Option<Duration>,
    /// RU/s, once there are two samples.
    per_sec: Option<f64>,
}

impl Demand {
    /// A request for `ru` at `now`. A request at or before the last one is not counted (PD
    /// skips it), though the clock starts again from it.
    pub fn sample(&mut self, now: Duration, ru: f64) {
        let Some(last) = self.last.replace(now) else {
            return;
        };
        let Some(elapsed) = now.checked_sub(last).filter(|d| !d.is_zero()) else {
            return;
        };
        let secs = elapsed.as_secs_f64();
        let ru = if ru.is_finite() { ru.max(0.0) } else { 0.0 };
        let rate = ru / secs;
        self.per_sec = Some(match self.per_sec {
            None => rate,
            Some(before) => {
                let decay = (-std::f64::consts::LN_2 / HALF_LIFE_S * secs).exp();
                let average = decay * before + (1.0 - decay) * rate;
                if average < MIN_PER_SEC {
                    0.0
                } else {
                    average
                }
            }
        });
    }

    /// The client's RU/s, `None` until it has asked twice.
    pub fn per_sec(&self) -> Option<f64> {
        self.per_sec
    }

    /// When it last asked.
    pub fn last(&self) -> Option<Duration> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    /// Worked by hand from PD's `ruTracker.sample`.
    #[test]
    fn pds_moving_average() {
        let mut d = Demand::default();
        d.sample(s(10.0), 500.0);
        assert_eq!(d.per_sec(), None, "the first request starts the clock");
        d.sample(s(11.0), 500.0);
        assert_eq!(d.per_sec(), Some(500.0));
        // 5 s later (one half-life) at 100/s: halfway from 500 to 100.
        d.sample(s(16.0), 500.0);
        assert!((d.per_sec().unwrap() - 300.0).abs() < 1e-9, "{d:?}");
        // Not later than the last: not counted.
        d.sample(s(16.0), 1e9);
        assert!((d.per_sec().unwrap() - 300.0).abs() < 1e-9, "{d:?}");
        // Asking for nothing for long enough decays under 1 RU/s: 0.
        d.sample(s(100.0), 0.0);
        assert_eq!(d.per_sec(), Some(0.0));
        d.sample(s(101.0), f64::NAN);
        assert_eq!(d.per_sec(), Some(0.0));
        assert_eq!(d.last(), Some(s(101.0)));
    }
}
