//! Deliberate bugs for the cluster simulation to find: each is a named step the server skips
//! while a simulation has switched it on, so the simulation's checks can be shown to catch
//! it. Without the `sim` feature nothing can switch one on and every query is `false`. Owns
//! the switches only; the code that consults one keeps its own logic.

/// The deliberate bugs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The TSO control loop serves without proving its lease first on each tick (T4): a
    /// leader whose lease may have lapsed goes on handing out timestamps.
    ServeBeforeLeaseProof,
    /// A window renewal raises the allocator's limit without persisting it first (T2): the
    /// leader serves past what is durable, so its successor starts below timestamps already
    /// handed out.
    SkipWindowPersist,
    /// A new term keeps alive the lease of the member's previous term instead of its own, and
    /// takes etcd's answer for that old lease ("gone", TTL 0) as a renewal (T4): the term's own
    /// lease expires, another member is elected, and this one still proves it leads.
    KeepaliveOldLease,
    /// A leader hands over to a transfer's target without suspending its allocator first,
    /// and stops serving only once the target leads: the target serves while the old leader
    /// still does.
    TransferBeforeStopping,
    /// A new term starts at its own wall clock instead of above the last persisted limit
    /// (T3): a clock that jumped back, or lags the old leader's, hands out timestamps below
    /// ones already handed out.
    TrustClockAfterBackwardJump,
    /// A split report or a store registration is acknowledged before it is durable: the split
    /// without waiting for its write, the registration applied and left to the persister
    /// instead of written first. A leader that loses its term before the write lands has
    /// acknowledged what its successor never loads.
    AckBeforeDurable,
}

impl Mutation {
    pub const ALL: [Mutation; 6] = [
        Mutation::ServeBeforeLeaseProof,
        Mutation::SkipWindowPersist,
        Mutation::KeepaliveOldLease,
        Mutation::TransferBeforeStopping,
        Mutation::TrustClockAfterBackwardJump,
        Mutation::AckBeforeDurable,
    ];

    /// The name a simulation's command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::ServeBeforeLeaseProof => "serve-before-lease-proof",
            Mutation::SkipWindowPersist => "skip-window-persist",
            Mutation::KeepaliveOldLease => "keepalive-old-lease",
            Mutation::TransferBeforeStopping => "transfer-before-stopping",
            Mutation::TrustClockAfterBackwardJump => "trust-clock-after-backward-jump",
            Mutation::AckBeforeDurable => "ack-before-durable",
        }
    }
}

#[cfg(feature = "sim")]
thread_local! {
    /// The bug on for this thread (a simulation runs its whole cluster on one thread).
    static ON: std::cell::Cell<Option<Mutation>> = const { std::cell::Cell::new(None) };
}

/// Switches `mutation` on for this thread (`None`: the shipped behaviour).
#[cfg(feature = "sim")]
pub fn set(mutation: Option<Mutation>) {
    ON.set(mutation);
}

/// Whether `mutation` is on: always `false` in a build without `sim`.
#[inline]
pub fn on(mutation: Mutation) -> bool {
    #[cfg(feature = "sim")]
    {
        ON.get() == Some(mutation)
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = mutation;
        false
    }
}
