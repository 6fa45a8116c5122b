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
}

impl Mutation {
    pub const ALL: [Mutation; 1] = [Mutation::ServeBeforeLeaseProof];

    /// The name a simulation's command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::ServeBeforeLeaseProof => "serve-before-lease-proof",
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
