//! PD's rule for a request the bucket cannot meet from what it holds (`token_buckets.go`,
//! `assignSlotTokens`): the client gets what the bucket holds and then borrows against the
//! fill still to come, in up to `k` rounds whose rates fall from `k * rate` to `rate`, until
//! the borrowing covers the client's target period; whatever it borrows is delivered over a
//! trickle time (`trickle_time_ms`) so the client spends it no faster than the round's rate.
//! A request made while the debt is past every round still gets PD's reserve, half a period
//! of fill. The debt is the bucket's tokens going negative; the fill repays it.
//!
//! What this owns: the arithmetic of one grant, given the bucket's tokens. It must not touch
//! the fill or the capacity (the bucket's) nor anything of a client's. Pure: no I/O, no clock.

/// PD's `defaultLoanCoefficient`: the rounds of borrowing when the capacity exceeds the
/// fill rate.
const LOAN_COEFFICIENT: usize = 2;
/// PD's `defaultReserveRatio`: the share of a period's fill a request always gets.
const RESERVE_RATIO: f64 = 0.5;

/// The most a bucket of this `rate` and `capacity` can be in debt after its rounds for a
/// client asking every `period_s`: the last round's threshold (PD's `p[k-1]`). Beyond it a
/// request only gets the reserve.
#[cfg(test)]
pub fn loan_ceiling(rate: f64, capacity: f64, period_s: f64) -> f64 {
    let k = coefficient(rate, capacity);
    (1..=k).map(|i| i as f64 * rate * period_s).sum()
}

/// What PD's reserve gives a request made past the ceiling.
pub fn reserve(rate: f64, period_s: f64) -> f64 {
    RESERVE_RATIO * rate * period_s
}

/// A bucket whose capacity is at most its fill does not hoard, so one round suffices (PD).
fn coefficient(rate: f64, capacity: f64) -> usize {
    if capacity > 0.0 && capacity <= rate.trunc() {
        1
    } else {
        LOAN_COEFFICIENT
    }
}

/// Grants `required` (finite, positive) from `tokens` (what the bucket holds, negative when
/// in debt) at fill `rate` (positive) for a client asking every `period_ms`. Returns the
/// tokens granted and the trickle time in ms; `tokens` is left with what remains (or the debt).
pub fn assign(
    tokens: &mut f64,
    required: f64,
    rate: f64,
    capacity: f64,
    period_ms: u64,
) -> (f64, i64) {
    if required <= 0.0 {
        return (0.0, 0);
    }
    if *tokens >= required {
        *tokens -= required;
        return (required, 0);
    }
    // PD's slot fill rate is an integer.
    let rate = rate.trunc().max(1.0);
    let mut required = required;
    let mut granted = 0.0;
    let consumed_existing = *tokens > 0.0;
    if consumed_existing {
        granted = *tokens;
        required -= granted;
        *tokens = 0.0;
    }
    let period_s = period_ms as f64 / 1000.0;
    let k = coefficient(rate, capacity);
    let mut thresholds = Vec::with_capacity(k);
    let mut sum = 0.0;
    for i in 0..k {
        sum += (k - i) as f64 * rate * period_s;
        thresholds.push(sum);
    }
    let mut trickle = 0.0;
    for (i, threshold) in thresholds.iter().enumerate() {
        if required <= 0.0 || trickle >= period_s {
            break;
        }
        let loan = -*tokens;
        if loan >= *threshold {
            continue;
        }
        let round = threshold - loan;
        let round_rate = (k - i) as f64 * rate;
        if round > required {
            *tokens -= required;
            granted += required;
            // PD divides all granted so far, the held tokens included, by the round's rate.
            trickle += granted / round_rate;
            required = 0.0;
        } else {
            let round_time = round / round_rate;
            if round_time + trickle >= period_s {
                let round_tokens = (period_s - trickle) * round_rate;
                required -= round_tokens;
                *tokens -= round_tokens;
                granted += round_tokens;
                trickle = period_s;
            } else {
                granted += round;
                required -= round;
                *tokens -= round;
                trickle += round_time;
            }
        }
    }
    let reserve = reserve(rate, period_s);
    if required > 0.0 && granted < reserve {
        let reserved = (required + granted).min(reserve);
        *tokens -= reserved - granted;
        granted = reserved;
    }
    // Having spent held tokens, the client trickles only the borrowed part's time; otherwise
    // it spreads the grant over its whole period (PD: Go's Duration truncates to whole ms).
    let trickle_ms = if consumed_existing {
        (trickle.min(period_s) * 1e9) as i64 / 1_000_000
    } else {
        period_ms as i64
    };
    (granted, trickle_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(tokens: &mut f64, required: f64, rate: f64, capacity: f64) -> (f64, i64) {
        assign(tokens, required, rate, capacity, 5000)
    }

    /// Worked by hand from PD's `assignSlotTokens`, one round (capacity 50 <= rate 100).
    #[test]
    fn one_round_when_the_capacity_is_within_the_fill() {
        let mut t = 50.0;
        assert_eq!(run(&mut t, 30.0, 100.0, 50.0), (30.0, 0));
        // 20 held, 10 borrowed; trickle = all 30 granted / 100 = 0.3 s.
        assert_eq!(run(&mut t, 30.0, 100.0, 50.0), (30.0, 300));
        assert_eq!(t, -10.0);
        assert_eq!(loan_ceiling(100.0, 50.0, 5.0), 500.0);
    }

    /// Two rounds (capacity 1000 > rate 100): thresholds 1000 at 200/s, then 1500 at 100/s.
    #[test]
    fn two_rounds_then_the_reserve() {
        let mut t = 0.0;
        // Round one covers the whole period: 5 s * 200/s.
        assert_eq!(run(&mut t, 2000.0, 100.0, 1000.0), (1000.0, 5000));
        assert_eq!(t, -1000.0);
        // Round two: 100 of its 500; nothing was held, so the whole period.
        assert_eq!(run(&mut t, 100.0, 100.0, 1000.0), (100.0, 5000));
        // The 400 left of round two (4 s at 100/s), more than the reserve of 250.
        assert_eq!(run(&mut t, 1000.0, 100.0, 1000.0), (400.0, 5000));
        assert_eq!(t, -1500.0);
        assert_eq!(loan_ceiling(100.0, 1000.0, 5.0), 1500.0);
        // Past every round: the reserve, half a period of fill.
        assert_eq!(run(&mut t, 1000.0, 100.0, 1000.0), (250.0, 5000));
        assert_eq!(t, -1750.0);
        assert_eq!(run(&mut t, 10.0, 100.0, 1000.0), (10.0, 5000));
    }

    #[test]
    fn nothing_asked_nothing_granted() {
        let mut t = -5.0;
        assert_eq!(run(&mut t, 0.0, 100.0, 1000.0), (0.0, 0));
        assert_eq!(t, -5.0);
    }
}
