//! One group's token bucket: request units accrue at the fill rate up to the capacity, and a
//! request is granted by PD's rule (`loan`): in full from what the bucket holds, else what it
//! holds plus a loan against the fill to come, delivered over a trickle time
//! (`trickle_time_ms`) so the client spends it no faster than the fill.
//!
//! Clients share the bucket as PD's `GroupTokenBucket` shares it among its slots: each client
//! (by its `client_unique_id`) asking for tokens has a slot. A lone client has the whole
//! bucket. Several at once split the fill rate by PD's rule (`share`, by each one's measured
//! demand, `demand`), and with it the capacity and each accrual; a slot holding more than its
//! part of the capacity gives the excess back to the bucket, which hands it out again at its
//! next accrual (PD's `reservedBurstTokens`). A client asks and borrows against its own slot
//! only, so one client's loans never take another's share. A client asking for nothing
//! leaves its slot; a slot not asked from for 10 minutes is dropped. The bucket's own tokens
//! are the ledger of all of it: every grant, from whichever slot, is taken from them.
//!
//! The promise, checked by property tests: over any window a limited group is granted at most
//! `rate * window + capacity + debt`, however many clients ask, where `debt` is what the
//! bucket owes at the window's end (the loans), and a lone client's request never takes the
//! debt past PD's last loan threshold by more than PD's reserve (half a period of fill) unless
//! it was already past it. PD's rule has no ceiling on the debt for a client that asks again
//! and again without waiting: each such request gets the reserve. A change of settings
//! forgives the debt at the next request that finds the bucket at or below zero (PD's
//! `settingChanged`), so the bound holds between changes. An unlimited group is never
//! refused. Pure: time is an argument (any monotonic origin), no I/O.
//!
//! Differs from PD: at most [`MAX_SLOTS`] clients share a group at once (PD has no bound); a
//! further client is granted nothing until a slot is free, as a throttled slot is.

use std::collections::BTreeMap;
use std::time::Duration;

use super::demand::Demand;
use super::limit::Limit;
use super::loan;
use super::share;

/// The longest target period a bucket takes from a client (the client's default is 5 s): a
/// longer one is taken as this, so a client cannot size its own loan (PD takes any).
pub const MAX_TRICKLE_MS: u64 = 60_000;
/// The most clients that share one group's bucket at once. Each request balances every slot,
/// so this bounds a request's work; TiDB servers, one client each, are far fewer.
pub const MAX_SLOTS: usize = 1024;
/// PD's `slotExpireTimeout`: a slot not asked from for this long is dropped.
const SLOT_EXPIRY: Duration = Duration::from_secs(600);

/// What one request is granted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grant {
    pub tokens: f64,
    /// Over how long the client should spend `tokens` (0: at once).
    pub trickle_ms: i64,
}

/// One client's part of the bucket (PD's `tokenSlot`).
#[derive(Debug, Clone, PartialEq)]
struct Slot {
    /// Its share of the fill, in whole RU/s as PD keeps it (0: throttled).
    rate: f64,
    /// Its share of the capacity, whole RU.
    burst: f64,
    /// What it holds, negative when it owes.
    tokens: f64,
    /// `tokens` as the bucket last accounted for it: the difference is what it granted since.
    accounted: f64,
    /// When it last asked for something.
    asked: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    limit: Limit,
    tokens: f64,
    /// When the bucket last accrued; time before it is never counted twice.
    last: Duration,
    /// The settings changed and the debt has not been forgiven since (PD's `settingChanged`):
    /// the next request that finds the bucket at or below zero starts it from zero.
    changed: bool,
    /// What accrued (less what the capacity cut off) and is not yet handed to the slots.
    unshared: f64,
    /// Taken back from slots over their part of the capacity, for the next accrual.
    reserved: f64,
    slots: BTreeMap<u64, Slot>,
    demands: BTreeMap<u64, Demand>,
}

/// A request for `required` tokens as a bucket reads it: anything but a finite, non-negative
/// number (a client's bytes decoded as a float) asks for nothing.
fn sane(required: f64) -> f64 {
    if required.is_finite() && required > 0.0 {
        required
    } else {
        0.0
    }
}

impl TokenBucket {
    /// A bucket holding `tokens` (at most its capacity) at `now`.
    pub fn new(limit: Limit, tokens: f64, now: Duration) -> TokenBucket {
        let mut bucket = TokenBucket {
            limit,
            tokens: 0.0,
            last: now,
            changed: false,
            unshared: 0.0,
            reserved: 0.0,
            slots: BTreeMap::new(),
            demands: BTreeMap::new(),
        };
        bucket.add(tokens);
        bucket
    }

    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// What the bucket holds as of its last request or change.
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Adds `delta` (a non-finite one is ignored), keeping at most the capacity.
    fn add(&mut self, delta: f64) {
        if !delta.is_finite() {
            return;
        }
        self.tokens += delta;
        if let Limit::Limited { capacity, .. } = self.limit {
            self.tokens = self.tokens.min(capacity);
        }
    }

    /// Accrues the fill since the last accrual, and what was taken back from slots, up to the
    /// capacity; what accrued is kept for the slots. A clock that went back accrues nothing,
    /// and the time it went back is not counted again.
    fn accrue(&mut self, now: Duration) {
        let Some(elapsed) = now.checked_sub(self.last) else {
            return;
        };
        self.last = now;
        let Limit::Limited { rate, capacity } = self.limit else {
            return;
        };
        if elapsed.is_zero() {
            return;
        }
        let mut fresh = rate * elapsed.as_secs_f64() + std::mem::take(&mut self.reserved);
        self.tokens += fresh;
        if self.tokens > capacity {
            fresh -= self.tokens - capacity;
            self.tokens = capacity;
        }
        self.unshared += fresh;
    }

    /// Brings the tokens up to `now`, so `tokens()` is what the bucket holds then.
    pub fn settle(&mut self, now: Duration) {
        self.accrue(now);
    }

    /// Accrues `idle` more time's fill: the time between a persisted state and its load, when
    /// no node held the bucket.
    pub fn resume(&mut self, idle: Duration) {
        if let Limit::Limited { rate, .. } = self.limit {
            self.add(rate * idle.as_secs_f64());
        }
    }

    /// New settings from `now` on (what accrued before is accrued under the old ones), with
    /// `delta` tokens added, as PD's ModifyResourceGroup patches a bucket.
    pub fn reconfigure(&mut self, limit: Limit, delta: f64, now: Duration) {
        self.accrue(now);
        self.limit = limit;
        self.add(delta);
        self.changed = true;
    }

    /// The fill rate and capacity `client`'s slot has, when it has one.
    pub fn share_of(&self, client: u64) -> Option<(f64, f64)> {
        self.slots.get(&client).map(|s| (s.rate, s.burst))
    }

    /// Grants up to `required` tokens to `client` at `now`; `target_period_ms` is how often
    /// the client means to ask.
    pub fn request(
        &mut self,
        now: Duration,
        required: f64,
        target_period_ms: u64,
        client: u64,
    ) -> Grant {
        let required = sane(required);
        self.accrue(now);
        if self.changed && self.tokens <= 0.0 {
            self.changed = false;
            self.tokens = 0.0;
            self.unshared = 0.0;
            for slot in self.slots.values_mut() {
                slot.tokens = 0.0;
                slot.accounted = 0.0;
            }
        }
        let Limit::Limited { rate, capacity } = self.limit else {
            return Grant {
                tokens: required,
                trickle_ms: 0,
            };
        };
        let period_ms = target_period_ms.min(MAX_TRICKLE_MS);
        let throttled = Grant {
            tokens: 0.0,
            trickle_ms: period_ms as i64,
        };
        if !self.join(now, client, required) {
            return throttled;
        }
        self.balance(rate, capacity);
        let Some(slot) = self.slots.get_mut(&client) else {
            // Asked for nothing: no slot, nothing granted.
            return Grant {
                tokens: 0.0,
                trickle_ms: 0,
            };
        };
        if slot.rate <= 0.0 {
            // PD's throttled slot: nothing now, ask again in a period; what it held or owed
            // stays the bucket's.
            slot.tokens = 0.0;
            slot.accounted = 0.0;
            return throttled;
        }
        let (tokens, trickle_ms) =
            loan::assign(&mut slot.tokens, required, slot.rate, slot.burst, period_ms);
        self.tokens -= slot.accounted - slot.tokens;
        slot.accounted = slot.tokens;
        Grant { tokens, trickle_ms }
    }

    /// Counts `client`'s request in its demand and gives it a slot, or takes its slot away
    /// when it asks for nothing (PD), and drops what has not been asked from for
    /// [`SLOT_EXPIRY`]. False when the client would need a slot and none is free.
    fn join(&mut self, now: Duration, client: u64, required: f64) -> bool {
        let stale = |last: Duration| now.saturating_sub(last) >= SLOT_EXPIRY;
        self.slots.retain(|_, s| !stale(s.asked));
        self.demands
            .retain(|_, d| d.last().is_some_and(|last| !stale(last)));
        if required <= 0.0 {
            if let Some(d) = self.demands.get_mut(&client) {
                d.sample(now, 0.0);
            }
            // What the slot held stays in the bucket's tokens, for the others.
            self.slots.remove(&client);
            return true;
        }
        if !self.slots.contains_key(&client) && self.slots.len() >= MAX_SLOTS {
            return false;
        }
        self.demands
            .entry(client)
            .or_default()
            .sample(now, required);
        let slot = self.slots.entry(client).or_insert(Slot {
            rate: 0.0,
            burst: 0.0,
            tokens: 0.0,
            accounted: 0.0,
            asked: now,
        });
        slot.asked = now;
        true
    }

    /// PD's `balanceSlotTokens`: a lone slot is the whole bucket; several split the fill, the
    /// capacity and what accrued since the last balance by each one's share of the fill.
    fn balance(&mut self, rate: f64, capacity: f64) {
        let fresh = std::mem::take(&mut self.unshared);
        if self.slots.len() == 1 {
            for slot in self.slots.values_mut() {
                slot.tokens = self.tokens;
                slot.accounted = self.tokens;
                slot.rate = rate.trunc();
                slot.burst = capacity.trunc();
            }
            return;
        }
        let demands: Vec<Option<f64>> = self
            .slots
            .keys()
            .map(|id| self.demands.get(id).and_then(Demand::per_sec))
            .collect();
        let shares = share::split(rate, &demands);
        for (slot, share) in self.slots.values_mut().zip(shares) {
            let ratio = share / rate;
            let burst = capacity * ratio;
            let mut assign = fresh * ratio;
            if burst > 0.0 && slot.tokens > burst {
                let excess = slot.tokens - burst;
                self.reserved += excess;
                self.tokens -= excess;
                assign -= excess;
            }
            slot.tokens += assign;
            slot.accounted += assign;
            slot.rate = share.trunc();
            slot.burst = burst.trunc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn limited(rate: f64, capacity: f64) -> Limit {
        Limit::Limited { rate, capacity }
    }

    /// Over every window `[grants[i].0, grants[j].0]`, both ends included, a bucket grants at
    /// most its rate over the window plus its capacity plus the debt it is left with.
    /// `grants` holds (when in ms, granted, the debt after it).
    fn window_bound_holds(
        grants: &[(u64, f64, f64)],
        rate: f64,
        capacity: f64,
    ) -> Result<(), TestCaseError> {
        for i in 0..grants.len() {
            let mut sum = 0.0;
            for (t, tokens, debt) in &grants[i..] {
                sum += tokens;
                let window = (t - grants[i].0) as f64 / 1000.0;
                let bound = rate * window + capacity + debt;
                prop_assert!(
                    sum <= bound * (1.0 + 1e-9) + 1e-6,
                    "{} granted over {}s, bound {}",
                    sum,
                    window,
                    bound
                );
            }
        }
        Ok(())
    }

    #[test]
    fn grants_what_it_holds_then_lends_as_pd_does() {
        let mut b = TokenBucket::new(limited(100.0, 50.0), 1e9, ms(0));
        assert_eq!(b.tokens(), 50.0, "never more than the capacity");
        assert_eq!(
            b.request(ms(0), 30.0, 5000, 1),
            Grant {
                tokens: 30.0,
                trickle_ms: 0
            }
        );
        // 20 held and 10 lent; trickled over 30 / 100 s.
        assert_eq!(
            b.request(ms(0), 30.0, 5000, 1),
            Grant {
                tokens: 30.0,
                trickle_ms: 300
            }
        );
        assert_eq!(b.tokens(), -10.0);
        // 100 ms at 100/s repays the debt; then one round of 5 s at 100/s, all of it.
        let g = b.request(ms(100), 1000.0, 5000, 1);
        assert!((g.tokens - 500.0).abs() < 1e-9, "{g:?}");
        assert_eq!(g.trickle_ms, 5000);
        // An idle minute fills to the capacity, not beyond.
        b.request(ms(60_000), 0.0, 5000, 1);
        assert_eq!(b.tokens(), 50.0);
        // A target period past the longest is taken as the longest.
        let mut b = TokenBucket::new(limited(10.0, 10.0), 0.0, ms(0));
        let g = b.request(ms(0), 1e9, u64::MAX, 1);
        assert_eq!(g.tokens, 10.0 * MAX_TRICKLE_MS as f64 / 1000.0);
    }

    #[test]
    fn bad_requests_ask_for_nothing_and_clocks_going_back_accrue_nothing() {
        let mut b = TokenBucket::new(limited(1000.0, 1000.0), 0.0, ms(1000));
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -5.0] {
            assert_eq!(b.request(ms(1000), bad, 10, 1).tokens, 0.0);
        }
        b.request(ms(500), 0.0, 10, 1);
        assert_eq!(b.tokens(), 0.0);
        b.request(ms(1001), 0.0, 10, 1);
        assert!((b.tokens() - 1.0).abs() < 1e-9, "{b:?}");
        let mut u = TokenBucket::new(Limit::Unlimited, 0.0, ms(0));
        assert_eq!(u.request(ms(0), f64::NAN, 10, 1).tokens, 0.0);
        assert_eq!(u.request(ms(0), 1e12, 10, 1).tokens, 1e12);
    }

    #[test]
    fn reconfiguring_keeps_the_capacity_and_applies_the_delta() {
        let mut b = TokenBucket::new(limited(10.0, 100.0), 100.0, ms(0));
        b.reconfigure(limited(10.0, 20.0), 0.0, ms(0));
        assert_eq!(b.tokens(), 20.0);
        b.reconfigure(limited(10.0, 20.0), -30.0, ms(0));
        assert_eq!(b.tokens(), -10.0);
        b.reconfigure(limited(10.0, 20.0), f64::NAN, ms(500));
        assert_eq!(b.tokens(), -5.0);
        // As PD, the first request after a change that finds the bucket in debt forgives it,
        // and only that one.
        assert_eq!(b.request(ms(500), 0.0, 10, 1).tokens, 0.0);
        assert_eq!(b.tokens(), 0.0);
        let g = b.request(ms(500), 0.1, 1000, 1);
        assert_eq!((g.tokens, b.tokens()), (0.1, -0.1));
        b.request(ms(500), 1.0, 1000, 1);
        assert!(b.tokens() < -0.1, "{b:?}");
    }

    /// One request: the time since the one before, and what it asks for.
    fn requests() -> impl Strategy<Value = Vec<(u64, f64)>> {
        prop::collection::vec(
            (
                prop_oneof![Just(0u64), 0u64..50, 0u64..5_000],
                prop_oneof![0.0f64..10.0, 0.0f64..10_000.0, Just(f64::NAN), Just(-1.0)],
            ),
            1..200,
        )
    }

    proptest! {
        #[test]
        fn a_limited_group_gets_at_most_rate_times_window_plus_capacity_plus_its_debt(
            rate in 1u64..100_000,
            burst in prop_oneof![Just(0i64), Just(-2i64), 1i64..1_000_000],
            initial in 0.0f64..2_000_000.0,
            period in prop_oneof![Just(5000u64), 1u64..10_000],
            reqs in requests(),
        ) {
            let limit = Limit::of(rate, burst);
            let Limit::Limited { rate, capacity } = limit else {
                return Err(TestCaseError::fail("limited settings gave an unlimited bucket"));
            };
            let period_s = period as f64 / 1000.0;
            let ceiling = super::loan::loan_ceiling(rate, capacity, period_s);
            let reserve = super::loan::reserve(rate, period_s);
            let mut b = TokenBucket::new(limit, initial, ms(0));
            let mut now = 0u64;
            // (when, granted, the debt after it)
            let mut grants = Vec::new();
            for (dt, required) in reqs {
                now += dt;
                let debt_before = (-b.tokens()).max(0.0);
                let g = b.request(ms(now), required, period, 1);
                prop_assert!(g.tokens >= 0.0 && g.tokens.is_finite());
                prop_assert!(g.tokens <= super::sane(required) * (1.0 + 1e-12));
                prop_assert!(g.trickle_ms >= 0 && g.trickle_ms as u64 <= period);
                let debt = (-b.tokens()).max(0.0);
                let tol = 1e-9 * (ceiling + reserve + debt_before) + 1e-6;
                prop_assert!(
                    debt <= debt_before.max(ceiling) + reserve + tol,
                    "debt {} after {} (ceiling {}, reserve {})", debt, debt_before, ceiling, reserve
                );
                grants.push((now, g.tokens, debt));
            }
            window_bound_holds(&grants, rate, capacity)?;
        }

        #[test]
        fn an_unlimited_group_is_never_refused(
            rate in any::<u64>(),
            initial in any::<f64>(),
            reqs in prop::collection::vec((0u64..10_000, 0.0f64..1e15), 1..100),
        ) {
            let mut b = TokenBucket::new(Limit::of(rate, -1), initial, ms(0));
            let mut now = 0u64;
            for (dt, required) in reqs {
                now += dt;
                let g = b.request(ms(now), required, 5000, 1);
                prop_assert_eq!(g, Grant { tokens: required, trickle_ms: 0 });
            }
        }
    }

    /// Two clients asking alike, as two TiDB servers of one group do: once both are measured,
    /// each has half the fill and half the capacity (PD's slots), and over a minute each is
    /// granted about half of what the group fills.
    #[test]
    fn two_clients_asking_alike_share_the_fill_evenly() {
        let mut b = TokenBucket::new(limited(1000.0, 2000.0), 0.0, ms(0));
        let mut total = [0.0; 2];
        // Each asks for 1000 once a second, for a minute.
        for round in 1..=60u64 {
            for (client, got) in total.iter_mut().enumerate() {
                let g = b.request(
                    ms(round * 1000 + client as u64),
                    1000.0,
                    1000,
                    client as u64,
                );
                *got += g.tokens;
            }
            if round > 1 {
                assert_eq!(b.share_of(0), Some((500.0, 1000.0)), "round {round}");
                assert_eq!(b.share_of(1), Some((500.0, 1000.0)), "round {round}");
            }
        }
        // 60 s at 1000/s, half each, plus what each may owe at the end: its two loan rounds
        // (1.5 s of its half) and the first request's loan against the whole bucket.
        for got in total {
            assert!((got - 30_000.0).abs() <= 2_000.0, "{total:?}");
        }
        // One stops asking (asks for nothing): the other has the whole bucket again.
        b.request(ms(61_000), 0.0, 1000, 0);
        b.request(ms(61_001), 1.0, 1000, 1);
        assert_eq!(b.share_of(0), None);
        assert_eq!(b.share_of(1), Some((1000.0, 2000.0)));
    }

    /// A client measured as asking little keeps what it asks for; the rest of the fill goes
    /// to the one that wants more (PD's split by demand).
    #[test]
    fn a_light_client_keeps_its_demand_and_a_heavy_one_gets_the_rest() {
        let mut b = TokenBucket::new(limited(1000.0, 1000.0), 0.0, ms(0));
        for round in 1..=100u64 {
            // 10 RU per second from the light client, 5000 from the heavy one.
            b.request(ms(round * 1000), 10.0, 1000, 7);
            b.request(ms(round * 1000 + 1), 5000.0, 1000, 8);
        }
        let (light, _) = b.share_of(7).unwrap();
        let (heavy, _) = b.share_of(8).unwrap();
        assert!((9.0..=10.0).contains(&light), "{light}");
        assert!((989.0..=990.0).contains(&heavy), "{heavy}");
    }

    /// Slots not asked from for 10 minutes are dropped, and no more than `MAX_SLOTS` clients
    /// share a bucket: another is throttled until one is free.
    #[test]
    fn idle_slots_expire_and_slots_are_bounded() {
        let mut b = TokenBucket::new(limited(1e6, 1e6), 0.0, ms(0));
        for client in 0..MAX_SLOTS as u64 {
            assert!(b.request(ms(1), 1.0, 1000, client).tokens > 0.0);
        }
        let refused = b.request(ms(2), 1.0, 1000, u64::MAX);
        assert_eq!(
            refused,
            Grant {
                tokens: 0.0,
                trickle_ms: 1000
            }
        );
        assert!(b.share_of(u64::MAX).is_none());
        // Ten minutes on, the others' slots have expired.
        b.request(ms(600_001), 1.0, 1000, 0);
        let g = b.request(ms(600_002), 1.0, 1000, u64::MAX);
        assert_eq!(g.tokens, 1.0);
        assert_eq!(b.slots.len(), 2);
        assert!(b.demands.len() <= 2);
    }

    proptest! {
        /// Any clients, in any order: the group as a whole keeps its bound.
        #[test]
        fn clients_together_get_at_most_rate_times_window_plus_capacity_plus_the_debt(
            rate in 1u64..100_000,
            burst in prop_oneof![Just(0i64), Just(-2i64), 1i64..1_000_000],
            initial in 0.0f64..2_000_000.0,
            period in prop_oneof![Just(5000u64), 1u64..10_000],
            reqs in prop::collection::vec(
                (
                    prop_oneof![Just(0u64), 0u64..50, 0u64..5_000],
                    0u64..6,
                    prop_oneof![0.0f64..10.0, 0.0f64..10_000.0, Just(0.0), Just(f64::NAN)],
                ),
                1..200,
            ),
        ) {
            let limit = Limit::of(rate, burst);
            let Limit::Limited { rate, capacity } = limit else {
                return Err(TestCaseError::fail("limited settings gave an unlimited bucket"));
            };
            let mut b = TokenBucket::new(limit, initial, ms(0));
            let mut now = 0u64;
            let mut grants = Vec::new();
            for (dt, client, required) in reqs {
                now += dt;
                let g = b.request(ms(now), required, period, client);
                prop_assert!(g.tokens >= 0.0 && g.tokens.is_finite());
                prop_assert!(g.tokens <= super::sane(required) * (1.0 + 1e-12));
                prop_assert!(g.trickle_ms >= 0 && g.trickle_ms as u64 <= period);
                grants.push((now, g.tokens, (-b.tokens()).max(0.0)));
            }
            window_bound_holds(&grants, rate, capacity)?;
        }

        /// N clients asking the same amount at the same pace: once each has asked twice (PD
        /// measures a demand from the second request), each slot has PD's even share, the
        /// fill and the capacity over N, in whole units.
        #[test]
        fn clients_asking_alike_get_pds_even_share(
            n in 2u64..9,
            rate in 1u64..1_000_000,
            burst in prop_oneof![Just(0i64), Just(-2i64), 1i64..10_000_000],
            amount in prop_oneof![1.0f64..100.0, 1.0f64..1e7],
            pace in 10u64..2_000,
        ) {
            let limit = Limit::of(rate, burst);
            let Limit::Limited { rate, capacity } = limit else {
                return Err(TestCaseError::fail("limited settings gave an unlimited bucket"));
            };
            let mut b = TokenBucket::new(limit, 0.0, ms(0));
            for round in 1..=4u64 {
                for client in 0..n {
                    b.request(ms(round * pace * n + client), amount, 1000, client);
                }
            }
            let (even_rate, even_burst) = (rate / n as f64, capacity / n as f64);
            for client in 0..n {
                let (r, cap) = b.share_of(client).unwrap();
                prop_assert!((r - even_rate.trunc()).abs() <= 1.0, "{} vs {}", r, even_rate);
                prop_assert!((cap - even_burst.trunc()).abs() <= 1.0, "{} vs {}", cap, even_burst);
            }
        }
    }
}
