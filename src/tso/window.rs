//! Window decisions: where to start after a restart or an election (T3) and when to persist a
//! higher limit (T2). Pure arithmetic over milliseconds; the shell persists what these return
//! before it hands the new limit to the allocator.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WindowConfig {
    /// How far ahead of the current physical time one persisted limit reaches.
    pub window_ms: u64,
    /// Renew once less than this much of the window is left.
    pub renew_below_ms: u64,
    /// How far the physical part may run ahead of the wall clock (T5).
    pub max_lead_ms: u64,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            window_ms: 3_000,
            renew_below_ms: 2_000,
            max_lead_ms: 1_000,
        }
    }
}

/// A `[tso]` setting that would break the window's arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WindowConfigError {
    /// A window this short would be renewed about as often as it is used.
    #[error("tso.window_ms must be at least 10, not {0}")]
    WindowTooShort(u64),
    /// Renewal must start after some of the window is used and before all of it is.
    #[error("tso.renew_below_ms must be within 1..window_ms ({window_ms}), not {renew_below_ms}")]
    RenewOutsideWindow { renew_below_ms: u64, window_ms: u64 },
}

/// What the shell must persist, then start serving with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPlan {
    pub start_ms: u64,
    pub limit_ms: u64,
}

impl WindowConfig {
    pub fn validate(&self) -> Result<(), WindowConfigError> {
        if self.window_ms < 10 {
            return Err(WindowConfigError::WindowTooShort(self.window_ms));
        }
        if self.renew_below_ms == 0 || self.renew_below_ms >= self.window_ms {
            return Err(WindowConfigError::RenewOutsideWindow {
                renew_below_ms: self.renew_below_ms,
                window_ms: self.window_ms,
            });
        }
        Ok(())
    }

    /// T3: start at `max(now, last_limit + 1 ms)` and persist `start + window` before serving.
    /// Never waits for the clock: a limit ahead of the clock is simply started above.
    pub fn plan_start(&self, now_ms: u64, last_limit_ms: Option<u64>) -> WindowPlan {
        let start_ms = match last_limit_ms {
            Some(last) => now_ms.max(last + 1),
            None => now_ms,
        };
        WindowPlan {
            start_ms,
            limit_ms: start_ms + self.window_ms,
        }
    }

    /// The limit to persist next, or `None` while enough of the window is left. Measured from the
    /// later of the clock and the allocator's physical time, so heavy logical carry renews early.
    pub fn plan_renewal(
        &self,
        now_ms: u64,
        current_physical_ms: u64,
        limit_ms: u64,
    ) -> Option<u64> {
        let base = now_ms.max(current_physical_ms);
        if limit_ms.saturating_sub(base) < self.renew_below_ms {
            Some((base + self.window_ms).max(limit_ms + 1))
        } else {
            None
        }
    }
}
