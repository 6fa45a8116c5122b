//! The admin HTTPS server and what it reports: health, readiness, membership and Prometheus
//! metrics, and the leadership changes an `admin` certificate may ask for. It reads server
//! state; it makes no serving decisions.

mod client;
mod http;
mod leadership;
mod listener;
mod metrics;
mod state;

pub use client::AdminClient;
pub use http::spawn;
pub use listener::{AdminLimits, AdminListener};
pub use metrics::{CoreMetrics, Metrics, PlacementGauges, RequestKind, StoreCounts};
pub use state::{AdminControl, AdminState};
